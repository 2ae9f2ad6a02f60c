//! `vmaas-bench network`: the user-space switch's forwarding rate in
//! process (64-byte frames between two guest ports, the goal is
//! ≥ 500k frames/s), through real unix sockets with QEMU's stream framing,
//! the DHCP server's answer time, and the latency a load balancer adds. Bounded in count and time; all
//! traffic stays in this process and its unix sockets.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::UnixStream;
use vmaas_switch::dhcp::{MessageType, client_frame};
use vmaas_switch::fabric::{PortKind, Verdict};
use vmaas_switch::firewall::{Firewall, Protocol, Rule};
use vmaas_switch::frame::udp_frame;
use vmaas_switch::port::{read_frame, write_frame};
use vmaas_switch::{Fabric, Mac, PortAddr, PortConfig, Segment, SubnetConfig};

fn subnet() -> SubnetConfig {
    SubnetConfig {
        network: Ipv4Addr::new(10, 77, 0, 0),
        prefix: 24,
        gateway: Ipv4Addr::new(10, 77, 0, 1),
        gateway_mac: Mac::local(b"gw"),
        lease_seconds: 3600,
    }
}

fn nic(n: u8) -> PortConfig {
    PortConfig { mac: Mac::local(&[n]), ip: Ipv4Addr::new(10, 77, 0, 10 + n), hostname: None, firewall: None }
}

/// A 64-byte frame from guest 1 to guest 2 (the minimum Ethernet frame, without its FCS).
fn small_frame() -> Vec<u8> {
    let mut f = udp_frame((nic(1).mac, nic(1).ip, 5000), (nic(2).mac, nic(2).ip, 5001), &[]);
    f.resize(64, 0);
    f
}

fn rate(n: usize, t: Duration) -> f64 {
    n as f64 / t.as_secs_f64()
}

/// Frames per second through `Fabric::receive`, in process; with
/// `guarded`, the receiver has a security group (the stateful path).
fn fabric_rate(frames: usize, guarded: bool) -> anyhow::Result<f64> {
    let mut f = Fabric::new(subnet());
    f.add_port(1, PortKind::Guest(nic(1)));
    let rule = Rule { protocol: Protocol::Udp, port_from: 5001, port_to: 5001, cidr: (Ipv4Addr::new(10, 77, 0, 0), 24) };
    let firewall = guarded.then(|| Firewall { ingress: vec![rule], egress: vec![] });
    f.add_port(2, PortKind::Guest(PortConfig { firewall, ..nic(2) }));
    let frame = small_frame();
    let start = Instant::now();
    for _ in 0..frames {
        let v = f.receive(1, std::hint::black_box(&frame));
        anyhow::ensure!(v == Verdict::Unicast(2), "the frame was not forwarded: {v:?}");
    }
    Ok(rate(frames, start.elapsed()))
}

/// Microseconds per DHCP DISCOVER answered, in process.
fn dhcp_micros(rounds: usize) -> f64 {
    let mut f = Fabric::new(subnet());
    f.add_port(1, PortKind::Guest(nic(1)));
    let discover = client_frame(nic(1).mac, MessageType::Discover, [1, 2, 3, 4], None);
    let start = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(f.receive(1, &discover));
    }
    start.elapsed().as_secs_f64() * 1e6 / rounds as f64
}

