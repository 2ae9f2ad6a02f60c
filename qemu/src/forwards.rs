//! The forwards a VM gets beyond its own: its exposed ports on each external
//! IP attached to it, and the ports its load balancers reach on its own
//! address. They are in the command line at boot and changed on a running
//! guest with QEMU's `hostfwd_add`/`hostfwd_remove`, so attaching, moving
//! or detaching an address needs no restart. What is applied is kept in
//! `vm.json`, so a server restart knows it.

use std::net::Ipv4Addr;

use tracing::info;
use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::{ExposedPort, Protocol};

use crate::argv::Forward;
use crate::qmp::Qmp;
use crate::vm::Vm;

/// The extra forwards `t` asks for, on a VM whose own address is `own`.
pub(crate) fn wanted(t: &VmTarget, own: Ipv4Addr) -> Vec<Forward> {
    extra(&t.spec.machine.exposed_ports, &t.spec.external_ips, &t.spec.balanced_ports, own)
}

/// `exposed` on each of `external_ips`, and each of `balanced` (TCP) on
/// `own` unless exposed there already; sorted.
fn extra(exposed: &[ExposedPort], external_ips: &[Ipv4Addr], balanced: &[u16], own: Ipv4Addr) -> Vec<Forward> {
    let mut out: Vec<Forward> = external_ips
        .iter()
        .flat_map(|ip| exposed.iter().map(|p| Forward { protocol: p.protocol, host: *ip, host_port: p.port, guest_port: p.port }))
        .collect();
    let already = |port: u16| exposed.iter().any(|p| p.protocol == Protocol::Tcp && p.port == port);
    out.extend(balanced.iter().filter(|p| !already(**p)).map(|p| Forward {
        protocol: Protocol::Tcp,
        host: own,
        host_port: *p,
        guest_port: *p,
    }));
    out.sort();
    out.dedup();
    out
}

/// Runs one human-monitor command; returns what it printed (QEMU answers
/// both success and failure of these commands as text).
async fn hmp(vm: &Vm, command: &str) -> Result<String, BackendError> {
    let mut q = Qmp::connect(&vm.path("qmp.sock")).await.map_err(|e| BackendError::transient("connecting to QMP", e))?;
    let out = q
        .execute("human-monitor-command", Some(serde_json::json!({ "command-line": command })))
        .await
        .map_err(|e| BackendError::transient(format!("running {command:?}"), e))?;
    Ok(out.as_str().unwrap_or_default().trim().to_owned())
}

/// Removes forward `f`; one that is not there is gone already.
pub(crate) async fn remove(vm: &Vm, netdev: &str, f: &Forward) -> Result<(), BackendError> {
    let command = format!("hostfwd_remove {netdev} {}", f.host_side());
    let out = hmp(vm, &command).await?;
    if out.ends_with("removed") || out.ends_with("not found") {
        Ok(())
    } else {
        Err(BackendError::transient(format!("running {command:?}"), out))
    }
}

/// Adds forward `f` (QEMU prints nothing when it worked).
async fn add(vm: &Vm, netdev: &str, f: &Forward) -> Result<(), BackendError> {
    let command = format!("hostfwd_add {netdev} {}", f.rule());
    let out = hmp(vm, &command).await?;
    if out.is_empty() { Ok(()) } else { Err(BackendError::transient(format!("running {command:?}"), out)) }
}

/// Brings the running guest's extra forwards to `wanted` through its first
/// user NIC `netdev`; what was applied is saved as it goes.
pub(crate) async fn sync(vm: &mut Vm, netdev: &str, wanted: Vec<Forward>) -> Result<(), BackendError> {
    if vm.file.forwards == wanted {
        return Ok(());
    }
    let gone: Vec<Forward> = vm.file.forwards.iter().filter(|f| !wanted.contains(f)).cloned().collect();
    for f in gone {
        remove(vm, netdev, &f).await?;
        vm.file.forwards.retain(|x| *x != f);
        vm.file.save(&vm.dir).await?;
        info!(vm = %vm.file.id, forward = %f.rule(), "forward removed");
    }
    let new: Vec<Forward> = wanted.iter().filter(|f| !vm.file.forwards.contains(f)).cloned().collect();
    for f in new {
        // A rebuilt vm.json may not list what QEMU has: drop it first, so
        // the add cannot collide with itself.
        remove(vm, netdev, &f).await?;
        add(vm, netdev, &f).await?;
        vm.file.forwards.push(f.clone());
        vm.file.save(&vm.dir).await?;
        info!(vm = %vm.file.id, forward = %f.rule(), "forward added");
    }
    vm.file.forwards = wanted;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_ports_answer_on_each_address_and_balanced_ports_on_its_own() {
        let exposed = [ExposedPort { port: 80, protocol: Protocol::Tcp, name: None }];
        let ext: Ipv4Addr = "127.43.0.1".parse().unwrap();
        let own: Ipv4Addr = "127.42.0.9".parse().unwrap();
        let rules: Vec<String> = extra(&exposed, &[ext], &[80, 8080], own).iter().map(Forward::rule).collect();
        assert_eq!(rules, ["tcp:127.42.0.9:8080-:8080", "tcp:127.43.0.1:80-:80"]);
    }
}
