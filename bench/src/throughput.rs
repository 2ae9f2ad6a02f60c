//! `vmaas-bench guests`: TCP throughput between two real test guests (QEMU,
//! busybox `nc`), once over a segment of the user-space switch and once
//! over QEMU's own socket networking (`-netdev socket`, a TCP connection on
//! loopback between the two QEMUs) as the baseline; and the time from a
//! DHCP request to an address in the guest. All guest traffic stays in the
//! switch or the loopback connection between the two QEMUs; the guests are
//! asked to reach nothing but each other.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::Context;
use vmaas_switch::fabric::PortKind;
use vmaas_switch::{Mac, PortAddr, PortConfig, Segment, SubnetConfig};
use vmaas_tests::guest::Guest;

const BOOT: Duration = Duration::from_secs(300);

fn subnet() -> SubnetConfig {
    SubnetConfig {
        network: Ipv4Addr::new(10, 56, 1, 0),
        prefix: 24,
        gateway: Ipv4Addr::new(10, 56, 1, 1),
        gateway_mac: Mac::local(b"bench-gw"),
        lease_seconds: 3600,
    }
}

fn nic(n: u8) -> PortConfig {
    PortConfig { mac: Mac::local(&[b'b', n]), ip: Ipv4Addr::new(10, 56, 1, 10 + n), hostname: None, firewall: None }
}

/// The guest's clock (`/proc/uptime`, 10 ms steps) around `what`, echoed
/// as `TAG:start:end` (the tag split so that the echo of the command does
/// not match).
fn timed(what: &str, tag: &str) -> String {
    let (a, b) = tag.split_at(2);
    format!("s=$(cut -d' ' -f1 /proc/uptime); {what}; e=$(cut -d' ' -f1 /proc/uptime); echo \"{a}\"\"{b}:$s:$e\"")
}

