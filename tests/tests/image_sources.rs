//! Where the server fetches images from, tried as a hostile tenant would
//! (loopback only): by default it fetches from public addresses only, so a
//! loopback service's secret cannot be imported; an administrator opens
//! loopback by name, never the server's own socket (directly or by a
//! redirect); every refused or failed fetch tells the tenant the same
//! words (no port scanning), the reason going to the server's log; a
//! source that stalls or trickles is cut off; and a tenant has a bounded
//! number of imports under way.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use vmaas_tests::Server;
use vmaas_tests::files::FileServer;
use vmaas_tests::images::{FETCH_FAILED, import, settled};
use vmaas_tests::objects::post;
use vmaas_tests::vms::V1;

/// A loopback file server holding `secret.bin` (a valid raw disk) and `slow.bin`.
async fn files() -> (tempfile::TempDir, FileServer) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.bin"), b"TOP-SECRET".repeat(512 * 100 / 10)).unwrap();
    std::fs::write(dir.path().join("slow.bin"), vec![0u8; 512]).unwrap();
    let web = FileServer::start(dir.path().to_owned()).await;
    (dir, web)
}

fn port_of(url: &str) -> &str {
    url.rsplit(':').next().unwrap()
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Imports `url` as `name` and expects it to fail; what the tenant is told.
async fn failed(s: &Server, t: &str, name: &str, url: &str) -> String {
    let id = import(s, t, name, json!({"source": url})).await;
    let img = settled(s, t, &id).await;
    assert_eq!(img["status"]["state"], "IMAGE_STATE_FAILED", "{name} ({url}): {img}");
    let why = img["status"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(why.starts_with(FETCH_FAILED), "{name}: {why}");
    why
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_and_the_server_itself_are_never_fetched_from_unless_opened() {
    let (_dir, web) = files().await;
    let port = port_of(&web.url).to_owned();
    let s = Server::start_qemu().await;
    let t = s.token("acme", false);

    // Default (public addresses only): a loopback service's file, by
    // address or by name, and a closed port all fail with the same words.
    let mut told = Vec::new();
    for (name, url) in [
        ("secret", format!("{}/secret.bin", web.url)),
        ("by-name", format!("http://localhost:{port}/secret.bin")),
        ("v6", format!("http://[::1]:{port}/secret.bin")),
        ("other-loopback", format!("http://127.0.0.2:{port}/secret.bin")),
        ("closed", format!("http://127.0.0.1:{}/secret.bin", closed_port())),
        ("own-api", format!("{}/api/openapi.json", s.endpoint)),
    ] {
        told.push(failed(&s, &t, name, &url).await);
    }
    assert!(told.windows(2).all(|w| w[0] == w[1]), "the messages tell apart what answered: {told:#?}");
    assert!(!told[0].contains("127.0.0.1") && !told[0].contains("refused"), "{}", told[0]);
    let log = s.log();
    assert!(log.contains("loopback address") && log.contains("image fetch refused or failed"), "the log has the reason:\n{log}");

    // Loopback opened by an administrator: the file server's files come, a
    // missing one and a closed port fail alike, and the server's own socket
    // stays closed, directly, by name, and through a redirect.
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.0/8,::1"]).await;
    let t = s.token("acme", false);
    let id = import(&s, &t, "secret", json!({"source": format!("{}/secret.bin", web.url)})).await;
    assert_eq!(settled(&s, &t, &id).await["status"]["state"], "IMAGE_STATE_READY");
    let own_port = port_of(&s.endpoint).to_owned();
    let mut told = Vec::new();
    for (name, url) in [
        ("missing", format!("{}/nothing.bin", web.url)),
        ("closed", format!("http://127.0.0.1:{}/x.bin", closed_port())),
        ("own-api", format!("{}/api/openapi.json", s.endpoint)),
        ("own-by-name", format!("http://localhost:{own_port}/healthz")),
        ("own-redirected", format!("{}/redirect?to=http://127.0.0.1:{own_port}/healthz", web.url)),
    ] {
        told.push(failed(&s, &t, name, &url).await);
    }
    assert!(told.windows(2).all(|w| w[0] == w[1]), "{told:#?}");
    assert!(s.log().contains("this server's own listening socket"), "{}", s.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_and_trickling_sources_are_cut_off_and_imports_per_tenant_are_bounded() {
    let (_dir, web) = files().await;
    let flags = [
        "--image-source-allow",
        "127.0.0.1",
        "--image-fetch-read-timeout",
        "2s",
        "--image-fetch-timeout",
        "8s",
        "--image-imports-per-tenant",
        "2",
    ];
    let s = Server::start_qemu_with(&flags).await;
    let (a, b) = (s.token("acme", false), s.token("globex", false));

    // Two imports under way (a stalled source and a trickling one) are
    // acme's limit: a third from a URL is refused, naming the field;
    // an upload, and another tenant, are not held back.
    let started = Instant::now();
    let stalled = import(&s, &a, "stalled", json!({"source": format!("{}/stall/slow.bin", web.url)})).await;
    let trickled = import(&s, &a, "trickled", json!({"source": format!("{}/trickle/slow.bin", web.url)})).await;
    let (st, e) =
        post(&s, &a, "images", json!({"metadata": {"name": "third"}, "spec": {"source": format!("{}/secret.bin", web.url)}})).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (429, Some("object.spec.source")), "{e}");
    assert!(e["details"][0]["reason"].as_str().unwrap().contains("--image-imports-per-tenant 2"), "{e}");
    import(&s, &a, "upload", json!({})).await;
    let other = import(&s, &b, "theirs", json!({"source": format!("{}/secret.bin", web.url)})).await;
    assert_eq!(settled(&s, &b, &other).await["status"]["state"], "IMAGE_STATE_READY");

    // The stalled one is cut at the read timeout, the trickling one at the total limit.
    let img = settled(&s, &a, &stalled).await;
    assert!(img["status"]["message"].as_str().unwrap_or_default().starts_with(FETCH_FAILED), "{img}");
    let img = settled(&s, &a, &trickled).await;
    assert!(img["status"]["message"].as_str().unwrap_or_default().starts_with(FETCH_FAILED), "{img}");
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(8) && took < Duration::from_secs(30), "cut off after {took:?}");
    assert!(s.log().contains("the download took longer than 8s"), "{}", s.log());

    // Once they are over, acme imports again.
    let id = import(&s, &a, "third", json!({"source": format!("{}/secret.bin", web.url)})).await;
    assert_eq!(settled(&s, &a, &id).await["status"]["state"], "IMAGE_STATE_READY");
}

#[tokio::test(flavor = "multi_thread")]
async fn imported_images_count_against_the_disk_quota() {
    let (_dir, web) = files().await;
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.1"]).await;
    let (t, admin) = (s.token("acme", false), s.token("ops", true));
    let (st, q) =
        s.raw(Method::PUT, &format!("{V1}/tenants/acme/quota"), Some(&admin), Some(json!({"object": {"spec": {"disk": "100Ki"}}}))).await;
    assert_eq!(st, 200, "{q}");
    // 50 KiB each: the first two fit under 100 KiB, then acme holds all of it.
    for name in ["one", "two"] {
        let id = import(&s, &t, name, json!({"source": format!("{}/secret.bin", web.url)})).await;
        assert_eq!(settled(&s, &t, &id).await["status"]["state"], "IMAGE_STATE_READY");
    }
    let (_, quota) = s.raw(Method::GET, &format!("{V1}/tenants/acme/quota"), Some(&t), None).await;
    assert_eq!(quota["object"]["status"]["usage"]["disk"], "100Ki", "{quota}");
    let (st, e) =
        post(&s, &t, "images", json!({"metadata": {"name": "three"}, "spec": {"source": format!("{}/secret.bin", web.url)}})).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (429, Some("quota.disk")), "{e}");
    let (st, e) = post(&s, &t, "volumes", json!({"metadata": {"name": "v"}, "spec": {"size": "1Mi"}})).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (429, Some("quota.disk")), "a volume does not fit either: {e}");
}
