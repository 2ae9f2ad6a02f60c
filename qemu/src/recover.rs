//! Finding a VM's QEMU again when its state file is damaged or its pid
//! file is gone, so that a running guest is adopted, never shadowed by a
//! second QEMU: `/proc` says which process runs with the VM's QMP socket,
//! and its command line says which addresses it forwards.

use std::net::Ipv4Addr;
use std::path::Path;

use crate::state::VmFile;

/// A QEMU process found for a VM directory, and its command line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    pub(crate) pid: i32,
    pub(crate) args: Vec<String>,
    /// Whether the pid file named it (else it was found through `/proc`).
    pub(crate) by_pid_file: bool,
}

pub(crate) fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect())
}

/// Whether a command line names the QMP socket `qmp` (`-qmp unix:PATH,…`),
/// whole, or as `qmp.next`: a QEMU that took a live migration over keeps
/// on its command line the `.next` name it started with (see
/// `migrate.rs`), though its socket has been renamed since.
fn runs_in(args: &[String], qmp: &str) -> bool {
    let names = [qmp.to_owned(), format!("{qmp}.next")];
    let parts = args.iter().flat_map(|a| a.split(','));
    parts.map(|part| part.strip_prefix("unix:").unwrap_or(part)).any(|path| names.iter().any(|n| n == path))
}

/// The process in `dir`'s pid file and its command line, if that command
/// line names the directory's QMP socket. Blocking.
pub(crate) fn pid_file_qemu(dir: &Path) -> Option<(i32, Vec<String>)> {
    let qmp = dir.join("qmp.sock").display().to_string();
    let pid = std::fs::read_to_string(dir.join("qemu.pid")).ok()?.trim().parse::<i32>().ok()?;
    cmdline(pid).filter(|a| runs_in(a, &qmp)).map(|args| (pid, args))
}

/// The QEMU process of the VM in `dir`: the pid file's, if its command line
/// names the directory's QMP socket, else any process whose does. Blocking.
pub(crate) fn find_qemu(dir: &Path) -> Option<Found> {
    if let Some((pid, args)) = pid_file_qemu(dir) {
        return Some(Found { pid, args, by_pid_file: true });
    }
    let qmp = dir.join("qmp.sock").display().to_string();
    let (pid, args) = processes().find(|(_, args)| runs_in(args, &qmp))?;
    Some(Found { pid, args, by_pid_file: false })
}

/// Every process on the host and its command line, from `/proc`. Blocking.
pub(crate) fn processes() -> impl Iterator<Item = (i32, Vec<String>)> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    entries.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).filter_map(|pid| Some((pid, cmdline(pid)?)))
}

/// The host forwards in a QEMU command line: `(host address, host port, guest port)`.
fn forwards(args: &[String]) -> Vec<(Ipv4Addr, u16, u16)> {
    let mut out = Vec::new();
    for netdev in args.windows(2).filter(|w| w[0] == "-netdev").map(|w| w[1].as_str()) {
        for fwd in netdev.split(',').filter_map(|p| p.strip_prefix("hostfwd=")) {
            // tcp:127.42.0.1:80-:80
            let mut parts = fwd.splitn(2, '-');
            let (host, guest) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let mut h = host.split(':').skip(1);
            let addr = h.next().and_then(|a| a.parse().ok());
            let port = h.next().and_then(|p| p.parse().ok());
            let guest_port = guest.rsplit(':').next().and_then(|p| p.parse().ok());
            if let (Some(a), Some(p), Some(g)) = (addr, port, guest_port) {
                out.push((a, p, g));
            }
        }
    }
    out
}

/// The external IP (the first forward from an address other than
/// loopback) and the probe port (the forward from loopback) in `fwd`.
pub(crate) fn addresses(fwd: &[(Ipv4Addr, u16, u16)]) -> (Option<Ipv4Addr>, Option<u16>) {
    (fwd.iter().map(|f| f.0).find(|a| *a != Ipv4Addr::LOCALHOST), fwd.iter().find(|f| f.0 == Ipv4Addr::LOCALHOST).map(|f| f.1))
}

/// The host forwards in QEMU's `info usernet` table: `(host address,
/// host port, guest port)`.
pub(crate) fn usernet_forwards(table: &str) -> Vec<(Ipv4Addr, u16, u16)> {
    table
        .lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            if c.len() < 6 || !c[0].ends_with("[HOST_FORWARD]") {
                return None;
            }
            Some((c[2].parse().ok()?, c[3].parse().ok()?, c[5].parse().ok()?))
        })
        .collect()
}

/// A state file rebuilt for the VM in `dir` from its running QEMU, if any:
/// the id from the directory, the external IP and probe port from the
/// forwards. Tenant, name and the restart generation are not on the host:
/// the first `ensure` fills them in from the store.
pub(crate) fn rebuild(dir: &Path, found: Option<&Found>) -> VmFile {
    let id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (external_ip, probe_port) = addresses(&found.map(|f| forwards(&f.args)).unwrap_or_default());
    VmFile {
        id,
        tenant: String::new(),
        name: String::new(),
        external_ip,
        probe_port,
        restarts: 0,
        ready_pid: None,
        forwards: Vec::new(),
        booted: None,
        volumes: Vec::new(),
        gpus: found.map(|f| gpus(&f.args)).unwrap_or_default(),
        migrations: 0,
        restores: 0,
        restore_ms: None,
        nic_ports: found.map(|f| nic_ports(&f.args)).unwrap_or_default(),
        snapshot: found.and_then(|f| snapshot_of(&f.args)),
        plugged: Vec::new(),
        // After a live migration the TPM's state is in the other directory.
        tpm_state: (!dir.join(crate::platform::TPM_DIR).is_dir() && dir.join(crate::platform::TPM_DIR_B).is_dir())
            .then(|| crate::platform::TPM_DIR_B.to_owned()),
        live: None,
    }
}

