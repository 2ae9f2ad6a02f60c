//! Host traffic to a VM on a subnet enters through its subnet NIC: the
//! ports (TCP and UDP) of its own address (exposed ports, load-balanced
//! ports) and of its external IPs are served by the server and carried into
//! the guest by the gateway of its first subnet ([`vmaas_switch::gateway`]),
//! so its security groups apply to them as to any traffic on the subnet
//! (the guest sees the gateway's address as the client). A VM without a
//! subnet keeps QEMU's forwards on its management NIC, as does the server's
//! own readiness probe. The forwards live in the server: a restarted server
//! makes them again on its first pass.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Mutex, MutexGuard};

use tracing::info;
use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::Protocol;
use vmaas_switch::{GatewayForward, Segment};

use crate::argv::Forward;
use crate::vm::Vm;

/// Whether `t`'s host traffic enters through its subnet NIC.
pub(crate) fn through_subnet(t: &VmTarget) -> bool {
    !t.spec.attachments.is_empty()
}

/// Whether forward `f` stays a QEMU forward for a VM on a subnet: the
/// readiness probe's (on 127.0.0.1, not the VM's own address).
pub(crate) fn stays_in_qemu(f: &Forward) -> bool {
    f.host == Ipv4Addr::LOCALHOST
}

/// The gateway forwards of `t` whose own address is `own`: its exposed
/// ports there, and what [`crate::forwards::wanted`] adds.
pub(crate) fn gateway_forwards(t: &VmTarget, own: Ipv4Addr) -> Vec<Forward> {
    let mut all = crate::argv::QemuArgs::forwards(&t.spec.machine.exposed_ports, own, None);
    all.extend(crate::forwards::wanted(t, own));
    all.retain(|f| !stays_in_qemu(f));
    all.sort();
    all.dedup();
    all
}

/// The gateway forwards of every VM, by id.
#[derive(Default)]
pub(crate) struct GatewayForwards(Mutex<HashMap<String, Vec<(Forward, GatewayForward)>>>);

impl GatewayForwards {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<(Forward, GatewayForward)>>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops every forward of VM `id`.
    pub(crate) fn clear(&self, id: &str) {
        if self.lock().remove(id).is_some() {
            info!(vm = %id, "gateway forwards stopped");
        }
    }

    /// Brings VM `vm`'s forwards to `wanted`, through `segment` to its NIC
    /// at `guest`. A port QEMU still forwards (set up by an older server)
    /// is taken from it first (`netdev`).
    pub(crate) async fn sync(
        &self,
        vm: &Vm,
        netdev: &str,
        segment: &Segment,
        guest: Ipv4Addr,
        wanted: &[Forward],
    ) -> Result<(), BackendError> {
        let id = vm.file.id.clone();
        let have: Vec<Forward> = self.lock().get(&id).map(|v| v.iter().map(|(f, _)| f.clone()).collect()).unwrap_or_default();
        if have == wanted {
            return Ok(());
        }
        if let Some(list) = self.lock().get_mut(&id) {
            list.retain(|(f, _)| wanted.contains(f));
        }
        for f in wanted.iter().filter(|f| !have.contains(f)) {
            let fwd = self.open(vm, netdev, segment, guest, f).await?;
            info!(vm = %id, forward = %f.rule(), "gateway forward added");
            self.lock().entry(id.clone()).or_default().push((f.clone(), fwd));
        }
        if let Some(list) = self.lock().get_mut(&id) {
            list.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Ok(())
    }

    /// Listens for forward `f` through the gateway.
    async fn open(&self, vm: &Vm, netdev: &str, segment: &Segment, guest: Ipv4Addr, f: &Forward) -> Result<GatewayForward, BackendError> {
        let listen = SocketAddr::from((f.host, f.host_port));
        let to = SocketAddrV4::new(guest, f.guest_port);
        let open = || async {
            match f.protocol {
                Protocol::Udp => segment.forward_udp(listen, to).await,
                _ => segment.forward(listen, to).await,
            }
        };
        match open().await {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                crate::forwards::remove(vm, netdev, f).await?;
                open().await
            }
            r => r,
        }
        .map_err(|e| BackendError::transient(format!("listening on {} {listen} for the guest's {to}", f.protocol.as_str()), e))
    }
}
