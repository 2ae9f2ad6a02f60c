//! A VM's NICs on subnets: a port of each subnet's segment, served on a
//! TCP port on loopback that the VM's QEMU connects to (faster than a unix
//! socket; taken only from this user's processes, see
//! [`vmaas_switch::listen`]). Ports are added before QEMU starts, their
//! numbers kept in the VM's state file, and served again on the same
//! numbers for a guest adopted after a restart (QEMU reconnects); they are
//! removed with the VM. A QEMU started by an older server, on a unix socket
//! under `DATA_DIR/sw/`, keeps its socket until its next boot.

use std::path::PathBuf;
use std::sync::Arc;

use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::security_group::{CheckedRule, Protocol};
use vmaas_switch::fabric::PortKind;
use vmaas_switch::firewall::{Firewall, Protocol as SwitchProtocol, Rule};
use vmaas_switch::segment::Segment;
use vmaas_switch::{Mac, PortAddr, PortConfig, PortId};

use crate::argv::SegmentNicArg;
use crate::subnet::Subnets;
use crate::vm::Vm;

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
    nic_hash(vm, index).max(1)
}

/// A stable 32-bit hash (FNV-1a) of NIC `index` of VM `vm`.
pub(crate) fn nic_hash(vm: &str, index: usize) -> u32 {
    format!("{vm}/{index}").bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Why a VM's NICs could not be put on their subnets.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// More NICs than a VM may have.
    #[error("at most {MAX_NICS} NICs on subnets")]
    TooMany,
    /// A NIC's MAC is not one.
    #[error("{0:?} is not a MAC")]
    BadMac(String),
    /// A subnet's segment does not run yet: the VM waits for it.
    #[error("subnet {0} is not running yet")]
    NotRunning(String),
    /// The switch refused.
    #[error("{0}")]
    Switch(String),
    /// The port a running QEMU reconnects to is held by another process.
    #[error(
        "serving NIC {index} where its running QEMU reconnects: {why} (another process holds it; the NIC is cut off until it is freed or the VM restarts)"
    )]
    Held {
        /// The NIC.
        index: usize,
        /// What the switch said.
        why: String,
    },
    /// The VM's state file, or the sockets' directory, could not be written.
    #[error(transparent)]
    State(#[from] BackendError),
}

impl From<PortError> for BackendError {
    fn from(e: PortError) -> Self {
        match e {
            PortError::State(e) => e,
            e @ (PortError::TooMany | PortError::BadMac(_)) => BackendError::invalid("attaching NICs", e),
            e => BackendError::transient("attaching NICs", e),
        }
    }
}

/// The ports of VMs' NICs on the subnets' segments.
pub(crate) struct Ports {
    /// The subnets' running segments.
    subnets: Arc<Subnets>,
    /// The directory of older servers' port sockets.
    sw_dir: PathBuf,
}

impl Ports {
    /// Ports on `subnets`' segments; older sockets under `sw_dir`.
    pub(crate) fn new(subnets: Arc<Subnets>, sw_dir: PathBuf) -> Self {
        Self { subnets, sw_dir }
    }

    /// The unix socket of NIC `index` of VM `vm`, as older servers had it
    /// (short: unix socket paths are).
    fn port_socket(&self, vm: &str, index: usize) -> PathBuf {
        self.sw_dir.join(format!("{}-{index}.sock", &vm[..vm.len().min(13)]))
    }

    /// Makes sure every NIC of `t` on a subnet has its port (the numbers
    /// kept in `vm`'s state file); returns them as QEMU arguments. A subnet
    /// whose segment does not run yet is a transient error (the VM waits
    /// for it).
    pub(crate) async fn attach(&self, vm: &mut Vm, t: &VmTarget) -> Result<Vec<SegmentNicArg>, PortError> {
        if t.spec.attachments.len() > MAX_NICS {
            return Err(PortError::TooMany);
        }
        let mut nics = Vec::new();
        for (i, a) in t.spec.attachments.iter().enumerate() {
            let segment = self.subnets.segment(&a.subnet).ok_or_else(|| PortError::NotRunning(a.subnet.clone()))?;
            let mac = Mac::parse(&a.mac).ok_or_else(|| PortError::BadMac(a.mac.clone()))?;
            let id = port_id(&t.id, i);
            let firewall = a.firewall.as_ref().map(firewall);
            let addr = match segment.port_addr(id) {
                Some(addr) => {
                    // Its security groups may have changed: applied at once (nothing if not).
                    segment.set_firewall(id, firewall).await.map_err(|e| PortError::Switch(e.to_string()))?;
                    addr
                }
                None => {
                    let cfg = PortConfig { mac, ip: a.ip, hostname: Some(t.name.clone()), firewall };
                    self.add_port(vm, &segment, (id, i), cfg).await?
                }
            };
            nics.push(SegmentNicArg { id: format!("nic-subnet{i}"), addr, mac: a.mac.clone() });
        }
        let ports: Vec<u16> = nics.iter().filter_map(|n| if let PortAddr::Tcp(p) = n.addr { Some(p) } else { None }).collect();
        if ports.len() == nics.len() && vm.file.nic_ports != ports {
            vm.file.nic_ports = ports;
            vm.file.save(&vm.dir).await?;
        }
        Ok(nics)
    }

    /// Serves NIC `index` of `vm` as port `id` of `segment`: on the TCP
    /// port its state file names (a running QEMU reconnects there), or the
    /// unix socket a QEMU of an older server has, or a new TCP port.
    async fn add_port(&self, vm: &Vm, segment: &Segment, (id, index): (PortId, usize), cfg: PortConfig) -> Result<PortAddr, PortError> {
        let running = vm.process.is_some();
        let want = match vm.file.nic_ports.get(index) {
            Some(port) => PortAddr::Tcp(*port),
            None if running && vm.file.nic_ports.is_empty() => {
                let dir = &self.sw_dir;
                tokio::fs::create_dir_all(dir).await.map_err(|e| BackendError::transient(format!("creating {}", dir.display()), e))?;
                PortAddr::Unix(self.port_socket(&vm.file.id, index))
            }
            None => PortAddr::Tcp(0),
        };
        let kind = PortKind::Guest(cfg);
        match segment.add_port(id, kind.clone(), &want).await {
            Ok(addr) => Ok(addr),
            // No QEMU waits on that port: any other will do.
            Err(_) if !running && want != PortAddr::Tcp(0) => {
                segment.add_port(id, kind, &PortAddr::Tcp(0)).await.map_err(|e| PortError::Switch(e.to_string()))
            }
            Err(e) => Err(PortError::Held { index, why: e.to_string() }),
        }
    }

    /// Removes the ports of VM `vm` from every segment.
    pub(crate) async fn detach(&self, vm: &str) {
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
