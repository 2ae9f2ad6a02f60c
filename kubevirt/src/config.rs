//! How the backend reaches its cluster and lays objects out in it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::proxy::Proxy;
use vmaas_model::k8s::render::{FloatingIp, LocalnetError, check_bridge_mapping, check_vlan};

/// How the backend reaches its cluster and lays objects out in it.
#[derive(Debug, Clone)]
pub struct KubevirtConfig {
    /// The kubeconfig; none: in-cluster configuration (or `KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// Prefix of the tenants' namespaces.
    pub namespace_prefix: String,
    /// The namespace of the images' DataSources (the catalog).
    pub images_namespace: String,
    /// The DataSource a template's `default` image means.
    pub default_image: String,
    /// Storage class of the disks (the cluster's default when none).
    pub storage_class: Option<String>,
    /// How floating IPs (Services of type LoadBalancer) get addresses.
    pub floating_ip: FloatingIp,
    /// The size of the volume an imported image is written to (a quantity, e.g. `10Gi`).
    pub image_volume_size: String,
    /// CDI's upload proxy; none: images cannot be uploaded.
    pub upload_proxy: Option<Proxy>,
    /// KubeVirt's export proxy; none: disks cannot be exported.
    pub export_proxy: Option<Proxy>,
    /// Where exports are written before they are streamed.
    pub scratch_dir: PathBuf,
    /// How subnets are networks of the cluster.
    pub subnets: SubnetMode,
    /// The physical networks offered as network classes, by class name
    /// (with [`SubnetMode::Secondary`] only: a localnet is never a
    /// namespace's primary network).
    pub physical_networks: BTreeMap<String, PhysicalNetwork>,
}

/// A physical network of the nodes, offered to tenants as a network class:
/// the subnets of a virtual network of that class are OVN-K localnet
/// CUDNs on it, and their NICs are bridged onto it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalNetwork {
    /// The nodes' bridge mapping (OVN-K's `physicalNetworkName`).
    pub bridge_mapping: String,
    /// The access VLAN its subnets are tagged with, if any.
    pub vlan: Option<u16>,
}

impl PhysicalNetwork {
    /// The physical network of bridge mapping `bridge_mapping`, tagged
    /// with `vlan` if given, once both are ones OVN-K takes.
    pub fn new(bridge_mapping: &str, vlan: Option<u16>) -> Result<Self, LocalnetError> {
        check_bridge_mapping(bridge_mapping)?;
        vlan.map(check_vlan).transpose()?;
        Ok(Self { bridge_mapping: bridge_mapping.to_owned(), vlan })
    }
}

/// How subnets are OVN-Kubernetes networks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SubnetMode {
    /// Each subnet is its own namespace's primary layer-2 UDN: OVN-K's
    /// IPAM gives the fixed addresses, NetworkPolicies apply; a VM is on
    /// one subnet.
    #[default]
    PrimaryUdn,
    /// Each subnet is a secondary layer-2 CUDN over its tenant's
    /// namespace: a VM is on the pod network (its exposure and egress)
    /// and on any number of subnets, one bridged NIC each, addresses from
    /// the server's IPAM told by cloud-init; MultiNetworkPolicies apply.
    Secondary,
}
