#!/usr/bin/env bash
# Builds function-vmaas as a Crossplane package: its runtime image (from
# scripts/image.sh, saved as an image tarball with skopeo, since no Docker
# daemon runs here) embedded by the real `crossplane xpkg build
# --embed-runtime-image-tarball`, with function/package (crossplane.yaml
# and the Input CRD). With --push, pushes it with `crossplane xpkg push`.
#
#   scripts/xpkg.sh [-o OUT_DIR] [--bin-dir DIR] [--push REGISTRY/REPOSITORY:TAG]
#
# OUT_DIR defaults to target/xpkg; prints the package file's path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

out=$ROOT/target/xpkg bin_args=() push=
while [ $# -gt 0 ]; do
    case $1 in
    -o) out=$2; shift 2 ;;
    --bin-dir) bin_args=(--bin-dir "$2"); shift 2 ;;
    --push) push=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument $1" ;;
    esac
done
apt_install skopeo >&2
export_from "$ROOT/scripts/tools.sh" crossplane
version=$(workspace_version)
mkdir -p "$out"
"$ROOT/scripts/image.sh" -o "$out/oci" "${bin_args[@]}" function-vmaas >&2
runtime=$out/function-vmaas-$version-runtime.tar
rm -f "$runtime"
skopeo copy --quiet "oci:$out/oci:function-vmaas-$version" "docker-archive:$runtime:function-vmaas:$version" >&2
package=$out/function-vmaas-$version.xpkg
rm -f "$package"
# No examples in the package (its examples root does not exist).
"$VMAAS_CRANK" xpkg build --package-root function/package --examples-root function/package/no-examples \
    --embed-runtime-image-tarball "$runtime" --package-file "$package" >&2
if [ -n "$push" ]; then
    "$VMAAS_CRANK" xpkg push --package-files "$package" "$push" >&2
fi
echo "$package"