/// Seconds between the two times of a `TAG:start:end` line.
fn elapsed(line: &str, tag: &str) -> Option<f64> {
    let mut parts = line.rsplit(&format!("{tag}:")).next()?.trim().split(':');
    let (s, e): (f64, f64) = (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    Some(e - s)
}

/// MB/s from `sender` to `receiver` (at `to`): `megabytes` of zeros through
/// busybox `nc`, timed by the sender from the first byte written to the
/// last one handed to its network stack.
fn transfer(sender: &mut Guest, receiver: &mut Guest, to: Ipv4Addr, megabytes: u32) -> anyhow::Result<f64> {
    receiver.run("nc -l -p 5001 >/dev/null & echo LIST''ENING", "LISTENING", Duration::from_secs(20)).context("nc -l")?;
    std::thread::sleep(Duration::from_millis(500));
    let cmd = timed(&format!("dd if=/dev/zero bs=64k count={} 2>/dev/null | nc {to} 5001", megabytes * 16), "XFER");
    let line = sender.run(&cmd, "XFER:", Duration::from_secs(120 + u64::from(megabytes))).context("the transfer did not finish")?;
    let secs = elapsed(&line, "XFER").with_context(|| format!("no times in {line:?}"))?;
    Ok(f64::from(megabytes) * 1.048_576 / secs.max(0.01))
}

/// Boots two guests on a segment whose ports are on loopback TCP (the
/// qemu backend's) or unix sockets; their MB/s, and the DHCP time.
async fn over_segment(tcp: bool, megabytes: u32) -> anyhow::Result<(f64, f64)> {
    let dir = tempfile::tempdir()?;
    let seg = Segment::start(subnet());
    let at = |n: &str| if tcp { PortAddr::Tcp(0) } else { PortAddr::Unix(dir.path().join(n)) };
    let a = seg.add_port(1, PortKind::Guest(nic(1)), &at("a.sock")).await?;
    let b = seg.add_port(2, PortKind::Guest(nic(2)), &at("b.sock")).await?;
    let stream = |p: &PortAddr| format!("stream,id=seg,server=off,{},reconnect-ms=1000", p.qemu_options());
    let (mut ga, mut gb) =
        (Guest::boot("bench-a", &nic(1).mac.to_string(), &stream(&a)), Guest::boot("bench-b", &nic(2).mac.to_string(), &stream(&b)));
    for g in [&ga, &gb] {
        g.expect("vmaas-guest: ready", BOOT).context("a guest did not boot")?;
    }
    let dhcp = tokio::task::block_in_place(|| dhcp_times(&mut ga))?;
    let rate = tokio::task::block_in_place(|| transfer(&mut ga, &mut gb, nic(2).ip, megabytes))?;
    Ok((rate, dhcp))
}

/// Milliseconds per DHCP round (five in a row, the address dropped before
/// each), by the guest's clock.
fn dhcp_times(g: &mut Guest) -> anyhow::Result<f64> {
    let rounds =
        "for i in 1 2 3 4 5; do ip addr flush dev eth1; udhcpc -i eth1 -s /etc/udhcpc.script -q -n -t 5 -T 1 >/dev/null 2>&1; done";
    let cmd = timed(&format!("{rounds}; ip -4 -o addr show eth1 | grep -q 10.56.1 || s=none"), "DHCP");
    let line = g.run(&cmd, "DHCP:", Duration::from_secs(60)).context("udhcpc")?;
    let secs = elapsed(&line, "DHCP").with_context(|| format!("udhcpc gave no address: {line:?}"))?;
    Ok(secs * 1000.0 / 5.0)
}

/// QEMU's own networking between two guests, without the switch.
#[derive(Debug, Clone, Copy)]
enum Direct {
    /// `-netdev socket`: a TCP connection on loopback (the baseline).
    Socket,
    /// `-netdev stream` on a unix socket: the framing and QEMU backend the
    /// switch's ports use, with one QEMU listening.
    Stream,
    /// `-netdev stream` on TCP loopback: the same backend as `Stream`
    /// over another transport.
    StreamInet,
}

/// Boots two guests joined directly by QEMU's networking; their MB/s.
fn over_qemu(how: Direct, megabytes: u32) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let (listen, connect) = match how {
        Direct::Socket => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            (format!("socket,id=seg,listen=127.0.0.1:{port}"), format!("socket,id=seg,connect=127.0.0.1:{port}"))
        }
        Direct::Stream => {
            let path = dir.path().join("direct.sock").display().to_string();
            let addr = format!("addr.type=unix,addr.path={path}");
            (format!("stream,id=seg,server=on,{addr}"), format!("stream,id=seg,server=off,{addr},reconnect-ms=1000"))
        }
        Direct::StreamInet => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let addr = format!("addr.type=inet,addr.host=127.0.0.1,addr.port={port}");
            (format!("stream,id=seg,server=on,{addr}"), format!("stream,id=seg,server=off,{addr},reconnect-ms=1000"))
        }
    };
    let mut ga = Guest::boot("base-a", &nic(1).mac.to_string(), &listen);
    std::thread::sleep(Duration::from_millis(500));
    let mut gb = Guest::boot("base-b", &nic(2).mac.to_string(), &connect);
    for g in [&ga, &gb] {
        g.expect("vmaas-guest: ready", BOOT).context("a guest did not boot")?;
    }
    // No DHCP without the switch: the same addresses, set by hand.
    for (g, n) in [(&mut ga, 1), (&mut gb, 2)] {
        let cmd = format!("ip addr flush dev eth1; ip addr add {}/24 dev eth1 && echo AD''DED", nic(n).ip);
        g.run(&cmd, "ADDED", Duration::from_secs(10)).context("ip addr add")?;
    }
    transfer(&mut ga, &mut gb, nic(2).ip, megabytes)
}

