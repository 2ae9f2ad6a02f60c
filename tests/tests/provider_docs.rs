//! The provider's registry documentation (`provider/docs`) against its
//! schema as OpenTofu reads it off the built provider: every resource and
//! data source has its page, every attribute and block is documented, and
//! nothing documented is gone. The pages are what `scripts/provider-docs.sh`
//! writes from the schema and the examples: a change to either without
//! running it fails here, naming the page.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use vmaas_tests::tf::{dev_overrides, repo, tofu};

/// `tofu providers schema -json` of the provider built here.
fn schema(dir: &Path) -> Value {
    std::fs::write(dir.join("tf.rc"), dev_overrides()).expect("tf.rc");
    std::fs::write(dir.join("main.tf"), "terraform {\n  required_providers {\n    vmaas = { source = \"vmaas/vmaas\" }\n  }\n}\n")
        .expect("main.tf");
    let out = Command::new(tofu())
        .args(["providers", "schema", "-json"])
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", dir.join("tf.rc"))
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .expect("tofu");
    assert!(out.status.success(), "tofu providers schema: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("schema.json"), &out.stdout).expect("schema.json");
    serde_json::from_slice(&out.stdout).expect("the schema's JSON")
}

/// The names a block documents at its top level and in its nested blocks
/// (`block.attribute`), as the schema has them.
fn names(block: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    for name in block["attributes"].as_object().into_iter().flatten().map(|(k, _)| k) {
        out.insert(format!("{prefix}{name}"));
    }
    for (name, nested) in block["block_types"].as_object().into_iter().flatten() {
        out.insert(format!("{prefix}{name}"));
        names(&nested["block"], &format!("{prefix}{name}."), out);
    }
}

/// The names a page documents: `- \`name\` (` lines, under the nested
/// schema they belong to.
fn documented(page: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut prefix = String::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("### Nested Schema for `") {
            prefix = format!("{}.", rest.trim_end_matches('`'));
        } else if let Some(rest) = line.strip_prefix("- `")
            && let Some((name, _)) = rest.split_once("` (")
        {
            out.insert(format!("{prefix}{name}"));
        }
    }
    out
}

#[test]
fn the_registry_docs_match_the_schema() {
    let work = tempfile::tempdir().expect("tempdir");
    let schema = schema(work.path());
    let provider = schema["provider_schemas"]
        .as_object()
        .and_then(|m| m.iter().find(|(k, _)| k.ends_with("/vmaas/vmaas")))
        .map(|(_, v)| v.clone())
        .expect("the vmaas provider's schema");
    let docs = repo().join("provider/docs");
    let mut wrong = Vec::new();
    let mut pages = vec![(docs.join("index.md"), provider["provider"]["block"].clone())];
    for (kind, key) in [("resources", "resource_schemas"), ("data-sources", "data_source_schemas")] {
        for (name, s) in provider[key].as_object().expect("schemas") {
            let short = name.trim_start_matches("vmaas_");
            pages.push((docs.join(kind).join(format!("{short}.md")), s["block"].clone()));
        }
    }
    for (page, block) in &pages {
        let Ok(text) = std::fs::read_to_string(page) else {
            wrong.push(format!("{} is missing", page.display()));
            continue;
        };
        let mut want = BTreeSet::new();
        names(block, "", &mut want);
        let have = documented(&text);
        for n in want.difference(&have) {
            wrong.push(format!("{}: `{n}` is undocumented", page.display()));
        }
        for n in have.difference(&want) {
            wrong.push(format!("{}: `{n}` is documented but gone", page.display()));
        }
    }
    // Pages of types that are gone.
    for kind in ["resources", "data-sources"] {
        for e in std::fs::read_dir(docs.join(kind)).expect("a docs directory").flatten() {
            if !pages.iter().any(|(p, _)| p == &e.path()) {
                wrong.push(format!("{} documents a type the provider does not have", e.path().display()));
            }
        }
    }
    assert!(wrong.is_empty(), "provider/docs and the schema disagree:\n{}", wrong.join("\n"));

    // And the pages are exactly what the generator writes now (examples included).
    let fresh = work.path().join("docs");
    let out = Command::new("python3")
        .arg(repo().join("scripts/provider_docs.py"))
        .arg(work.path().join("schema.json"))
        .arg(repo().join("examples"))
        .arg(&fresh)
        .output()
        .expect("python3");
    assert!(out.status.success(), "scripts/provider_docs.py: {}", String::from_utf8_lossy(&out.stderr));
    let stale: Vec<PathBuf> = pages
        .iter()
        .map(|(p, _)| p.strip_prefix(&docs).expect("under docs").to_owned())
        .filter(|rel| std::fs::read(fresh.join(rel)).ok() != std::fs::read(docs.join(rel)).ok())
        .collect();
    assert!(stale.is_empty(), "provider/docs pages out of date (run scripts/provider-docs.sh): {stale:?}");
}
