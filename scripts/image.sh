#!/usr/bin/env bash
# Builds OCI images of vmaas's programs without a container engine, with
# Debian's umoci: each image holds the program, the libraries it links (as
# `ldd` finds them, the loader included), a passwd entry for its user and,
# for the server, the CA bundle its HTTPS clients trust. Nothing else: no
# shell, no package manager. It runs as 65532:65532 (non-root), carries the
# org.opencontainers.image.* labels, and is reproducible: every time stamp
# is the last commit's, so the same binaries give the same digest.
#
#   scripts/image.sh [-o OCI_DIR] [--bin-dir DIR] vmaas-server function-vmaas
#
# OCI_DIR (default target/images) is an OCI layout; each image is tagged
# NAME-VERSION there. For each image it prints `NAME VERSION sha256:DIGEST
# same|changed|new` (compared with the previous build in OCI_DIR). Without
# --bin-dir, release binaries are built. Push with skopeo, e.g.
#   skopeo copy oci:target/images:vmaas-server-0.1.0 docker://REGISTRY/vmaas/vmaas-server:0.1.0
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

out=$ROOT/target/images bin_dir= names=()
while [ $# -gt 0 ]; do
    case $1 in
    -o) out=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    vmaas-server|function-vmaas) names+=("$1"); shift ;;
    *) die "unknown argument $1 (images: vmaas-server, function-vmaas)" ;;
    esac
done
[ ${#names[@]} -gt 0 ] || names=(vmaas-server function-vmaas)
apt_install umoci >&2
command -v ldd >/dev/null || die "ldd is missing"

version=$(workspace_version)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
if [ -z "$bin_dir" ]; then
    pkgs=()
    for n in "${names[@]}"; do
        case $n in vmaas-server) pkgs+=(-p vmaas-server) ;; function-vmaas) pkgs+=(-p vmaas-function) ;; esac
    done
    log "building release binaries (${names[*]})" >&2
    cargo build --locked --release "${pkgs[@]}" --bins >&2
    bin_dir=$CARGO_TARGET_DIR/release
fi

# digest_of LAYOUT TAG: the manifest digest of TAG in the OCI layout.
digest_of() {
    python3 - "$1/index.json" "$2" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1])).get("manifests") or []:
    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == sys.argv[2]:
        print(m["digest"]); break
else:
    sys.exit(1)
PY
}

# Files owned by root in the image: kept as they are when run as root, mapped by umoci otherwise.
rootless=
[ "$(id -u)" = 0 ] || rootless=--rootless

# stage NAME DIR: the image's files for NAME in DIR.
stage() {
    local name=$1 root=$2 lib
    local bin=$bin_dir/$name
    [ -x "$bin" ] || die "$bin is missing"
    mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp" "$root/home/nonroot"
    cp "$bin" "$root/usr/local/bin/$name"
    for lib in $(ldd "$bin" | grep -o '/[^ ]*' | sort -u); do
        cp --parents -L "$lib" "$root/"
    done
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$root/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' > "$root/etc/group"
    if [ "$name" = vmaas-server ]; then
        mkdir -p "$root/etc/ssl/certs"
        cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
    fi
    chmod 1777 "$root/tmp"
    if [ -z "$rootless" ]; then chown -R 0:0 "$root" && chown 65532:65532 "$root/home/nonroot"; fi
    find "$root" -exec touch -h -d "@$epoch" {} +
}

description() {
    case $1 in
    vmaas-server) echo "vmaas fulfillment server: REST, OpenAPI and OSAC gRPC over VMs, networks and storage" ;;
    function-vmaas) echo "vmaas Crossplane composition function: VMs rendered into KubeVirt, OVN-K and Service objects" ;;
    esac
}

mkdir -p "$(dirname "$out")"
if [ ! -f "$out/index.json" ]; then
    rmdir "$out" 2>/dev/null || true
    umoci init --layout "$out"
fi
for name in "${names[@]}"; do
    tag=$name-$version work=$(mktemp -d)
    previous=$(digest_of "$out" "$tag" || true)
    stage "$name" "$work/root"
    umoci rm --image "$out:$tag" 2>/dev/null || true
    umoci new --image "$out:$tag"
    umoci insert $rootless --image "$out:$tag" --history.created "$created" --history.created_by "scripts/image.sh" "$work/root" / >/dev/null
    umoci config --image "$out:$tag" --created "$created" --author vmaas --no-history \
        --architecture amd64 --os linux --config.user 65532:65532 --config.workingdir /home/nonroot \
        --config.entrypoint "/usr/local/bin/$name" \
        --config.env PATH=/usr/local/bin --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
        --config.label "org.opencontainers.image.title=$name" \
        --config.label "org.opencontainers.image.description=$(description "$name")" \
        --config.label "org.opencontainers.image.version=$version" \
        --config.label "org.opencontainers.image.revision=$revision" \
        --config.label "org.opencontainers.image.created=$created" \
        --config.label "org.opencontainers.image.licenses=Apache-2.0" \
        --manifest.annotation "org.opencontainers.image.title=$name" \
        --manifest.annotation "org.opencontainers.image.version=$version" \
        --manifest.annotation "org.opencontainers.image.created=$created"
    rm -rf "$work"
    digest=$(digest_of "$out" "$tag")
    if [ -z "$previous" ]; then state=new; elif [ "$previous" = "$digest" ]; then state=same; else state=changed; fi
    echo "$name $version $digest $state"
done
umoci gc --layout "$out"
