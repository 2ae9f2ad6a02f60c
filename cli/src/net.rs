//! `vmaas network|subnet|security-group`: a tenant's networks, their
//! subnets and their security groups, by name or id.

use clap::Subcommand;
use serde::Serialize;
use serde::de::DeserializeOwned;
use vmaas_client::Client;
use vmaas_model::security_group::{PatchSecurityGroup, Protocol, SecurityGroupPatchSpec};
use vmaas_model::vm::MetadataInput;
use vmaas_model::{
    CreateSecurityGroup, CreateSubnet, CreateVirtualNetwork, Page, SecurityGroup, SecurityGroupSpec, SecurityRule, Subnet, SubnetSpec,
    VirtualNetwork, VirtualNetworkSpec,
};

use crate::output::{self, Format};

const NETWORKS: &str = "/virtual_networks";
const SUBNETS: &str = "/subnets";
const GROUPS: &str = "/security_groups";

/// `vmaas network …`.
#[derive(Subcommand, Debug)]
pub enum NetworkCmd {
    /// Create a virtual network.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// Its IPv4 address space, e.g. 10.10.0.0/16.
        #[arg(long)]
        cidr: String,
        /// Its network class, one the server offers (e.g. a physical network on kubevirt) [default: the backend's own].
        #[arg(long)]
        class: Option<String>,
    },
    /// List your virtual networks.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        network: String,
    },
    /// Delete one (refused while it has subnets or security groups).
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        network: String,
    },
}

/// `vmaas subnet …`.
#[derive(Subcommand, Debug)]
pub enum SubnetCmd {
    /// Create a subnet of one of your networks.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// The network, by name or id.
        #[arg(long)]
        network: String,
        /// Its IPv4 range, inside the network's, e.g. 10.10.1.0/24.
        #[arg(long)]
        cidr: String,
    },
    /// List your subnets.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        subnet: String,
    },
    /// Delete one (refused while VMs are attached to it).
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        subnet: String,
    },
}

/// `vmaas security-group …`.
#[derive(Subcommand, Debug)]
pub enum SecurityGroupCmd {
    /// Create a security group for the NICs of one of your networks.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// The network, by name or id.
        #[arg(long)]
        network: String,
        /// An ingress rule: tcp:PORT[-PORT][@CIDR], udp:…, icmp[@CIDR] or all[@CIDR]; repeat.
        #[arg(long, value_parser = parse_rule)]
        ingress: Vec<SecurityRule>,
        /// An egress rule, as --ingress; repeat.
        #[arg(long, value_parser = parse_rule)]
        egress: Vec<SecurityRule>,
    },
    /// Replace a group's rules (NICs enforce them at once).
    SetRules {
        /// Name or id.
        group: String,
        /// The new ingress rules (none given: unchanged).
        #[arg(long, value_parser = parse_rule)]
        ingress: Vec<SecurityRule>,
        /// The new egress rules (none given: unchanged).
        #[arg(long, value_parser = parse_rule)]
        egress: Vec<SecurityRule>,
    },
    /// List your security groups.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        group: String,
    },
    /// Delete one (refused while NICs have it).
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        group: String,
    },
}

/// `tcp:80`, `tcp:8000-8080@10.0.1.0/24`, `icmp`, `all@10.0.0.0/8` into a rule.
pub fn parse_rule(s: &str) -> Result<SecurityRule, String> {
    let (what, cidr) = match s.split_once('@') {
        Some((w, c)) => (w, Some(c.to_owned())),
        None => (s, None),
    };
    let (proto, ports) = match what.split_once(':') {
        Some((p, ports)) => (p, Some(ports)),
        None => (what, None),
    };
    let protocol = match proto.to_ascii_lowercase().as_str() {
        "tcp" => Protocol::Tcp,
        "udp" => Protocol::Udp,
        "icmp" => Protocol::Icmp,
        "all" => Protocol::All,
        other => return Err(format!("{other:?}: expected tcp, udp, icmp or all")),
    };
    let port = |p: &str| p.parse::<i32>().map_err(|_| format!("{p:?} is not a port"));
    let (port_from, port_to) = match ports.map(|p| p.split_once('-').map_or((p, None), |(a, b)| (a, Some(b)))) {
        None => (None, None),
        Some((a, b)) => (Some(port(a)?), b.map(port).transpose()?),
    };
    Ok(SecurityRule { protocol, port_from, port_to, ipv4_cidr: cidr, ipv6_cidr: None })
}

