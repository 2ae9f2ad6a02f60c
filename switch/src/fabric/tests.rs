use std::net::Ipv4Addr;

use super::*;
use crate::dhcp::{Message, MessageType, client_frame};
use crate::frame::{PROTO_UDP, udp_frame};

fn subnet() -> SubnetConfig {
    SubnetConfig {
        network: Ipv4Addr::new(10, 1, 0, 0),
        prefix: 24,
        gateway: Ipv4Addr::new(10, 1, 0, 1),
        gateway_mac: Mac::local(b"gw"),
        lease_seconds: 3600,
    }
}

fn guest(n: u8) -> PortConfig {
    PortConfig { mac: Mac::local(&[n]), ip: Ipv4Addr::new(10, 1, 0, 10 + n), hostname: Some(format!("vm{n}")), firewall: None }
}

fn fabric() -> Fabric {
    let mut f = Fabric::new(subnet());
    f.add_port(1, PortKind::Guest(guest(1)));
    f.add_port(2, PortKind::Guest(guest(2)));
    f
}

/// A UDP frame from guest `a` to guest `b`.
fn between(a: &PortConfig, b: &PortConfig) -> Vec<u8> {
    udp_frame((a.mac, a.ip, 5000), (b.mac, b.ip, 80), b"x")
}

#[test]
fn the_subnet_knows_its_mask_and_broadcast() {
    let s = subnet();
    assert_eq!((s.mask(), s.broadcast()), (Ipv4Addr::new(255, 255, 255, 0), Ipv4Addr::new(10, 1, 0, 255)));
    assert!(s.contains(Ipv4Addr::new(10, 1, 0, 200)) && !s.contains(Ipv4Addr::new(10, 1, 1, 1)));
}

#[test]
fn guests_reach_each_other_by_their_macs_and_broadcasts_flood() {
    let mut f = fabric();
    assert_eq!(f.receive(1, &between(&guest(1), &guest(2))), Verdict::Unicast(2));
    assert_eq!(f.receive(2, &between(&guest(2), &guest(1))), Verdict::Unicast(1));
    let who_has = Arp { op: 1, sha: guest(1).mac, spa: guest(1).ip, tha: Mac::default(), tpa: guest(2).ip };
    assert_eq!(f.receive(1, &who_has.to_frame(guest(1).mac, Mac::BROADCAST)), Verdict::Flood);
    let stranger = PortConfig { mac: Mac::local(b"nobody"), ..guest(3) };
    assert_eq!(f.receive(1, &between(&guest(1), &stranger)), Verdict::Drop(Drop::Unknown));
    assert_eq!(f.stats().unicast, 2);
}

#[test]
fn a_guest_cannot_spoof_a_mac_or_an_address() {
    let mut f = fabric();
    let other_mac = PortConfig { mac: guest(2).mac, ..guest(1) };
    assert_eq!(f.receive(1, &between(&other_mac, &guest(2))), Verdict::Drop(Drop::Spoofed));
    let other_ip = PortConfig { ip: Ipv4Addr::new(10, 1, 0, 99), ..guest(1) };
    assert_eq!(f.receive(1, &between(&other_ip, &guest(2))), Verdict::Drop(Drop::Spoofed));
    let arp = Arp { op: 2, sha: guest(1).mac, spa: guest(2).ip, tha: guest(2).mac, tpa: guest(2).ip };
    assert_eq!(f.receive(1, &arp.to_frame(guest(1).mac, guest(2).mac)), Verdict::Drop(Drop::Spoofed), "ARP poisoning");
    let mut ipv6 = between(&guest(1), &guest(2));
    ipv6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    assert_eq!(f.receive(1, &ipv6), Verdict::Drop(Drop::Protocol));
    assert_eq!(f.receive(9, &between(&guest(1), &guest(2))), Verdict::Drop(Drop::NoPort));
    assert_eq!(f.receive(1, &[0u8; 10]), Verdict::Drop(Drop::Runt));
    assert_eq!(f.stats().dropped[&Drop::Spoofed], 3);
}

#[test]
fn the_gateway_answers_arp_and_nothing_is_routed_through_it() {
    let mut f = fabric();
    let g = guest(1);
    let who_has = Arp { op: 1, sha: g.mac, spa: g.ip, tha: Mac::default(), tpa: subnet().gateway };
    let Verdict::Reply(r) = f.receive(1, &who_has.to_frame(g.mac, Mac::BROADCAST)) else { panic!("no ARP reply") };
    let a = Arp::parse(&r).unwrap();
    assert_eq!((a.op, a.sha, a.spa, a.tha, a.tpa), (2, subnet().gateway_mac, subnet().gateway, g.mac, g.ip));
    assert_eq!(Ethernet::parse(&r).unwrap().dst, g.mac);
    let gw = PortConfig { mac: subnet().gateway_mac, ip: Ipv4Addr::new(8, 8, 8, 8), hostname: None, firewall: None };
    assert_eq!(f.receive(1, &between(&g, &gw)), Verdict::Drop(Drop::Nowhere), "off the segment goes nowhere");
}

