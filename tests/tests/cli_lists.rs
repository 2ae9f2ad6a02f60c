//! The `vmaas` CLI's lists and exit codes against the real server:
//! `--filter` (CEL) and `-l KEY[=VALUE]` on every list, evaluated by the
//! server; exit code 2 for a command line that cannot run (clap's errors
//! and those found after parsing), 3 for a `--wait` that ran out of time, 1
//! for what the server refused.

use std::process::Output;

use serde_json::{Value, json};
use vmaas_tests::objects::post;
use vmaas_tests::vms::{TINY, publish};
use vmaas_tests::{Db, Server};

fn names(o: &Output) -> Vec<String> {
    assert!(o.status.success(), "vmaas failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let mut out: Vec<String> =
        v["items"].as_array().expect("items").iter().map(|i| i["metadata"]["name"].as_str().unwrap_or_default().to_owned()).collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_filter_by_cel_and_labels_on_the_server() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    let t = s.token("acme", false);
    for (name, cidr, labels) in [
        ("front", "10.1.0.0/16", json!({"env": "prod", "team": "web"})),
        ("back", "10.2.0.0/16", json!({"env": "prod"})),
        ("lab", "10.3.0.0/16", json!({"env": "dev"})),
    ] {
        let (status, body) =
            post(&s, &t, "virtual_networks", json!({"metadata": {"name": name, "labels": labels}, "spec": {"ipv4_cidr": cidr}})).await;
        assert_eq!(status, 201, "{body}");
    }
    let list = |args: &[&str]| {
        let mut all = vec!["-o", "json", "network", "list"];
        all.extend_from_slice(args);
        names(&s.cli(&t, &all))
    };
    assert_eq!(list(&[]), ["back", "front", "lab"]);
    assert_eq!(list(&["-l", "env=prod"]), ["back", "front"]);
    assert_eq!(list(&["-l", "env=prod", "-l", "team"]), ["front"]);
    assert_eq!(list(&["--label", "team=db"]), Vec::<String>::new());
    assert_eq!(list(&["--filter", "this.spec.ipv4_cidr.startsWith('10.3.')"]), ["lab"]);
    assert_eq!(list(&["--filter", "this.metadata.name != 'back'", "-l", "env=prod"]), ["front"]);

    // VMs, with the older --state beside it.
    publish(&s, TINY);
    for (name, env) in [("a", "prod"), ("b", "dev")] {
        let body = json!({"metadata": {"name": name, "labels": {"env": env}}, "spec": {"template": "tiny"}});
        let (status, body) = post(&s, &t, "virtual_machines", body).await;
        assert_eq!(status, 201, "{body}");
    }
    assert_eq!(names(&s.cli(&t, &["-o", "json", "vm", "list", "-l", "env=dev"])), ["b"]);
    assert_eq!(names(&s.cli(&t, &["-o", "json", "vm", "list", "--filter", "this.metadata.name == 'a'", "--state", "PROGRESSING"])), ["a"]);

    // A filter the server cannot read is its 400, naming `filter`: exit 1.
    let bad = s.cli(&t, &["network", "list", "--filter", "this.spec.ipv4_cidr =="]);
    assert_eq!(bad.status.code(), Some(1), "{}", String::from_utf8_lossy(&bad.stderr));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("filter"), "{}", String::from_utf8_lossy(&bad.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_tell_usage_timeouts_and_failures_apart() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    let t = s.token("acme", false);
    publish(&s, TINY);
    let code = |args: &[&str]| {
        let o = s.cli(&t, args);
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    // Usage: clap's own, and what is found after parsing.
    assert_eq!(code(&["vm", "list", "--no-such-flag"]).0, Some(2));
    let (c, err) = code(&["network", "list", "-l", "env='x"]);
    assert_eq!(c, Some(2), "{err}");
    assert!(err.contains("-l"), "{err}");
    let (c, err) = code(&["vm", "create", "x", "-t", "tiny", "-p", "no_such_parameter=1"]);
    assert_eq!(c, Some(2), "{err}");
    // A --wait that runs out: the API-only backend never makes a VM READY.
    let (c, err) = code(&["vm", "create", "slow", "-t", "tiny", "--wait", "--timeout", "2s"]);
    assert_eq!(c, Some(3), "{err}");
    assert!(err.contains("timed out"), "{err}");
    // Refused by the server: 1.
    let (c, err) = code(&["vm", "create", "slow", "-t", "tiny"]);
    assert_eq!(c, Some(1), "the name is taken: {err}");
    let (c, err) = code(&["vm", "get", "nowhere"]);
    assert_eq!(c, Some(1), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_profiles_pick_the_server_and_token() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    let (acme, globex) = (s.token("acme", false), s.token("globex", false));
    let (status, body) =
        post(&s, &acme, "virtual_networks", json!({"metadata": {"name": "acme-net"}, "spec": {"ipv4_cidr": "10.1.0.0/16"}})).await;
    assert_eq!(status, 201, "{body}");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    let vmaas = |args: &[&str], profile_env: Option<&str>| {
        let mut cmd = std::process::Command::new(vmaas_tests::bin("vmaas"));
        cmd.args(args).env("VMAAS_CONFIG", &config).env_remove("VMAAS_ENDPOINT").env_remove("VMAAS_TOKEN").env_remove("VMAAS_PROFILE");
        if let Some(p) = profile_env {
            cmd.env("VMAAS_PROFILE", p);
        }
        cmd.output().expect("vmaas")
    };
    for (name, token) in [("acme", &acme), ("globex", &globex)] {
        let o = vmaas(&["--profile", name, "login", "--server", &s.endpoint, "--token", token], None);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let saved = std::fs::read_to_string(&config).expect("the config file");
    assert!(saved.contains("profiles:") && saved.contains("acme:") && saved.contains("globex:"), "{saved}");
    assert_eq!(names(&vmaas(&["-o", "json", "--profile", "acme", "network", "list"], None)), ["acme-net"]);
    assert_eq!(names(&vmaas(&["-o", "json", "network", "list"], Some("globex"))), Vec::<String>::new(), "VMAAS_PROFILE picks globex");
    let o = vmaas(&["--profile", "nobody", "network", "list"], None);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("acme, globex"), "{}", String::from_utf8_lossy(&o.stderr));
}