pub(crate) fn named(name: String) -> Option<MetadataInput> {
    Some(MetadataInput { name: Some(name), ..Default::default() })
}

/// Prints one object, or its row.
pub(crate) fn one<T: Serialize>(format: Format, value: &T, row: Vec<String>, header: &[&str]) -> anyhow::Result<()> {
    if format == Format::Table { output::rows(header, vec![row]) } else { output::structured(format, value) }
}

/// Prints a page, or its rows.
pub(crate) fn page<T: Serialize + DeserializeOwned>(
    format: Format,
    p: &Page<T>,
    row: impl Fn(&T) -> Vec<String>,
    header: &[&str],
) -> anyhow::Result<()> {
    if format == Format::Table { output::rows(header, p.items.iter().map(row).collect()) } else { output::structured(format, p) }
}

const NET_HEADER: [&str; 4] = ["NAME", "STATE", "IPV4", "ID"];

fn net_row(n: &VirtualNetwork) -> Vec<String> {
    let state = n.status.state.as_str().trim_start_matches("VIRTUAL_NETWORK_STATE_").to_owned();
    vec![n.metadata.name.clone(), state, n.spec.ipv4_cidr.clone().unwrap_or_default(), n.id.clone()]
}

const SUBNET_HEADER: [&str; 5] = ["NAME", "STATE", "IPV4", "NETWORK", "ID"];

fn subnet_row(s: &Subnet) -> Vec<String> {
    let state = s.status.state.as_str().trim_start_matches("SUBNET_STATE_").to_owned();
    vec![s.metadata.name.clone(), state, s.spec.ipv4_cidr.clone().unwrap_or_default(), s.spec.virtual_network.clone(), s.id.clone()]
}

const GROUP_HEADER: [&str; 5] = ["NAME", "STATE", "INGRESS", "EGRESS", "ID"];

fn group_row(g: &SecurityGroup) -> Vec<String> {
    let state = g.status.state.as_str().trim_start_matches("SECURITY_GROUP_STATE_").to_owned();
    vec![g.metadata.name.clone(), state, g.spec.ingress.len().to_string(), g.spec.egress.len().to_string(), g.id.clone()]
}

/// Runs a `vmaas network` command.
pub async fn network(client: &Client, cmd: NetworkCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        NetworkCmd::Create { name, cidr, class } => {
            let spec = VirtualNetworkSpec { ipv4_cidr: Some(cidr), network_class: class.unwrap_or_default(), ..Default::default() };
            let req = CreateVirtualNetwork { type_url: None, id: None, metadata: named(name), spec, status: None };
            let n: VirtualNetwork = client.create_object(NETWORKS, &req).await?;
            one(format, &n, net_row(&n), &NET_HEADER)
        }
        NetworkCmd::List(l) => {
            page(format, &client.list_objects_where::<VirtualNetwork>(NETWORKS, l.filter()?.as_deref()).await?, net_row, &NET_HEADER)
        }
        NetworkCmd::Get { network } => {
            let n: VirtualNetwork = client.find_object(NETWORKS, &network).await?;
            one(format, &n, net_row(&n), &NET_HEADER)
        }
        NetworkCmd::Delete { network } => {
            let n: VirtualNetwork = client.find_object(NETWORKS, &network).await?;
            let n: VirtualNetwork = client.delete_object(NETWORKS, &n.id).await?;
            one(format, &n, net_row(&n), &NET_HEADER)
        }
    }
}

