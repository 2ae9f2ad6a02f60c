//! Every per-type example of the provider's documentation, applied for
//! real with OpenTofu on a qemu server: `examples/resources/<type>/
//! resource.tf` is applied; the type's `examples/data-sources/<type>/
//! data-source.tf` then reads what it made; its `import.sh` command imports
//! it again into a state that forgot it, after which a plan has nothing to
//! do; then it is destroyed. The list data sources are applied last. The
//! image example's vendor URL is replaced by a loopback copy of the test
//! guest's disk (the only change made to an example).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use vmaas_tests::Server;
use vmaas_tests::files::FileServer;
use vmaas_tests::tf::{Tf, Workspace, repo};
use vmaas_tests::vms::{TINY, publish};

const VERSIONS_TF: &str = "terraform {\n  required_providers {\n    vmaas = { source = \"vmaas/vmaas\" }\n  }\n}\n";
const VENDOR_IMAGE: &str = "https://images.example.com/debian-12-genericcloud-amd64.qcow2";

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn workspace(s: &Server, t: &str, main_tf: &str) -> Workspace {
    let w = Workspace::new(Tf::Tofu, s, t, main_tf);
    w.add_file("versions.tf", VERSIONS_TF);
    w
}

/// `terraform import ADDRESS ID` of an import.sh: `(address, id)`.
fn import_command(text: &str) -> (String, String) {
    let line = text.lines().find(|l| l.starts_with("terraform import ")).expect("a `terraform import` line");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 4, "terraform import ADDRESS ID: {line}");
    (words[2].to_owned(), words[3].to_owned())
}

/// What a plan would change, as `address: attribute` (or `address:
/// replace`), leaving out the `timeouts` block: it lives in the
/// configuration and state only, so an import cannot know it, and writing
/// it changes nothing on the server.
fn changes_after_import(w: &Workspace) -> Vec<String> {
    w.ok(&["plan", "-no-color", "-input=false", "-out=after-import.plan"]);
    let shown: Value = serde_json::from_str(&w.ok(&["show", "-json", "after-import.plan"])).expect("the plan's JSON");
    let mut out = Vec::new();
    for rc in shown["resource_changes"].as_array().into_iter().flatten() {
        let (address, change) = (rc["address"].as_str().unwrap_or_default(), &rc["change"]);
        let actions: Vec<&str> = change["actions"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if actions == ["no-op"] || actions == ["read"] {
            continue;
        }
        if actions.contains(&"delete") || actions.contains(&"create") {
            out.push(format!("{address}: replace ({actions:?})"));
            continue;
        }
        let keys = change["before"].as_object().into_iter().chain(change["after"].as_object()).flat_map(|m| m.keys());
        let differing: BTreeSet<&String> =
            keys.filter(|k| k.as_str() != "timeouts" && change["before"][k.as_str()] != change["after"][k.as_str()]).collect();
        out.extend(differing.into_iter().map(|k| format!("{address}: {k}")));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_resource_and_data_source_example_applies() {
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.1"]).await;
    publish(&s, TINY);
    // Templates and instance types are published by administrators.
    let t = s.token("examples", true);
    let disk = vmaas_tests::images_dir().join("test-guest/bios.qcow2");
    let web = FileServer::start(disk.parent().expect("images dir").to_owned()).await;
    let local_image = format!("{}/bios.qcow2", web.url);

    let examples = repo().join("examples");
    let mut types: Vec<String> = std::fs::read_dir(examples.join("resources"))
        .expect("examples/resources")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    types.sort();
    assert!(types.len() >= 14, "an example per resource: {types:?}");
    for ty in &types {
        let dir = examples.join("resources").join(ty);
        let w = workspace(&s, &t, &read(&dir.join("resource.tf")).replace(VENDOR_IMAGE, &local_image));
        w.apply(&[]);
        let data = examples.join("data-sources").join(ty).join("data-source.tf");
        if data.exists() {
            let d = workspace(&s, &t, &read(&data));
            let out = d.apply(&[]);
            assert!(out.contains("Outputs:"), "{ty}'s data source read nothing:\n{out}");
        }
        let (address, id) = import_command(&read(&dir.join("import.sh")));
        w.ok(&["state", "rm", "-no-color", &address]);
        w.ok(&["import", "-no-color", "-input=false", &address, &id]);
        let changed = changes_after_import(&w);
        assert!(changed.is_empty(), "{ty}: after `import {address} {id}`, a plan would change {changed:?}");
        w.ok(&["destroy", "-auto-approve", "-no-color", "-input=false"]);
    }
    for list in ["vmaas_images", "vmaas_templates", "vmaas_volumes"] {
        let d = workspace(&s, &t, &read(&examples.join("data-sources").join(list).join("data-source.tf")));
        d.apply(&[]);
    }
    let ids = workspace(&s, &t, &read(&examples.join("data-sources/vmaas_templates/data-source.tf")));
    ids.apply(&[]);
    assert!(ids.ok(&["output", "-no-color", "ids"]).contains("tiny"), "the templates list names tiny");
}
