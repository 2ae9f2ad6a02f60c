# Installs what the product needs at run time (sourced by the other scripts).
# shellcheck shell=bash

ensure_runtime_deps() {
    apt_install curl ca-certificates
}
