#!/usr/bin/env bash
# The main job, from nothing: installs what is missing (QEMU, the test
# guest image, Terraform), builds, starts vmaas-server with its embedded
# defaults (SQLite, the qemu backend), publishes the example templates, runs
# a real `terraform apply` of examples/terraform/quickstart that boots a VM,
# creates another VM through the CLI, and fetches both guests' web pages on
# their external IPs.
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
    if [ -f "$DEMO/terraform/terraform.tfstate" ] && [ -f "$DEMO/server.pid" ]; then
        export_from "$ROOT/scripts/terraform.sh"
        (cd "$DEMO/terraform" && VMAAS_ENDPOINT=$ENDPOINT VMAAS_TOKEN=$("$CARGO_TARGET_DIR/debug/vmaas-server" token --tenant demo --data-dir "$DEMO/data") \
            TF_CLI_CONFIG_FILE=$DEMO/terraform/tf.rc CHECKPOINT_DISABLE=1 "$VMAAS_TF103" destroy -auto-approve -no-color >/dev/null) || true
    fi
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
# Only what the demo runs: the server, the CLI and the Terraform provider
# (scripts/test.sh builds everything).
build_bins vmaas-server vmaas-cli vmaas-provider
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

log "terraform apply (Terraform 1.0.3) of examples/terraform/quickstart: one VM, READY when its guest answers"
export_from "$ROOT/scripts/terraform.sh"
TFDIR=$DEMO/terraform
mkdir -p "$TFDIR"
cp examples/terraform/quickstart/main.tf "$TFDIR/"
printf 'provider_installation {\n  dev_overrides {\n    "vmaas/vmaas" = "%s"\n  }\n  direct {}\n}\n' "$BIN" >"$TFDIR/tf.rc"
(cd "$TFDIR" && TF_CLI_CONFIG_FILE=$TFDIR/tf.rc CHECKPOINT_DISABLE=1 "$VMAAS_TF103" apply -auto-approve -input=false -no-color)
tf_ip=$(cd "$TFDIR" && TF_CLI_CONFIG_FILE=$TFDIR/tf.rc CHECKPOINT_DISABLE=1 "$VMAAS_TF103" output -raw external_ip)
log "the Terraform VM's web server: curl http://$tf_ip/"
curl -fsS "http://$tf_ip/"

log "examples/terraform/ci-ephemeral: 2 short-lived VMs, as a CI pipeline makes them, then destroyed"
CIDIR=$DEMO/ci-ephemeral
mkdir -p "$CIDIR"
cp examples/terraform/ci-ephemeral/main.tf "$CIDIR/"
cp "$TFDIR/tf.rc" "$CIDIR/tf.rc"
(cd "$CIDIR" && export TF_CLI_CONFIG_FILE=$CIDIR/tf.rc CHECKPOINT_DISABLE=1 &&
    "$VMAAS_TF103" apply -auto-approve -input=false -no-color -var count_vms=2 | tail -n 6 &&
    "$VMAAS_TF103" destroy -auto-approve -input=false -no-color -var count_vms=2 | tail -n 1)

log "creating a VM as tenant 'demo' with the CLI (vmaas vm create --wait)"
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
