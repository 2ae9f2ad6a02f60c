#!/usr/bin/env bash
# Sets up everything the tests need and runs the whole suite:
# formatting and lints, unit and property tests, then the end-to-end tests
# against the real binaries on SQLite and on a PostgreSQL cluster started
# here on loopback, and the Kubernetes tests against a real kube-apiserver
# and etcd (scripts/k8s.sh), each test starting its own on loopback.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

house_checks

# The workspace is built (every binary, clippy, every test binary) in the
# background while the rest is installed: that is mostly downloading and
# unpacking, the build is CPU. Its output is printed once it is done.
. "$ROOT/scripts/deps.sh"
ensure_npm # server/build.rs installs the web page's packages with npm
buildlog=$(mktemp "${TMPDIR:-/tmp}/vmaas-build.XXXXXX")
(
    build_bins
    log "linting (cargo clippy -D warnings)"
    cargo clippy --locked --workspace --all-targets -- -D warnings
    log "building the tests"
    cargo test --locked --workspace --no-run
) >"$buildlog" 2>&1 &
build=$!
trap 'pkill -P "$build" 2>/dev/null; kill "$build" 2>/dev/null; rm -f "$buildlog"' EXIT

apt_install postgresql curl ca-certificates openssl iproute2 chromium umoci skopeo docker-registry
ensure_runtime_deps
"$ROOT/scripts/guest-image.sh"
"$ROOT/scripts/debian-image.sh"
export_from "$ROOT/scripts/terraform.sh"
export VMAAS_TF103 VMAAS_TF115_PYTHON
# OpenTofu, Crossplane's CLI and core, MetalLB's controller and Helm, built
# from their Go modules, and cargo-nextest, built from crates.io, once per
# machine (cached under ~/.cache/vmaas/tools).
export_from "$ROOT/scripts/tools.sh"

log "waiting for the build, clippy and the test binaries (their output follows)"
status=0
wait "$build" || status=$?
cat "$buildlog"
[ "$status" = 0 ] || die "the build, clippy or the test binaries failed (exit $status; see above)"
trap - EXIT
rm -f "$buildlog"

# The upstream schemas the function's output is checked against live in the
# shared directory beside the repository (or beside the one it was cloned from).
if [ -z "${VMAAS_SHARED:-}" ]; then
    origin=$(git -C "$ROOT" remote get-url origin 2>/dev/null || true)
    for c in "$ROOT/../shared" "$ROOT/../../shared" "$ROOT/../../../shared" "$origin/../shared"; do
        if [ -d "$c/schemas" ]; then VMAAS_SHARED=$(cd "$c" && pwd); break; fi
    done
fi
[ -n "${VMAAS_SHARED:-}" ] || die "cannot find the shared directory (with schemas/) beside the repository; set VMAAS_SHARED"
export VMAAS_SHARED
# A real kube-apiserver and etcd for the Kubernetes tests (envtest style).
k8s_env=$("$ROOT/scripts/k8s.sh" "$VMAAS_SHARED")
eval "export $(echo $k8s_env)"

pgdir=$(mktemp -d "${TMPDIR:-/tmp}/vmaas-pg.XXXXXX")
trap 'scripts/postgres.sh stop "$pgdir"' EXIT
log "starting PostgreSQL on loopback"
VMAAS_TEST_DATABASE_URL=$(scripts/postgres.sh start "$pgdir")
export VMAAS_TEST_DATABASE_URL VMAAS_REQUIRE_POSTGRES=1
# The web page is tested in Debian's Chromium (installed above).
export VMAAS_CHROMIUM=/usr/bin/chromium VMAAS_REQUIRE_BROWSER=1

log "running the tests"
# A failure's message, not a backtrace, is what a CI log's tail must show.
export RUST_BACKTRACE=0
# Every test cluster's audit log of the server's requests (made as the
# Helm chart's ServiceAccount) is kept here, for the ClusterRole check below.
auditdir=$(mktemp -d "${TMPDIR:-/tmp}/vmaas-audit.XXXXXX")
trap 'scripts/postgres.sh stop "$pgdir"; rm -rf "$auditdir"' EXIT
export VMAAS_KEEP_AUDIT_LOGS=$auditdir
# cargo-nextest (scripts/tools.sh) runs several tests at once across binaries
# (.config/nextest.toml); doctests are cargo test's.
"$VMAAS_NEXTEST" nextest run --locked --workspace --no-fail-fast "$@"
[ $# -gt 0 ] || cargo test --locked --workspace --doc -q
if [ $# -eq 0 ]; then
    log "checking the chart's ClusterRole against every request of the suite (both ways)"
    VMAAS_RBAC_AUDIT_DIR=$auditdir VMAAS_REQUIRE_RBAC_AUDIT=1 \
        cargo test --locked -q -p vmaas-tests --test e2e chart::the_cluster_role_matches_the_backends_calls
fi
log "all tests passed"
