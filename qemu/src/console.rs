//! The serial console: the backend owns QEMU's serial socket for the guest's
//! whole life, keeps a ring buffer (and a log file) of everything printed,
//! and fans output out to any number of viewers. Output printed while nobody
//! watches is kept, which QEMU alone would lose.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use vmaas_backend::Console;

/// Bytes of output kept in memory.
pub const RING: usize = 256 * 1024;
/// The log file is trimmed back to the ring when it grows past this.
const LOG_MAX: u64 = 4 * 1024 * 1024;

/// One guest's serial console.
pub struct SerialConsole {
    ring: Arc<Mutex<VecDeque<u8>>>,
    output: broadcast::Sender<Bytes>,
    input: mpsc::Sender<Bytes>,
    tasks: Vec<JoinHandle<()>>,
}

fn tail_of(path: &Path, n: usize) -> VecDeque<u8> {
    let data = std::fs::read(path).unwrap_or_default();
    data[data.len().saturating_sub(n)..].iter().copied().collect()
}

impl SerialConsole {
    /// Connects to QEMU's serial socket (retrying while QEMU creates it),
    /// restoring earlier output from `log`.
    pub async fn attach(socket: &Path, log: PathBuf) -> std::io::Result<Self> {
        let mut last = None;
        let mut stream = None;
        for _ in 0..50 {
            match UnixStream::connect(socket).await {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let stream = stream.ok_or_else(|| last.unwrap_or_else(|| std::io::Error::other("no serial socket")))?;
        let (mut r, mut w) = stream.into_split();
        let ring = Arc::new(Mutex::new(tail_of(&log, RING)));
        let (output, _) = broadcast::channel(256);
        let (input, mut input_rx) = mpsc::channel::<Bytes>(64);
        let reader = {
            let ring = ring.clone();
            let output = output.clone();
            tokio::spawn(async move {
                let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&log).ok();
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = match r.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let chunk = Bytes::copy_from_slice(&buf[..n]);
                    {
                        let mut ring = ring.lock().unwrap_or_else(|p| p.into_inner());
                        ring.extend(chunk.iter());
                        let excess = ring.len().saturating_sub(RING);
                        ring.drain(..excess);
                        if let Some(f) = file.as_mut() {
                            let _ = f.write_all(&chunk);
                            if f.metadata().map(|m| m.len()).unwrap_or(0) > LOG_MAX {
                                let (a, b) = ring.as_slices();
                                let _ = std::fs::write(&log, [a, b].concat());
                                file = std::fs::OpenOptions::new().append(true).open(&log).ok();
                            }
                        }
                        // Sent under the lock: a viewer sees each byte once,
                        // in its history or in its stream.
                        let _ = output.send(chunk);
                    }
                }
            })
        };
        let writer = tokio::spawn(async move {
            while let Some(b) = input_rx.recv().await {
                if w.write_all(&b).await.is_err() {
                    break;
                }
            }
        });
        Ok(Self { ring, output, input, tasks: vec![reader, writer] })
    }

    /// Everything buffered so far.
    pub fn history(&self) -> Vec<u8> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = ring.as_slices();
        [a, b].concat()
    }

    /// The last `n` lines of output, as text.
    pub fn last_lines(&self, n: usize) -> String {
        let tail: Vec<u8> = {
            let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
            ring.iter().skip(ring.len().saturating_sub(8 * 1024)).copied().collect()
        };
        let text = String::from_utf8_lossy(&tail).replace('\r', "");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Sends `bytes` down the guest's serial line, as a viewer's keys go.
    pub fn send(&self, bytes: &'static [u8]) {
        let _ = self.input.try_send(Bytes::from_static(bytes));
    }

    /// A console handle for one viewer.
    pub fn open(&self) -> Console {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let output = self.output.subscribe();
        let (a, b) = ring.as_slices();
        Console { history: [a, b].concat(), output, input: self.input.clone() }
    }
}

impl Drop for SerialConsole {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
