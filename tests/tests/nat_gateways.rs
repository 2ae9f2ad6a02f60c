//! NAT gateways with real guests: a guest on a subnet of a network with a
//! gateway reaches a listener this test runs, and the listener sees the
//! gateway's external address; a guest of a network without one reaches
//! nothing, even with a route to it; a destination the administrator did
//! not allow is refused at once; deleting the gateway closes the way out.
//!
//! Where the packets go: the "outside" is a network namespace this test
//! makes, in which every address of 192.0.2.0/24 (documentation) is local
//! (`ip route add local`), and the server makes its NAT sockets there
//! (`--nat-netns`). The listener binds 192.0.2.10 in that namespace; the
//! gateway's address comes from a pool of that range. No packet leaves
//! the namespace, the switch or the guests: the host's own networks never
//! see one.

use std::process::{Child, Command, Stdio};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::vms::{TINY, V1, console, publish, said, wait_object, wait_ready, wait_state};

/// The listener, for five minutes at most: HTTP on 192.0.2.10:8080
/// answering `FROM <client address>`, and DNS on 192.0.2.10:53 (UDP)
/// answering every A question with the client's address. Each request is
/// a line `GOT <client address>` on its output.
const LISTENER: &str = r#"
import http.server, socket, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ("FROM " + self.client_address[0]).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a):
        print("GOT", self.client_address[0], flush=True)
def dns():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("192.0.2.10", 53))
    while True:
        q, peer = u.recvfrom(512)
        end = q.index(b"\0", 12) + 5
        a = q[end - 4:end - 2] == b"\0\1"
        print("GOT", peer[0], flush=True)
        answer = b"\xc0\x0c\0\1\0\1\0\0\0\0\0\4" + socket.inet_aton(peer[0]) if a else b""
        u.sendto(q[:2] + b"\x81\x80\0\1" + (b"\0\1" if a else b"\0\0") + b"\0\0\0\0" + q[12:end] + answer, peer)
threading.Thread(target=dns, daemon=True).start()
s = http.server.HTTPServer(("192.0.2.10", 8080), H)
threading.Timer(300, s.shutdown).start()
s.serve_forever()
"#;

/// The namespace and the listener in it, removed however the test ends.
struct Outside {
    ns: String,
    listener: Child,
    seen: tempfile::NamedTempFile,
}

