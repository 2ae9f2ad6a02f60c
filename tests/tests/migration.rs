//! Live migration on the qemu backend: an administrator moves a running
//! guest to a new QEMU process without the guest noticing: same boot, same
//! memory (a file on its tmpfs), its console, its external IP, its NIC on
//! a subnet (a peer still reaches it), a volume hotplugged while it ran
//! (mounted, written to after the move) and its readiness follow it, and a
//! restarted server adopts the new QEMU.

use reqwest::Method;
use serde_json::json;
use vmaas_tests::vms::{TINY, V1, console, find_disk, found_disk, publish, said, state, wait_ready, wait_state, wait_until};
use vmaas_tests::{Server, qemu_pids};

async fn page(addr: &str) -> String {
    let c = reqwest::Client::builder().no_proxy().timeout(std::time::Duration::from_secs(5)).build().unwrap();
    match c.get(format!("http://{addr}/")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_guest_moves_to_a_new_qemu_without_noticing() {
    let mut s = Server::start_qemu().await;
    publish(&s, TINY);
    let (t, admin) = (s.token("acme", false), s.token("ops", true));
    let post = |path: &'static str, body: serde_json::Value| {
        let (s, t) = (&s, t.clone());
        async move {
            let (st, b) = s.raw(Method::POST, &format!("{V1}/{path}"), Some(&t), Some(json!({ "object": body }))).await;
            assert_eq!(st, 201, "{path}: {b}");
            b["object"]["id"].as_str().unwrap().to_owned()
        }
    };
    post("virtual_networks", json!({"metadata": {"name": "lab"}, "spec": {"ipv4_cidr": "10.31.0.0/16"}})).await;
    post("subnets", json!({"metadata": {"name": "front"}, "spec": {"virtual_network": "lab", "ipv4_cidr": "10.31.1.0/24"}})).await;
    let on_front = |name: &str, ip: &str| json!({"metadata": {"name": name}, "spec": {"template": "tiny", "network_attachments": [{"subnet": "front", "ip_address": ip}]}});
    let id = post("virtual_machines", on_front("mover", "10.31.1.10")).await;
    let peer = post("virtual_machines", on_front("peer", "10.31.1.11")).await;
    wait_ready(&s, &t, &peer).await;
    let ready = wait_ready(&s, &t, &id).await;
    let ip = ready["status"]["externalIP"].as_str().unwrap().to_owned();
    // A volume hotplugged into the running guest, mounted and written to.
    let vol = post("volumes", json!({"metadata": {"name": "data"}, "spec": {"size": "64Mi"}})).await;
    wait_state(&s, &t, &format!("{V1}/volumes/{vol}"), "VOLUME_STATE_READY", 60).await;
    let att =
        post("volume_attachments", json!({"metadata": {"name": "data-on-mover"}, "spec": {"volume": "data", "compute_instance": "mover"}}))
            .await;
    let att = wait_state(&s, &t, &format!("{V1}/volume_attachments/{att}"), "VOLUME_ATTACHMENT_STATE_READY", 120).await;
    let serial = att["status"]["serial"].as_str().unwrap().to_owned();
    let found = console(&s, &t, "mover", &find_disk(&serial));
    let dev = found_disk(&found).unwrap_or_else(|| panic!("the hotplugged volume is not in the guest: {found}"));
    let write = format!(
        "mke2fs -q /dev/{dev} && mkdir -p /mnt/v && mount /dev/{dev} /mnt/v && echo before > /mnt/v/note && sync && echo \"<<WROTE>>\""
    );
    assert_eq!(said(&console(&s, &t, "mover", &write)), "WROTE", "writing on the volume");

    let before = console(&s, &t, "mover", "echo kept-in-memory > /tmp/marker; echo \"<<$(cat /proc/sys/kernel/random/boot_id)>>\"");
    let boot_id = said(&before);
    assert_eq!(boot_id.len(), 36, "a boot id: {before}");
    let old = qemu_pids(&id);
    assert_eq!(old.len(), 1);
    let movable =
        ready["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_LIVE_MIGRATABLE");
    assert_eq!(movable.map(|c| &c["status"]), Some(&json!("CONDITION_STATUS_TRUE")), "the status says it can move: {ready:#}");

    let (st, body) = s.raw(Method::POST, &format!("{V1}/virtual_machines/{id}/migrate"), Some(&admin), Some(json!({}))).await;
    assert_eq!(st, 202, "{body}");
    assert_eq!(state(&body["object"]), "VIRTUAL_MACHINE_STATE_MIGRATING", "{body}");
    // The backend gives up on a migration after 5 minutes; either way it ends READY.
    let moved = wait_until(&s, &t, &id, "no longer MIGRATING", 330, |v| state(v) != "VIRTUAL_MACHINE_STATE_MIGRATING").await;
    let new = qemu_pids(&id);
    let lines = s.log().lines().filter(|l| l.contains("migration")).collect::<Vec<_>>().join("\n");
    assert!(state(&moved) == "VIRTUAL_MACHINE_STATE_READY" && new != old, "not moved: {moved}\nthe server's migration lines:\n{lines}");
    assert_eq!(new.len(), 1, "one QEMU runs the guest: {new:?} (was {old:?})");
    let after = console(&s, &t, "mover", "echo \"<<$(cat /proc/sys/kernel/random/boot_id) $(cat /tmp/marker)>>\"");
    assert_eq!(said(&after), format!("{boot_id} kept-in-memory"), "same boot, same memory: {after}");
    let again = "echo after >> /mnt/v/note && sync && echo 3 > /proc/sys/vm/drop_caches && echo \"<<$(cat /mnt/v/note | tr '\\n' ' ')>>\"";
    assert_eq!(said(&console(&s, &t, "mover", again)), "before after", "the volume moved with the guest and takes writes");
    assert!(page(&ip).await.contains("vmaas test guest mover"), "the external IP follows the guest");
    let fetch = "timeout 5 wget -O- http://10.31.1.10/ 2>/dev/null | sed -n 's/.*test guest \\([a-z]*\\)<.*/<<PAGE-OF-\\1>>/p'";
    let reached = (0..3).any(|_| said(&console(&s, &t, "peer", fetch)) == "PAGE-OF-mover");
    assert!(reached, "the peer reaches the moved guest on the subnet\n{}", s.log());
    assert!(s.log().contains("live migration done"), "{}", s.log());

    // A restarted server adopts the new QEMU.
    s.restart().await;
    let again = wait_ready(&s, &t, &id).await;
    assert_eq!(qemu_pids(&id), new, "adopted, not booted again: {again:#}");
    let log = console(&s, &t, "mover", "echo \"<<$(cat /tmp/marker)>>\"");
    assert_eq!(said(&log), "kept-in-memory", "the console follows: {log}");
}
