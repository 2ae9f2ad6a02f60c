//! OSAC's own clients: Python scripts in `tests/osac/` whose stubs
//! `grpcio-tools` generates from `../shared/osac` (not the project's
//! `.proto` files), run against a server.

use crate::Server;
use crate::tf::{python, repo, shared};

/// Runs `tests/osac/<script>` against `s` (`--grpc`, `--http`, `--shared`,
/// then `args`), asserts that it succeeded and printed each of `steps`;
/// what it printed.
pub async fn run_client(s: &Server, script: &str, args: &[&str], steps: &[&str]) -> String {
    let out = tokio::process::Command::new(python())
        .arg(repo().join("tests/osac").join(script))
        .args(["--grpc", s.endpoint.trim_start_matches("http://"), "--http", &s.endpoint])
        .arg("--shared")
        .arg(shared())
        .args(args)
        .output()
        .await
        .expect("run the OSAC client");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the OSAC client {script} failed:\n{stdout}\n{stderr}{}\n{}", crate::scratch::SERVER_LOG, s.log());
    for step in steps {
        assert!(stdout.contains(step), "no step {step:?} in:\n{stdout}");
    }
    stdout.into_owned()
}
