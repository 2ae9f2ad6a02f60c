//! The web page in a real headless Chromium, over HTTPS (a self-signed
//! certificate) against the real server with the qemu backend: sign in
//! with a token, see the template's parameters as a form, get the model's
//! validation message beside the field, create a VM, watch it become READY
//! through the event stream, type `uname -a` into its serial console in the
//! browser (xterm.js over `wss://`) and read the answer, stop and delete
//! it. Then a VM's screen in the page (noVNC over the VNC WebSocket): keys
//! pressed in the browser run a command in the guest, and the page draws
//! the same screen, pixel for pixel, as another viewer of the display
//! reads. Screenshots go to `VMAAS_SCREENSHOTS` (docs/images keeps a set).

use std::path::PathBuf;

use reqwest::Method;
use vmaas_tests::Server;
use vmaas_tests::browser::Browser;
use vmaas_tests::vms::{TINY, V1, publish};

/// Where screenshots are written.
fn shots() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("VMAAS_SCREENSHOTS") {
        Some(d) => (PathBuf::from(d), None),
        None => {
            let t = tempfile::tempdir().unwrap();
            (t.path().to_owned(), Some(t))
        }
    }
}

/// JavaScript: the row of VM `name`'s cell `i` text (0 name, 2 state).
fn cell(name: &str, i: usize) -> String {
    format!("document.querySelector('#vms tr[data-name=\"{name}\"]').cells[{i}].textContent")
}

/// JavaScript: clicks the `action` button of VM `name`'s row.
fn click(name: &str, action: &str) -> String {
    format!("document.querySelector('#vms tr[data-name=\"{name}\"] button[data-action=\"{action}\"]').click(), true")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_creates_a_vm_and_types_into_its_console() {
    let Some(mut b) = Browser::start().await else { return };
    let s = Server::start_qemu_with(&["--tls-self-signed"]).await;
    publish(&s, TINY);
    let token = s.token("acme", false);
    let (dir, _keep) = shots();
    std::fs::create_dir_all(&dir).unwrap();

    // The page is served by vmaas-server, with its own headers.
    let page =
        reqwest::Client::builder().danger_accept_invalid_certs(true).build().unwrap().get(format!("{}/", s.endpoint)).send().await.unwrap();
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("script-src 'self'"));
    b.goto(&format!("{}/", s.endpoint)).await;

    // A wrong token is refused on the page; the right one signs in.
    b.eval("document.getElementById('token').value = 'not-a-token'; document.getElementById('sign-in-button').click(), true").await;
    b.wait_for("document.getElementById('sign-in-error').textContent", "the sign-in error", 10).await;
    b.screenshot(&dir.join("web-sign-in.png")).await;
    b.eval(&format!("document.getElementById('token').value = '{token}'; document.getElementById('sign-in-button').click(), true")).await;
    b.wait_for("!document.getElementById('console-app').hidden", "signed in", 10).await;
    b.wait_for("document.getElementById('live').textContent === 'live'", "the event stream", 10).await;
    let who = b.eval("document.getElementById('who').textContent").await;
    assert_eq!(who, "acme in tenant acme");

    // The templates are listed; the template's typed parameters are a form;
    // a bad value gets the model's message beside its field.
    let listed =
        b.wait_for("document.querySelector('#templates tr[data-template=\"tiny\"]').cells[1].textContent", "the templates", 10).await;
    assert_eq!(listed, "Tiny VM");
    let kind = b
        .wait_for("document.getElementById('param-vm_cpu_cores') && document.getElementById('param-vm_cpu_cores').type", "the form", 10)
        .await;
    assert_eq!(kind, "number");
    b.eval("document.getElementById('vm-name').value = 'web'; document.getElementById('param-vm_memory').value = '9Gi'; document.getElementById('create-button').click(), true").await;
    let said = b
        .wait_for(
            "document.querySelector('[data-field=\"object.spec.template_parameters.vm_memory\"]').textContent",
            "the field's error",
            10,
        )
        .await;
    assert_eq!(said, "must be at most 2Gi, got 9Gi");
    b.screenshot(&dir.join("web-validation.png")).await;
    let (_, none) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&token), None).await;
    assert_eq!(none["total"], 0, "nothing was made: {none}");

    // A good one is made and becomes READY on the page, through the event stream.
    b.eval("document.getElementById('param-vm_memory').value = '256Mi'; document.getElementById('create-button').click(), true").await;
    b.wait_for(&format!("{} === 'READY'", cell("web", 2)), "the VM READY on the page", 180).await;
    assert_eq!(b.eval("document.querySelector('[data-field=\"object.spec.template_parameters.vm_memory\"]').textContent").await, "");
    b.screenshot(&dir.join("web-vms.png")).await;

    // The serial console in the browser: type `uname -a`, read the answer.
    b.eval(&click("web", "console")).await;
    b.wait_for(
        "!document.getElementById('terminal-section').hidden && document.querySelector('.xterm-rows') && document.getElementById('terminal').dataset.connected === 'yes'",
        "the terminal, connected",
        10,
    )
    .await;
    b.eval("document.querySelector('.xterm-helper-textarea').focus(), true").await;
    b.press_enter().await;
    b.type_text("uname -a").await;
    b.press_enter().await;
    let screen = b
        .wait_for(
            "(t => t.includes('uname -a') && /Linux \\S+ \\d/.test(t) ? t : '')(document.querySelector('.xterm-rows').innerText)",
            "uname's answer in the terminal",
            60,
        )
        .await;
    assert!(screen.as_str().unwrap().contains("Linux"), "{screen}");
    b.screenshot(&dir.join("web-console.png")).await;

    // Stop, then delete (a second click confirms).
    b.eval(&click("web", "stop")).await;
    b.wait_for(&format!("{} === 'STOPPED'", cell("web", 2)), "the VM STOPPED on the page", 120).await;
    b.eval(&click("web", "delete")).await;
    b.eval(&click("web", "delete")).await;
    let gone = b.try_wait_for("!document.querySelector('#vms tr[data-name=\"web\"]')", 120).await;
    let (_, left) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&token), None).await;
    if gone.is_none() {
        // Which side kept it: the server (its log says why) or the page's live list.
        panic!(
            "the VM is still on the page after 120 s:\n{}\nthe API lists: {left:#}{}\n{}",
            b.text().await,
            vmaas_tests::scratch::SERVER_LOG,
            s.log()
        );
    }
    assert_eq!(left["total"], 0, "{left}");
}

