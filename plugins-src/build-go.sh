#!/usr/bin/env bash
# Build, check or test the Go WebAssembly plugins: the Go guest SDK (sdk-go/, module
# modelserving.dev/plugin) and the example plugins written with it (examples-go/<name>/).
#
#   plugins-src/build-go.sh build [FLAVOUR [NAME...]]
#                                            build every examples-go/<name> (or those named) into
#                                            examples/wasm/go-<name>.wasm (standard Go) and
#                                            examples/wasm/tinygo-<name>.wasm (TinyGo)
#   plugins-src/build-go.sh check [FLAVOUR]  build into a temporary directory and fail when
#                                            examples/wasm/ differs (a stale module: run
#                                            `make wasm-go` and commit it)
#   plugins-src/build-go.sh test             go vet (natively and for wasip1) and go test
#                                            (natively) of the SDK and every example; the
#                                            examples replay abi/vectors
#
# FLAVOUR: go (standard Go), tinygo, or both (the default).
#
# Standard Go: the `go` command on PATH (Go >= 1.21) running Go $GO_VERSION exactly: GOTOOLCHAIN
# pins it, so a machine with another Go downloads go$GO_VERSION once, as a module from the Go
# module proxy, and every machine compiles with the same compiler and standard library. The
# build is reproducible: -trimpath, no VCS stamp, no go.work, no cgo, the user's go env file
# ignored (GOENV=off; set GOPROXY in the environment to use a mirror), so the same sources give
# the same bytes on every machine. Example modules that need modules from outside the
# repository (go-pdk) fetch them from the proxy once, checked against the committed go.sum.
#
# TinyGo: v0.37.0, installed into the cache by install-tinygo.sh when missing (`make tinygo`;
# Debian's LLVM 19 and the Go module proxy), run with Go $TINYGO_GO_VERSION (the newest Go it
# accepts) as its standard library, with -target=wasip1 -buildmode=c-shared -no-debug
# -scheduler=none. Its output is reproducible too (TinyGo keeps no paths in a -no-debug module).
#
# Environment: MODELSERVING_CACHE (default $XDG_CACHE_HOME/modelserving or ~/.cache/modelserving)
# holds the Go build cache (go/build) and module cache (go/mod); WASM_GO_OUT overrides the
# output directory of `build`.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO="$(dirname "$SRC")"
OUT_DEFAULT="$REPO/examples/wasm"
GO_VERSION=1.26.8
# -s -w: no symbol table or DWARF (about 2% smaller; panics still print Go stack traces).
GO_BUILD_FLAGS=(-buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w")
# TinyGo: Go's standard library of this version (TinyGo 0.37 takes Go 1.19 to 1.24).
TINYGO_GO_VERSION=1.24.13
# -no-debug: no DWARF or names section; -scheduler=none: no goroutines (a call is one function
# on one stack; asyncify, the default, makes the module larger and every call dearer).
TINYGO_FLAGS=(-target=wasip1 -buildmode=c-shared -no-debug -scheduler=none)
# Native vet and test compile with the local control plane's compiler flags for the standard
# library (STD_GCFLAGS in host/modelserving/devcluster/build.py), so the standard library
# packages that build put in the shared build cache are reused, not compiled a second time.
NATIVE_FLAGS=(-trimpath "-gcflags=all=-dwarf=false")

die() {
    echo "plugins-src/build-go.sh: $*" >&2
    exit 1
}

setup_env() {
    command -v go >/dev/null || die "no go on PATH: install Go >= 1.21 (Go $GO_VERSION is used; see plugins-src/README.md)"
    local cache="${MODELSERVING_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelserving}"
    export GOENV=off GOTOOLCHAIN="go$GO_VERSION" GOWORK=off CGO_ENABLED=0 GOFLAGS=-modcacherw
    export GOCACHE="$cache/go/build" GOMODCACHE="$cache/go/mod"
    unset GOOS GOARCH GOWASM GOEXPERIMENT GOROOT GOPATH
    mkdir -p "$GOCACHE" "$GOMODCACHE"
    local have
    have="$(go env GOVERSION)" || die "go does not run with GOTOOLCHAIN=$GOTOOLCHAIN (Go >= 1.21 is needed to switch toolchains; the download comes from the Go module proxy)"
    [[ "$have" == "go$GO_VERSION" ]] || die "go runs $have, expected go$GO_VERSION"
}

# The example directories (one Go module each, with a go.mod): those named in ONLY, or all.
ONLY=()
examples() {
    local mod
    if ((${#ONLY[@]})); then
        for mod in "${ONLY[@]}"; do
            [[ -f "$SRC/examples-go/$mod/go.mod" ]] || die "no example examples-go/$mod"
            echo "$mod"
        done
        return 0
    fi
    for mod in "$SRC"/examples-go/*/go.mod; do
        [[ -f "$mod" ]] && basename "$(dirname "$mod")"
    done
}

# The flavours an argument names: go, tinygo, or both when none.
flavours() {
    case "${1:-both}" in
        go) echo go ;;
        tinygo) echo tinygo ;;
        both) printf 'go\ntinygo\n' ;;
        *) die "unknown flavour '$1' (go, tinygo or both)" ;;
    esac
}

# The TinyGo installed in the cache (installed first when missing), ready to run: TINYGO is its
# command; it runs with Go $TINYGO_GO_VERSION's go command first on TINYGO_PATH.
setup_tinygo() {
    local root
    root="$(bash "$SRC/install-tinygo.sh")" || die "TinyGo could not be installed (plugins-src/install-tinygo.sh, above)"
    TINYGO="$(dirname "$root")/bin/tinygo"
    export TINYGOROOT="$root" XDG_CACHE_HOME="$(dirname "$root")/cache"
    # The Go that install-tinygo.sh linked into the install: no toolchain switch, so no network.
    TINYGO_PATH="$(dirname "$root")/go/bin:$PATH"
    local have
    have="$(GOTOOLCHAIN=local "$(dirname "$root")/go/bin/go" env GOVERSION)" || die "the Go linked into TinyGo's install ($(dirname "$root")/go) does not run"
    [[ "$have" == "go$TINYGO_GO_VERSION" ]] || die "TinyGo's Go is $have, expected go$TINYGO_GO_VERSION"
}

# compile FLAVOUR NAME OUT: one example to OUT.
compile() {
    local flavour="$1" name="$2" out="$3"
    if [[ "$flavour" == go ]]; then
        (cd "$SRC/examples-go/$name" && GOOS=wasip1 GOARCH=wasm go build "${GO_BUILD_FLAGS[@]}" -o "$out" .)
    else
        (cd "$SRC/examples-go/$name" && PATH="$TINYGO_PATH" GOTOOLCHAIN=local "$TINYGO" build "${TINYGO_FLAGS[@]}" -o "$out" .) ||
            die "tinygo build of examples-go/$name failed"
    fi
}

# build_into DIR FLAVOUR...: compile every example to DIR/<flavour>-<name>.wasm.
build_into() {
    local out="$1" name flavour file
    shift
    mkdir -p "$out"
    local -a names=()
    mapfile -t names < <(examples)
    ((${#names[@]})) || die "no Go modules under $SRC/examples-go/"
    for flavour in "$@"; do
        [[ "$flavour" == tinygo ]] && setup_tinygo
        for name in "${names[@]}"; do
            file="$out/$flavour-$name.wasm"
            compile "$flavour" "$name" "$file.tmp"
            chmod 644 "$file.tmp"
            mv -f "$file.tmp" "$file"
            echo "plugins-src/build-go.sh: $file ($(wc -c <"$file") bytes, $(gzip -9 -n -c "$file" | wc -c) gzipped)" >&2
        done
    done
}

cmd_build() {
    local -a which=()
    mapfile -t which < <(flavours "${1:-}")
    ONLY=("${@:2}")
    build_into "${WASM_GO_OUT:-$OUT_DEFAULT}" "${which[@]}"
}

cmd_check() {
    local name stale=0 rel file flavour
    local -a which=()
    mapfile -t which < <(flavours "${1:-}")
    CHECK_DIR="$(mktemp -d)"
    trap 'rm -rf "$CHECK_DIR"' EXIT
    build_into "$CHECK_DIR" "${which[@]}"
    for flavour in "${which[@]}"; do
        for name in $(examples); do
            file="$flavour-$name.wasm"
            rel="examples/wasm/$file"
            if [[ ! -f "$OUT_DEFAULT/$file" ]]; then
                echo "$rel is missing: run \`make wasm-go\` and commit $rel" >&2
                stale=1
            elif ! cmp -s "$CHECK_DIR/$file" "$OUT_DEFAULT/$file"; then
                echo "$rel is stale: it does not match plugins-src/ (built: $(wc -c <"$CHECK_DIR/$file") bytes, sha256 $(sha256sum "$CHECK_DIR/$file" | cut -c1-16)...; committed: $(wc -c <"$OUT_DEFAULT/$file") bytes, sha256 $(sha256sum "$OUT_DEFAULT/$file" | cut -c1-16)...). Run \`make wasm-go\` and commit $rel" >&2
                stale=1
            fi
        done
    done
    ((stale == 0)) || exit 1
    echo "examples/wasm/ matches plugins-src/ (${which[*]})" >&2
}

cmd_test() {
    local dir
    for dir in "$SRC/sdk-go" $(examples | sed "s|^|$SRC/examples-go/|"); do
        echo "plugins-src/build-go.sh: testing ${dir#"$SRC"/}" >&2
        (
            cd "$dir"
            unformatted="$(gofmt -l .)"
            [[ -z "$unformatted" ]] || die "not gofmt-formatted in ${dir#"$SRC"/}: $unformatted"
            go vet "${NATIVE_FLAGS[@]}" ./...
            GOOS=wasip1 GOARCH=wasm go vet ./...
            go test "${NATIVE_FLAGS[@]}" ./...
        )
    done
}

main() {
    local mode="${1:-build}"
    case "$mode" in
        build | check | test) ;;
        -h | --help | help)
            awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"
            return 0
            ;;
        *) die "unknown mode '$mode' (build, check or test)" ;;
    esac
    [[ "$mode" == test ]] || flavours "${2:-}" >/dev/null
    setup_env
    "cmd_$mode" "${@:2}"
}

main "$@"
