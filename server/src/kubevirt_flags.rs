//! The kubevirt backend's command-line flags, and the configuration they
//! make ([`KubevirtArgs::config`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use vmaas_kubevirt::{FloatingIp, KubevirtConfig, PhysicalNetwork, SubnetMode};

use crate::clusters;
use crate::flags::FlagError;

/// Where the kubevirt backend finds its cluster and how it lays objects out.
#[derive(clap::Args, Debug, Clone)]
pub struct KubevirtArgs {
    /// kubevirt: the kubeconfig [default: in-cluster, else KUBECONFIG or ~/.kube/config].
    #[arg(long, env = "VMAAS_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// kubevirt: prefix of each tenant's namespace.
    #[arg(long, env = "VMAAS_NAMESPACE_PREFIX", default_value = "vmaas-")]
    pub namespace_prefix: String,
    /// kubevirt: namespace of the images' CDI DataSources (the catalog).
    #[arg(long, env = "VMAAS_IMAGES_NAMESPACE", default_value = "vmaas-images")]
    pub images_namespace: String,
    /// kubevirt: storage class of VM disks [default: the cluster's].
    #[arg(long, env = "VMAAS_STORAGE_CLASS")]
    pub storage_class: Option<String>,
    /// kubevirt: size of the volume each imported image is written to.
    #[arg(long, env = "VMAAS_IMAGE_VOLUME_SIZE", default_value = "10Gi")]
    pub image_volume_size: vmaas_model::Quantity,
    /// kubevirt: MetalLB address pool of floating IPs and load balancers [default: MetalLB's choice].
    #[arg(long, env = "VMAAS_METALLB_POOL")]
    pub metallb_pool: Option<String>,
    /// kubevirt: URL of CDI's upload proxy, for images uploaded through the API [default: no uploads].
    #[arg(long, env = "VMAAS_CDI_UPLOAD_PROXY")]
    pub cdi_upload_proxy: Option<String>,
    /// kubevirt: PEM file of the CA that signed the upload proxy's certificate [default: the system's roots].
    #[arg(long, env = "VMAAS_CDI_UPLOAD_PROXY_CA", requires = "cdi_upload_proxy")]
    pub cdi_upload_proxy_ca: Option<PathBuf>,
    /// kubevirt: URL of KubeVirt's export proxy (virt-exportproxy), for disk exports [default: no exports].
    #[arg(long, env = "VMAAS_KUBEVIRT_EXPORT_PROXY")]
    pub kubevirt_export_proxy: Option<String>,
    /// kubevirt: PEM file of the CA that signed the export proxy's certificate [default: the system's roots].
    #[arg(long, env = "VMAAS_KUBEVIRT_EXPORT_PROXY_CA", requires = "kubevirt_export_proxy")]
    pub kubevirt_export_proxy_ca: Option<PathBuf>,
    /// kubevirt: one of several clusters VMs are placed among, as NAME=KUBECONFIG, or NAME=host for
    /// this host's qemu backend (repeatable) [default: one cluster, of --kubeconfig].
    #[arg(long = "cluster", value_parser = clusters::parse_cluster, conflicts_with = "kubeconfig")]
    pub clusters: Vec<clusters::ClusterFlag>,
    /// kubevirt: a label of a --cluster, as NAME:KEY=VALUE (repeatable), for spec.placement.labels.
    #[arg(long = "cluster-label", value_parser = clusters::parse_cluster_label, requires = "clusters")]
    pub cluster_labels: Vec<clusters::ClusterLabel>,
    /// kubevirt: CDI's upload proxy of one --cluster, as NAME=URL (repeatable) [default: --cdi-upload-proxy].
    #[arg(long = "cluster-cdi-upload-proxy", value_parser = clusters::parse_cluster_value, requires = "clusters")]
    pub cluster_cdi_upload_proxies: Vec<clusters::ClusterValue>,
    /// kubevirt: the CA of one --cluster's upload proxy, as NAME=PEM_FILE (repeatable) [default: --cdi-upload-proxy-ca].
    #[arg(long = "cluster-cdi-upload-proxy-ca", value_parser = clusters::parse_cluster_value, requires = "clusters")]
    pub cluster_cdi_upload_proxy_cas: Vec<clusters::ClusterValue>,
    /// kubevirt: KubeVirt's export proxy of one --cluster, as NAME=URL (repeatable) [default: --kubevirt-export-proxy].
    #[arg(long = "cluster-kubevirt-export-proxy", value_parser = clusters::parse_cluster_value, requires = "clusters")]
    pub cluster_kubevirt_export_proxies: Vec<clusters::ClusterValue>,
    /// kubevirt: the CA of one --cluster's export proxy, as NAME=PEM_FILE (repeatable) [default: --kubevirt-export-proxy-ca].
    #[arg(long = "cluster-kubevirt-export-proxy-ca", value_parser = clusters::parse_cluster_value, requires = "clusters")]
    pub cluster_kubevirt_export_proxy_cas: Vec<clusters::ClusterValue>,
    /// kubevirt: how subnets are OVN-K networks (docs/backends.md).
    #[arg(long, env = "VMAAS_SUBNET_NETWORKS", value_enum, default_value = "primary-udn")]
    pub subnet_networks: SubnetNetworks,
    /// kubevirt: a physical network of the nodes offered as a network class, as
    /// CLASS=BRIDGE_MAPPING or CLASS=BRIDGE_MAPPING/VLAN (repeatable; needs --subnet-networks secondary).
    #[arg(long = "physical-network", value_parser = parse_physical_network)]
    pub physical_networks: Vec<PhysicalNetworkFlag>,
}

