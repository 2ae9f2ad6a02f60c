//! The provider as users install it: `scripts/release.sh` makes the
//! release's zip, SHA256SUMS and manifest and a filesystem mirror; OpenTofu
//! and both Terraform versions install it from that mirror (no
//! `dev_overrides`), record its checksum in the lock file, and use it.

use std::path::Path;
use std::process::Command;

use base64::Engine;
use sha2::{Digest, Sha256};
use vmaas_tests::tf::{Tf, Workspace};
use vmaas_tests::vms::{self, TINY};
use vmaas_tests::{Db, Server};

const MAIN_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas", version = "VERSION" }
  }
}

data "vmaas_template" "tiny" {
  id = "tiny"
}

output "title" {
  value = data.vmaas_template.tiny.title
}
"#;

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// `scripts/release.sh` into `dist` and `mirror`, from the binaries built here.
fn release(dist: &Path, mirror: &Path) {
    let bins = vmaas_tests::bin("terraform-provider-vmaas").parent().expect("bin dir").to_owned();
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/release.sh"))
        .arg("-o")
        .arg(dist)
        .arg("--bin-dir")
        .arg(&bins)
        .arg("--mirror")
        .arg(mirror)
        .output()
        .expect("scripts/release.sh");
    assert!(out.status.success(), "scripts/release.sh: {}", String::from_utf8_lossy(&out.stderr));
}

/// The entries of a zip: `(name, unix mode, bytes)` (Python's zipfile reads it).
fn unzip(zip: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let script = "import json, sys, zipfile, base64\nz = zipfile.ZipFile(sys.argv[1])\nprint(json.dumps([[i.filename, i.external_attr >> 16, base64.b64encode(z.read(i)).decode()] for i in z.infolist()]))";
    let out = Command::new("python3").args(["-c", script]).arg(zip).output().expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let entries: Vec<(String, u32, String)> = serde_json::from_slice(&out.stdout).expect("zip listing");
    entries.into_iter().map(|(n, m, b)| (n, m, base64::engine::general_purpose::STANDARD.decode(b).expect("base64"))).collect()
}

/// Terraform's `h1:` hash of a package: SHA-256 of the sorted
/// `"<sha256 hex>  <name>\n"` lines of its files (Go's dirhash.Hash1).
fn h1(entries: &[(String, u32, Vec<u8>)]) -> String {
    let mut lines: Vec<String> = entries.iter().map(|(name, _, bytes)| format!("{}  {name}\n", sha256_hex(bytes))).collect();
    lines.sort();
    format!("h1:{}", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(lines.concat().as_bytes())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_installs_from_a_filesystem_mirror_on_every_terraform() {
    let version = env!("CARGO_PKG_VERSION");
    let work = tempfile::tempdir().expect("tempdir");
    let (dist, mirror) = (work.path().join("dist"), work.path().join("mirror"));
    release(&dist, &mirror);
    let name = format!("terraform-provider-vmaas_{version}");
    let zip = dist.join(format!("{name}_linux_amd64.zip"));
    let manifest = dist.join(format!("{name}_manifest.json"));

    // The three files, each as registries serve them.
    let sums = std::fs::read_to_string(dist.join(format!("{name}_SHA256SUMS"))).expect("SHA256SUMS");
    for file in [&zip, &manifest] {
        let line =
            format!("{}  {}", sha256_hex(&std::fs::read(file).expect("a release file")), file.file_name().unwrap().to_string_lossy());
        assert!(sums.lines().any(|l| l == line), "SHA256SUMS lacks {line}:\n{sums}");
    }
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).expect("manifest")).expect("manifest JSON");
    assert_eq!(m["metadata"]["protocol_versions"], serde_json::json!(["6.0"]), "{m}");
    let entries = unzip(&zip);
    let built = std::fs::read(vmaas_tests::bin("terraform-provider-vmaas")).expect("the built provider");
    assert_eq!(entries.len(), 1, "one file in the zip");
    assert_eq!(entries[0].0, format!("terraform-provider-vmaas_v{version}"));
    assert_eq!(entries[0].1 & 0o777, 0o755, "executable");
    assert!(entries[0].2 == built, "the zip holds the built provider");
    let first = std::fs::read(&zip).expect("zip");
    release(&dist, &mirror);
    assert!(std::fs::read(&zip).expect("zip") == first, "the same binary makes the same zip");

    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    vms::publish(&s, TINY);
    let t = s.token("acme", false);
    let main_tf = MAIN_TF.replace("VERSION", version);
    for tf in Tf::ALL {
        let w = Workspace::from_mirror(tf, &s, &t, &main_tf, &mirror);
        let init = w.ok(&["init", "-no-color", "-input=false"]);
        assert!(init.contains(&format!("Installed vmaas/vmaas v{version}")), "{tf:?} installs the release:\n{init}");
        let lock = std::fs::read_to_string(w.dir().join(".terraform.lock.hcl")).expect("the lock file");
        let host = if tf == Tf::Tofu { "registry.opentofu.org" } else { "registry.terraform.io" };
        assert!(lock.contains(&format!("provider \"{host}/vmaas/vmaas\"")), "{tf:?}: {lock}");
        assert!(lock.contains(&format!("version     = \"{version}\"")), "{tf:?}: {lock}");
        assert!(lock.contains(&h1(&entries)), "{tf:?} records the release's checksum {}:\n{lock}", h1(&entries));
        w.apply(&[]);
        assert!(!w.output("title").is_empty(), "{tf:?}: the installed provider read the template");
    }
}
