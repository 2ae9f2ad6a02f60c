//! `vmaas external-ip|load-balancer`: addresses a tenant's VMs answer on
//! from outside their networks.

use clap::Subcommand;
use vmaas_client::Client;
use vmaas_model::external_ip::ExternalIpAttachmentPatchSpec;
use vmaas_model::load_balancer::{LbProtocol, LoadBalancerPatchSpec};
use vmaas_model::{
    CreateObject, ExternalIp, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpPool, ExternalIpSpec, LoadBalancer,
    LoadBalancerSpec, PatchExternalIpAttachment, PatchLoadBalancer, PortMapping,
};

use crate::net::{named, one, page};
use crate::output::Format;

const IPS: &str = "/external_ips";
const ATTACHMENTS: &str = "/external_ip_attachments";
const POOLS: &str = "/external_ip_pools";
const BALANCERS: &str = "/load_balancers";

/// `vmaas external-ip …`.
#[derive(Subcommand, Debug)]
pub enum ExternalIpCmd {
    /// Allocate an address from a pool.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// The pool (default: the default pool).
        #[arg(long, default_value = "")]
        pool: String,
    },
    /// Attach it to a VM, or move it to another one (the traffic follows).
    Attach {
        /// The external IP, by name or id.
        external_ip: String,
        /// The VM, by name or id.
        #[arg(long)]
        vm: String,
    },
    /// Detach it from its VM.
    Detach {
        /// The external IP, by name or id.
        external_ip: String,
    },
    /// List your external IPs.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        external_ip: String,
    },
    /// Release one (refused while attached).
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        external_ip: String,
    },
    /// List the pools and what is left in each.
    Pools,
}

/// `vmaas load-balancer …`.
#[derive(Subcommand, Debug)]
pub enum LoadBalancerCmd {
    /// Create a load balancer over VMs of one subnet.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// The subnet its targets are on, by name or id.
        #[arg(long)]
        subnet: String,
        /// A target VM, by name or id; repeat.
        #[arg(long = "target")]
        targets: Vec<String>,
        /// A port: [tcp:|udp:]EXTERNAL[:INTERNAL]; repeat.
        #[arg(long = "port", value_parser = parse_mapping, required = true)]
        ports: Vec<PortMapping>,
    },
    /// Replace its targets.
    SetTargets {
        /// Name or id.
        load_balancer: String,
        /// A target VM, by name or id; repeat (none: no targets).
        #[arg(long = "target")]
        targets: Vec<String>,
    },
    /// List your load balancers.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        load_balancer: String,
    },
    /// Delete one.
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        load_balancer: String,
    },
}

/// `80`, `tcp:80:8080`, `udp:53` into a mapping.
pub fn parse_mapping(s: &str) -> Result<PortMapping, String> {
    let (protocol, rest) = match s.split_once(':') {
        Some(("tcp", r)) => (LbProtocol::Tcp, r),
        Some(("udp", r)) => (LbProtocol::Udp, r),
        _ => (LbProtocol::Tcp, s),
    };
    let port = |p: &str| p.parse::<i32>().map_err(|_| format!("{p:?} is not a port"));
    let (external_port, internal_port) = match rest.split_once(':') {
        Some((e, i)) => (port(e)?, port(i)?),
        None => (port(rest)?, port(rest)?),
    };
    Ok(PortMapping { protocol, external_port, internal_port })
}

const IP_HEADER: [&str; 5] = ["NAME", "STATE", "ADDRESS", "ATTACHED", "ID"];

fn ip_row(i: &ExternalIp) -> Vec<String> {
    let state = i.status.state.as_str().trim_start_matches("EXTERNAL_IP_STATE_").to_owned();
    vec![i.metadata.name.clone(), state, i.status.address.clone(), i.status.attached.to_string(), i.id.clone()]
}

const ATTACHMENT_HEADER: [&str; 5] = ["NAME", "STATE", "ADDRESS", "VM", "ID"];

fn attachment_row(a: &ExternalIpAttachment) -> Vec<String> {
    let state = a.status.state.as_str().trim_start_matches("EXTERNAL_IP_ATTACHMENT_STATE_").to_owned();
    let vm = a.spec.compute_instance.clone().unwrap_or_default();
    vec![a.metadata.name.clone(), state, a.status.external_ip_address.clone(), vm, a.id.clone()]
}

const POOL_HEADER: [&str; 2] = ["NAME", "AVAILABLE"];

fn pool_row(p: &ExternalIpPool) -> Vec<String> {
    vec![p.metadata.name.clone(), p.status.available.to_string()]
}

const LB_HEADER: [&str; 6] = ["NAME", "STATE", "ADDRESS", "PORTS", "HEALTHY", "ID"];

fn lb_row(l: &LoadBalancer) -> Vec<String> {
    let state = l.status.state.as_str().trim_start_matches("LOAD_BALANCER_STATE_").to_owned();
    let ports: Vec<String> = l.spec.port_mappings.iter().map(|m| format!("{}:{}", m.external_port, m.internal_port)).collect();
    let healthy = format!("{}/{}", l.status.healthy_targets.len(), l.spec.targets.len());
    vec![l.metadata.name.clone(), state, l.status.address.clone(), ports.join(","), healthy, l.id.clone()]
}

/// The attachment holding external IP `id`, if any.
async fn attachment_of(client: &Client, id: &str) -> anyhow::Result<Option<ExternalIpAttachment>> {
    let all = client.list_objects::<ExternalIpAttachment>(ATTACHMENTS).await?;
    Ok(all.items.into_iter().find(|a| a.spec.external_ip == id))
}

