//! Real QEMU guests on the user-space switch: two test guests whose second
//! NIC is a `-netdev stream` port of one segment get the addresses the
//! switch's DHCP assigns them and fetch each other's web page; a third on
//! another segment with the same addresses (another tenant's network) gets
//! nothing from them. All guest traffic stays inside the switch: every
//! address a guest is asked to reach is on its own segment (the first NIC
//! is QEMU's user network with `restrict=on`, and nothing is forwarded to it).

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use vmaas_switch::fabric::PortKind;
use vmaas_switch::{Mac, PortAddr, PortConfig, Segment, SubnetConfig};
use vmaas_tests::guest::Guest;

/// A test guest whose second NIC is a port of a segment, on `socket`.
fn boot(name: &str, mac: Mac, socket: &Path) -> Guest {
    let stream = format!("stream,id=seg,server=off,addr.type=unix,addr.path={},reconnect-ms=1000", socket.display());
    Guest::boot(name, &mac.to_string(), &stream)
}

/// Segment `n`: every one carries 10.55.1.0/24, as two tenants' networks may.
fn subnet(n: u8) -> SubnetConfig {
    SubnetConfig {
        network: Ipv4Addr::new(10, 55, 1, 0),
        prefix: 24,
        gateway: Ipv4Addr::new(10, 55, 1, 1),
        gateway_mac: Mac::local(&[b'g', n]),
        lease_seconds: 3600,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_on_one_segment_reach_each_other_and_not_another_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (one, other) = (Segment::start(subnet(1)), Segment::start(subnet(2)));
    let nic =
        |n: u8, seg: u8| PortConfig { mac: Mac::local(&[n, seg]), ip: Ipv4Addr::new(10, 55, 1, 10 + n), hostname: None, firewall: None };
    let sock = |n: &str| dir.path().join(format!("{n}.sock"));
    one.add_port(1, PortKind::Guest(nic(1, 1)), &PortAddr::Unix(sock("a"))).await.unwrap();
    one.add_port(2, PortKind::Guest(nic(2, 1)), &PortAddr::Unix(sock("b"))).await.unwrap();
    other.add_port(1, PortKind::Guest(nic(3, 2)), &PortAddr::Unix(sock("c"))).await.unwrap();

    let mut guests: Vec<Guest> =
        [("a", nic(1, 1)), ("b", nic(2, 1)), ("c", nic(3, 2))].iter().map(|(n, c)| boot(&format!("guest-{n}"), c.mac, &sock(n))).collect();
    for (g, name) in guests.iter().zip(["a", "b", "c"]) {
        assert!(g.expect("vmaas-guest: ready", Duration::from_secs(240)).is_some(), "guest {name} did not boot");
    }
    // Each guest's segment NIC has the address the switch's DHCP gave it.
    let got = guests[1].run("ip -4 -o addr show eth1", "inet 10.55.1.12/24", Duration::from_secs(20));
    assert!(got.is_some(), "guest b's segment NIC lacks its assigned address");
    let b_ip = nic(2, 1).ip;
    // The page of b, fetched by a over the segment, names b and its segment address.
    let fetch = format!("timeout 10 wget -O- http://{b_ip}/ 2>/dev/null | sed -n 's/.*test guest guest-\\(b\\)<.*/PAGE-OF-\\1/p'");
    let mut page = None;
    for _ in 0..5 {
        page = guests[0].run(&fetch, "PAGE-OF-b", Duration::from_secs(20));
        if page.is_some() {
            break;
        }
    }
    assert!(page.is_some(), "guest a could not fetch guest b's page over the segment");
    let stats = one.stats().await.unwrap();
    assert!(stats.answered >= 2 && stats.unicast > 0, "DHCP answered and frames switched: {stats:?}");
    // Busybox's wget, as a tenant would use it; the guest's own ping too.
    let ping = format!("ping -c 1 -W 3 {b_ip} >/dev/null && echo PING\"OK\"");
    assert!(guests[0].run(&ping, "PINGOK", Duration::from_secs(20)).is_some(), "ICMP between guests");
    // c, on another segment with the same subnet, cannot reach b's address.
    let probe = format!("timeout 5 wget -O- http://{b_ip}/ >/dev/null 2>&1 && echo REACH\"ED\" || echo ISO\"LATED\"");
    let got = guests[2].run(&probe, "ISOLATED", Duration::from_secs(30));
    assert!(got.is_some(), "guest c reached another segment");
}

/// Segment `third` of 10.56.`third`.0/24.
fn numbered(third: u8) -> SubnetConfig {
    SubnetConfig {
        network: Ipv4Addr::new(10, 56, third, 0),
        gateway: Ipv4Addr::new(10, 56, third, 1),
        gateway_mac: Mac::local(&[b'r', third]),
        ..subnet(0)
    }
}

/// Two subnets of one network reach each other through their gateways
/// (the routes come from DHCP), as the receiver's security group allows,
/// and a rule added live opens more; a subnet of another network, told by
/// its guest to go through its gateway, reaches nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_subnets_route_to_each_other_and_another_network_does_not() {
    use vmaas_switch::Router;
    use vmaas_switch::firewall::{Firewall, Protocol, Rule};
    let dir = tempfile::tempdir().unwrap();
    let (one, two, other) = (Segment::start(numbered(1)), Segment::start(numbered(2)), Segment::start(numbered(3)));
    let (network, elsewhere) = (Router::new(), Router::new());
    one.join(&network);
    two.join(&network);
    other.join(&elsewhere);
    let nic =
        |third: u8| PortConfig { mac: Mac::local(&[b'n', third]), ip: Ipv4Addr::new(10, 56, third, 10), hostname: None, firewall: None };
    let web = |extra: Option<Rule>| {
        let http = Rule { protocol: Protocol::Tcp, port_from: 80, port_to: 80, cidr: (Ipv4Addr::new(10, 56, 1, 0), 24) };
        Some(Firewall { ingress: [Some(http), extra].into_iter().flatten().collect(), egress: vec![] })
    };
    let sock = |n: &str| dir.path().join(format!("{n}.sock"));
    one.add_port(1, PortKind::Guest(nic(1)), &PortAddr::Unix(sock("a"))).await.unwrap();
    two.add_port(1, PortKind::Guest(PortConfig { firewall: web(None), ..nic(2) }), &PortAddr::Unix(sock("b"))).await.unwrap();
    other.add_port(1, PortKind::Guest(nic(3)), &PortAddr::Unix(sock("c"))).await.unwrap();
    let mut guests: Vec<Guest> =
        [("a", 1), ("b", 2), ("c", 3)].iter().map(|(n, t)| boot(&format!("guest-{n}"), nic(*t).mac, &sock(n))).collect();
    for (g, name) in guests.iter().zip(["a", "b", "c"]) {
        assert!(g.expect("vmaas-guest: ready", Duration::from_secs(240)).is_some(), "guest {name} did not boot");
    }
    let route =
        guests[0].run("ip route show 10.56.2.0/24 | sed 's/^/ROUTE: /'", "ROUTE: 10.56.2.0/24 via 10.56.1.1", Duration::from_secs(20));
    assert!(route.is_some(), "guest a has no route to the sibling subnet from DHCP");
    let b_ip = nic(2).ip;
    let fetch = format!("timeout 10 wget -O- http://{b_ip}/ 2>/dev/null | sed -n 's/.*test guest guest-\\(b\\)<.*/PAGE-OF-\\1/p'");
    let page = (0..5).find_map(|_| guests[0].run(&fetch, "PAGE-OF-b", Duration::from_secs(20)));
    assert!(page.is_some(), "guest a could not fetch guest b's page across the gateway");
    let stats = (one.stats().await.unwrap(), two.stats().await.unwrap());
    assert!(stats.0.routed > 0 && stats.1.routed > 0, "the frames were routed: {stats:?}");
    // b's security group allows HTTP, not ICMP: a ping waits for a rule added live.
    let ping = format!("ping -c 1 -W 3 {b_ip} >/dev/null && echo PING\"OK\" || echo PING\"LOST\"");
    assert!(guests[0].run(&ping, "PINGLOST", Duration::from_secs(20)).is_some(), "ICMP passed b's security group");
    let icmp = Rule { protocol: Protocol::Icmp, port_from: 0, port_to: 0, cidr: (Ipv4Addr::UNSPECIFIED, 0) };
    two.set_firewall(1, web(Some(icmp))).await.unwrap();
    assert!(guests[0].run(&ping, "PINGOK", Duration::from_secs(20)).is_some(), "the ICMP rule added live did not open the ping");
    // c, on another network's segment, has no route; one it makes goes nowhere.
    guests[2].run("ip route add 10.56.2.0/24 via 10.56.3.1 && echo ADDED\"ROUTE\"", "ADDEDROUTE", Duration::from_secs(20));
    let probe = format!("timeout 5 wget -O- http://{b_ip}/ >/dev/null 2>&1 && echo REACH\"ED\" || echo ISO\"LATED\"");
    assert!(guests[2].run(&probe, "ISOLATED", Duration::from_secs(30)).is_some(), "guest c reached another network's subnet");
    assert!(other.stats().await.unwrap().routed == 0, "nothing was routed out of the other network");
}