/// Runs the guest benchmark.
pub async fn guests(megabytes: u32) -> anyhow::Result<()> {
    let megabytes = megabytes.clamp(1, 512);
    println!("guest to guest TCP ({megabytes} MiB through busybox nc, two TCG guests with one vCPU each)");
    let (switch, dhcp) = over_segment(true, megabytes).await?;
    println!("  over a segment of the vmaas switch: {switch:.1} MB/s (ports on loopback TCP, as the qemu backend has them)");
    let (unix, _) = over_segment(false, megabytes).await?;
    println!("  the same, ports on unix sockets:    {unix:.1} MB/s");
    let base = tokio::task::block_in_place(|| over_qemu(Direct::Socket, megabytes))?;
    println!("  over QEMU's socket networking:      {base:.1} MB/s");
    let stream = tokio::task::block_in_place(|| over_qemu(Direct::Stream, megabytes))?;
    println!("  over QEMU's stream networking:      {stream:.1} MB/s (the switch ports' backend, QEMU to QEMU)");
    let inet = tokio::task::block_in_place(|| over_qemu(Direct::StreamInet, megabytes))?;
    println!("  over QEMU's stream networking, TCP: {inet:.1} MB/s (the same backend on loopback TCP, QEMU to QEMU)");
    println!(
        "  ratio to socket: {:.2} (goal >= 0.8; with unix ports {:.2}); to stream over TCP: {:.2}; stream over unix / over TCP: {:.2}",
        switch / base,
        unix / base,
        switch / inet,
        stream / inet
    );
    println!("DHCP, request to address in the guest (mean of 5 rounds): {dhcp:.0} ms");
    host_only(megabytes).await
}

/// Runs the host-to-guest part alone.
pub async fn host_only(megabytes: u32) -> anyhow::Result<()> {
    let megabytes = megabytes.clamp(1, 512);
    let (gateway, user) = host_to_guest(megabytes).await?;
    println!("host to guest TCP ({megabytes} MiB from the host into one guest's nc):");
    println!("  through its subnet's gateway (a VM on a subnet: external IPs, load balancers): {gateway:.1} MB/s");
    println!("  through QEMU's user network (hostfwd on eth0, a VM without subnets):          {user:.1} MB/s");
    println!("  ratio gateway / user network: {:.2}", gateway / user);
    Ok(())
}

/// MB/s of `megabytes` sent by the host to `to` (a guest's `nc -l -p 5001`,
/// started anew): from the connect to the guest's close after the last byte.
async fn send_to(guest: &mut Guest, to: std::net::SocketAddr, megabytes: u32) -> anyhow::Result<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio::task::block_in_place(|| guest.run("nc -l -p 5001 >/dev/null & echo LIST''ENING", "LISTENING", Duration::from_secs(20)))
        .context("nc -l")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let limit = Duration::from_secs(120 + u64::from(megabytes));
    let started = std::time::Instant::now();
    let run = async {
        let mut c = tokio::net::TcpStream::connect(to).await?;
        let chunk = vec![0u8; 64 * 1024];
        for _ in 0..megabytes * 16 {
            c.write_all(&chunk).await?;
        }
        c.shutdown().await?;
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).await?;
        anyhow::Ok(())
    };
    tokio::time::timeout(limit, run).await.context("the transfer did not finish")??;
    Ok(f64::from(megabytes) * 1.048_576 / started.elapsed().as_secs_f64().max(0.01))
}

/// One guest on a segment, with its port 5001 forwarded both through the
/// segment's gateway and by QEMU's user network; MB/s through each.
async fn host_to_guest(megabytes: u32) -> anyhow::Result<(f64, f64)> {
    let seg = Segment::start(subnet());
    let port = seg.add_port(1, PortKind::Guest(nic(1)), &PortAddr::Tcp(0)).await?;
    let user_port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let stream = format!("stream,id=seg,server=off,{},reconnect-ms=1000", port.qemu_options());
    let hostfwd = format!(",hostfwd=tcp:127.0.0.1:{user_port}-:5001");
    let mut g = Guest::boot_with("bench-h", &nic(1).mac.to_string(), &stream, &hostfwd);
    g.expect("vmaas-guest: ready", BOOT).context("the guest did not boot")?;
    let fwd = seg.forward("127.0.0.1:0".parse()?, std::net::SocketAddrV4::new(nic(1).ip, 5001)).await?;
    let gateway = send_to(&mut g, fwd.local_addr(), megabytes).await?;
    let user = send_to(&mut g, std::net::SocketAddr::from(([127, 0, 0, 1], user_port)), megabytes).await?;
    Ok((gateway, user))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_times_parse() {
        assert_eq!(elapsed("XFER:12.50:14.75", "XFER"), Some(2.25));
        assert_eq!(elapsed("DHCP:none:3.1", "DHCP"), None);
        assert!(timed("true", "XFER").ends_with("echo \"XF\"\"ER:$s:$e\""));
    }
}
