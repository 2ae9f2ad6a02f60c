#!/usr/bin/env bash
# Builds the Go tools the tests run (OpenTofu, Crossplane's CLI and core,
# MetalLB's controller, Helm, prometheus-operator's ServiceMonitor CRD, and the
# tests' OpenID provider over zitadel/oidc) from their Go modules, and the
# test runner cargo-nextest from crates.io, pinned, once per machine: each
# lands in ~/.cache/vmaas/tools/<tool>-<version>/ and is never committed. Prints `export VMAAS_<TOOL>=path` lines for eval.
#
#   eval "$(scripts/tools.sh)"          # every tool
#   eval "$(scripts/tools.sh tofu)"     # one
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TOOLS=${VMAAS_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/vmaas/tools}
# The versions the project tests; docs/provider/index.md and docs/function.md
# name the same ones.
TOFU_VERSION=v1.12.6
# v2.2.4 (the version the real-tools issue chose) is refused by the Go
# module proxy here (403, as are v2.2.2 and v2.2.3): v2.2.1 is the nearest
# that is served, and the last line with the CLI in this module.
CROSSPLANE_VERSION=v2.2.1
METALLB_VERSION=v0.16.1
HELM_VERSION=v3.19.0
# The ServiceMonitor CRD the chart's optional ServiceMonitor is checked
# against (the newest root module of prometheus-operator served here).
PROMETHEUS_OPERATOR_VERSION=v0.85.0
# The test runner (Rust, from crates.io): runs the suite's tests several at
# once across binaries (.config/nextest.toml).
NEXTEST_VERSION=0.9.151

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
command -v go >/dev/null || die "go is not installed (the polyglot machine has it at /usr/local/go/bin)"

