//! The `vmaas` CLI against the real server.

use std::process::Output;

use serde_json::Value;
use vmaas_tests::{Db, Server};

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "vmaas failed ({}):\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fails(o: &Output) -> String {
    assert!(!o.status.success(), "vmaas unexpectedly succeeded: {}", String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/templates")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_sync_is_idempotent_and_prunes() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let admin = s.token("ops", true);
    let dir = tempfile::tempdir().unwrap();
    for f in ["simple_vm.yaml", "tiny.yaml"] {
        std::fs::copy(examples().join(f), dir.path().join(f)).unwrap();
    }
    let d = dir.path().to_str().unwrap();
    let out = ok(&s.cli(&admin, &["template", "sync", d]));
    assert!(out.contains("created: simple_vm, tiny"), "{out}");
    let out = ok(&s.cli(&admin, &["template", "sync", d]));
    assert_eq!(out.trim(), "unchanged: simple_vm, tiny");
    // Change one, remove the other.
    let text = std::fs::read_to_string(dir.path().join("tiny.yaml")).unwrap().replace("title: Tiny VM", "title: Tiny VM v2");
    std::fs::write(dir.path().join("tiny.yaml"), text).unwrap();
    std::fs::remove_file(dir.path().join("simple_vm.yaml")).unwrap();
    let out = ok(&s.cli(&admin, &["template", "sync", "--dry-run", d]));
    assert!(out.contains("would be updated: tiny") && out.contains("would be deleted: simple_vm"), "{out}");
    let out = ok(&s.cli(&admin, &["-o", "json", "template", "sync", d]));
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["updated"], serde_json::json!(["tiny"]));
    assert_eq!(r["deleted"], serde_json::json!(["simple_vm"]));
    let list: Value = serde_json::from_str(&ok(&s.cli(&admin, &["-o", "json", "template", "list"]))).unwrap();
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["title"], "Tiny VM v2");
    // A bad file changes nothing and says where the problem is.
    std::fs::write(
        dir.path().join("bad.yaml"),
        "id: bad\nparameters:\n  - name: vm_memory\n    default: {value: 12}\n    min: 1Gi\n    max: 1Mi\n",
    )
    .unwrap();
    let err = fails(&s.cli(&admin, &["template", "sync", d]));
    assert!(err.contains("bad.yaml") && err.contains("parameters[0].min"), "{err}");
    // Tenants cannot publish.
    let tenant = s.token("acme", false);
    std::fs::remove_file(dir.path().join("bad.yaml")).unwrap();
    std::fs::write(dir.path().join("new.yaml"), "id: newer\n").unwrap();
    let err = fails(&s.cli(&tenant, &["template", "sync", d]));
    assert!(err.contains("only administrators"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_lifecycle_through_the_cli() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let admin = s.token("ops", true);
    ok(&s.cli(&admin, &["template", "sync", examples().to_str().unwrap()]));
    let t = s.token("acme", false);
    let tpl = ok(&s.cli(&t, &["template", "get", "simple_vm"]));
    assert!(tpl.contains("vm_memory") && tpl.contains("quantity"), "{tpl}");

    // Parameters typed from the template: 4 becomes an integer, 4096Mi a quantity.
    let out = ok(&s
        .cli(&t, &["-o", "json", "vm", "create", "web", "-t", "simple_vm", "-p", "vm_cpu_cores=4", "-p", "vm_memory=4096Mi", "--stopped"]));
    let vm: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(vm["spec"]["template_parameters"]["vm_cpu_cores"]["value"], 4);
    assert_eq!(vm["spec"]["template_parameters"]["vm_memory"]["value"], "4096Mi");
    assert_eq!(vm["spec"]["state"], "stopped");

    let err = fails(&s.cli(&t, &["vm", "create", "bad", "-t", "simple_vm", "-p", "vm_cpu_cores=four", "-p", "colour=red"]));
    assert!(err.contains("-p vm_cpu_cores: expected an integer, got \"four\""), "{err}");
    assert!(err.contains("-p colour: unknown parameter \"colour\"; valid parameters are: vm_cpu_cores, vm_disk_size, vm_memory"), "{err}");
    let err = fails(&s.cli(&t, &["vm", "create", "web", "-t", "simple_vm"]));
    assert!(err.contains("already exists"), "{err}");

    // The stopped VM reaches STOPPED; wait says so.
    let out = ok(&s.cli(&t, &["-o", "json", "vm", "wait", "web", "--for", "stopped", "--timeout", "20s"]));
    let vm: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(vm["status"]["state"], "VIRTUAL_MACHINE_STATE_STOPPED");
    // Starting it with the none backend never gets READY: the timeout names what it waited for.
    ok(&s.cli(&t, &["vm", "start", "web"]));
    let err = fails(&s.cli(&t, &["vm", "wait", "web", "--for", "ready", "--timeout", "1s"]));
    assert!(err.contains("timed out after 1s waiting for virtual machine"), "{err}");
    assert!(err.contains("to be READY") && err.contains("NoBackend"), "{err}");

    let table = ok(&s.cli(&t, &["vm", "list"]));
    let header = table.lines().next().unwrap();
    assert!(header.starts_with("NAME") && header.contains("STATE") && header.contains("EXTERNAL IP"), "{table}");
    assert!(table.lines().nth(1).unwrap().starts_with("web "), "{table}");
    let yaml = ok(&s.cli(&t, &["-o", "yaml", "vm", "get", "web"]));
    assert!(yaml.contains("name: web") && yaml.contains("state: started"), "{yaml}");

    ok(&s.cli(&t, &["vm", "delete", "web", "--wait", "--timeout", "20s"]));
    let list: Value = serde_json::from_str(&ok(&s.cli(&t, &["-o", "json", "vm", "list"]))).unwrap();
    assert_eq!(list["total"], 0);
    let err = fails(&s.cli(&t, &["vm", "get", "web"]));
    assert!(err.contains("virtual machine \"web\" not found"), "{err}");

    // Completions are generated.
    let bash = ok(&s.cli(&t, &["completions", "bash"]));
    assert!(bash.contains("_vmaas()"), "{}", &bash[..200.min(bash.len())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_config_file_and_unreachable_server() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let t = s.token("acme", false);
    let cfg = s.data_dir.join("cli-config.yaml");
    // login writes the file; later calls need neither flag nor env.
    let out = std::process::Command::new(vmaas_tests::bin("vmaas"))
        .args(["login", "--server", &s.endpoint, "--token", &t])
        .env("VMAAS_CONFIG", &cfg)
        .env_remove("VMAAS_ENDPOINT")
        .env_remove("VMAAS_TOKEN")
        .output()
        .unwrap();
    ok(&out);
    let out = std::process::Command::new(vmaas_tests::bin("vmaas"))
        .args(["-o", "json", "vm", "list"])
        .env("VMAAS_CONFIG", &cfg)
        .env_remove("VMAAS_ENDPOINT")
        .env_remove("VMAAS_TOKEN")
        .output()
        .unwrap();
    let list: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(list["total"], 0);
    let out = std::process::Command::new(vmaas_tests::bin("vmaas"))
        .args(["vm", "list", "--endpoint", "http://127.0.0.1:9"])
        .env("VMAAS_CONFIG", &cfg)
        .output()
        .unwrap();
    let err = fails(&out);
    assert!(err.contains("cannot reach the vmaas server at http://127.0.0.1:9"), "{err}");
}