fn dhcp_reply(v: Verdict) -> Message {
    let Verdict::Reply(r) = v else { panic!("no DHCP reply: {v:?}") };
    let ip = Ipv4::parse(&r).unwrap();
    assert_eq!((ip.proto, ip.ports(&r)), (PROTO_UDP, Some((67, 68))));
    Message::parse(&r[ip.payload + 8..]).unwrap()
}

#[test]
fn dhcp_gives_each_guest_its_assigned_address() {
    let mut f = fabric();
    let g = guest(2);
    let offer = dhcp_reply(f.receive(2, &client_frame(g.mac, MessageType::Discover, [1, 2, 3, 4], None)));
    assert_eq!((offer.kind, offer.yiaddr, offer.xid), (MessageType::Offer, g.ip, [1, 2, 3, 4]));
    let opt = |m: &Message, c: u8| m.options.iter().find(|(k, _)| *k == c).map(|(_, v)| v.clone());
    assert_eq!(opt(&offer, 1), Some(vec![255, 255, 255, 0]));
    assert_eq!(opt(&offer, 54), Some(vec![10, 1, 0, 1]));
    assert_eq!(opt(&offer, 12), Some(b"vm2".to_vec()));
    assert_eq!(opt(&offer, 3), None, "no router: the guest's default route stays where it is");
    let ack = dhcp_reply(f.receive(2, &client_frame(g.mac, MessageType::Request, [1, 2, 3, 5], Some(g.ip))));
    assert_eq!((ack.kind, ack.yiaddr), (MessageType::Ack, g.ip));
    let nak = dhcp_reply(f.receive(2, &client_frame(g.mac, MessageType::Request, [1, 2, 3, 6], Some(guest(1).ip))));
    assert_eq!(nak.kind, MessageType::Nak, "another guest's address is refused");
    // A DHCP request is answered, never forwarded to the other guests.
    assert_eq!(f.stats().flooded, 0);
}

#[test]
fn an_uplink_learns_the_macs_behind_it() {
    let mut f = fabric();
    f.add_port(7, PortKind::Uplink);
    let outside = PortConfig { mac: Mac::local(b"router"), ip: Ipv4Addr::new(10, 1, 0, 254), hostname: None, firewall: None };
    assert_eq!(f.receive(1, &between(&guest(1), &outside)), Verdict::Flood, "unknown: the uplink may have it");
    assert_eq!(f.receive(7, &between(&outside, &guest(1))), Verdict::Unicast(1));
    assert_eq!(f.receive(1, &between(&guest(1), &outside)), Verdict::Unicast(7), "learned");
    f.remove_port(7);
    assert_eq!(f.receive(1, &between(&guest(1), &outside)), Verdict::Drop(Drop::Unknown), "forgotten with its port");
}

#[test]
fn security_groups_are_enforced_statefully_and_changes_apply_at_once() {
    use crate::firewall::{Firewall, Protocol, Rule};
    let mut f = fabric();
    let web = Firewall {
        ingress: vec![Rule { protocol: Protocol::Tcp, port_from: 80, port_to: 80, cidr: (Ipv4Addr::new(10, 1, 0, 0), 24) }],
        egress: vec![],
    };
    f.set_firewall(2, Some(web.clone()));
    let tcp = |a: &PortConfig, b: &PortConfig, sport: u16, dport: u16| {
        let mut fr = udp_frame((a.mac, a.ip, sport), (b.mac, b.ip, dport), &[0u8; 20]);
        fr[ETH_HEADER_PROTO] = crate::frame::PROTO_TCP;
        fr
    };
    assert_eq!(f.receive(1, &tcp(&guest(1), &guest(2), 40000, 80)), Verdict::Unicast(2), "80 is open");
    assert_eq!(f.receive(2, &tcp(&guest(2), &guest(1), 80, 40000)), Verdict::Unicast(1), "its reply passes");
    assert_eq!(f.receive(1, &tcp(&guest(1), &guest(2), 40001, 22)), Verdict::Drop(Drop::Firewall), "22 is closed");
    assert_eq!(f.receive(2, &tcp(&guest(2), &guest(1), 5000, 22)), Verdict::Drop(Drop::Firewall), "web opens nothing");
    let arp = Arp { op: 1, sha: guest(1).mac, spa: guest(1).ip, tha: Mac::default(), tpa: guest(2).ip };
    assert_eq!(f.receive(1, &arp.to_frame(guest(1).mac, guest(2).mac)), Verdict::Unicast(2), "ARP is not firewalled");
    // A rule added opens 22 without a restart; removing the group cuts nothing it should not.
    let mut ssh = web.clone();
    ssh.ingress.push(Rule { protocol: Protocol::Tcp, port_from: 22, port_to: 22, cidr: (Ipv4Addr::UNSPECIFIED, 0) });
    f.set_firewall(2, Some(ssh));
    assert_eq!(f.receive(1, &tcp(&guest(1), &guest(2), 40001, 22)), Verdict::Unicast(2));
    f.set_firewall(2, Some(web));
    assert_eq!(f.receive(1, &tcp(&guest(1), &guest(2), 40001, 22)), Verdict::Drop(Drop::Firewall), "removed: the flow is cut");
}

