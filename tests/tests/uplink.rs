//! Physical L2 (seed 001's "my VMs attached to my own physical L2
//! network"): `--uplink NETWORK=IFACE` joins a virtual network's subnets to
//! a host TAP device or bridge. The "physical network" is a network
//! namespace this test makes: the TAP is made on the host, opened by the
//! server, then moved into the namespace and addressed there; a second
//! network is uplinked to a host bridge (the server adds a TAP of its own
//! to it) whose other port is a veth pair's end, the other end in the
//! namespace. The host's side has no address and IPv6 off, so every packet
//! of the test stays between the guests, the switch and that namespace.
//! From the namespace, a guest on each uplinked subnet serves its page at
//! its API address; a guest with the same subnet and an address of it on
//! a network without an uplink is not there.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use vmaas_tests::Server;
use vmaas_tests::vms::{TINY, publish};

/// Runs `cmd` (a program and its arguments), which must succeed.
fn run(cmd: &[&str]) -> String {
    let out = Command::new(cmd[0]).args(&cmd[1..]).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The namespace, the TAP, the bridge and the veth pair, removed when the
/// test ends however it ends.
struct Physical {
    ns: String,
    tap: String,
    bridge: String,
    veth: String,
}

/// Turns IPv6 off on the host interface `dev`: the host sends nothing on it.
fn quiet(dev: &str) {
    std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1").expect("IPv6 off");
}

/// Runs `cmd` inside the namespace `ns`.
fn run_in(ns: &str, cmd: &[&str]) {
    let mut all = vec!["ip", "netns", "exec", ns];
    all.extend(cmd);
    run(&all);
}

impl Physical {
    /// A TAP on the host (down, no address, IPv6 off: the host sends
    /// nothing on it) and an empty namespace for it to move to.
    fn make() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let me = Self {
            ns: format!("vmaas-up-{}", &id[..8]),
            tap: format!("vup{}", &id[..8]),
            bridge: format!("vbr{}", &id[..8]),
            veth: format!("vve{}", &id[..8]),
        };
        run(&["ip", "tuntap", "add", "dev", &me.tap, "mode", "tap"]);
        quiet(&me.tap);
        run(&["ip", "netns", "add", &me.ns]);
        run(&["ip", "link", "add", &me.bridge, "type", "bridge"]);
        quiet(&me.bridge);
        run(&["ip", "link", "add", &me.veth, "type", "veth", "peer", "name", "wire", "netns", &me.ns]);
        quiet(&me.veth);
        run(&["ip", "link", "set", &me.veth, "master", &me.bridge]);
        for dev in [&me.bridge, &me.veth] {
            run(&["ip", "link", "set", dev, "up"]);
        }
        me
    }

    /// Moves the TAP (open in the server) into the namespace, and gives it
    /// `addr` there: the namespace is a host on the physical network.
    fn plug(&self, addr: &str) {
        run(&["ip", "link", "set", &self.tap, "netns", &self.ns]);
        run_in(&self.ns, &["ip", "link", "set", "lo", "up"]);
        run_in(&self.ns, &["ip", "addr", "add", addr, "dev", &self.tap]);
        run_in(&self.ns, &["ip", "link", "set", &self.tap, "up"]);
    }

    /// Gives the namespace's end of the veth pair (on the bridge) `addr`.
    fn plug_bridge(&self, addr: &str) {
        run_in(&self.ns, &["ip", "addr", "add", addr, "dev", "wire"]);
        run_in(&self.ns, &["ip", "link", "set", "wire", "up"]);
    }

    /// The page at `http://ADDR/`, fetched from inside the namespace.
    fn page(&self, addr: &str) -> Option<String> {
        let url = format!("http://{addr}/");
        let out = Command::new("ip").args(["netns", "exec", &self.ns, "curl", "-s", "--max-time", "3", &url]).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Physical {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        for dev in [&self.tap, &self.veth, &self.bridge] {
            let _ = Command::new("ip").args(["link", "del", dev]).output();
        }
    }
}

fn id_of(v: &Value) -> String {
    v["id"].as_str().or(v["object"]["id"].as_str()).expect("an id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uplinked_subnet_reaches_the_physical_network_and_no_other_does() {
    assert_eq!(run(&["id", "-u"]).trim(), "0", "this test makes a network namespace and a TAP: it runs as root");
    let phys = Physical::make();
    let mut s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let lab = id_of(&s.cli_json(&t, &["network", "create", "lab", "--cidr", "10.77.0.0/16"]));
    s.cli_json(&t, &["subnet", "create", "front", "--network", "lab", "--cidr", "10.77.1.0/24"]);
    s.cli_json(&t, &["network", "create", "other", "--cidr", "10.77.0.0/16"]);
    s.cli_json(&t, &["subnet", "create", "shadow", "--network", "other", "--cidr", "10.77.1.0/24"]);
    s.cli_json(&t, &["network", "create", "bridged", "--cidr", "10.78.0.0/16"]);
    s.cli_json(&t, &["subnet", "create", "back", "--network", "bridged", "--cidr", "10.78.1.0/24"]);

    // The administrator uplinks `lab` (by id) to the TAP and `bridged` (by
    // tenant and name) to the bridge.
    let mut extra = s.extra().to_vec();
    extra.extend(["--uplink".to_owned(), format!("{lab}={},acme/bridged={}", phys.tap, phys.bridge)]);
    s.set_extra(&extra);
    s.restart().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.log().matches("uplink joined a subnet").count() < 2 {
        assert!(Instant::now() < deadline, "the uplinks never joined their subnets:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    phys.plug("10.77.1.250/24");
    phys.plug_bridge("10.78.1.250/24");

    for (name, subnet, ip) in [("web", "front", "10.77.1.10"), ("hidden", "shadow", "10.77.1.11"), ("db", "back", "10.78.1.10")] {
        let nic = format!("{subnet},ip={ip}");
        s.cli_json(&t, &["vm", "create", name, "-t", "tiny", "--subnet", &nic, "--wait", "--timeout", "5m"]);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if phys.page("10.77.1.10").is_some_and(|p| p.contains("test guest web")) {
            break;
        }
        assert!(Instant::now() < deadline, "the physical network never reached web's page:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Through the bridge, as through the TAP.
    loop {
        if phys.page("10.78.1.10").is_some_and(|p| p.contains("test guest db")) {
            break;
        }
        assert!(Instant::now() < deadline, "the bridged network never reached db's page:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Its twin address on a network without an uplink is not on the wire.
    assert_eq!(phys.page("10.77.1.11"), None, "a guest of a network without an uplink answered on the physical network");
    assert!(phys.page("10.77.1.10").is_some_and(|p| p.contains("test guest web")), "web still answers");
}
