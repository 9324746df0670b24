#!/usr/bin/env bash
# Build, check or test the Rust WebAssembly plugins, offline and reproducibly.
#
#   plugins-src/build.sh build   build every crate under builtins/ into plugins-wasm/<crate>.wasm
#   plugins-src/build.sh check   build into a temporary directory and fail when plugins-wasm/
#                                differs (a stale module: run `make wasm` and commit the result)
#   plugins-src/build.sh test    cargo test of the SDK and the built-ins on the host target
#
# `build` and `test` take package names to work on those only (`build.sh test accelerator`).
#
# Toolchain: Debian bookworm's Rust 1.63 (/usr/bin/rustc, /usr/bin/cargo and the wasm32 standard
# library), installed with apt-get when missing; rustup's toolchains are ignored, so every
# machine compiles with the same compiler and std and gets the same bytes. No crates are
# downloaded (the workspace has no external dependencies; --offline --locked).
#
# Environment: MODELSERVING_CACHE (default $XDG_CACHE_HOME/modelserving or ~/.cache/modelserving)
# holds a private CARGO_HOME; WASM_OUT overrides the output directory of `build`.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO="$(dirname "$SRC")"
OUT_DEFAULT="$REPO/plugins-wasm"
TARGET=wasm32-unknown-unknown
RUST_VERSION=1.63
# Flags of the WebAssembly builds (not of `test`, which runs natively):
# * the stack in linear memory, in bytes (rustc's default is 1 MiB). It is laid out first
#   (--stack-first), so an overflow traps instead of corrupting data; 64 KiB is over ten times
#   what the SDK uses at its deepest (msgpack nested MAX_DEPTH = 128 levels, see README.md),
#   and keeps a module's initial memory at 2 pages instead of 17: the host zeroes a call's
#   memory when the instance is discarded, so every page costs on every call;
# * bulk-memory (WebAssembly 2.0, on in wasmtime): memcpy and memset become one instruction
#   each instead of a loop, about 12% less fuel per call.
WASM_STACK_SIZE=65536
WASM_RUSTFLAGS=(-Clink-arg=-zstack-size=$WASM_STACK_SIZE -Ctarget-feature=+bulk-memory)
DEBIAN_PACKAGES=(rustc cargo libstd-rust-dev-wasm32)

die() {
    echo "plugins-src/build.sh: $*" >&2
    exit 1
}

toolchain_ok() {
    [[ -x /usr/bin/rustc && -x /usr/bin/cargo && -x /usr/bin/rustdoc ]] || return 1
    [[ "$(/usr/bin/rustc --version 2>/dev/null)" == "rustc $RUST_VERSION."* ]] || return 1
    [[ -d "$(/usr/bin/rustc --print sysroot)/lib/rustlib/$TARGET/lib" ]]
}

ensure_toolchain() {
    toolchain_ok && return 0
    echo "plugins-src/build.sh: installing Debian's Rust $RUST_VERSION (${DEBIAN_PACKAGES[*]})" >&2
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null || die "need root (or sudo) to run: apt-get install -y ${DEBIAN_PACKAGES[*]}"
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null || die "no apt-get: install Rust $RUST_VERSION as /usr/bin/rustc, /usr/bin/cargo with the $TARGET standard library"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${DEBIAN_PACKAGES[@]}" >/dev/null
    toolchain_ok || die "after installing ${DEBIAN_PACKAGES[*]}: /usr/bin/rustc is $(/usr/bin/rustc --version 2>&1), need $RUST_VERSION with $TARGET"
}

setup_env() {
    local cache="${MODELSERVING_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelserving}"
    export CARGO_HOME="$cache/cargo"
    mkdir -p "$CARGO_HOME"
    # Debian's tools, not whatever rustup puts first on PATH.
    export CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
    unset RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER RUSTFLAGS RUSTDOCFLAGS CARGO_BUILD_RUSTFLAGS \
        CARGO_TARGET_DIR CARGO_BUILD_TARGET CARGO_BUILD_TARGET_DIR RUSTUP_TOOLCHAIN
    # No absolute path of this checkout or of the cargo home may reach a module.
    local sep=$'\x1f'
    export CARGO_ENCODED_RUSTFLAGS="--remap-path-prefix=$SRC=/plugins-src$sep--remap-path-prefix=$CARGO_HOME=/cargo-home"
    cd "$SRC"
}

