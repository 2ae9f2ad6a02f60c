//! A segment served on real unix sockets, spoken to as QEMU speaks
//! (`-netdev stream`: length-prefixed frames): two NICs reach each other,
//! get their addresses over DHCP, and a NIC that reconnects (as QEMU does
//! after a server restart) is served again.

use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::net::UnixStream;
use vmaas_switch::dhcp::{Message, MessageType, client_frame};
use vmaas_switch::fabric::PortKind;
use vmaas_switch::frame::{Ipv4, udp_frame};
use vmaas_switch::port::{read_frame, write_frame};
use vmaas_switch::{Mac, PortConfig, Segment, SubnetConfig};

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

async fn next(s: &mut UnixStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let got = tokio::time::timeout(Duration::from_secs(5), read_frame(s, &mut buf)).await.expect("a frame within 5 s");
    assert!(got.unwrap(), "the port closed");
    buf
}

#[tokio::test]
async fn two_nics_talk_and_get_their_addresses_over_dhcp() {
    let dir = tempfile::tempdir().unwrap();
    let seg = Segment::start(subnet());
    let (p1, p2) = (dir.path().join("1.sock"), dir.path().join("2.sock"));
    seg.add_port(1, PortKind::Guest(nic(1)), &p1).await.unwrap();
    seg.add_port(2, PortKind::Guest(nic(2)), &p2).await.unwrap();
    let (mut a, mut b) = (connect(&p1).await, connect(&p2).await);

    write_frame(&mut a, &client_frame(nic(1).mac, MessageType::Discover, [9, 9, 9, 9], None)).await.unwrap();
    let offer = next(&mut a).await;
    let ip = Ipv4::parse(&offer).unwrap();
    let m = Message::parse(&offer[ip.payload + 8..]).unwrap();
    assert_eq!((m.kind, m.yiaddr), (MessageType::Offer, nic(1).ip));

    let hello = udp_frame((nic(1).mac, nic(1).ip, 4000), (nic(2).mac, nic(2).ip, 80), b"hello");
    write_frame(&mut a, &hello).await.unwrap();
    assert_eq!(next(&mut b).await, hello);
    let back = udp_frame((nic(2).mac, nic(2).ip, 80), (nic(1).mac, nic(1).ip, 4000), b"back");
    write_frame(&mut b, &back).await.unwrap();
    assert_eq!(next(&mut a).await, back);

    // QEMU reconnecting after a restart of the server's side is served again.
    drop(b);
    let mut b = connect(&p2).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    write_frame(&mut a, &hello).await.unwrap();
    assert_eq!(next(&mut b).await, hello);

    let stats = seg.stats().await.unwrap();
    assert!(stats.unicast >= 3 && stats.answered == 1, "{stats:?}");
    seg.remove_port(2).await.unwrap();
    assert!(!p2.exists(), "a removed port's socket is gone");
}
