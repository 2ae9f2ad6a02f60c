//! Physical L2 (seed 001's "my VMs attached to my own physical L2
//! network"): `--uplink NETWORK=IFACE` joins a virtual network's subnets to
//! a host TAP device. The "physical network" is a network namespace this
//! test makes: the TAP is made on the host, opened by the server, then
//! moved into the namespace and addressed there, so every packet of the
//! test stays between the guest, the switch and that namespace. From the
//! namespace, a guest on the uplinked subnet serves its page at its API
//! address; a guest with the same subnet and an address of it on a network
//! without an uplink is not there.

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

/// The namespace and the TAP, removed when the test ends however it ends.
struct Physical {
    ns: String,
    tap: String,
}

impl Physical {
    /// A TAP on the host (down, no address, IPv6 off: the host sends
    /// nothing on it) and an empty namespace for it to move to.
    fn make() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let me = Self { ns: format!("vmaas-up-{}", &id[..8]), tap: format!("vup{}", &id[..8]) };
        run(&["ip", "tuntap", "add", "dev", &me.tap, "mode", "tap"]);
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", me.tap), "1").expect("IPv6 off on the TAP");
        run(&["ip", "netns", "add", &me.ns]);
        me
    }

    /// Moves the TAP (open in the server) into the namespace, and gives it
    /// `addr` there: the namespace is a host on the physical network.
    fn plug(&self, addr: &str) {
        run(&["ip", "link", "set", &self.tap, "netns", &self.ns]);
        for cmd in [
            vec!["ip", "link", "set", "lo", "up"],
            vec!["ip", "addr", "add", addr, "dev", &self.tap],
            vec!["ip", "link", "set", &self.tap, "up"],
        ] {
            let mut all = vec!["ip", "netns", "exec", &self.ns];
            all.extend(cmd);
            run(&all);
        }
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
        let _ = Command::new("ip").args(["link", "del", &self.tap]).output();
    }
}

/// `vmaas ARGS -o json`, which must succeed; its JSON.
fn cli_json(s: &Server, t: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = s.cli(t, &all);
    assert!(out.status.success(), "vmaas {args:?}: {}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
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
    let lab = id_of(&cli_json(&s, &t, &["network", "create", "lab", "--cidr", "10.77.0.0/16"]));
    cli_json(&s, &t, &["subnet", "create", "front", "--network", "lab", "--cidr", "10.77.1.0/24"]);
    cli_json(&s, &t, &["network", "create", "other", "--cidr", "10.77.0.0/16"]);
    cli_json(&s, &t, &["subnet", "create", "shadow", "--network", "other", "--cidr", "10.77.1.0/24"]);

    // The administrator uplinks `lab` to the TAP.
    let mut extra = s.extra().to_vec();
    extra.extend(["--uplink".to_owned(), format!("{lab}={}", phys.tap)]);
    s.set_extra(&extra);
    s.restart().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.log().contains("uplink joined a subnet") {
        assert!(Instant::now() < deadline, "the uplink never joined the subnet:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    phys.plug("10.77.1.250/24");

    for (name, subnet, ip) in [("web", "front", "10.77.1.10"), ("hidden", "shadow", "10.77.1.11")] {
        let nic = format!("{subnet},ip={ip}");
        cli_json(&s, &t, &["vm", "create", name, "-t", "tiny", "--subnet", &nic, "--wait", "--timeout", "5m"]);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if phys.page("10.77.1.10").is_some_and(|p| p.contains("test guest web")) {
            break;
        }
        assert!(Instant::now() < deadline, "the physical network never reached web's page:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Its twin address on a network without an uplink is not on the wire.
    assert_eq!(phys.page("10.77.1.11"), None, "a guest of a network without an uplink answered on the physical network");
    assert!(phys.page("10.77.1.10").is_some_and(|p| p.contains("test guest web")), "web still answers");
}
