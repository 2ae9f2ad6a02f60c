#!/usr/bin/env bash
# The main job, from nothing: installs what is missing (QEMU, the test
# guest image), builds, starts vmaas-server with its embedded defaults
# (SQLite, the qemu backend), publishes the example templates, creates a VM
# through the CLI, waits until its guest answers, and fetches its web page
# on its external IP.
#
#   scripts/demo.sh          run it; the server keeps running afterwards
#   scripts/demo.sh down     stop the server and remove the demo's data
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

DEMO=${VMAAS_DEMO_DIR:-$CACHE/demo}
PORT=${VMAAS_DEMO_PORT:-8000}
ENDPOINT=http://127.0.0.1:$PORT

stop_server() {
    if [ -f "$DEMO/server.pid" ]; then
        kill "$(cat "$DEMO/server.pid")" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$(cat "$DEMO/server.pid")" 2>/dev/null || break; sleep 0.2; done
        rm -f "$DEMO/server.pid"
    fi
}

if [ "${1:-}" = down ]; then
    if [ -f "$DEMO/server.pid" ] && [ -x "${CARGO_TARGET_DIR}/debug/vmaas" ]; then
        VMAAS_ENDPOINT=$ENDPOINT VMAAS_TOKEN=$("$CARGO_TARGET_DIR/debug/vmaas-server" token --tenant demo --data-dir "$DEMO/data") \
            "$CARGO_TARGET_DIR/debug/vmaas" vm delete demo-vm --wait >/dev/null 2>&1 || true
    fi
    stop_server
    rm -rf "$DEMO"
    log "demo stopped and removed"
    exit 0
fi

. "$ROOT/scripts/deps.sh"
ensure_runtime_deps
"$ROOT/scripts/guest-image.sh"
build_bins
stop_server
mkdir -p "$DEMO"

log "starting vmaas-server on $ENDPOINT (data in $DEMO/data)"
"$BIN/vmaas-server" --listen "127.0.0.1:$PORT" --data-dir "$DEMO/data" >"$DEMO/server.log" 2>&1 &
echo $! >"$DEMO/server.pid"
wait_http "$ENDPOINT/healthz" 60 || { cat "$DEMO/server.log"; die "the server did not start"; }
curl -fsS "$ENDPOINT/healthz"; echo

ADMIN=$("$BIN/vmaas-server" token --admin --tenant ops --data-dir "$DEMO/data")
TOKEN=$("$BIN/vmaas-server" token --tenant demo --data-dir "$DEMO/data")
export VMAAS_ENDPOINT=$ENDPOINT VMAAS_CONFIG=$DEMO/cli.yaml VMAAS_PROGRESS=1

log "publishing the example templates (vmaas template sync)"
VMAAS_TOKEN=$ADMIN "$BIN/vmaas" template sync examples/templates
export VMAAS_TOKEN=$TOKEN
"$BIN/vmaas" template list

log "creating a VM as tenant 'demo' (vmaas vm create --wait)"
"$BIN/vmaas" vm delete demo-vm --wait >/dev/null 2>&1 || true
"$BIN/vmaas" vm create demo-vm --template tiny -p vm_memory=256Mi --wait --timeout 3m
"$BIN/vmaas" vm list
ip=$("$BIN/vmaas" -o json vm get demo-vm | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["externalIP"])')
log "the guest's web server on its external IP: curl http://$ip/"
curl -fsS "http://$ip/"

cat <<EOT

The server keeps running at $ENDPOINT. Try:
  export VMAAS_ENDPOINT=$ENDPOINT VMAAS_TOKEN=\$($BIN/vmaas-server token --tenant demo --data-dir $DEMO/data)
  $BIN/vmaas vm get demo-vm
  $BIN/vmaas vm console demo-vm        # Ctrl-] leaves
Stop it with: scripts/demo.sh down
EOT
