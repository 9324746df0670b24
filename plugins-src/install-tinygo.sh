#!/usr/bin/env bash
# Install TinyGo, pinned, into the cache: what `make tinygo` runs (and build-go.sh before a
# TinyGo build). Nothing is downloaded but Debian packages and Go modules.
#
#   plugins-src/install-tinygo.sh          install when missing, then print TINYGOROOT
#   plugins-src/install-tinygo.sh --root   print TINYGOROOT when installed (status 1 when not)
#
# TinyGo $TINYGO_VERSION is built from its Go module (the Go module proxy serves that exact
# version; `go install ...@version` is refused because the proxy gives no version list), with
# Go $TINYGO_GO_VERSION (TinyGo 0.37 accepts Go 1.19 to 1.24; GOTOOLCHAIN fetches it from the
# proxy) and cgo against Debian's LLVM $LLVM_MAJOR. The module lacks TinyGo's git submodules, so
# the root is completed from Debian packages: wasi-libc (lib/wasi-libc/sysroot), compiler-rt's
# prebuilt WebAssembly builtins (pkg/wasm32-unknown-wasi-generic/compiler-rt/lib.a, where TinyGo
# looks for a precompiled library) and an empty src/net (enough for programs that do not import
# net); wasm-opt is binaryen's. The Debian packages are installed with apt-get when missing (as
# root, or through sudo).
#
# Steps: go, packages, download, build, root, smoke. A failure names its step. The result is
# $MODELSERVING_CACHE/tinygo-<key> (key: a hash of this script, so a change to it installs
# afresh), with bin/tinygo, the root in root/, TinyGo's build cache in cache/, go/ (a link to Go
# $TINYGO_GO_VERSION's GOROOT in the Go module cache: run tinygo with go/bin first on PATH and
# GOTOOLCHAIN=local, and it needs no network to find Go) and the stamp .installed written last:
# a second run finds the stamp and does nothing.
set -euo pipefail

TINYGO_VERSION=v0.37.0
# The module's hash as the Go checksum database has it (go.sum's h1: form), checked after the
# download.
TINYGO_SUM="h1:N6ThUAOfgqcsZmcbkFBIJQSTBe4d/JFyTSbEjIy9yeU="
TINYGO_GO_VERSION=1.24.13
LLVM_MAJOR=19
DEBIAN_PACKAGES=("llvm-$LLVM_MAJOR-dev" "libclang-$LLVM_MAJOR-dev" "clang-$LLVM_MAJOR" "lld-$LLVM_MAJOR"
    wasi-libc "libclang-rt-$LLVM_MAJOR-dev-wasm32" binaryen)
WASI_SYSROOT_LIB=/usr/lib/wasm32-wasi
WASI_SYSROOT_INCLUDE=/usr/include/wasm32-wasi
BUILTINS_A="/usr/lib/llvm-$LLVM_MAJOR/lib/clang/$LLVM_MAJOR/lib/wasi/libclang_rt.builtins-wasm32.a"

SELF="${BASH_SOURCE[0]}"
CACHE="${MODELSERVING_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelserving}"
KEY="$(sha256sum "$SELF" | cut -c1-12)"
HOME_DIR="$CACHE/tinygo-$KEY"
STEP=setup

die() {
    echo "plugins-src/install-tinygo.sh: step '$STEP' failed: $*; TinyGo $TINYGO_VERSION is not installed" >&2
    trap - EXIT
    exit 1
}
# A command that fails outside die (set -e) is reported with its step too.
trap 'status=$?; ((status == 0)) || echo "plugins-src/install-tinygo.sh: step '"'"'$STEP'"'"' failed (exit status $status); TinyGo $TINYGO_VERSION is not installed" >&2' EXIT

installed() {
    [[ -f "$HOME_DIR/.installed" && -x "$HOME_DIR/bin/tinygo" && -x "$HOME_DIR/go/bin/go" ]]
}

