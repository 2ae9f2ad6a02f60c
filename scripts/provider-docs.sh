#!/usr/bin/env bash
# Writes the provider's registry documentation, provider/docs, from the
# schema OpenTofu reads off the built provider and from examples/provider,
# examples/resources and examples/data-sources (scripts/provider_docs.py).
# Run it after changing the provider's schema or an example;
# tests/tests/provider_docs.rs fails while the committed pages differ.
#
#   scripts/provider-docs.sh [OUT_DIR]     # default: provider/docs
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

out=${1:-$ROOT/provider/docs}
export_from "$ROOT/scripts/tools.sh" tofu
build_bins vmaas-provider >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'provider_installation {\n  dev_overrides {\n    "vmaas/vmaas" = "%s"\n  }\n  direct {}\n}\n' "$BIN" > "$work/tf.rc"
printf 'terraform {\n  required_providers {\n    vmaas = { source = "vmaas/vmaas" }\n  }\n}\n' > "$work/main.tf"
(cd "$work" && TF_CLI_CONFIG_FILE=$work/tf.rc CHECKPOINT_DISABLE=1 "$VMAAS_TOFU" providers schema -json > schema.json 2> tofu.log) ||
    die "tofu providers schema failed: $(cat "$work/tofu.log")"
rm -rf "$out.tmp"
python3 "$ROOT/scripts/provider_docs.py" "$work/schema.json" "$ROOT/examples" "$out.tmp"
rm -rf "$out" && mv "$out.tmp" "$out"
log "wrote $(find "$out" -name '*.md' | wc -l) pages in $out"