/// `--subnet-networks`: how subnets are OVN-K networks.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SubnetNetworks {
    /// Each subnet its namespace's primary layer-2 UDN; a VM on one subnet.
    PrimaryUdn,
    /// Each subnet a secondary layer-2 CUDN; a VM on the pod network and any number of subnets.
    Secondary,
}

/// One `--physical-network`: a class name and the physical network it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalNetworkFlag {
    /// The class a virtual network names (`spec.network_class`).
    pub class: String,
    /// The physical network.
    pub network: PhysicalNetwork,
}

const PHYSICAL_FORM: &str = "CLASS=BRIDGE_MAPPING or CLASS=BRIDGE_MAPPING/VLAN, e.g. lab=physnet-lab/120";

/// Parses `CLASS=BRIDGE_MAPPING[/VLAN]`: the class a DNS label, the bridge
/// mapping without `,` or `:` (OVN-K's own separators), the VLAN 1 to 4094.
pub fn parse_physical_network(text: &str) -> Result<PhysicalNetworkFlag, FlagError> {
    let form = || FlagError::Form { given: text.to_owned(), expected: PHYSICAL_FORM };
    let (class, rest) = text.split_once('=').ok_or_else(form)?;
    vmaas_model::validation::check_dns_label(class).map_err(|_| form())?;
    let (mapping, vlan) = match rest.split_once('/') {
        Some((m, v)) => (m, Some(v.parse::<u16>().map_err(|_| form())?)),
        None => (rest, None),
    };
    let network = PhysicalNetwork::new(mapping, vlan).map_err(|_| form())?;
    Ok(PhysicalNetworkFlag { class: class.to_owned(), network })
}

impl KubevirtArgs {
    /// Every per-cluster flag names a `--cluster`.
    pub fn check_cluster_values(&self) -> Result<(), FlagError> {
        let each = [
            ("--cluster-cdi-upload-proxy", &self.cluster_cdi_upload_proxies),
            ("--cluster-cdi-upload-proxy-ca", &self.cluster_cdi_upload_proxy_cas),
            ("--cluster-kubevirt-export-proxy", &self.cluster_kubevirt_export_proxies),
            ("--cluster-kubevirt-export-proxy-ca", &self.cluster_kubevirt_export_proxy_cas),
        ];
        each.into_iter().try_for_each(|(flag, values)| clusters::check_named(flag, values, &self.clusters))
    }

