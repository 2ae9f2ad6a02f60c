#!/usr/bin/env bash
# Installs what the tests need for a real Kubernetes API server (envtest
# style: a real kube-apiserver and a real etcd on loopback, no kubelet, no
# controllers), and prints the exports that point the tests at them:
#   eval "$(scripts/k8s.sh SHARED_DIR)"
# etcd comes from Debian (etcd-server); kube-apiserver from SHARED_DIR/k8s,
# decompressed once into the cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

shared=${1:?usage: scripts/k8s.sh SHARED_DIR}
apt_install etcd-server zstd socat >&2
src="$shared/k8s/kube-apiserver.zst"
[ -f "$src" ] || die "$src is missing"
out="$CACHE/k8s"
mkdir -p "$out"
if [ ! -x "$out/kube-apiserver" ] || [ "$src" -nt "$out/kube-apiserver" ]; then
    log "decompressing kube-apiserver" >&2
    zstd -q -d -f "$src" -o "$out/kube-apiserver.tmp"
    chmod +x "$out/kube-apiserver.tmp"
    mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi
etcd=$(command -v etcd || true)
[ -n "$etcd" ] || etcd=/usr/bin/etcd
[ -x "$etcd" ] || die "etcd is missing after installing etcd-server"
echo "VMAAS_KUBE_APISERVER=$out/kube-apiserver"
echo "VMAAS_ETCD=$etcd"
echo "VMAAS_K8S_DIR=$shared/k8s"