/// The snapshot a QEMU command line maps its RAM from
/// (`mem-path=DIR/snapshots/KEY/ram`).
fn snapshot_of(args: &[String]) -> Option<String> {
    let path = args.iter().flat_map(|a| a.split(',')).find_map(|p| p.strip_prefix("mem-path="))?;
    let key = Path::new(path).parent()?.file_name()?.to_string_lossy().into_owned();
    Some(key)
}

/// The loopback ports of the NICs on subnets in a QEMU command line
/// (`-netdev stream,id=nic-subnetN,…,addr.port=P`), in order.
fn nic_ports(args: &[String]) -> Vec<u16> {
    let netdevs = args.windows(2).filter(|w| w[0] == "-netdev").map(|w| w[1].as_str());
    netdevs
        .filter(|d| d.starts_with("stream,") && d.contains("id=nic-subnet"))
        .filter_map(|d| d.split(',').find_map(|p| p.strip_prefix("addr.port="))?.parse().ok())
        .collect()
}

/// The host GPUs in a QEMU command line (`-device vfio-pci,host=ADDR,…`).
fn gpus(args: &[String]) -> Vec<String> {
    let devices = args.windows(2).filter(|w| w[0] == "-device").map(|w| w[1].as_str());
    devices
        .filter(|d| d.starts_with("vfio-pci,"))
        .filter_map(|d| d.split(',').find_map(|p| p.strip_prefix("host=")))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_gpus_back_from_the_command_line() {
        let args: Vec<String> = ["qemu", "-device", "virtio-net-pci,netdev=n", "-device", "vfio-pci,host=0000:65:00.0,id=gpu0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(gpus(&args), vec!["0000:65:00.0"]);
    }

    #[test]
    fn reads_the_forwards_back_from_qemu() {
        let table = "Hub -1 (nic-default):\n  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\n  TCP[HOST_FORWARD]  14      127.42.0.7    80       10.0.2.15    80     0     0\n  TCP[HOST_FORWARD]  15       127.0.0.1 40001       10.0.2.15    80     0     0\n  TCP[ESTABLISHED]   19       127.0.0.1 45269       10.0.2.15    22     0     0\n";
        assert_eq!(usernet_forwards(table), vec![(Ipv4Addr::new(127, 42, 0, 7), 80, 80), (Ipv4Addr::LOCALHOST, 40001, 80)]);
    }

    #[test]
    fn reads_the_nic_ports_back_from_the_command_line() {
        let args: Vec<String> = [
            "qemu",
            "-netdev",
            "stream,id=nic-subnet0,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=40001,reconnect-ms=1000",
            "-netdev",
            "stream,id=nic-subnet1,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=40007,reconnect-ms=1000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(nic_ports(&args), vec![40001, 40007]);
        let clone = ["-object".to_owned(), "memory-backend-file,id=ram0,size=256M,mem-path=/d/snapshots/0a1b/ram,share=off".to_owned()];
        assert_eq!(snapshot_of(&clone).as_deref(), Some("0a1b"));
    }

    #[test]
    fn reads_the_forwards_back_from_the_command_line() {
        let args: Vec<String> =
            ["qemu", "-netdev", "user,id=nic-default,restrict=on,hostfwd=tcp:127.42.0.7:80-:80,hostfwd=tcp:127.0.0.1:40001-:80"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let f = rebuild(Path::new("/x/vms/abc"), Some(&Found { pid: 1, args, by_pid_file: true }));
        assert_eq!(f.id, "abc");
        assert_eq!(f.external_ip, Some(Ipv4Addr::new(127, 42, 0, 7)));
        assert_eq!(f.probe_port, Some(40001));
        assert_eq!(rebuild(Path::new("/x/vms/abc"), None).external_ip, None);
    }

    #[test]
    fn a_socket_is_named_whole_or_as_a_migration_target_named_it() {
        let args = |a: &str| vec!["qemu".to_owned(), "-qmp".to_owned(), a.to_owned()];
        assert!(runs_in(&args("unix:/d/vm/qmp.sock,server=on,wait=off"), "/d/vm/qmp.sock"));
        assert!(runs_in(&args("unix:/d/vm/qmp.sock.next,server=on,wait=off"), "/d/vm/qmp.sock"), "a QEMU that took a migration over");
        assert!(!runs_in(&args("unix:/d/vm2/qmp.sock,server=on"), "/d/vm/qmp.sock"), "another VM's");
        assert!(!runs_in(&args("unix:/d/vm/qmp.sock.old,server=on"), "/d/vm/qmp.sock"));
    }

    #[test]
    fn finds_a_process_by_its_socket_path() {
        let dir = tempfile::tempdir().unwrap();
        let qmp = dir.path().join("qmp.sock").display().to_string();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do sleep 0.1; done", &qmp])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut found = None;
        for _ in 0..100 {
            found = find_qemu(dir.path());
            if found.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(found.map(|f| f.pid), Some(pid), "found through /proc without a pid file");
        std::fs::write(dir.path().join("qemu.pid"), "1").unwrap();
        assert_eq!(find_qemu(dir.path()).map(|f| f.pid), Some(pid), "a pid file naming another process is not believed");
        let _ = child.kill();
        let _ = child.wait();
        // A `sleep` the shell just forked holds its command line until it
        // execs: allow it that moment.
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            find_qemu(dir.path()).is_none()
        });
        assert!(gone, "a process that exited is not found");
    }
}
