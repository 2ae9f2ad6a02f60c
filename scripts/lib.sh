# Shared helpers for the project's scripts. Source it; do not run it.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${VMAAS_CACHE:-$ROOT/.cache}
# One build directory shared by every clone on this machine, so a fresh
# clone (as in CI) does not rebuild the dependencies from scratch.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vmaas/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export DEBIAN_FRONTEND=noninteractive
mkdir -p "$CACHE"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi
}

APT_UPDATED=
# apt_install PKG...: installs the Debian packages that are missing.
apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing Debian packages: ${missing[*]}"
    if [ -z "$APT_UPDATED" ]; then as_root apt-get update -qq >/dev/null; APT_UPDATED=1; fi
    as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# free_port: prints a TCP port free on 127.0.0.1.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# trim_target: keeps the target directory, which every clone on this
# machine shares, bounded: above 20 GiB it drops the incremental caches and
# the test binaries not rebuilt for a day (cargo builds again what it needs).
trim_target() {
    local kib
    [ -d "$CARGO_TARGET_DIR" ] || return 0
    kib=$(du -sk "$CARGO_TARGET_DIR" 2>/dev/null | cut -f1)
    [ "${kib:-0}" -gt $((20 * 1024 * 1024)) ] || return 0
    log "trimming $CARGO_TARGET_DIR ($((kib / 1024 / 1024)) GiB): incremental caches, test binaries a day old"
    rm -rf "$CARGO_TARGET_DIR"/*/incremental
    find "$CARGO_TARGET_DIR"/*/deps -maxdepth 1 -type f -executable ! -name '*.so' -mmin +1440 -delete 2>/dev/null || true
}

# house_checks: the house rules that need no build: formatting, file sizes,
# errors written as strings, circles of imports.
house_checks() {
    log "checking formatting (cargo fmt --check)"
    (cd "$ROOT" && cargo fmt --all --check) || die "cargo fmt --check: run cargo fmt and commit"
    log "checking file sizes (600 lines at most)"
    check_file_sizes
    log "checking for errors written as strings"
    check_string_errors
    log "checking for circles of imports inside each crate"
    python3 "$ROOT/scripts/circles.py"
}

# build_bins [PACKAGE...]: builds the binaries of the named packages, else
# of the whole workspace (debug profile).
build_bins() {
    local what=(--workspace) p
    if [ $# -gt 0 ]; then
        what=()
        for p in "$@"; do what+=(-p "$p"); done
    fi
    trim_target
    log "building ${*:-every binary} (cargo, target dir $CARGO_TARGET_DIR)"
    (cd "$ROOT" && cargo build --locked "${what[@]}" --bins)
    BIN=$CARGO_TARGET_DIR/debug
}

# wait_http URL SECONDS: waits until URL answers 200.
wait_http() {
    local url=$1 secs=${2:-30} i
    for ((i = 0; i < secs * 10; i++)); do
        curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# check_file_sizes: fails naming every tracked source file over 600 lines
# (the house rule); lock files, generated data and prose are not counted.
check_file_sizes() {
    local over
    over=$(cd "$ROOT" && git ls-files -- '*.rs' '*.proto' '*.sh' '*.py' '*.js' '*.html' '*.css' '*.tf' '*.sql' '*.toml' \
        | while read -r f; do [ -f "$f" ] && n=$(wc -l < "$f") && [ "$n" -gt 600 ] && echo "  $f: $n lines"; done || true)
    [ -z "$over" ] || die "files over 600 lines (split them):
$over"
}

# check_string_errors: fails naming every `Result<_, String>` in the
# crates that keep their errors typed (model, server, qemu, kubevirt): an
# error there is an enum that says what went wrong, not a sentence.
check_string_errors() {
    local found
    found=$(cd "$ROOT" && git ls-files -- 'model/*.rs' 'server/*.rs' 'qemu/*.rs' 'kubevirt/*.rs' \
        | xargs perl -0777 -ne 'while (/Result<((?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*?),\s*String\s*>/g) { my $l = 1 + (substr($_, 0, pos($_)) =~ tr/\n//); print "  $ARGV:$l\n" }' || true)
    [ -z "$found" ] || die "Result<_, String> in a crate that types its errors (write an error enum):
$found"
}

# workspace_version: the version of the workspace's crates (Cargo.toml's
# [workspace.package]), which images, the provider release and the function
# package are tagged with.
workspace_version() {
    awk -F'"' '/^\[workspace.package\]/{p=1} p && /^version/{print $2; exit}' "$ROOT/Cargo.toml"
}

# Runs a setup script that prints `export NAME=VALUE` lines and applies them;
# stops here when the script fails (a bare `eval "$(script)"` would go on
# with nothing exported).
export_from() {
    local out status=0
    out=$("$@") || status=$?
    [ "$status" = 0 ] || die "$(basename "$1") failed (exit $status)"
    eval "$out"
}