# The package names of the built-ins, one per directory of builtins/ with a Cargo.toml (only
# those named in ONLY, when it is set).
ONLY=()
builtins() {
    local manifest name
    for manifest in "$SRC"/builtins/*/Cargo.toml; do
        [[ -f "$manifest" ]] || continue
        name="$(sed -n 's/^name *= *"\([^"]*\)".*/\1/p' "$manifest" | head -n 1)"
        if ((${#ONLY[@]})) && [[ " ${ONLY[*]} " != *" $name "* ]]; then continue; fi
        echo "$name"
    done
}

# build_into DIR: compile every built-in and copy it to DIR/<crate>.wasm.
build_into() {
    local out="$1" name artifact
    local -a packages=()
    mapfile -t packages < <(builtins)
    ((${#packages[@]})) || die "no crates under $SRC/builtins/"
    local -a args=()
    for name in "${packages[@]}"; do args+=(--package "$name"); done
    local sep=$'\x1f' flags="$CARGO_ENCODED_RUSTFLAGS" flag
    for flag in "${WASM_RUSTFLAGS[@]}"; do flags+="$sep$flag"; done
    CARGO_ENCODED_RUSTFLAGS="$flags" \
        "$CARGO" build --offline --locked --release --target "$TARGET" --target-dir "$SRC/target" "${args[@]}"
    mkdir -p "$out"
    for name in "${packages[@]}"; do
        artifact="$SRC/target/$TARGET/release/${name//-/_}.wasm"
        [[ -f "$artifact" ]] || die "cargo produced no $artifact (is $name a cdylib?)"
        cp "$artifact" "$out/$name.wasm.tmp"
        chmod 644 "$out/$name.wasm.tmp"
        mv -f "$out/$name.wasm.tmp" "$out/$name.wasm"
        echo "plugins-src/build.sh: $out/$name.wasm ($(wc -c <"$out/$name.wasm") bytes)" >&2
    done
}

cmd_build() {
    build_into "${WASM_OUT:-$OUT_DEFAULT}"
}

cmd_check() {
    local name stale=0
    CHECK_DIR="$(mktemp -d)"
    trap 'rm -rf "$CHECK_DIR"' EXIT
    local tmp="$CHECK_DIR"
    build_into "$tmp"
    for name in $(builtins); do
        if [[ ! -f "$OUT_DEFAULT/$name.wasm" ]]; then
            echo "plugins-wasm/$name.wasm is missing: run \`make wasm\` and commit plugins-wasm/$name.wasm" >&2
            stale=1
        elif ! cmp -s "$tmp/$name.wasm" "$OUT_DEFAULT/$name.wasm"; then
            echo "plugins-wasm/$name.wasm is stale: it does not match plugins-src/ (built: $(wc -c <"$tmp/$name.wasm") bytes, sha256 $(sha256sum "$tmp/$name.wasm" | cut -c1-16)...; committed: $(wc -c <"$OUT_DEFAULT/$name.wasm") bytes, sha256 $(sha256sum "$OUT_DEFAULT/$name.wasm" | cut -c1-16)...). Run \`make wasm\` and commit plugins-wasm/$name.wasm" >&2
            stale=1
        fi
    done
    ((stale == 0)) || exit 1
    echo "plugins-wasm/ matches plugins-src/" >&2
}

cmd_test() {
    local -a scope=(--workspace)
    if ((${#ONLY[@]})); then
        scope=()
        for name in "${ONLY[@]}"; do scope+=(--package "$name"); done
    fi
    "$CARGO" test --offline --locked --target-dir "$SRC/target" "${scope[@]}"
}

main() {
    local mode="${1:-build}"
    ONLY=("${@:2}")
    case "$mode" in
        build | check | test) ;;
        -h | --help | help)
            sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            return 0
            ;;
        *) die "unknown mode '$mode' (build, check or test)" ;;
    esac
    ensure_toolchain
    setup_env
    "cmd_$mode"
}

main "$@"