fn run(cmd: &[&str]) {
    let out = Command::new(cmd[0]).args(&cmd[1..]).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Outside {
    fn make() -> Self {
        let ns = format!("vmaas-nat-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        run(&["ip", "netns", "add", &ns]);
        run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);
        run(&["ip", "netns", "exec", &ns, "ip", "route", "add", "local", "192.0.2.0/24", "dev", "lo"]);
        let seen = tempfile::NamedTempFile::new().expect("a file for the listener");
        let listener = Command::new("ip")
            .args(["netns", "exec", &ns, "python3", "-c", LISTENER])
            .stdout(seen.reopen().expect("the listener's output"))
            .stderr(Stdio::null())
            .spawn()
            .expect("the listener starts");
        Self { ns, listener, seen }
    }

    /// The client address of every request the listener has had.
    fn seen(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.seen.path()).unwrap_or_default();
        text.lines().filter_map(|l| l.strip_prefix("GOT ")).map(str::to_owned).collect()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.listener.kill();
        let _ = self.listener.wait();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// What `vm` got fetching `url` (its body, or `FAILED …`): the console is
/// read until the guest has been quiet for longer than the fetch may take.
fn fetch(s: &Server, t: &str, vm: &str, url: &str) -> String {
    let cmd = format!("\nr=$(timeout 5 wget -O- {url} 2>/tmp/e) || r=\"FAILED $(cat /tmp/e)\"; echo \"<<$r>>\"\n");
    let out = s.cli_with_stdin(t, &["vm", "console", vm, "--batch", "--idle", "8s"], cmd.as_bytes());
    said(&String::from_utf8_lossy(&out.stdout))
}

async fn post(s: &Server, t: &str, path: &str, name: &str, spec: Value) -> (u16, Value) {
    s.raw(Method::POST, &format!("{V1}/{path}"), Some(t), Some(json!({"object": {"metadata": {"name": name}, "spec": spec}}))).await
}

async fn made(s: &Server, t: &str, path: &str, name: &str, spec: Value) -> Value {
    let (st, v) = post(s, t, path, name, spec).await;
    assert_eq!(st, 201, "{path} {name}: {v}");
    v["object"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_reaches_the_outside_through_its_nat_gateway_only() {
    let outside = Outside::make();
    let netns = format!("/run/netns/{}", outside.ns);
    let pool = "egress=192.0.2.128/25";
    let s = Server::start_qemu_with(&["--external-ip-pool", pool, "--nat-netns", &netns, "--nat-allow", "192.0.2.10"]).await;
    publish(&s, TINY);
    let (t, other) = (s.token("acme", false), s.token("other", false));
    for (net, cidr, sub, sub_cidr) in [("lab", "10.30.0.0/16", "front", "10.30.1.0/24"), ("closed", "10.31.0.0/16", "back", "10.31.1.0/24")]
    {
        made(&s, &t, "virtual_networks", net, json!({"ipv4_cidr": cidr})).await;
        made(&s, &t, "subnets", sub, json!({"virtual_network": net, "ipv4_cidr": sub_cidr})).await;
    }
    let ip = made(&s, &t, "external_ips", "out", json!({"pool": "egress"})).await;
    let address = ip["status"]["address"].as_str().unwrap().to_owned();

    // OSAC's typed references, or plain names; READY once the router routes out.
    let gw = made(&s, &t, "nat_gateways", "gw", json!({"virtual_network": {"name": "lab"}, "external_ip": {"name": "out"}})).await;
    assert_eq!(gw["@type"], "type.googleapis.com/osac.public.v1.NATGateway");
    assert_eq!((&gw["spec"]["external_ip"], gw["status"]["address"].as_str()), (&json!({"id": ip["id"]}), Some(address.as_str())));
    let gw_path = format!("{V1}/nat_gateways/{}", gw["id"].as_str().unwrap());
    let ready = wait_state(&s, &t, &gw_path, "NAT_GATEWAY_STATE_READY", 30).await;
    assert_eq!(ready["status"]["address"], address.as_str(), "{ready}");

    // What cannot be: a second gateway, an address in use, another tenant's network, nothing named.
    let (st, e) = post(&s, &t, "nat_gateways", "again", json!({"virtual_network": "lab", "external_ip": "out"})).await;
    assert_eq!((st, e["code"].as_i64()), (409, Some(6)), "{e}");
    made(&s, &t, "external_ips", "spare", json!({"pool": "egress"})).await;
    let (st, e) = post(&s, &t, "nat_gateways", "closed-gw", json!({"virtual_network": "closed", "external_ip": "out"})).await;
    assert!(st == 409 && e["message"].as_str().unwrap().contains("is held by NAT gateway \"gw\""), "{e}");
    let (st, e) = post(&s, &t, "external_ip_attachments", "x", json!({"external_ip": "out", "compute_instance": "nobody"})).await;
    assert!(st == 409 && e["message"].as_str().unwrap().contains("NAT gateway"), "{e}");
    made(&s, &other, "external_ips", "theirs", json!({"pool": "egress"})).await;
    let (st, e) = post(&s, &other, "nat_gateways", "steal", json!({"virtual_network": "lab", "external_ip": "theirs"})).await;
    assert!(st == 400 && e["details"][0]["field"] == "object.spec.virtual_network", "{e}");
    let (st, e) = post(&s, &t, "nat_gateways", "empty", json!({})).await;
    let fields: Vec<&str> = e["details"].as_array().unwrap().iter().filter_map(|d| d["field"].as_str()).collect();
    assert_eq!((st, fields), (400, vec!["object.spec.virtual_network", "object.spec.external_ip"]), "{e}");
    let (st, e) = s.raw(Method::DELETE, &format!("{V1}/external_ips/{}", ip["id"].as_str().unwrap()), Some(&t), None).await;
    assert!(st == 409 && e["message"].as_str().unwrap().contains("NAT gateway"), "{e}");

    // A guest of lab reaches the listener, which sees the gateway's address.
    let alpha = s.cli_json(&t, &["vm", "create", "alpha", "-t", "tiny", "--subnet", "front", "--wait", "--timeout", "5m"]);
    let beta = s.cli_json(&t, &["vm", "create", "beta", "-t", "tiny", "--subnet", "back", "--wait", "--timeout", "5m"]);
    for v in [&alpha, &beta] {
        wait_ready(&s, &t, v["id"].as_str().or(v["object"]["id"].as_str()).unwrap()).await;
    }
    assert_eq!(fetch(&s, &t, "alpha", "http://192.0.2.10:8080/"), format!("FROM {address}"), "{}", s.log());
    // UDP too: the DNS answer is the address the listener saw.
    let dns = said(&console(&s, &t, "alpha", "echo \"<<$(nslookup -type=a probe.test 192.0.2.10 2>&1 | tail -2 | tr -d '\\n')>>\""));
    assert!(dns.contains(&format!("Address: {address}")), "{dns}\n{}", s.log());
    assert_eq!(outside.seen(), [address.as_str(), address.as_str()], "the listener saw the gateway's address twice");

    // Not allowed by the administrator: refused at once, nothing dialled.
    let refused = fetch(&s, &t, "alpha", "http://192.0.2.11:8080/");
    assert!(refused.contains("FAILED") && refused.contains("refused"), "{refused}");

    // A network without a gateway reaches nothing, even routed at its gateway by hand.
    assert!(fetch(&s, &t, "beta", "http://192.0.2.10:8080/").contains("FAILED"));
    console(&s, &t, "beta", "ip route add 192.0.2.0/24 via 10.31.1.1");
    assert!(fetch(&s, &t, "beta", "http://192.0.2.10:8080/").contains("FAILED"));
    assert_eq!(outside.seen().len(), 2, "nothing but alpha's two requests reached the listener");

    // Deleted: lab's way out is closed, and the address is free again.
    let (st, _) = s.raw(Method::DELETE, &gw_path, Some(&t), None).await;
    assert_eq!(st, 202);
    wait_object(&s, &t, &gw_path, "gone", 30, |v| v.is_none()).await;
    assert!(fetch(&s, &t, "alpha", "http://192.0.2.10:8080/").contains("FAILED"));
    assert_eq!(outside.seen().len(), 2, "nothing reached the listener once the gateway was gone");
    made(&s, &t, "nat_gateways", "gw2", json!({"virtual_network": "closed", "external_ip": "out"})).await;
}
