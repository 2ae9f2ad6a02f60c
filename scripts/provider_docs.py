#!/usr/bin/env python3
"""Writes the provider's registry documentation (provider/docs) from its
schema, as OpenTofu reports it (`tofu providers schema -json`), and from the
examples: examples/provider/provider.tf, examples/resources/<type>/resource.tf
and import.sh, examples/data-sources/<type>/data-source.tf.

    scripts/provider_docs.py SCHEMA_JSON EXAMPLES_DIR OUT_DIR

The layout is the registries' (index.md, resources/<name>.md,
data-sources/<name>.md, the name without the `vmaas_` prefix), the schema
sections those of tfplugindocs (Required, Optional, Read-Only, nested
schemas). scripts/provider-docs.sh runs it; tests/tests/provider_docs.rs
fails when the committed pages differ from what it writes.
"""

import json
import os
import sys

PREFIX = "vmaas_"


def type_name(t):
    """An attribute's type, as the registry shows it."""
    if isinstance(t, str):
        return {"string": "String", "number": "Number", "bool": "Boolean", "dynamic": "Dynamic"}.get(t, t)
    kind, inner = t[0], t[1]
    if kind == "object":
        return "Object"
    return "%s of %s" % (kind.capitalize(), type_name(inner))


def flags(a):
    out = []
    if a.get("sensitive"):
        out.append("Sensitive")
    if a.get("write_only"):
        out.append("Write-only")
    if a.get("deprecated"):
        out.append("Deprecated")
    return out


def describe(text):
    return " ".join((text or "").split())


def anchor(path):
    return "nestedblock--" + "--".join(path)


def section(block, path, out, pending):
    """The Required / Optional / Read-Only lists of `block` into `out`;
    nested blocks are queued in `pending` as (path, block)."""
    groups = {"Required": [], "Optional": [], "Read-Only": []}
    for name, a in sorted(block.get("attributes", {}).items()):
        if a.get("required"):
            group = "Required"
        elif a.get("optional"):
            group = "Optional"
        else:
            group = "Read-Only"
        kind = ", ".join([type_name(a.get("type", "dynamic"))] + flags(a))
        groups[group].append("- `%s` (%s) %s" % (name, kind, describe(a.get("description"))))
    for name, b in sorted(block.get("block_types", {}).items()):
        mode = {"list": "Block List", "set": "Block Set", "single": "Block", "map": "Block Map"}.get(b.get("nesting_mode"), "Block")
        limits = []
        if b.get("min_items"):
            limits.append("Min: %d" % b["min_items"])
        if b.get("max_items"):
            limits.append("Max: %d" % b["max_items"])
        kind = mode + (", " + ", ".join(limits) if limits else "")
        group = "Required" if b.get("min_items") else "Optional"
        sub = path + [name]
        text = describe(b["block"].get("description"))
        groups[group].append("- `%s` (%s) %s (see [below for nested schema](#%s))" % (name, kind, text, anchor(sub)))
        pending.append((sub, b["block"]))
    for group in ("Required", "Optional", "Read-Only"):
        if groups[group]:
            out.append("### " + group)
            out.append("")
            out.extend(groups[group])
            out.append("")


def schema(block):
    out = ["## Schema", ""]
    pending = []
    section(block, [], out, pending)
    while pending:
        path, b = pending.pop(0)
        out.append('<a id="%s"></a>' % anchor(path))
        out.append("### Nested Schema for `%s`" % ".".join(path))
        out.append("")
        section(b, path, out, pending)
    return out


def read(path):
    with open(path) as f:
        return f.read().rstrip("\n")


def example(path, lang):
    return ["```" + lang, read(path), "```", ""]


def page(kind, name, block, examples):
    """One resource's or data source's page."""
    short = name[len(PREFIX):]
    what = "Resource" if kind == "resources" else "Data Source"
    desc = describe(block.get("description"))
    out = [
        "---",
        'page_title: "%s %s - vmaas"' % (name, what),
        'subcategory: ""',
        "description: |-",
        "  " + desc,
        "---",
        "",
        "# %s (%s)" % (name, what),
        "",
        desc,
        "",
        "## Example Usage",
        "",
    ]
    folder = os.path.join(examples, kind, name)
    tf = os.path.join(folder, "resource.tf" if kind == "resources" else "data-source.tf")
    if not os.path.exists(tf):
        sys.exit("%s is missing: every type has an example" % tf)
    out += example(tf, "terraform")
    out += schema(block)
    if kind == "resources":
        imp = os.path.join(folder, "import.sh")
        if not os.path.exists(imp):
            sys.exit("%s is missing: every resource can be imported" % imp)
        out += ["## Import", "", "Import is supported using the following syntax:", ""]
        out += example(imp, "shell")
    return short, "\n".join(out).rstrip("\n") + "\n"


def index(provider, examples):
    block = provider["block"]
    out = [
        "---",
        'page_title: "vmaas Provider"',
        "description: |-",
        "  " + describe(block.get("description")),
        "---",
        "",
        "# vmaas Provider",
        "",
        describe(block.get("description")),
        "It speaks plugin protocol 6 (OpenTofu, and Terraform 1.0 and later).",
        "Every setting can also come from the environment, as each says below.",
        "",
        "## Example Usage",
        "",
    ]
    out += example(os.path.join(examples, "provider", "provider.tf"), "terraform")
    out += schema(block)
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    schema_json, examples, out_dir = sys.argv[1:]
    with open(schema_json) as f:
        schemas = json.load(f)["provider_schemas"]
    (provider,) = [v for k, v in schemas.items() if k.endswith("/vmaas/vmaas")]
    pages = {"index.md": index(provider["provider"], examples)}
    for kind, key in (("resources", "resource_schemas"), ("data-sources", "data_source_schemas")):
        for name, s in sorted(provider.get(key, {}).items()):
            short, text = page(kind, name, s["block"], examples)
            pages[os.path.join(kind, short + ".md")] = text
    for rel, text in pages.items():
        path = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