/// Offset of the IPv4 protocol byte in a frame.
const ETH_HEADER_PROTO: usize = crate::frame::ETH_HEADER + 9;

/// Segment 10.1.`n`.0/24 of one network, with guest `n` at .10.
fn sibling(n: u8) -> (Fabric, PortConfig) {
    let subnet = SubnetConfig {
        network: Ipv4Addr::new(10, 1, n, 0),
        gateway: Ipv4Addr::new(10, 1, n, 1),
        gateway_mac: Mac::local(&[b'g', n]),
        ..subnet()
    };
    let g = PortConfig { mac: Mac::local(&[b'v', n]), ip: Ipv4Addr::new(10, 1, n, 10), hostname: None, firewall: None };
    let mut f = Fabric::new(subnet);
    f.add_port(1, PortKind::Guest(g.clone()));
    (f, g)
}

#[test]
fn the_gateway_routes_to_sibling_subnets_through_both_nics_security_groups() {
    use crate::firewall::{Firewall, Protocol, Rule};
    let ((mut a, ga), (mut b, gb)) = (sibling(1), sibling(2));
    let gw_a = a.subnet().gateway_mac;
    let to_b = |sport: u16, dport: u16| udp_frame((ga.mac, ga.ip, sport), (gw_a, gb.ip, dport), b"x");
    assert_eq!(a.receive(1, &to_b(5000, 80)), Verdict::Drop(Drop::Nowhere), "no route yet");
    a.set_routes(vec![(Ipv4Addr::new(10, 1, 2, 0), 24)]);
    b.set_routes(vec![(Ipv4Addr::new(10, 1, 1, 0), 24)]);
    let mut frame = to_b(5000, 80);
    assert_eq!(a.receive(1, &frame), Verdict::Route);
    assert_eq!(b.route_in(&mut frame), Verdict::Unicast(1));
    let eth = Ethernet::parse(&frame).unwrap();
    assert_eq!((eth.dst, eth.src, frame[crate::frame::ETH_HEADER + 8]), (gb.mac, b.subnet().gateway_mac, 63), "readdressed, TTL one less");
    // DHCP offers the route to the sibling, via the gateway (RFC 3442).
    let offer = dhcp_reply(a.receive(1, &client_frame(ga.mac, MessageType::Discover, [9, 9, 9, 9], None)));
    let routes = offer.options.iter().find(|(k, _)| *k == 121).map(|(_, v)| v.clone());
    assert_eq!(routes, Some(vec![24, 10, 1, 2, 10, 1, 1, 1]));
    // b's ingress rules allow UDP 80 only; a's egress rules, TCP only.
    let only_80 = vec![Rule { protocol: Protocol::Udp, port_from: 80, port_to: 80, cidr: (Ipv4Addr::UNSPECIFIED, 0) }];
    b.set_firewall(1, Some(Firewall { ingress: only_80, egress: vec![] }));
    assert_eq!(b.route_in(&mut to_b(5001, 22)), Verdict::Drop(Drop::Firewall), "the receiver's ingress rules apply");
    assert_eq!(b.route_in(&mut to_b(5002, 80)), Verdict::Unicast(1));
    let tcp_out = vec![Rule { protocol: Protocol::Tcp, port_from: 1, port_to: 65535, cidr: (Ipv4Addr::UNSPECIFIED, 0) }];
    a.set_firewall(1, Some(Firewall { ingress: vec![], egress: tcp_out }));
    assert_eq!(a.receive(1, &to_b(5003, 80)), Verdict::Drop(Drop::Firewall), "the sender's egress rules apply");
    // Only guests the API placed are routed to; a TTL that runs out stops.
    let stranger = udp_frame((ga.mac, ga.ip, 1), (gw_a, Ipv4Addr::new(10, 1, 2, 99), 80), b"x");
    assert_eq!(b.route_in(&mut stranger.clone()), Verdict::Drop(Drop::Unknown));
    let mut last = to_b(5004, 80);
    last[crate::frame::ETH_HEADER + 8] = 1;
    assert_eq!(b.route_in(&mut last), Verdict::Drop(Drop::Expired));
}