    /// The upload and export proxies of cluster `name` (none: the one
    /// cluster of `--kubeconfig`): its own flags', else the shared ones.
    fn proxies(&self, name: Option<&str>) -> [Option<vmaas_kubevirt::proxy::Proxy>; 2] {
        fn own<'a>(values: &'a [clusters::ClusterValue], name: Option<&str>) -> Option<&'a str> {
            name.and_then(|n| clusters::value_of(values, n))
        }
        let proxy = |url: Option<&str>, ca: Option<&str>, shared: (&Option<String>, &Option<PathBuf>)| {
            let url = url.map(str::to_owned).or_else(|| shared.0.clone())?;
            Some(vmaas_kubevirt::proxy::Proxy { url, ca: ca.map(PathBuf::from).or_else(|| shared.1.clone()) })
        };
        [
            proxy(
                own(&self.cluster_cdi_upload_proxies, name),
                own(&self.cluster_cdi_upload_proxy_cas, name),
                (&self.cdi_upload_proxy, &self.cdi_upload_proxy_ca),
            ),
            proxy(
                own(&self.cluster_kubevirt_export_proxies, name),
                own(&self.cluster_kubevirt_export_proxy_cas, name),
                (&self.kubevirt_export_proxy, &self.kubevirt_export_proxy_ca),
            ),
        ]
    }

    /// The backend's configuration on the cluster of `kubeconfig` (named
    /// `name` among several), with `default_image` for templates'
    /// `default` and exports' scratch space under `data_dir`. Physical
    /// networks need secondary subnets.
    pub fn config(
        &self,
        (name, kubeconfig): (Option<&str>, Option<PathBuf>),
        default_image: &str,
        data_dir: &Path,
    ) -> Result<KubevirtConfig, FlagError> {
        let subnets = match self.subnet_networks {
            SubnetNetworks::PrimaryUdn => SubnetMode::PrimaryUdn,
            SubnetNetworks::Secondary => SubnetMode::Secondary,
        };
        if subnets == SubnetMode::PrimaryUdn && !self.physical_networks.is_empty() {
            return Err(FlagError::Conflict(
                "--physical-network needs --subnet-networks secondary: a localnet is never a namespace's primary network",
            ));
        }
        let mut physical_networks = BTreeMap::new();
        for p in &self.physical_networks {
            if physical_networks.insert(p.class.clone(), p.network.clone()).is_some() {
                return Err(FlagError::Form { given: p.class.clone(), expected: "a class named by one --physical-network only" });
            }
        }
        let [upload_proxy, export_proxy] = self.proxies(name);
        Ok(KubevirtConfig {
            kubeconfig,
            namespace_prefix: self.namespace_prefix.clone(),
            images_namespace: self.images_namespace.clone(),
            default_image: default_image.to_owned(),
            storage_class: self.storage_class.clone(),
            image_volume_size: self.image_volume_size.to_string(),
            floating_ip: FloatingIp { provider: "metallb".into(), address_pool: self.metallb_pool.clone() },
            upload_proxy,
            export_proxy,
            scratch_dir: data_dir.join("exports"),
            subnets,
            physical_networks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_physical_network_is_a_class_a_bridge_mapping_and_maybe_a_vlan() {
        let p = parse_physical_network("lab=physnet-lab/120").expect("valid");
        assert_eq!((p.class.as_str(), p.network.bridge_mapping.as_str(), p.network.vlan), ("lab", "physnet-lab", Some(120)));
        assert_eq!(parse_physical_network("lab=physnet").expect("valid").network.vlan, None);
        for bad in ["lab", "Lab=physnet", "lab=", "lab=a:b", "lab=physnet/0", "lab=physnet/4095", "lab=physnet/x"] {
            assert!(parse_physical_network(bad).is_err(), "{bad}");
        }
    }
}