# build_module NAME VERSION MODULE PKG...: (LDFLAGS: extra -ldflags; CRDS: a
# directory of the module whose CRDs are kept beside the binaries) builds each PKG (a directory of
# the module) inside a writable copy of the module at VERSION, into
# $TOOLS/NAME-VERSION/, once. Building inside the module (rather than `go
# install module/pkg@version`) keeps its own replace lines (OpenTofu's go.mod
# replaces hcl with its fork) and asks the proxy for the module alone, not
# for every prefix of the package's path (which it may refuse with a 403).
build_module() {
    local name=$1 version=$2 module=$3; shift 3
    local dir=$TOOLS/$name-$version src pkg done=1
    for pkg in "$@"; do [ -x "$dir/${pkg##*/}" ] || done=0; done
    [ -z "${CRDS:-}" ] || [ -d "$dir/crds" ] || done=0
    [ "$done" = 1 ] && return 0
    log "building $name $version from $module (Go, once; cached in $dir)"
    src=$(go mod download -json "$module@$version" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    rm -rf "$dir.src" "$dir.tmp" && cp -r "$src" "$dir.src" && chmod -R u+w "$dir.src"
    mkdir -p "$dir.tmp"
    for pkg in "$@"; do
        (cd "$dir.src" && GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath \
            -ldflags="-s -w ${LDFLAGS:-}" -o "$dir.tmp/${pkg##*/}" "./$pkg") >&2
    done
    [ -z "${CRDS:-}" ] || cp -r "$dir.src/$CRDS" "$dir.tmp/crds"
    rm -rf "$dir" "$dir.src" && mv "$dir.tmp" "$dir"
}

tool() {
    case $1 in
    tofu)
        # A release build says its version without OpenTofu's "-dev" marker.
        LDFLAGS="-X github.com/opentofu/opentofu/version.dev=no" \
            build_module tofu "$TOFU_VERSION" github.com/opentofu/opentofu cmd/tofu
        echo "export VMAAS_TOFU=$TOOLS/tofu-$TOFU_VERSION/tofu" ;;
    crossplane)
        local xp=$TOOLS/crossplane-$CROSSPLANE_VERSION
        CRDS=cluster/crds LDFLAGS="-X github.com/crossplane/crossplane/v2/internal/version.version=$CROSSPLANE_VERSION" \
            build_module crossplane "$CROSSPLANE_VERSION" github.com/crossplane/crossplane/v2 cmd/crank cmd/crossplane
        # `crossplane beta validate` wants Crossplane's own schemas, which it
        # would download from its image at xpkg.crossplane.io: its cache is
        # seeded with the same CRDs from the module, so it never goes out.
        local seeded=$xp/validate-cache/xpkg.crossplane.io/crossplane/crossplane@$CROSSPLANE_VERSION
        [ -d "$seeded" ] || { mkdir -p "$seeded" && cp "$xp"/crds/*.yaml "$seeded/"; }
        echo "export VMAAS_CROSSPLANE_VALIDATE_CACHE=$xp/validate-cache"
        echo "export VMAAS_CRANK=$TOOLS/crossplane-$CROSSPLANE_VERSION/crank"
        echo "export VMAAS_CROSSPLANE_CORE=$TOOLS/crossplane-$CROSSPLANE_VERSION/crossplane"
        echo "export VMAAS_CROSSPLANE_CRDS=$TOOLS/crossplane-$CROSSPLANE_VERSION/crds" ;;
    metallb)
        CRDS=config/crd/bases build_module metallb "$METALLB_VERSION" go.universe.tf/metallb controller
        echo "export VMAAS_METALLB_CONTROLLER=$TOOLS/metallb-$METALLB_VERSION/controller"
        echo "export VMAAS_METALLB_CRDS=$TOOLS/metallb-$METALLB_VERSION/crds" ;;
    helm)
        build_module helm "$HELM_VERSION" helm.sh/helm/v3 cmd/helm
        echo "export VMAAS_HELM=$TOOLS/helm-$HELM_VERSION/helm" ;;
    monitoring)
        # CRDs only: the module is unpacked, never built.
        local dir=$TOOLS/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION src
        if [ ! -d "$dir/crds" ]; then
            src=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" |
                python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
            mkdir -p "$dir.tmp" && cp "$src"/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml "$dir.tmp/"
            rm -rf "$dir" && mkdir -p "$dir" && mv "$dir.tmp" "$dir/crds"
        fi
        echo "export VMAAS_MONITORING_CRDS=$dir/crds" ;;
    idp)
        # The OpenID provider of the device-login test: tests/idp, our own
        # main over zitadel/oidc's OP (its version pinned in tests/idp/go.mod
        # and go.sum), rebuilt when those files change.
        local src sum dir
        src=$(cd "$(dirname "$0")/../tests/idp" && pwd)
        sum=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)
        dir=$TOOLS/idp-$sum
        if [ ! -x "$dir/idp" ]; then
            log "building the test OpenID provider (zitadel/oidc, Go, once; cached in $dir)"
            mkdir -p "$dir.tmp"
            (cd "$src" && go build -trimpath -ldflags="-s -w" -o "$dir.tmp/idp" .) >&2
            rm -rf "$dir" && mv "$dir.tmp" "$dir"
        fi
        echo "export VMAAS_IDP=$dir/idp" ;;
    nextest)
        local dir=$TOOLS/cargo-nextest-$NEXTEST_VERSION
        if [ ! -x "$dir/bin/cargo-nextest" ]; then
            log "building cargo-nextest $NEXTEST_VERSION from crates.io (Rust, once; cached in $dir)"
            rm -rf "$dir.tmp" "$dir.build"
            # Optimised less than a release (opt-level 1): a test runner
            # waits on the tests, and its build took 179 s here against 227.
            CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_TARGET_DIR=$dir.build cargo install --quiet --locked --no-default-features \
                --version "$NEXTEST_VERSION" --root "$dir.tmp" cargo-nextest >&2
            rm -rf "$dir" "$dir.build" && mv "$dir.tmp" "$dir"
        fi
        echo "export VMAAS_NEXTEST=$dir/bin/cargo-nextest" ;;
    *) die "unknown tool $1 (tofu, crossplane, metallb, helm, monitoring, idp, nextest)" ;;
    esac
}

mkdir -p "$TOOLS"
# One build at a time per machine: a second run (another checkout's CI, a
# developer's shell) waits for the first, then finds the tools built.
exec 9>"$TOOLS/.lock"
flock 9
for t in "${@:-tofu crossplane metallb helm monitoring idp nextest}"; do
    for one in $t; do tool "$one"; done
done