/// JavaScript: the digest of the screen noVNC draws (as `Rfb::digest`).
const CANVAS_DIGEST: &str = "(() => { const c = document.querySelector('#screen canvas'); if (!c || !c.width) return '';
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; const counts = new Map();
  for (let i = 0; i < d.length; i += 4) { const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2]; counts.set(k, (counts.get(k) || 0) + 1); }
  let bg = 0, most = -1; for (const [k, n] of counts) if (n > most) { most = n; bg = k; }
  let ink = 0, sum = 0; for (let i = 0, p = 0; i < d.length; i += 4, p++) { const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
    if (k !== bg) { ink++; sum = (sum + p) % 4294967291; } }
  return `${c.width}x${c.height} ${ink} ${sum}`; })()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_screen_in_the_browser_shows_its_text_and_takes_keys() {
    let Some(mut b) = Browser::start().await else { return };
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let token = s.token("acme", false);
    let (dir, _keep) = shots();
    std::fs::create_dir_all(&dir).unwrap();
    let id = vmaas_tests::vms::create(&s, &token, "desk", "tiny").await;
    vmaas_tests::vms::wait_ready(&s, &token, &id).await;
    b.goto(&format!("{}/", s.endpoint)).await;
    b.eval(&format!("document.getElementById('token').value = '{token}'; document.getElementById('sign-in-button').click(), true")).await;
    b.wait_for(&format!("{} === 'READY'", cell("desk", 2)), "the VM READY on the page", 60).await;

    // noVNC in the page, on the VM's VNC WebSocket (a VNC ticket).
    b.eval(&click("desk", "screen")).await;
    b.wait_for("document.getElementById('screen').dataset.connected === 'yes'", "noVNC connected", 30).await;
    b.wait_for("document.querySelector('#screen canvas').width >= 640", "the guest's screen", 30).await;

    // Keys pressed in the browser reach the guest's shell: the command runs.
    // (One line at a time: the shell drops what was typed ahead of its prompt.)
    b.eval("document.querySelector('#screen canvas').focus(), true").await;
    b.press_keys("echo vnc-in-the-browser >/dev/ttyS0\n").await;
    let client = vmaas_client::Client::new(&s.endpoint, Some(token.clone())).unwrap();
    let start = std::time::Instant::now();
    while !String::from_utf8_lossy(&client.console_log(&id).await.unwrap()).contains("vnc-in-the-browser") {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "the command typed in the browser never ran");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    b.press_keys("seq 2000 2030\n").await;

    // The page shows the guest's screen: another viewer of the same display
    // (the test's own RFB client) reads the same text, pixel for pixel.
    let url = client.console_url(&client.display_session(&id).await.unwrap());
    let mut viewer = vmaas_tests::rfb::Rfb::connect(&url).await;
    let start = std::time::Instant::now();
    let (mut seen, mut shown);
    loop {
        seen = viewer.digest().await;
        shown = b.eval(CANVAS_DIGEST).await.as_str().unwrap_or_default().to_owned();
        let ink: usize = seen.split(' ').nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
        if seen == shown && ink > 3000 {
            break;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "the page shows {shown:?}, the display is {seen:?}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(b.screenshot(&dir.join("web-screen.png")).await > 10_000, "a screenshot of the guest's screen");
}
