#!/usr/bin/env bash
# Regenerate or check what tests/kthena-revision derives from Kthena's code: the Go type schema
# the Python revision hashes render from, and the test vectors they are checked against.
#
#   tests/kthena-revision/run.sh types          write host/modelserving/data/kthena-role-types.json
#   tests/kthena-revision/run.sh vectors CRD    write tests/data/kthena-revision/vectors.json from
#                                               the case files, pruned and defaulted with CRD:
#                                               Kthena's ModelServing CRD (its repository's
#                                               charts/kthena/charts/workload/crds/
#                                               workload.serving.volcano.sh_modelservings.yaml at
#                                               the commit the vectors describe)
#   tests/kthena-revision/run.sh check          fail when the schema is stale, or when the cases,
#                                               defaulted by OUR CRD (crds/) and hashed by
#                                               Kthena's rule, give other values than the vectors
#                                               (so our CRD's defaults are Kthena's, hash-wise)
#
# Toolchain: the `go` command on PATH running Go $GO_VERSION (GOTOOLCHAIN pins it, as in
# plugins-src/build-go.sh), modules from the Go module proxy (k8s.io/api, apimachinery and
# apiextensions-apiserver at the versions Kthena pins), caches in MODELSERVING_CACHE (default
# $XDG_CACHE_HOME/modelserving or ~/.cache/modelserving): go/build, go/mod, and the tool's binary.
# The first build compiles the API server's schema packages: about 4 minutes on 2 cores.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO="$(cd "$HERE/../.." && pwd -P)"
GO_VERSION=1.26.8
SCHEMA="$REPO/host/modelserving/data/kthena-role-types.json"
DATA="$REPO/tests/data/kthena-revision"
OUR_CRD="$REPO/crds/workload.serving.volcano.sh_modelservings.yaml"

die() {
    echo "tests/kthena-revision/run.sh: $*" >&2
    exit 1
}

setup_env() {
    command -v go >/dev/null || die "no go on PATH: install Go >= 1.21 (Go $GO_VERSION is used)"
    local cache="${MODELSERVING_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelserving}"
    export GOENV=off GOTOOLCHAIN="go$GO_VERSION" GOWORK=off CGO_ENABLED=0 GOFLAGS=-modcacherw
    export GOCACHE="$cache/go/build" GOMODCACHE="$cache/go/mod"
    unset GOOS GOARCH GOEXPERIMENT GOROOT GOPATH
    mkdir -p "$GOCACHE" "$GOMODCACHE" "$cache/kthena-revision"
    BIN="$cache/kthena-revision/kthena-revision"
    (cd "$HERE" && nice -n 10 go build -trimpath -o "$BIN" .) || die "building the tool failed"
}

cases() {
    (cd "$REPO" && ls "${DATA#"$REPO"/}"/cases/*.yaml)
}

cmd_types() {
    "$BIN" schema >"$SCHEMA.tmp" && mv "$SCHEMA.tmp" "$SCHEMA"
    echo "wrote ${SCHEMA#"$REPO"/}" >&2
}

cmd_vectors() {
    local crd="${1:-}"
    [[ -n "$crd" && -f "$crd" ]] || die "vectors needs Kthena's ModelServing CRD file (see --help)"
    crd="$(cd "$(dirname "$crd")" && pwd -P)/$(basename "$crd")"
    # shellcheck disable=SC2046
    (cd "$REPO" && "$BIN" vectors -crd "$crd" $(cases)) >"$DATA/vectors.json.tmp"
    mv "$DATA/vectors.json.tmp" "$DATA/vectors.json"
    echo "wrote ${DATA#"$REPO"/}/vectors.json" >&2
}

cmd_check() {
    FRESH="$(mktemp)"
    trap 'rm -f "$FRESH"' EXIT
    "$BIN" schema >"$FRESH"
    cmp -s "$FRESH" "$SCHEMA" ||
        die "${SCHEMA#"$REPO"/} is stale: run \`make kthena-revision\` and commit it"
    echo "${SCHEMA#"$REPO"/} matches tests/kthena-revision" >&2
    # shellcheck disable=SC2046
    (cd "$REPO" && "$BIN" vectors -crd "${OUR_CRD#"$REPO"/}" -check "${DATA#"$REPO"/}/vectors.json" $(cases))
}

main() {
    local mode="${1:-}"
    case "$mode" in
        types | vectors | check) ;;
        -h | --help | help | "")
            sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            return 0
            ;;
        *) die "unknown mode '$mode' (types, vectors or check)" ;;
    esac
    shift
    setup_env
    "cmd_$mode" "$@"
}

main "$@"
