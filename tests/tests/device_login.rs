//! `vmaas login --device` against a real OpenID provider: zitadel/oidc's
//! OP (tests/idp, built by scripts/tools.sh from its Go module) on
//! loopback. The CLI shows a code; the test plays the user at the
//! provider's own pages (signs in, allows); the CLI saves the ID token, and
//! the real server, trusting that provider, takes it: the VM it creates is
//! in the tenant the token names. A denied sign-in saves nothing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::V1;
use vmaas_tests::{Db, Server, bin};

const CLIENT: &str = "vmaas-cli";
const SECRET: &str = "vmaas-cli-secret";
const PASSWORD: &str = "correct horse";

/// The provider, killed when dropped.
struct Idp {
    child: Child,
    issuer: String,
    _users: tempfile::TempDir,
}

impl Drop for Idp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn idp_binary() -> PathBuf {
    let p = std::env::var_os("VMAAS_IDP").map(PathBuf::from).expect("VMAAS_IDP: run scripts/tools.sh (scripts/test.sh does)");
    assert!(p.exists(), "the OpenID provider is missing at {}: run scripts/tools.sh", p.display());
    p
}

/// Starts the provider with one user, `acme` (its subject is `acme`).
fn start_idp() -> Idp {
    let users = tempfile::tempdir().unwrap();
    let file = users.path().join("users.json");
    let user = json!({"acme": {"ID": "acme", "Username": "acme", "Password": PASSWORD, "FirstName": "A", "LastName": "Cme",
        "Email": "ops@acme.example", "EmailVerified": true, "PreferredLanguage": "en"}});
    std::fs::write(&file, user.to_string()).unwrap();
    let mut child = Command::new(idp_binary())
        .args(["--client-id", CLIENT, "--client-secret", SECRET, "--users"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the OpenID provider starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let issuer = first.strip_prefix("issuer ").unwrap_or_else(|| panic!("the provider said {first:?}")).trim().to_owned();
    Idp { child, issuer, _users: users }
}

/// `vmaas login --device` for `s`, its config in `config`; the child and
/// its stderr, read up to the code it shows.
fn start_login(s: &Server, idp: &Idp, config: &Path) -> (Child, BufReader<ChildStderr>, String) {
    let mut child = Command::new(bin("vmaas"))
        .args(["--config"])
        .arg(config)
        .args(["login", "--server", &s.endpoint, "--device", "--issuer", &idp.issuer, "--client-id", CLIENT, "--client-secret", SECRET])
        .env_remove("VMAAS_TOKEN")
        .env_remove("VMAAS_PROFILE")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("enter the code") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the CLI ended without a code");
    }
    let code = line.trim().rsplit(' ').next().unwrap().to_owned();
    (child, err, code)
}

/// Plays the user at the provider's pages: signs in as `acme` with the
/// code, then allows or denies the CLI.
async fn answer(idp: &Idp, code: &str, action: &str) {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let login = http
        .post(format!("{}device/login", idp.issuer))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("user_code={code}&username=acme&password={}", PASSWORD.replace(' ', "+")))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200, "signing in at the provider");
    let cookie = login.headers().get("set-cookie").expect("the provider keeps the code in a cookie").to_str().unwrap().to_owned();
    let page = login.text().await.unwrap();
    assert!(page.contains(CLIENT), "the provider asks about the CLI's client: {page}");
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let confirm = http
        .post(format!("{}device/confirm", idp.issuer))
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("action={action}"))
        .send()
        .await
        .unwrap();
    let text = confirm.text().await.unwrap();
    assert!(text.contains(&format!("Device authorization {action}")), "{text}");
}

/// Waits for the CLI to end (at most a minute): whether it succeeded, and the rest of its stderr.
fn finish(mut child: Child, mut err: BufReader<ChildStderr>) -> (bool, String) {
    let mut rest = String::new();
    let reader = std::thread::spawn(move || {
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    });
    for _ in 0..600 {
        if let Some(st) = child.try_wait().unwrap() {
            return (st.success(), reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("vmaas login did not end in a minute");
}

fn saved_token(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    let v: Value = serde_norway::from_str(&text).ok()?;
    v["token"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_device_flow_signs_in_at_a_real_provider_and_the_server_takes_its_token() {
    let idp = start_idp();
    let args = ["--backend", "none", "--oidc-issuer", &idp.issuer, "--oidc-audience", CLIENT, "--oidc-tenant-claim", "sub"];
    let s = Server::start_with(Db::Sqlite, &args).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");

    // Allowed: the CLI saves the provider's ID token, and the server takes it.
    let (child, err, code) = start_login(&s, &idp, &config);
    answer(&idp, &code, "allowed").await;
    let (ok, rest) = tokio::task::spawn_blocking(move || finish(child, err)).await.unwrap();
    assert!(ok && rest.contains("signed in"), "{rest}\n{}", s.log());
    let token = saved_token(&config).expect("the token is saved");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let body = json!({"object": {"metadata": {"name": "signed-in"}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}});
    let (st, made) = s.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&token), Some(body)).await;
    assert_eq!(st, 201, "the server takes the provider's token: {made}\n{}", s.log());
    let meta = &made["object"]["metadata"];
    assert_eq!((&meta["tenant"], &meta["creator"]), (&json!("acme"), &json!("acme")), "its tenant is its subject: {made}");
    let listed = Command::new(bin("vmaas"))
        .arg("--config")
        .arg(&config)
        .args(["-o", "json", "network", "list"])
        .env_remove("VMAAS_TOKEN")
        .env_remove("VMAAS_ENDPOINT")
        .output()
        .unwrap();
    assert!(listed.status.success(), "the CLI uses the saved profile: {}", String::from_utf8_lossy(&listed.stderr));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("signed-in"), "{}", String::from_utf8_lossy(&listed.stdout));
    let own = s.token("acme", false);
    let (_, theirs) = s.raw(Method::GET, &format!("{V1}/virtual_networks"), Some(&own), None).await;
    assert_eq!(theirs["total"], 1, "the tenant acme holds it: {theirs}");

    // Denied: the CLI fails saying so, and the saved token stays.
    let (child, err, code) = start_login(&s, &idp, &config);
    answer(&idp, &code, "denied").await;
    let (ok, rest) = tokio::task::spawn_blocking(move || finish(child, err)).await.unwrap();
    assert!(!ok && rest.contains("the sign-in was denied"), "{rest}");
    assert_eq!(saved_token(&config).as_deref(), Some(token.as_str()));
}
