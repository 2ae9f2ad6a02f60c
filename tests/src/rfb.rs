//! A small RFB (VNC) client over a WebSocket, as noVNC speaks to vmaas's
//! graphical console (or over TCP, as a VNC viewer speaks to `vmaas vm
//! vnc`): protocol 3.8, no security (the ticket admitted us),
//! a shared session, the whole screen in Raw encoding at 32 bits per pixel,
//! and key events (X keysyms, Shift pressed for the characters that need it).

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What the protocol runs over.
enum Transport {
    /// RFB in binary frames.
    Ws(Box<Socket>),
    /// RFB as bytes.
    Tcp(tokio::net::TcpStream),
}

/// A connected viewer.
pub struct Rfb {
    transport: Transport,
    buf: Vec<u8>,
    /// The screen's width in pixels.
    pub width: u16,
    /// Its height.
    pub height: u16,
    /// The desktop's name (QEMU: the VM's `-name`).
    pub name: String,
    screen: Vec<u32>,
}

const SHIFTED: &str = "~!@#$%^&*()_+{}|:\"<>?";

impl Rfb {
    /// Connects to the WebSocket at `url` and completes the handshake.
    pub async fn connect(url: &str) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.expect("the display's WebSocket");
        Self::handshake(Transport::Ws(Box::new(ws))).await
    }

    /// Completes the handshake over TCP connection `tcp`.
    pub async fn over_tcp(tcp: tokio::net::TcpStream) -> Self {
        Self::handshake(Transport::Tcp(tcp)).await
    }

    async fn handshake(transport: Transport) -> Self {
        let mut r = Self { transport, buf: Vec::new(), width: 0, height: 0, name: String::new(), screen: Vec::new() };
        let version = r.take(12).await;
        assert!(version.starts_with(b"RFB 003."), "{version:?}");
        r.send(b"RFB 003.008\n").await;
        let n = r.take(1).await[0] as usize;
        assert!(n > 0, "the server refused: {:?}", String::from_utf8_lossy(&r.take(64).await));
        let types = r.take(n).await;
        assert!(types.contains(&1), "security None offered: {types:?}");
        r.send(&[1]).await;
        assert_eq!(r.take(4).await, [0, 0, 0, 0], "security result OK");
        r.send(&[1]).await; // ClientInit: shared
        let init = r.take(24).await;
        r.width = u16::from_be_bytes([init[0], init[1]]);
        r.height = u16::from_be_bytes([init[2], init[3]]);
        let len = u32::from_be_bytes([init[20], init[21], init[22], init[23]]) as usize;
        r.name = String::from_utf8_lossy(&r.take(len).await).into_owned();
        // 32 bpp, depth 24, little endian, true colour, 8 bits each: red at 16, green at 8, blue at 0.
        r.send(&[0u8, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0]).await;
        r.send(&[2, 0, 0, 1, 0, 0, 0, 0]).await; // SetEncodings: Raw only
        r
    }

    async fn send(&mut self, bytes: &[u8]) {
        match &mut self.transport {
            Transport::Ws(ws) => ws.send(Message::Binary(bytes.to_vec().into())).await.expect("sending to the display"),
            Transport::Tcp(tcp) => tokio::io::AsyncWriteExt::write_all(tcp, bytes).await.expect("sending to the display"),
        }
    }

    /// The next `n` bytes from the server.
    async fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            let more = tokio::time::timeout(Duration::from_secs(30), self.receive()).await.expect("the display answers");
            self.buf.extend_from_slice(&more);
        }
        self.buf.drain(..n).collect()
    }

    /// What the server sends next (possibly nothing, for a frame of another kind).
    async fn receive(&mut self) -> Vec<u8> {
        match &mut self.transport {
            Transport::Ws(ws) => match ws.next().await {
                Some(Ok(Message::Binary(b))) => b.to_vec(),
                Some(Ok(Message::Close(_))) | None => panic!("the display closed"),
                Some(Ok(_)) => Vec::new(),
                Some(Err(e)) => panic!("the display's WebSocket: {e}"),
            },
            Transport::Tcp(tcp) => {
                let mut chunk = vec![0u8; 64 * 1024];
                let n = tokio::io::AsyncReadExt::read(tcp, &mut chunk).await.expect("reading the display");
                assert!(n > 0, "the display closed");
                chunk.truncate(n);
                chunk
            }
        }
    }

    /// The whole screen now, one `0x00RRGGBB` per pixel, row by row.
    pub async fn screen(&mut self) -> &[u32] {
        let (w, h) = (self.width, self.height);
        self.screen.resize(w as usize * h as usize, 0);
        let mut req = vec![3u8, 0, 0, 0, 0, 0];
        req.extend_from_slice(&w.to_be_bytes());
        req.extend_from_slice(&h.to_be_bytes());
        self.send(&req).await;
        loop {
            match self.take(1).await[0] {
                0 => break,
                2 => {} // Bell
                3 => {
                    let head = self.take(7).await; // ServerCutText
                    let len = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
                    self.take(len).await;
                }
                t => panic!("unexpected RFB message {t}"),
            }
        }
        let head = self.take(3).await;
        for _ in 0..u16::from_be_bytes([head[1], head[2]]) {
            let r = self.take(12).await;
            let at = |i: usize| u16::from_be_bytes([r[i], r[i + 1]]) as usize;
            let (x, y, rw, rh) = (at(0), at(2), at(4), at(6));
            let encoding = i32::from_be_bytes([r[8], r[9], r[10], r[11]]);
            if encoding == -223 {
                // DesktopSize: the screen changed size; asked again by the caller.
                self.width = rw as u16;
                self.height = rh as u16;
                continue;
            }
            assert_eq!(encoding, 0, "Raw encoding only");
            let pixels = self.take(rw * rh * 4).await;
            for row in 0..rh {
                for col in 0..rw {
                    let p = &pixels[(row * rw + col) * 4..][..4];
                    if let Some(dst) = self.screen.get_mut((y + row) * w as usize + x + col) {
                        *dst = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) & 0x00ff_ffff;
                    }
                }
            }
        }
        &self.screen
    }

    /// Pixels of the screen that are not its most common colour (the
    /// background): how much is written on it.
    pub async fn ink(&mut self) -> usize {
        let screen = self.screen().await;
        let background = background(screen);
        screen.iter().filter(|p| **p != background).count()
    }

    /// The screen's digest: `WxH INK SUM`, where INK counts the pixels that
    /// are not the background (the most common colour) and SUM adds their
    /// indices modulo 4294967291: two viewers showing the same text agree.
    pub async fn digest(&mut self) -> String {
        let screen = self.screen().await.to_vec();
        let background = background(&screen);
        let (mut ink, mut sum) = (0u64, 0u64);
        for (i, p) in screen.iter().enumerate() {
            if *p != background {
                ink += 1;
                sum = (sum + i as u64) % 4_294_967_291;
            }
        }
        format!("{}x{} {ink} {sum}", self.width, self.height)
    }

    /// Presses and releases each key of `text` (`\n` is Return).
    pub async fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            let (keysym, shift) = match c {
                '\n' => (0xff0d, false),
                c => (c as u32, c.is_ascii_uppercase() || SHIFTED.contains(c)),
            };
            if shift {
                self.key(0xffe1, true).await;
            }
            self.key(keysym, true).await;
            self.key(keysym, false).await;
            if shift {
                self.key(0xffe1, false).await;
            }
        }
    }

    async fn key(&mut self, keysym: u32, down: bool) {
        let mut ev = vec![4u8, u8::from(down), 0, 0];
        ev.extend_from_slice(&keysym.to_be_bytes());
        self.send(&ev).await;
    }
}

/// The most common colour of `screen`: its background.
fn background(screen: &[u32]) -> u32 {
    let mut counts = std::collections::HashMap::new();
    for p in screen {
        *counts.entry(*p).or_insert(0usize) += 1;
    }
    counts.into_iter().max_by_key(|(_, n)| *n).map(|(p, _)| p).unwrap_or(0)
}
