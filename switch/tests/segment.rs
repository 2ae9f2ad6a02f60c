//! A segment served on real unix and loopback TCP sockets, spoken to as
//! QEMU speaks (`-netdev stream`: length-prefixed frames): two NICs reach
//! each other, get their addresses over DHCP, and a NIC that reconnects
//! (as QEMU does after a server restart) is served again.

use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};
use vmaas_switch::dhcp::{Message, MessageType, client_frame};
use vmaas_switch::fabric::PortKind;
use vmaas_switch::frame::{Ipv4, udp_frame};
use vmaas_switch::port::{read_frame, write_frame};
use vmaas_switch::{Mac, PortAddr, PortConfig, Segment, SubnetConfig};

fn subnet() -> SubnetConfig {
    SubnetConfig {
        network: Ipv4Addr::new(10, 9, 0, 0),
        prefix: 24,
        gateway: Ipv4Addr::new(10, 9, 0, 1),
        gateway_mac: Mac::local(b"gw"),
        lease_seconds: 600,
    }
}

fn nic(n: u8) -> PortConfig {
    PortConfig { mac: Mac::local(&[n]), ip: Ipv4Addr::new(10, 9, 0, 10 + n), hostname: None, firewall: None }
}

async fn connect(path: &std::path::Path) -> UnixStream {
    for _ in 0..100 {
        if let Ok(s) = UnixStream::connect(path).await {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("cannot connect to {}", path.display());
}

/// Sends `frame` from `from` until `to` reads a frame (5 s at most); that
/// frame. A frame switched before the segment took a NIC's connection is
/// dropped, as a switch drops frames to an unplugged port, and a guest
/// sends again.
async fn exchange<A, B>(from: &mut A, to: &mut B, frame: &[u8]) -> Option<Vec<u8>>
where
    A: tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + Unpin,
{
    for _ in 0..25 {
        write_frame(from, frame).await.unwrap();
        let mut buf = Vec::new();
        if let Ok(Ok(true)) = tokio::time::timeout(Duration::from_millis(200), read_frame(to, &mut buf)).await {
            return Some(buf);
        }
    }
    None
}

/// Whether `frame`, sent from `from` (again if need be), reaches `to`.
async fn delivered<A, B>(from: &mut A, to: &mut B, frame: &[u8]) -> bool
where
    A: tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + Unpin,
{
    exchange(from, to, frame).await.as_deref() == Some(frame)
}

#[tokio::test]
async fn two_nics_talk_and_get_their_addresses_over_dhcp() {
    let dir = tempfile::tempdir().unwrap();
    let seg = Segment::start(subnet());
    let (p1, p2) = (dir.path().join("1.sock"), dir.path().join("2.sock"));
    seg.add_port(1, PortKind::Guest(nic(1)), &PortAddr::Unix(p1.clone())).await.unwrap();
    seg.add_port(2, PortKind::Guest(nic(2)), &PortAddr::Unix(p2.clone())).await.unwrap();
    let (mut a, mut b) = (connect(&p1).await, connect(&p2).await);

    let discover = client_frame(nic(1).mac, MessageType::Discover, [9, 9, 9, 9], None);
    let (mut r, mut w) = a.split();
    let offer = exchange(&mut w, &mut r, &discover).await.expect("an offer within 5 s");
    let ip = Ipv4::parse(&offer).unwrap();
    let m = Message::parse(&offer[ip.payload + 8..]).unwrap();
    assert_eq!((m.kind, m.yiaddr), (MessageType::Offer, nic(1).ip));

    let hello = udp_frame((nic(1).mac, nic(1).ip, 4000), (nic(2).mac, nic(2).ip, 80), b"hello");
    assert!(delivered(&mut a, &mut b, &hello).await, "a reaches b");
    let back = udp_frame((nic(2).mac, nic(2).ip, 80), (nic(1).mac, nic(1).ip, 4000), b"back");
    assert!(delivered(&mut b, &mut a, &back).await, "b reaches a");

    // QEMU reconnecting after a restart of the server's side is served again.
    drop(b);
    let mut b = connect(&p2).await;
    assert!(delivered(&mut a, &mut b, &hello).await, "the reconnected NIC gets frames again");

    let stats = seg.stats().await.unwrap();
    assert!(stats.unicast >= 3 && stats.answered == 1, "{stats:?}");
    seg.remove_port(2).await.unwrap();
    assert!(!p2.exists(), "a removed port's socket is gone");
}

#[tokio::test]
async fn nics_on_loopback_tcp_talk_and_a_port_keeps_its_number() {
    let seg = Segment::start(subnet());
    // A port the kernel chooses (0) is named back.
    let PortAddr::Tcp(chosen) = seg.add_port(9, PortKind::Guest(nic(9)), &PortAddr::Tcp(0)).await.unwrap() else { panic!("not TCP") };
    assert_ne!(chosen, 0);
    seg.remove_port(9).await.unwrap();
    // The ports taken again after the restart are below the ephemeral
    // range, where no other process's connection can take them meanwhile.
    let (one, two) = (unephemeral_port(), unephemeral_port());
    assert_eq!(seg.add_port(1, PortKind::Guest(nic(1)), &PortAddr::Tcp(one)).await.unwrap(), PortAddr::Tcp(one));
    assert_eq!(seg.add_port(2, PortKind::Guest(nic(2)), &PortAddr::Tcp(two)).await.unwrap(), PortAddr::Tcp(two));
    let connect = |port: u16| TcpStream::connect(("127.0.0.1", port));
    let (mut a, mut b) = (connect(one).await.unwrap(), connect(two).await.unwrap());
    let hello = udp_frame((nic(1).mac, nic(1).ip, 4000), (nic(2).mac, nic(2).ip, 80), b"hello");
    assert!(delivered(&mut a, &mut b, &hello).await, "a reaches b over TCP");

    // A restarted server serves the same NIC on the port it had, and QEMU reconnects to it.
    drop((a, b));
    drop(seg);
    assert!(closes(one).await, "a dropped segment's port is closed");
    let seg = Segment::start(subnet());
    assert_eq!(seg.add_port(1, PortKind::Guest(nic(1)), &PortAddr::Tcp(one)).await.unwrap(), PortAddr::Tcp(one));
    seg.add_port(2, PortKind::Guest(nic(2)), &PortAddr::Tcp(two)).await.unwrap();
    let (mut a, mut b) = (connect(one).await.unwrap(), connect(two).await.unwrap());
    let back = udp_frame((nic(2).mac, nic(2).ip, 80), (nic(1).mac, nic(1).ip, 4000), b"back");
    assert!(delivered(&mut b, &mut a, &back).await, "the NIC reconnected to its port gets frames again");

    // A port taken by something else is an error naming it, not a silent second listener.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = seg.add_port(3, PortKind::Guest(nic(3)), &PortAddr::Tcp(port)).await.unwrap_err();
    assert!(err.to_string().contains(&format!("Tcp({port})")), "{err}");
    seg.remove_port(1).await.unwrap();
    assert!(closes(one).await, "a removed port stops listening");
}

/// A free loopback port from 20000 to 29999, below Linux's ephemeral range
/// (32768 and up), so none other's `bind(0)` or `connect` takes it while
/// the test lets it go and takes it again, as a restarted server does.
fn unephemeral_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let base = (std::process::id() % 10_000) as u16;
    (0..10_000)
        .map(|_| 20_000 + (base + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) % 10_000)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free loopback port from 20000 to 29999")
}

/// Whether loopback `port` stops taking connections within a second (a
/// port's task ends on the switch's own thread).
async fn closes(port: u16) -> bool {
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
