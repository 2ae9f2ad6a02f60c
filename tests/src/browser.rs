//! A real headless Chromium (Debian's `chromium`, or `VMAAS_CHROMIUM`)
//! driven over the DevTools protocol: navigate, evaluate JavaScript in the
//! page, type, and take screenshots. Started with a new profile and with
//! its background networking off, so it talks to the page's server only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A headless Chromium with one page.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    socket: Socket,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Chromium binary.
pub fn chromium() -> PathBuf {
    std::env::var_os("VMAAS_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

impl Browser {
    /// Starts Chromium (trusting any certificate: the tests' servers are
    /// self-signed) and connects to its page; `None` without Chromium
    /// unless `VMAAS_REQUIRE_BROWSER` is set.
    pub async fn start() -> Option<Self> {
        if !chromium().exists() {
            assert!(std::env::var_os("VMAAS_REQUIRE_BROWSER").is_none(), "{} is missing", chromium().display());
            eprintln!("skipping: {} is missing", chromium().display());
            return None;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let stderr = tempfile::NamedTempFile::new().expect("a file for chromium's stderr");
        let mut child = Command::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--ignore-certificate-errors",
                "--window-size=1280,1000",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(stderr.reopen().expect("chromium's stderr"))
            .spawn()
            .expect("start chromium");
        let port = devtools_port(profile.path(), &mut child, stderr.path()).await;
        let targets: Value = reqwest::get(format!("http://127.0.0.1:{port}/json/list")).await.expect("targets").json().await.expect("json");
        let page = targets.as_array().and_then(|t| t.iter().find(|t| t["type"] == "page")).expect("a page target").clone();
        let url = page["webSocketDebuggerUrl"].as_str().expect("debugger url");
        let (socket, _) = tokio_tungstenite::connect_async(url).await.expect("connect to the page");
        let mut b = Self { child, _profile: profile, socket, next_id: 0 };
        b.call("Page.enable", json!({})).await;
        Some(b)
    }

    /// Calls a DevTools method; its result (panics on a protocol error).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.socket.send(Message::Text(msg.into())).await.expect("send to chromium");
        loop {
            let m = tokio::time::timeout(Duration::from_secs(60), self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer from chromium in 60 s"))
                .expect("chromium closed the connection")
                .expect("read from chromium");
            let Message::Text(text) = m else { continue };
            let v: Value = serde_json::from_str(&text).expect("json from chromium");
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {}", v["error"]);
                return v["result"].clone();
            }
        }
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", "the page to load", 30).await;
    }

    /// Evaluates `js` in the page (awaiting a promise); its value.
    pub async fn eval(&mut self, js: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({"expression": js, "returnByValue": true, "awaitPromise": true})).await;
        assert!(r["exceptionDetails"].is_null(), "{js}: {:#}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Waits until `js` is truthy in the page; its value.
    pub async fn wait_for(&mut self, js: &str, what: &str, secs: u64) -> Value {
        match self.try_wait_for(js, secs).await {
            Some(v) => v,
            None => {
                let body = self.eval("document.body ? document.body.innerText : ''").await;
                panic!("timed out waiting for {what} ({js}); the page shows:\n{}", body.as_str().unwrap_or(""));
            }
        }
    }

    /// Waits until `js` is truthy in the page: its value, or none after `secs`.
    pub async fn try_wait_for(&mut self, js: &str, secs: u64) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.eval(&format!("(() => {{ try {{ return {js}; }} catch (e) {{ return null; }} }})()")).await;
            if !(v.is_null() || v == false || v == "" || v == 0) {
                return Some(v);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The page's text.
    pub async fn text(&mut self) -> String {
        self.eval("document.body ? document.body.innerText : ''").await.as_str().unwrap_or_default().to_owned()
    }

    /// Types `text` into the focused element.
    pub async fn type_text(&mut self, text: &str) {
        self.call("Input.insertText", json!({"text": text})).await;
    }

    /// Presses the keys of `text` as a keyboard would, one key event each
    /// (Shift held for the characters that need it; `\n` is Enter): what a
    /// page that reads key events (noVNC) sees. Letters, digits, space and
    /// `-./>` only.
    pub async fn press_keys(&mut self, text: &str) {
        for c in text.chars() {
            let (code, vk, shift) = match c {
                'a'..='z' => (format!("Key{}", c.to_ascii_uppercase()), c.to_ascii_uppercase() as u32, false),
                'A'..='Z' => (format!("Key{c}"), c as u32, true),
                '0'..='9' => (format!("Digit{c}"), c as u32, false),
                ' ' => ("Space".into(), 32, false),
                '-' => ("Minus".into(), 189, false),
                '.' => ("Period".into(), 190, false),
                '>' => ("Period".into(), 190, true),
                '/' => ("Slash".into(), 191, false),
                '\n' => ("Enter".into(), 13, false),
                c => panic!("press_keys: no key for {c:?}"),
            };
            if shift {
                let down = json!({"type": "rawKeyDown", "key": "Shift", "code": "ShiftLeft", "windowsVirtualKeyCode": 16, "modifiers": 8});
                self.call("Input.dispatchKeyEvent", down).await;
            }
            let (key, text) = if c == '\n' { ("Enter".to_owned(), "\r".to_owned()) } else { (c.to_string(), c.to_string()) };
            let modifiers = if shift { 8 } else { 0 };
            let down =
                json!({"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk, "text": text, "modifiers": modifiers});
            self.call("Input.dispatchKeyEvent", down).await;
            let up = json!({"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers});
            self.call("Input.dispatchKeyEvent", up).await;
            if shift {
                self.call(
                    "Input.dispatchKeyEvent",
                    json!({"type": "keyUp", "key": "Shift", "code": "ShiftLeft", "windowsVirtualKeyCode": 16}),
                )
                .await;
            }
        }
    }

    /// Presses Enter in the focused element.
    pub async fn press_enter(&mut self) {
        for kind in ["keyDown", "keyUp"] {
            let key = json!({"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13, "text": "\r"});
            self.call("Input.dispatchKeyEvent", key).await;
        }
    }

    /// A PNG screenshot of the page, written to `path`; its size in bytes.
    pub async fn screenshot(&mut self, path: &Path) -> usize {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"})).await;
        let png = base64::engine::general_purpose::STANDARD.decode(r["data"].as_str().expect("screenshot data")).expect("base64");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, &png).expect("write the screenshot");
        png.len()
    }
}

/// How long Chromium may take to open its DevTools port (seconds when the
/// machine is idle; a loaded CI machine has been seen past 30 s).
const DEVTOOLS_WITHIN: Duration = Duration::from_secs(90);

/// Waits for Chromium to write its DevTools port into the profile; when it
/// does not, says whether it exited and what it wrote on stderr.
async fn devtools_port(profile: &Path, child: &mut Child, stderr: &Path) -> u16 {
    let deadline = Instant::now() + DEVTOOLS_WITHIN;
    loop {
        if let Ok(text) = std::fs::read_to_string(profile.join("DevToolsActivePort"))
            && let Some(port) = text.lines().next().and_then(|l| l.trim().parse().ok())
        {
            return port;
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let said = std::fs::read_to_string(stderr).unwrap_or_default();
            let tail = crate::scratch::tail(&said, 2000);
            let how = exited.map_or_else(|| format!("still running after {DEVTOOLS_WITHIN:?}"), |st| format!("exited ({st})"));
            panic!("chromium did not open its DevTools port: {how}; its stderr ends:\n{tail}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