missing_packages() {
    local pkg
    for pkg in "${DEBIAN_PACKAGES[@]}"; do
        [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" == "install ok installed" ]] || echo "$pkg"
    done
}

step_packages() {
    STEP=packages
    command -v dpkg-query >/dev/null || die "no dpkg-query: this needs Debian (bookworm) packages: ${DEBIAN_PACKAGES[*]}"
    local -a missing=()
    mapfile -t missing < <(missing_packages)
    ((${#missing[@]})) || return 0
    local -a sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null || die "need root (or sudo) to run: apt-get install -y ${missing[*]}"
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null || die "no apt-get to install ${missing[*]}"
    echo "plugins-src/install-tinygo.sh: apt-get install ${missing[*]}" >&2
    "${sudo[@]}" apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install -y ${missing[*]} failed"
    mapfile -t missing < <(missing_packages)
    ((${#missing[@]} == 0)) || die "still not installed after apt-get: ${missing[*]}"
}

step_go() {
    STEP=go
    command -v go >/dev/null || die "no go on PATH: install Go >= 1.21 (it fetches go$TINYGO_GO_VERSION from the Go module proxy)"
    export GOENV=off GOTOOLCHAIN="go$TINYGO_GO_VERSION" GOWORK=off GOFLAGS=-modcacherw
    export GOCACHE="$CACHE/go/build" GOMODCACHE="$CACHE/go/mod"
    unset GOOS GOARCH GOROOT GOPATH GOEXPERIMENT
    mkdir -p "$GOCACHE" "$GOMODCACHE"
    local have
    have="$(go env GOVERSION)" || die "go does not run with GOTOOLCHAIN=$GOTOOLCHAIN (the toolchain comes from the Go module proxy)"
    [[ "$have" == "go$TINYGO_GO_VERSION" ]] || die "go runs $have, expected go$TINYGO_GO_VERSION"
    GO_ROOT="$(go env GOROOT)" && [[ -x "$GO_ROOT/bin/go" ]] || die "no go command in GOROOT $GO_ROOT"
}

step_download() {
    STEP=download
    local json
    json="$(cd "$PARTIAL" && go mod download -json "github.com/tinygo-org/tinygo@$TINYGO_VERSION")" ||
        die "go mod download github.com/tinygo-org/tinygo@$TINYGO_VERSION: $json"
    SRC_DIR="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")"
    local sum
    sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$json")"
    [[ "$sum" == "$TINYGO_SUM" ]] || die "github.com/tinygo-org/tinygo@$TINYGO_VERSION has hash $sum, expected $TINYGO_SUM"
    [[ -f "$SRC_DIR/go.mod" ]] || die "no module directory in: $json"
}

step_build() {
    STEP=build
    cp -R "$SRC_DIR" "$PARTIAL/root"
    chmod -R u+w "$PARTIAL/root"
    echo "plugins-src/install-tinygo.sh: building TinyGo $TINYGO_VERSION with go$TINYGO_GO_VERSION and LLVM $LLVM_MAJOR (about 1.5 minutes)" >&2
    (cd "$PARTIAL/root" && CGO_ENABLED=1 go build -trimpath -buildvcs=false -o "$PARTIAL/bin/tinygo" .) ||
        die "go build of TinyGo $TINYGO_VERSION failed (cgo against /usr/lib/llvm-$LLVM_MAJOR: are ${DEBIAN_PACKAGES[*]} installed?)"
}

step_root() {
    STEP=root
    local root="$PARTIAL/root"
    [[ -f "$WASI_SYSROOT_LIB/libc.a" ]] || die "no $WASI_SYSROOT_LIB/libc.a (Debian package wasi-libc)"
    [[ -d "$WASI_SYSROOT_INCLUDE" ]] || die "no $WASI_SYSROOT_INCLUDE (Debian package wasi-libc)"
    [[ -f "$BUILTINS_A" ]] || die "no $BUILTINS_A (Debian package libclang-rt-$LLVM_MAJOR-dev-wasm32)"
    ln -sfn "$GO_ROOT" "$PARTIAL/go"
    mkdir -p "$root/lib/wasi-libc/sysroot/lib" "$root/pkg/wasm32-unknown-wasi-generic/compiler-rt" "$root/src/net"
    ln -sfn "$WASI_SYSROOT_LIB" "$root/lib/wasi-libc/sysroot/lib/wasm32-wasi"
    ln -sfn "$WASI_SYSROOT_INCLUDE" "$root/lib/wasi-libc/sysroot/include"
    cp "$BUILTINS_A" "$root/pkg/wasm32-unknown-wasi-generic/compiler-rt/lib.a"
    command -v wasm-opt >/dev/null || die "no wasm-opt on PATH (Debian package binaryen)"
}

# A WASI reactor that exports one function, built with the flags build-go.sh uses.
step_smoke() {
    STEP=smoke
    local dir="$PARTIAL/smoke"
    mkdir -p "$dir"
    printf 'module smoke\n\ngo 1.22\n' >"$dir/go.mod"
    printf 'package main\n\n//go:wasmexport add\nfunc add(a, b uint32) uint32 { return a + b }\n\nfunc main() {}\n' >"$dir/main.go"
    (cd "$dir" && PATH="$PARTIAL/go/bin:$PATH" GOTOOLCHAIN=local GOPROXY=off \
        TINYGOROOT="$PARTIAL/root" XDG_CACHE_HOME="$PARTIAL/cache" "$PARTIAL/bin/tinygo" build \
        -target=wasip1 -buildmode=c-shared -no-debug -scheduler=none -o "$dir/smoke.wasm" .) ||
        die "tinygo could not build a test module (TINYGOROOT=$PARTIAL/root)"
    [[ -s "$dir/smoke.wasm" ]] || die "tinygo wrote no module"
    rm -rf "$dir"
}

main() {
    case "${1:-}" in
        --root)
            installed || exit 1
            echo "$HOME_DIR/root"
            trap - EXIT
            return 0
            ;;
        "") ;;
        -h | --help)
            sed -n '2,23p' "$SELF" | sed 's/^# \{0,1\}//'
            trap - EXIT
            return 0
            ;;
        *) die "unknown argument '$1' (none, --root or --help)" ;;
    esac
    if installed; then
        echo "$HOME_DIR/root"
        return 0
    fi
    step_go
    step_packages
    PARTIAL="$HOME_DIR.partial"
    rm -rf "$PARTIAL" && mkdir -p "$PARTIAL/bin" "$PARTIAL/cache"
    step_download
    step_build
    step_root
    step_smoke
    STEP=finish
    echo "tinygo $TINYGO_VERSION go$TINYGO_GO_VERSION llvm-$LLVM_MAJOR" >"$PARTIAL/.installed"
    rm -rf "$HOME_DIR"
    mv "$PARTIAL" "$HOME_DIR"
    echo "plugins-src/install-tinygo.sh: TinyGo $TINYGO_VERSION installed in $HOME_DIR" >&2
    echo "$HOME_DIR/root"
}

main "$@"
