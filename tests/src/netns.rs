//! A network namespace a test makes for itself, and ways through its wall
//! that are not network traffic on the host: unix sockets bridged by
//! `socat` (Debian's, from `scripts/k8s.sh`) inside the namespace, and a
//! forwarder in the test process from a host loopback port to such a
//! socket. Packets with a non-loopback address stay inside the namespace.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use tokio::net::{TcpListener, UnixStream};
use tokio::task::JoinHandle;

/// A network namespace with its loopback up, deleted on drop.
pub struct Netns {
    /// Its name (`ip netns`).
    pub name: String,
}

/// Runs `cmd`, which must succeed.
fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Netns {
    /// Makes a namespace `PREFIX-<random>` with loopback up and `extra`
    /// (an address, `10.255.0.1/32` say) on its loopback too: an address
    /// that is not loopback for the programs inside, yet reaches nothing
    /// outside.
    pub fn make(prefix: &str, extra: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let me = Self { name: format!("{prefix}-{}", &id[..8]) };
        run(Command::new("ip").args(["netns", "add", &me.name]));
        run(me.command("ip").args(["link", "set", "lo", "up"]));
        run(me.command("ip").args(["addr", "add", extra, "dev", "lo"]));
        me
    }

    /// `program` to run inside the namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// `socat` inside the namespace, listening on unix socket `sock` and
    /// connecting each client to `tcp` (`127.0.0.1:6443`) in the namespace.
    pub fn unix_to_tcp(&self, sock: &Path, tcp: &str) -> Command {
        let mut c = self.command("socat");
        c.arg(format!("UNIX-LISTEN:{},fork", sock.display())).arg(format!("TCP:{tcp}"));
        c
    }

    /// `socat` inside the namespace, serving TLS with `cert`/`key` on `tcp`
    /// (`10.255.0.1:8443`) and passing each client's plain stream to unix
    /// socket `sock`.
    pub fn tls_to_unix(&self, tcp: &str, cert: &Path, key: &Path, sock: &Path) -> Command {
        tls_to_unix(self.command("socat"), tcp, cert, key, sock)
    }
}

/// `socat` (`cmd`) serving TLS with `cert`/`key` on `tcp` and passing each
/// client's plain stream to unix socket `sock`.
pub fn tls_to_unix(mut cmd: Command, tcp: &str, cert: &Path, key: &Path, sock: &Path) -> Command {
    let (host, port) = tcp.rsplit_once(':').unwrap_or((tcp, "443"));
    cmd.arg(format!("OPENSSL-LISTEN:{port},bind={host},cert={},key={},verify=0,fork,reuseaddr", cert.display(), key.display()))
        .arg(format!("UNIX-CONNECT:{}", sock.display()));
    cmd
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Forwards a new host loopback port to unix socket `sock`: returns the
/// port's address and the task (abort it when done).
pub async fn loopback_to_unix(sock: PathBuf) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let task = tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let sock = sock.clone();
            tokio::spawn(async move {
                if let Ok(mut unix) = UnixStream::connect(&sock).await {
                    let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                }
            });
        }
    });
    (addr, task)
}