/// Attaches external IP `ip` to `vm`: a new attachment named after the
/// address, or the existing one moved.
async fn attach(client: &Client, ip: &ExternalIp, vm: String) -> anyhow::Result<ExternalIpAttachment> {
    Ok(match attachment_of(client, &ip.id).await? {
        Some(a) => {
            let patch =
                PatchExternalIpAttachment { spec: ExternalIpAttachmentPatchSpec { compute_instance: Some(vm) }, ..Default::default() };
            client.patch_object(ATTACHMENTS, &a.id, &patch).await?
        }
        None => {
            let spec = ExternalIpAttachmentSpec { external_ip: ip.id.clone(), compute_instance: Some(vm), ..Default::default() };
            let req = CreateObject { type_url: None, id: None, metadata: named(ip.metadata.name.clone()), spec, status: None };
            client.create_object(ATTACHMENTS, &req).await?
        }
    })
}

/// Runs a `vmaas external-ip` command.
pub async fn external_ip(client: &Client, cmd: ExternalIpCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        ExternalIpCmd::Create { name, pool } => {
            let req = CreateObject { type_url: None, id: None, metadata: named(name), spec: ExternalIpSpec { pool }, status: None };
            let i: ExternalIp = client.create_object(IPS, &req).await?;
            one(format, &i, ip_row(&i), &IP_HEADER)
        }
        ExternalIpCmd::Attach { external_ip, vm } => {
            let ip: ExternalIp = client.find_object(IPS, &external_ip).await?;
            let a = attach(client, &ip, vm).await?;
            one(format, &a, attachment_row(&a), &ATTACHMENT_HEADER)
        }
        ExternalIpCmd::Detach { external_ip } => {
            let ip: ExternalIp = client.find_object(IPS, &external_ip).await?;
            let a = attachment_of(client, &ip.id).await?.ok_or_else(|| anyhow::anyhow!("external IP {external_ip:?} is not attached"))?;
            let a: ExternalIpAttachment = client.delete_object(ATTACHMENTS, &a.id).await?;
            one(format, &a, attachment_row(&a), &ATTACHMENT_HEADER)
        }
        ExternalIpCmd::List(l) => {
            page(format, &client.list_objects_where::<ExternalIp>(IPS, l.filter()?.as_deref()).await?, ip_row, &IP_HEADER)
        }
        ExternalIpCmd::Get { external_ip } => {
            let i: ExternalIp = client.find_object(IPS, &external_ip).await?;
            one(format, &i, ip_row(&i), &IP_HEADER)
        }
        ExternalIpCmd::Delete { external_ip } => {
            let i: ExternalIp = client.find_object(IPS, &external_ip).await?;
            let i: ExternalIp = client.delete_object(IPS, &i.id).await?;
            one(format, &i, ip_row(&i), &IP_HEADER)
        }
        ExternalIpCmd::Pools => page(format, &client.list_objects::<ExternalIpPool>(POOLS).await?, pool_row, &POOL_HEADER),
    }
}

/// Runs a `vmaas load-balancer` command.
pub async fn load_balancer(client: &Client, cmd: LoadBalancerCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        LoadBalancerCmd::Create { name, subnet, targets, ports } => {
            let spec = LoadBalancerSpec { subnet, targets, port_mappings: ports };
            let req = CreateObject { type_url: None, id: None, metadata: named(name), spec, status: None };
            let l: LoadBalancer = client.create_object(BALANCERS, &req).await?;
            one(format, &l, lb_row(&l), &LB_HEADER)
        }
        LoadBalancerCmd::SetTargets { load_balancer, targets } => {
            let l: LoadBalancer = client.find_object(BALANCERS, &load_balancer).await?;
            let patch =
                PatchLoadBalancer { spec: LoadBalancerPatchSpec { targets: Some(targets), port_mappings: None }, ..Default::default() };
            let l: LoadBalancer = client.patch_object(BALANCERS, &l.id, &patch).await?;
            one(format, &l, lb_row(&l), &LB_HEADER)
        }
        LoadBalancerCmd::List(l) => {
            page(format, &client.list_objects_where::<LoadBalancer>(BALANCERS, l.filter()?.as_deref()).await?, lb_row, &LB_HEADER)
        }
        LoadBalancerCmd::Get { load_balancer } => {
            let l: LoadBalancer = client.find_object(BALANCERS, &load_balancer).await?;
            one(format, &l, lb_row(&l), &LB_HEADER)
        }
        LoadBalancerCmd::Delete { load_balancer } => {
            let l: LoadBalancer = client.find_object(BALANCERS, &load_balancer).await?;
            let l: LoadBalancer = client.delete_object(BALANCERS, &l.id).await?;
            one(format, &l, lb_row(&l), &LB_HEADER)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_parse_from_their_short_form() {
        let m = parse_mapping("80").unwrap();
        assert_eq!((m.protocol, m.external_port, m.internal_port), (LbProtocol::Tcp, 80, 80));
        let m = parse_mapping("udp:53:5353").unwrap();
        assert_eq!((m.protocol, m.external_port, m.internal_port), (LbProtocol::Udp, 53, 5353));
        assert_eq!(parse_mapping("tcp:8080:80").unwrap().internal_port, 80);
        assert!(parse_mapping("tcp:http").unwrap_err().contains("\"http\" is not a port"));
    }
}
