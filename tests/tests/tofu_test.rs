//! The examples' own test files (`examples/terraform/*/*.tftest.hcl`), run
//! by `tofu test` (OpenTofu 1.12.6) and `terraform test` (Terraform 1.15.5;
//! 1.0.3 predates the command) against the real server and real QEMU
//! guests: every run's assertions hold, and nothing is left behind.

use reqwest::Method;
use vmaas_tests::Server;
use vmaas_tests::tf::{Tf, Workspace, repo};

/// The example directories that carry test files, with those files.
fn examples_with_tests() -> Vec<(String, Vec<std::path::PathBuf>)> {
    let mut out = Vec::new();
    for dir in std::fs::read_dir(repo().join("examples/terraform")).unwrap() {
        let dir = dir.unwrap().path();
        let mut tests: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().ends_with(".tftest.hcl")).collect();
        tests.sort();
        if !tests.is_empty() {
            out.push((dir.file_name().unwrap().to_string_lossy().into_owned(), tests));
        }
    }
    out.sort();
    out
}

async fn run_every_example(tf: Tf) {
    let s = Server::start_qemu().await;
    let admin = s.token("ops", true);
    let templates = tempfile::tempdir().unwrap();
    std::fs::copy(repo().join("examples/templates/tiny.yaml"), templates.path().join("tiny.yaml")).unwrap();
    let out = s.cli(&admin, &["template", "sync", templates.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = s.token("tester", false);

    let examples = examples_with_tests();
    // Every example a tenant can run without an image of its own carries tests.
    for needed in ["ci-ephemeral", "data-volume", "guest-config", "quickstart", "two-tier"] {
        assert!(examples.iter().any(|(n, _)| n == needed), "examples/terraform/{needed} has no *.tftest.hcl");
    }
    for (name, tests) in examples {
        let main_tf = std::fs::read_to_string(repo().join("examples/terraform").join(&name).join("main.tf")).unwrap();
        let w = Workspace::new(tf, &s, &t, &main_tf);
        let mut runs = 0;
        for test in &tests {
            let text = std::fs::read_to_string(test).unwrap();
            runs += text.matches("\nrun \"").count();
            w.add_file(&test.file_name().unwrap().to_string_lossy(), &text);
        }
        let out = w.ok(&["test", "-no-color"]);
        assert!(out.contains(&format!("{runs} passed, 0 failed")), "{name} ({tf:?}): {runs} runs expected to pass:\n{out}");
        // `test` destroys what it made: the tenant has nothing left.
        for kind in ["virtual_machines", "volumes", "load_balancers", "virtual_networks"] {
            let (_, body) = s.raw(Method::GET, &format!("/api/fulfillment/v1/{kind}"), Some(&t), None).await;
            let left = body["items"].as_array().map(Vec::len).unwrap_or(0);
            assert_eq!(left, 0, "{name} ({tf:?}) left {kind} behind: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_tests_pass_on_opentofu() {
    run_every_example(Tf::Tofu).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_tests_pass_on_terraform_1_15_5() {
    run_every_example(Tf::V1_15_5).await;
}