/// Runs a `vmaas subnet` command.
pub async fn subnet(client: &Client, cmd: SubnetCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        SubnetCmd::Create { name, network, cidr } => {
            let spec = SubnetSpec { virtual_network: network, ipv4_cidr: Some(cidr), ipv6_cidr: None };
            let req = CreateSubnet { type_url: None, id: None, metadata: named(name), spec, status: None };
            let s: Subnet = client.create_object(SUBNETS, &req).await?;
            one(format, &s, subnet_row(&s), &SUBNET_HEADER)
        }
        SubnetCmd::List(l) => {
            page(format, &client.list_objects_where::<Subnet>(SUBNETS, l.filter()?.as_deref()).await?, subnet_row, &SUBNET_HEADER)
        }
        SubnetCmd::Get { subnet } => {
            let s: Subnet = client.find_object(SUBNETS, &subnet).await?;
            one(format, &s, subnet_row(&s), &SUBNET_HEADER)
        }
        SubnetCmd::Delete { subnet } => {
            let s: Subnet = client.find_object(SUBNETS, &subnet).await?;
            let s: Subnet = client.delete_object(SUBNETS, &s.id).await?;
            one(format, &s, subnet_row(&s), &SUBNET_HEADER)
        }
    }
}

/// Runs a `vmaas security-group` command.
pub async fn security_group(client: &Client, cmd: SecurityGroupCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        SecurityGroupCmd::Create { name, network, ingress, egress } => {
            let spec = SecurityGroupSpec { virtual_network: network, ingress, egress };
            let req = CreateSecurityGroup { type_url: None, id: None, metadata: named(name), spec, status: None };
            let g: SecurityGroup = client.create_object(GROUPS, &req).await?;
            one(format, &g, group_row(&g), &GROUP_HEADER)
        }
        SecurityGroupCmd::SetRules { group, ingress, egress } => {
            let g: SecurityGroup = client.find_object(GROUPS, &group).await?;
            let spec = SecurityGroupPatchSpec {
                ingress: (!ingress.is_empty()).then_some(ingress),
                egress: (!egress.is_empty()).then_some(egress),
            };
            let g: SecurityGroup = client.patch_object(GROUPS, &g.id, &PatchSecurityGroup { spec, ..Default::default() }).await?;
            one(format, &g, group_row(&g), &GROUP_HEADER)
        }
        SecurityGroupCmd::List(l) => {
            page(format, &client.list_objects_where::<SecurityGroup>(GROUPS, l.filter()?.as_deref()).await?, group_row, &GROUP_HEADER)
        }
        SecurityGroupCmd::Get { group } => {
            let g: SecurityGroup = client.find_object(GROUPS, &group).await?;
            one(format, &g, group_row(&g), &GROUP_HEADER)
        }
        SecurityGroupCmd::Delete { group } => {
            let g: SecurityGroup = client.find_object(GROUPS, &group).await?;
            let g: SecurityGroup = client.delete_object(GROUPS, &g.id).await?;
            one(format, &g, group_row(&g), &GROUP_HEADER)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_from_their_short_form() {
        let r = parse_rule("tcp:8000-8080@10.0.1.0/24").unwrap();
        assert_eq!(
            (r.protocol, r.port_from, r.port_to, r.ipv4_cidr.as_deref()),
            (Protocol::Tcp, Some(8000), Some(8080), Some("10.0.1.0/24"))
        );
        let r = parse_rule("icmp").unwrap();
        assert_eq!((r.protocol, r.port_from, r.ipv4_cidr), (Protocol::Icmp, None, None));
        assert_eq!(parse_rule("udp:53").unwrap().port_from, Some(53));
        assert!(parse_rule("sctp:1").unwrap_err().contains("expected tcp, udp, icmp or all"));
        assert!(parse_rule("tcp:http").unwrap_err().contains("\"http\" is not a port"));
    }
}