/// An HTTP GET of `/` at `addr` (a forward on the host): the page, or why not.
async fn get_page(addr: std::net::SocketAddr) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: guest\r\n\r\n").await.map_err(|e| e.to_string())?;
    let mut page = String::new();
    match tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut page)).await {
        Ok(Ok(_)) if !page.is_empty() => Ok(page),
        Ok(Ok(_)) => Err("closed without an answer".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer in 10 s".into()),
    }
}

/// Traffic from the host (what an external IP or a load balancer carries)
/// enters the guest through the gateway on its subnet NIC, where its
/// security group applies: closed while port 80 is not allowed, open once
/// a rule is added live; the guest sees the gateway as the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_traffic_enters_through_the_gateway_where_security_groups_apply() {
    use vmaas_switch::firewall::{Firewall, Protocol, Rule};
    let dir = tempfile::tempdir().unwrap();
    let seg = Segment::start(numbered(7));
    let nic = PortConfig { mac: Mac::local(b"gw-test"), ip: Ipv4Addr::new(10, 56, 7, 10), hostname: None, firewall: None };
    let rule = |port: u16| Rule { protocol: Protocol::Tcp, port_from: port, port_to: port, cidr: (Ipv4Addr::UNSPECIFIED, 0) };
    let ssh_only = Firewall { ingress: vec![rule(22)], egress: vec![] };
    let sock = dir.path().join("g.sock");
    seg.add_port(1, PortKind::Guest(PortConfig { firewall: Some(ssh_only.clone()), ..nic.clone() }), &PortAddr::Unix(sock.clone()))
        .await
        .unwrap();
    let mut guest = boot("guest-g", nic.mac, &sock);
    assert!(guest.expect("vmaas-guest: ready", Duration::from_secs(240)).is_some(), "the guest did not boot");
    let fwd = seg.forward("127.0.0.1:0".parse().unwrap(), std::net::SocketAddrV4::new(nic.ip, 80)).await.unwrap();
    let asked = std::time::Instant::now();
    let refused = get_page(fwd.local_addr()).await;
    assert_eq!(refused, Err("closed without an answer".into()), "port 80 answered through a security group that does not allow it");
    // Closed by the refusal itself, not by the gateway's 3 s connect timeout: a load balancer's probe sees a refusing guest.
    assert!(asked.elapsed() < Duration::from_secs(3), "the refused connection stayed open {:?}", asked.elapsed());
    let web = Firewall { ingress: vec![rule(22), rule(80)], egress: vec![] };
    seg.set_firewall(1, Some(web)).await.unwrap();
    let page = get_page(fwd.local_addr()).await.expect("the page once port 80 is allowed");
    assert!(page.contains("test guest guest-g"), "{page}");
    // The guest saw the gateway as its client.
    let seen = guest.run("netstat -tn 2>/dev/null | grep -c 10.56.7.1: | sed 's/^/FROM-G''W: /'", "FROM-GW: ", Duration::from_secs(10));
    assert!(seen.is_some_and(|l| !l.ends_with(" 0")), "no connection from the gateway in the guest's table");
    drop(fwd);
}