/// Frames per second from one NIC's socket to another's through a running segment.
async fn socket_rate(frames: usize) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let seg = Segment::start(subnet());
    let (p1, p2) = (dir.path().join("1.sock"), dir.path().join("2.sock"));
    seg.add_port(1, PortKind::Guest(nic(1)), &PortAddr::Unix(p1.clone())).await?;
    seg.add_port(2, PortKind::Guest(nic(2)), &PortAddr::Unix(p2.clone())).await?;
    let (mut a, mut b) = (UnixStream::connect(&p1).await?, UnixStream::connect(&p2).await?);
    let frame = small_frame();
    let deadline = Instant::now() + Duration::from_secs(60);
    let receiver = tokio::spawn(async move {
        // QEMU reads its socket with a large buffer too.
        let mut b = tokio::io::BufReader::with_capacity(1 << 16, &mut b);
        let (mut buf, mut got) = (Vec::new(), 0usize);
        while got < frames && Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_secs(2), read_frame(&mut b, &mut buf)).await {
                Ok(Ok(true)) => got += 1,
                _ => break,
            }
        }
        got
    });
    let start = Instant::now();
    // Paced in bursts below the port queue, so the figure is forwarding, not drops.
    for chunk in 0..frames.div_ceil(256) {
        for _ in 0..256.min(frames - chunk * 256) {
            write_frame(&mut a, &frame).await?;
        }
        tokio::task::yield_now().await;
    }
    let got = receiver.await.context("the receiver")?;
    let t = start.elapsed();
    println!("  socket path: {got} of {frames} frames delivered");
    Ok(rate(got, t))
}

/// Round-trip times (µs, sorted) of `n` 64-byte request/response pairs to
/// `addr`, each on a new connection (what a balancer sees per request).
async fn round_trips(addr: std::net::SocketAddr, n: usize) -> anyhow::Result<Vec<f64>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut out = Vec::with_capacity(n);
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..n {
        anyhow::ensure!(Instant::now() < deadline, "the round trips took over 60 s");
        let start = Instant::now();
        let mut c = tokio::net::TcpStream::connect(addr).await?;
        c.set_nodelay(true)?;
        c.write_all(&[7u8; 64]).await?;
        let mut buf = [0u8; 64];
        c.read_exact(&mut buf).await?;
        out.push(start.elapsed().as_secs_f64() * 1e6);
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}

/// An echo server on loopback: the balancer's target.
async fn echo_server() -> anyhow::Result<std::net::SocketAddr> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = l.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while s.read_exact(&mut buf).await.is_ok() {
                    if s.write_all(&buf).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// The latency a load balancer's proxy adds: a new connection and a 64-byte
/// exchange to an echo server on loopback, directly and through the proxy.
async fn balancer_latency(n: usize) -> anyhow::Result<()> {
    use std::sync::Arc;
    use vmaas_qemu::proxy::{Backends, Proxy};
    let target = echo_server().await?;
    let backends = Arc::new(Backends::default());
    backends.set(vec![target]);
    let proxy = Proxy::start("127.0.0.1:0".parse()?, backends).await?;
    round_trips(target, n.min(200)).await?;
    round_trips(proxy.local_addr(), n.min(200)).await?;
    let direct = round_trips(target, n).await?;
    let through = round_trips(proxy.local_addr(), n).await?;
    let p = crate::percentile;
    println!("load balancer ({n} connections, each one 64-byte request and answer, loopback)");
    println!("  direct:        p50 {:.0} us, p99 {:.0} us", p(&direct, 0.5), p(&direct, 0.99));
    println!("  through it:    p50 {:.0} us, p99 {:.0} us", p(&through, 0.5), p(&through, 0.99));
    println!(
        "  added:         p50 {:.0} us, p99 {:.0} us (goal: p99 <= 1000 us)",
        p(&through, 0.5) - p(&direct, 0.5),
        p(&through, 0.99) - p(&direct, 0.99)
    );
    Ok(())
}

/// Runs the network benchmark.
pub async fn network(frames: usize) -> anyhow::Result<()> {
    let frames = frames.clamp(1000, 20_000_000);
    println!("switch forwarding, 64-byte frames between two guest ports");
    let r = fabric_rate(frames, false)?;
    println!("  in process: {r:.0} frames/s ({frames} frames; goal >= 500000)");
    let g = fabric_rate(frames, true)?;
    println!("  in process, the receiver behind a security group: {g:.0} frames/s");
    let s = socket_rate(frames.min(200_000)).await?;
    println!("  through unix sockets with QEMU framing: {s:.0} frames/s");
    println!("DHCP: {:.2} us per DISCOVER answered, in process", dhcp_micros(100_000));
    balancer_latency(5000).await
}
