//! The graphical console on the qemu backend, with a real guest: every VM
//! has a VGA whose screen QEMU serves on a unix socket in the VM's
//! directory, and the server hands it to a viewer as RFB over a WebSocket
//! (what noVNC speaks), admitted by a single-use `CONSOLE_TYPE_VNC` ticket.
//! Keys typed through it reach the guest's shell, and what the shell
//! prints is on the screen the viewer reads; tickets are single-use, of one
//! kind, and another tenant gets none; after a live migration the new
//! QEMU's display shows the same screen.

use std::time::{Duration, Instant};

use vmaas_client::Client;
use vmaas_tests::Server;
use vmaas_tests::rfb::Rfb;
use vmaas_tests::vms::{self, TINY, publish, wait_ready};

/// Polls the screen until `ok(ink)` holds (60 s at most); the ink then.
async fn until_ink(rfb: &mut Rfb, what: &str, ok: impl Fn(usize) -> bool) -> usize {
    let start = Instant::now();
    loop {
        let ink = rfb.ink().await;
        if ok(ink) {
            return ink;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{what}: the screen has {ink} written pixels");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_screen_is_its_tenants_over_vnc_and_takes_keystrokes() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let id = vms::create(&s, &t, "screen", "tiny").await;
    wait_ready(&s, &t, &id).await;
    assert!(s.data_dir.join("vms").join(&id).join("vnc.sock").exists(), "the display is a unix socket in the VM's directory");
    let c = Client::new(&s.endpoint, Some(t.clone())).unwrap();
    let session = c.display_session(&id).await.unwrap();
    assert_eq!(session.kind, "CONSOLE_TYPE_VNC");
    assert!(session.url.contains(&format!("/virtual_machines/{id}/vnc?ticket=")), "{}", session.url);
    let url = c.console_url(&session);
    let mut rfb = Rfb::connect(&url).await;
    assert!(rfb.name.contains("vmaas-screen") && rfb.width >= 640 && rfb.height >= 400, "{} {}x{}", rfb.name, rfb.width, rfb.height);

    // The guest's banner and prompt are on the screen; `clear` empties it,
    // and what a typed command prints fills it again.
    until_ink(&mut rfb, "the banner", |ink| ink > 500).await;
    rfb.type_text("clear\n").await;
    let clear = until_ink(&mut rfb, "after clear", |ink| ink < 400).await;
    rfb.type_text("seq 1000 1040\n").await;
    let printed = until_ink(&mut rfb, "after seq", |ink| ink > clear + 3000).await;
    println!("written pixels: {clear} after clear, {printed} after seq");
    assert!(printed > 5 * clear.max(1), "{printed} written pixels after seq, {clear} after clear");

    // A command typed on the screen runs: it writes to the serial console.
    rfb.type_text("echo vnc-typed-$((40+2)) >/dev/ttyS0\n").await;
    let start = Instant::now();
    while !String::from_utf8_lossy(&c.console_log(&id).await.unwrap()).contains("vnc-typed-42") {
        assert!(start.elapsed() < Duration::from_secs(60), "the typed command never ran");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // The ticket was used; a serial ticket does not open the display; another tenant gets no session.
    assert!(tokio_tungstenite::connect_async(url.as_str()).await.is_err(), "a ticket opens the display once");
    let serial = c.console_session(&id).await.unwrap();
    let wrong = c.console_url(&serial).replace("/console?", "/vnc?");
    assert!(tokio_tungstenite::connect_async(wrong.as_str()).await.is_err(), "a serial ticket does not open the display");
    let other = Client::new(&s.endpoint, Some(s.token("globex", false))).unwrap();
    assert!(other.display_session(&id).await.is_err(), "another tenant's VM has no session for us");

    // After a live migration the display is the new QEMU's, with the same screen.
    let old = vmaas_tests::qemu_pids(&id);
    let path = format!("{}/virtual_machines/{id}/migrate", vms::V1);
    let (st, b) = s.raw(reqwest::Method::POST, &path, Some(&s.token("ops", true)), Some(serde_json::json!({}))).await;
    assert_eq!(st, 202, "{b}");
    vms::wait_until(&s, &t, &id, "READY on a new QEMU", 180, |v| {
        vms::state(v) == "VIRTUAL_MACHINE_STATE_READY" && vmaas_tests::qemu_pids(&id) != old
    })
    .await;
    let mut moved = Rfb::connect(&c.console_url(&c.display_session(&id).await.unwrap())).await;
    let ink = until_ink(&mut moved, "after the migration", |ink| ink > 3000).await;
    assert!(ink > 5 * clear.max(1), "the printed lines are still on the screen: {ink}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vmaas_vm_vnc_serves_the_screen_to_a_local_vnc_viewer() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let id = vms::create(&s, &t, "viewed", "tiny").await;
    wait_ready(&s, &t, &id).await;
    // `vmaas vm vnc viewed --once`: the address it listens on, on stdout.
    let mut cli = s.cli_command(&t, &["vm", "vnc", "viewed", "--once"]);
    cli.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cli.spawn().expect("vmaas vm vnc");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let addr: std::net::SocketAddr = line.trim().parse().unwrap_or_else(|e| {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
        panic!("{line:?}: {e}; vmaas said: {err}")
    });
    assert!(addr.ip().is_loopback() && addr.port() > 0, "{addr}");
    // A VNC viewer's handshake through it reaches the VM's display.
    let viewer = Rfb::over_tcp(tokio::net::TcpStream::connect(addr).await.unwrap()).await;
    assert!(viewer.name.contains("vmaas-viewed"), "{:?}", viewer.name);
    drop(viewer);
    let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "vmaas vm vnc --once ends with its viewer");
}
