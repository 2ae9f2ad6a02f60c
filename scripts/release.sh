#!/usr/bin/env bash
# Makes a release of the Terraform/OpenTofu provider as registries and
# mirrors serve providers:
#   terraform-provider-vmaas_<version>_linux_amd64.zip   (the binary, named terraform-provider-vmaas_v<version>)
#   terraform-provider-vmaas_<version>_SHA256SUMS        (of the zip and the manifest)
#   terraform-provider-vmaas_<version>_manifest.json     (plugin protocol 6.0)
# and, with --mirror DIR, a filesystem mirror (the packed layout) that
# OpenTofu and Terraform install from with
#   provider_installation { filesystem_mirror { path = "DIR" } }
#
#   scripts/release.sh [-o DIST] [--bin-dir DIR] [--mirror DIR]
#
# DIST defaults to target/dist. Without --bin-dir a release binary is built.
# The zip is reproducible: its entries carry the last commit's time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

dist=$ROOT/target/dist bin_dir= mirror=
while [ $# -gt 0 ]; do
    case $1 in
    -o) dist=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --mirror) mirror=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) die "unknown argument $1" ;;
    esac
done
version=$(workspace_version)
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}
if [ -z "$bin_dir" ]; then
    log "building the provider (release)" >&2
    cargo build --locked --release -p vmaas-provider --bins >&2
    bin_dir=$CARGO_TARGET_DIR/release
fi
bin=$bin_dir/terraform-provider-vmaas
[ -x "$bin" ] || die "$bin is missing"

name=terraform-provider-vmaas_$version
mkdir -p "$dist"
python3 - "$bin" "$dist/${name}_linux_amd64.zip" "terraform-provider-vmaas_v$version" "$epoch" <<'PY'
import sys, time, zipfile
src, out, entry, epoch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
info = zipfile.ZipInfo(entry, date_time=time.gmtime(max(epoch, 315532800))[:6])
info.external_attr = 0o100755 << 16
info.compress_type = zipfile.ZIP_DEFLATED
info.create_system = 3
with open(src, "rb") as f, zipfile.ZipFile(out, "w") as z:
    z.writestr(info, f.read(), compresslevel=9)
PY
printf '{\n  "version": 1,\n  "metadata": {\n    "protocol_versions": ["6.0"]\n  }\n}\n' > "$dist/${name}_manifest.json"
(cd "$dist" && sha256sum "${name}_linux_amd64.zip" "${name}_manifest.json" > "${name}_SHA256SUMS")

if [ -n "$mirror" ]; then
    # The same package under each registry's host name: Terraform expands
    # vmaas/vmaas to registry.terraform.io, OpenTofu to registry.opentofu.org.
    for host in registry.terraform.io registry.opentofu.org; do
        mkdir -p "$mirror/$host/vmaas/vmaas"
        cp "$dist/${name}_linux_amd64.zip" "$mirror/$host/vmaas/vmaas/"
    done
fi
cat "$dist/${name}_SHA256SUMS"
