#!/usr/bin/env bash
# The fast lane for the inner loop: formatting, lints, file sizes and the
# unit tests of every crate. No root, no QEMU, no databases or clusters
# started: the end-to-end tests (tests/) are left to scripts/test.sh, which
# CI runs, so this is not instead of it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

house_checks
log "linting (cargo clippy -D warnings)"
cargo clippy --locked --workspace --all-targets -- -D warnings
log "unit tests (every crate but the end-to-end tests)"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --locked --workspace --exclude vmaas-tests --no-fail-fast "$@"
else
    cargo test --locked --workspace --exclude vmaas-tests --no-fail-fast "$@"
fi
log "fast checks passed"
