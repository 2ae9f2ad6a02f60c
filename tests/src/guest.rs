//! A test guest under QEMU by itself (no server), its serial console on
//! stdin/stdout, with a second NIC on whatever `-netdev` the caller gives
//! (a port of a segment, or QEMU's own socket networking). Its first NIC is
//! QEMU's user network with `restrict=on`, with nothing forwarded.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::images_dir;

/// A running test guest.
pub struct Guest {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Guest {
    /// Boots the test guest named `name` whose second NIC (`mac`) is
    /// `-netdev NETDEV` (which must carry `id=seg`).
    pub fn boot(name: &str, mac: &str, netdev: &str) -> Self {
        Self::boot_with(name, mac, netdev, "")
    }

    /// [`Guest::boot`] with `user` appended to its user network's options
    /// (`,hostfwd=tcp:127.0.0.1:PORT-:PORT`, say).
    pub fn boot_with(name: &str, mac: &str, netdev: &str, user: &str) -> Self {
        let image = images_dir().join("test-guest");
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(image.join("image.json")).expect("the test guest")).expect("image.json");
        let append = format!("{} vmaas.name={name}", meta["cmdline"].as_str().unwrap_or("console=ttyS0"));
        let mut child = Command::new("qemu-system-x86_64")
            .args(["-machine", "pc", "-accel", "tcg", "-cpu", "max", "-m", "192M", "-smp", "1"])
            .args(["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-serial", "stdio"])
            .arg("-kernel")
            .arg(image.join("vmlinux"))
            .arg("-initrd")
            .arg(image.join("initrd.cpio"))
            .args(["-append", &append])
            .args(["-netdev", &format!("user,id=up,restrict=on{user}"), "-device", "virtio-net-pci,netdev=up"])
            .args(["-netdev", netdev, "-device", &format!("virtio-net-pci,netdev=seg,mac={mac}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64");
        let stdin = child.stdin.take().expect("stdin");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, stdin, lines }
    }

    /// Waits for a console line containing `needle`; returns it.
    pub fn expect(&self, needle: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    }

    /// Types `cmd` on the console and waits for a line holding `want`
    /// (which the command's own echo must not contain).
    pub fn run(&mut self, cmd: &str, want: &str, within: Duration) -> Option<String> {
        assert!(!cmd.contains(want), "the echo of {cmd:?} would match {want:?}");
        writeln!(self.stdin, "{cmd}").expect("the console");
        self.stdin.flush().expect("the console");
        self.expect(want, within)
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
