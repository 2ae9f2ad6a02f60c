//! A VM's NICs on subnets: a port of each subnet's segment, served on a
//! unix socket under `DATA_DIR/sw/` that the VM's QEMU connects to. Ports
//! are added before QEMU starts (and again for a guest adopted after a
//! restart: QEMU reconnects to the same socket), and removed with the VM.

use std::path::PathBuf;

use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::security_group::{CheckedRule, Protocol};
use vmaas_switch::fabric::PortKind;
use vmaas_switch::firewall::{Firewall, Protocol as SwitchProtocol, Rule};
use vmaas_switch::{Mac, PortConfig, PortId};

use crate::Vms;
use crate::argv::SegmentNicArg;

/// The switch's firewall of a NIC's merged security groups.
fn firewall(f: &vmaas_backend::Firewall) -> Firewall {
    let rule = |r: &CheckedRule| Rule {
        protocol: match r.protocol {
            Protocol::Tcp => SwitchProtocol::Tcp,
            Protocol::Udp => SwitchProtocol::Udp,
            Protocol::Icmp => SwitchProtocol::Icmp,
            Protocol::All => SwitchProtocol::All,
        },
        port_from: r.ports.0,
        port_to: r.ports.1,
        cidr: r.cidr,
    };
    Firewall { ingress: f.ingress.iter().map(rule).collect(), egress: f.egress.iter().map(rule).collect() }
}

/// NICs on subnets a VM may have.
pub const MAX_NICS: usize = 8;

/// The port of NIC `index` of VM `vm` on its segment: stable, so that a
/// restarted server finds the same port for the same NIC.
fn port_id(vm: &str, index: usize) -> PortId {
    let seed = format!("{vm}/{index}");
    let h = seed.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    h.max(1)
}

impl Vms {
    /// The directory of the ports' sockets.
    fn sw_dir(&self) -> PathBuf {
        self.cfg.state_dir.parent().unwrap_or(&self.cfg.state_dir).join("sw")
    }

    /// The socket of NIC `index` of VM `vm` (short: unix socket paths are).
    fn port_socket(&self, vm: &str, index: usize) -> PathBuf {
        self.sw_dir().join(format!("{}-{index}.sock", &vm[..vm.len().min(13)]))
    }

    /// Makes sure every NIC of `t` on a subnet has its port; returns them
    /// as QEMU arguments. A subnet whose segment does not run yet is a
    /// transient error (the VM waits for it).
    pub(crate) async fn attach_ports(&self, t: &VmTarget) -> Result<Vec<SegmentNicArg>, BackendError> {
        if t.spec.attachments.len() > MAX_NICS {
            return Err(BackendError::invalid("attaching NICs", format!("at most {MAX_NICS} NICs on subnets")));
        }
        let dir = self.sw_dir();
        tokio::fs::create_dir_all(&dir).await.map_err(|e| BackendError::transient(format!("creating {}", dir.display()), e))?;
        let mut nics = Vec::new();
        for (i, a) in t.spec.attachments.iter().enumerate() {
            let segment = self
                .subnets
                .segment(&a.subnet)
                .ok_or_else(|| BackendError::transient("attaching NICs", format!("subnet {} is not running yet", a.subnet)))?;
            let mac = Mac::parse(&a.mac).ok_or_else(|| BackendError::invalid("attaching NICs", format!("{:?} is not a MAC", a.mac)))?;
            let (id, socket) = (port_id(&t.id, i), self.port_socket(&t.id, i));
            let firewall = a.firewall.as_ref().map(firewall);
            if segment.has_port(id) {
                // Its security groups may have changed: applied at once (nothing if not).
                segment.set_firewall(id, firewall).await.map_err(|e| BackendError::transient("attaching NICs", e))?;
            } else {
                let cfg = PortConfig { mac, ip: a.ip, hostname: Some(t.name.clone()), firewall };
                segment.add_port(id, PortKind::Guest(cfg), &socket).await.map_err(|e| BackendError::transient("attaching NICs", e))?;
            }
            nics.push(SegmentNicArg { id: format!("nic-subnet{i}"), socket, mac: a.mac.clone() });
        }
        Ok(nics)
    }

    /// Removes the ports of VM `vm` from every segment.
    pub(crate) async fn detach_ports(&self, vm: &str) {
        for segment in self.subnets.all() {
            for i in 0..MAX_NICS {
                let _ = segment.remove_port(port_id(vm, i)).await;
            }
        }
        for i in 0..MAX_NICS {
            let _ = tokio::fs::remove_file(self.port_socket(vm, i)).await;
        }
    }
}
