//! # vmaas-tap
//!
//! An uplink to a physical L2 network: a host TAP device opened by name (its
//! frames are the host side's), or, for a host bridge, a new TAP of our own
//! made a port of that bridge. Either way the result is a [`Tap`]: a
//! non-blocking file where each read is one Ethernet frame in and each
//! write one frame out. Opening needs `CAP_NET_ADMIN` in the device's
//! network namespace (or a TAP made for this user with `ip tuntap add
//! user`).
//!
//! [`AsyncTap`] serves it to tokio. [`netns::Namespace`] runs work (making
//! sockets) inside another network namespace.
//!
//! This is the only crate of vmaas with `unsafe` code: the three `ioctl`s
//! (`TUNSETIFF`, `SIOCGIFFLAGS`/`SIOCSIFFLAGS`, `SIOCBRADDIF`) that Linux
//! offers no other way to make, registering the TAP's file with
//! tokio's reactor, and `setns` for [`netns`].

pub mod netns;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `SIOCBRADDIF` (`linux/sockios.h`): add an interface to a bridge.
const SIOCBRADDIF: libc::c_ulong = 0x89a2;

/// An opened uplink: the TAP's file, and what it is.
#[derive(Debug)]
pub struct Tap {
    /// The TAP's file: one frame per read or write, non-blocking.
    pub file: File,
    /// The TAP's name (the device named, or the one made on the bridge).
    pub tap: String,
    /// The bridge it was added to, if the device named was a bridge.
    pub bridge: Option<String>,
}

/// An interface request naming `name`, checked to fit `IFNAMSIZ`.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} is not an interface name (1 to 15 characters)")));
    }
    // SAFETY: `ifreq` is plain old data (a name and a union of integers and
    // addresses); all zeroes is a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

/// Whether the host interface `name` is a bridge.
pub fn is_bridge(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).join("bridge").is_dir()
}

/// Opens `/dev/net/tun` as the TAP `name` (made if it does not exist,
/// then gone when the file closes), frames without packet information.
fn tun_set_iff(name: &str) -> io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open("/dev/net/tun")?;
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `ifreq`, which `req` is, on the
    // open tun control file.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// A datagram socket: what interface `ioctl`s are made on.
fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a negative result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just made and is owned by nothing else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// One interface `ioctl` (`request`) with `req` on a control socket.
fn if_ioctl(sock: &OwnedFd, request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request used here (SIOCGIFFLAGS, SIOCSIFFLAGS,
    // SIOCBRADDIF) reads or writes exactly one `ifreq`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Sets the interface `name` up.
fn set_up(sock: &OwnedFd, name: &str) -> io::Result<()> {
    let mut req = ifreq(name)?;
    if_ioctl(sock, libc::SIOCGIFFLAGS as _, &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    if_ioctl(sock, libc::SIOCSIFFLAGS as _, &mut req)
}

/// Adds the interface `port` to the bridge `bridge`.
fn add_to_bridge(sock: &OwnedFd, bridge: &str, port: &str) -> io::Result<()> {
    let index = std::fs::read_to_string(Path::new("/sys/class/net").join(port).join("ifindex"))?;
    let index: libc::c_int = index.trim().parse().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("ifindex: {e}")))?;
    let mut req = ifreq(bridge)?;
    req.ifr_ifru.ifru_ifindex = index;
    if_ioctl(sock, SIOCBRADDIF, &mut req)
}

/// The name of the TAP made for `bridge` (short: names take 15 bytes).
pub fn tap_for_bridge(bridge: &str) -> String {
    let h = bridge.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("vmaas{:08x}", h)
}

/// Opens the uplink `name`: the TAP of that name, or for a bridge a new TAP
/// of ours made its port. The TAP is set up either way.
pub fn open(name: &str) -> io::Result<Tap> {
    let sock = control_socket()?;
    if is_bridge(name) {
        let tap = tap_for_bridge(name);
        let file = tun_set_iff(&tap)?;
        add_to_bridge(&sock, name, &tap)?;
        set_up(&sock, &tap)?;
        return Ok(Tap { file, tap, bridge: Some(name.to_owned()) });
    }
    let file = tun_set_iff(name)?;
    set_up(&sock, name)?;
    Ok(Tap { file, tap: name.to_owned(), bridge: None })
}

/// A TAP served by tokio: frames in and out, each a whole Ethernet frame.
#[derive(Debug)]
pub struct AsyncTap {
    fd: tokio::io::unix::AsyncFd<File>,
}

impl AsyncTap {
    /// Registers `tap`'s file with the current tokio runtime.
    pub fn new(tap: Tap) -> io::Result<Self> {
        // SAFETY: the `File` is owned by the `AsyncFd` and keeps its
        // descriptor open, unchanged, for the `AsyncFd`'s whole life.
        let fd = unsafe { tokio::io::unix::AsyncFd::register(tap.file) }.map_err(io::Error::from)?;
        Ok(Self { fd })
    }

    /// Reads one frame into `buf`; its length.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.readable().await?;
            match ready.try_io(|f| std::io::Read::read(&mut f.get_ref(), buf)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes one frame.
    pub async fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            let mut ready = self.fd.writable().await?;
            match ready.try_io(|f| std::io::Write::write(&mut f.get_ref(), frame)) {
                Ok(r) => return r.map(|_| ()),
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(ifreq("eth0").is_ok());
        assert!(ifreq("").is_err());
        assert!(ifreq("a-name-too-long-for-linux").is_err());
        assert!(ifreq("a/b").is_err());
        assert!(tap_for_bridge("br-lab").len() < libc::IFNAMSIZ);
        assert_eq!(tap_for_bridge("br-lab"), tap_for_bridge("br-lab"));
    }
}