/// UDP from the host enters through the gateway too: a NIC whose security
/// group does not allow the port gets nothing; once a rule allows it, the
/// datagram arrives from the gateway's address and the NIC's answer goes
/// back to the host client. The NIC is played on its port's socket (the
/// test guest has no UDP server), with QEMU's stream framing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_udp_enters_through_the_gateway_where_security_groups_apply() {
    use vmaas_switch::firewall::{Firewall, Protocol, Rule};
    use vmaas_switch::frame::{Ipv4, udp_frame};
    use vmaas_switch::port::{read_frame, write_frame};
    let dir = tempfile::tempdir().unwrap();
    let seg = Segment::start(numbered(8));
    let nic = PortConfig { mac: Mac::local(b"udp-nic"), ip: Ipv4Addr::new(10, 56, 8, 10), hostname: None, firewall: None };
    let rule = |p: Protocol, port: u16| Rule { protocol: p, port_from: port, port_to: port, cidr: (Ipv4Addr::UNSPECIFIED, 0) };
    let closed = Firewall { ingress: vec![rule(Protocol::Tcp, 53)], egress: vec![] };
    let sock = dir.path().join("u.sock");
    seg.add_port(1, PortKind::Guest(PortConfig { firewall: Some(closed), ..nic.clone() }), &PortAddr::Unix(sock.clone())).await.unwrap();
    let mut wire = tokio::net::UnixStream::connect(&sock).await.unwrap();
    let fwd = seg.forward_udp("127.0.0.1:0".parse().unwrap(), std::net::SocketAddrV4::new(nic.ip, 53)).await.unwrap();
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // The next UDP datagram the NIC receives, if one comes within a second.
    let mut buf = Vec::new();
    let mut next_udp = async |wire: &mut tokio::net::UnixStream| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while let Ok(Ok(true)) = tokio::time::timeout_at(deadline, read_frame(wire, &mut buf)).await {
            if Ipv4::parse(&buf).is_some_and(|ip| ip.proto == vmaas_switch::frame::PROTO_UDP) {
                return Some(buf.clone());
            }
        }
        None
    };
    client.send_to(b"query-1", fwd.local_addr()).await.unwrap();
    assert_eq!(next_udp(&mut wire).await, None, "UDP 53 passed a security group that allows only TCP 53");
    seg.set_firewall(1, Some(Firewall { ingress: vec![rule(Protocol::Udp, 53)], egress: vec![] })).await.unwrap();
    client.send_to(b"query-2", fwd.local_addr()).await.unwrap();
    let got = next_udp(&mut wire).await.expect("the datagram once UDP 53 is allowed");
    let ip = Ipv4::parse(&got).unwrap();
    let (sport, dport) = ip.ports(&got).unwrap();
    assert_eq!(
        (ip.src, ip.dst, dport, &got[ip.payload + 8..]),
        (Ipv4Addr::new(10, 56, 8, 1), nic.ip, 53, &b"query-2"[..]),
        "from the gateway"
    );
    // The NIC answers the gateway; the host client gets it from the forward's address.
    let gw_mac = vmaas_switch::frame::Ethernet::parse(&got).unwrap().src;
    write_frame(&mut wire, &udp_frame((nic.mac, nic.ip, 53), (gw_mac, ip.src, sport), b"answer-2")).await.unwrap();
    let mut answer = [0u8; 64];
    let (n, from) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut answer)).await.expect("an answer").unwrap();
    assert_eq!((&answer[..n], from), (&b"answer-2"[..], fwd.local_addr()));
}
