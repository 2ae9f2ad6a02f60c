//! `osac.public.v1`'s networking services, typed: virtual networks,
//! subnets and security groups, each a [`Served`] kind (its message and
//! the model's object converted field by field) served by [`served!`].

use prost_reflect::DescriptorPool;
use vmaas_model::{
    CreateObject, PatchSecurityGroup, SecurityGroup, SecurityGroupSpec, SecurityRule, Subnet, SubnetSpec, ValidationErrors, VirtualNetwork,
    VirtualNetworkSpec,
};

use vmaas_model::security_group::Protocol;

use super::kinds::{Served, relabel, served};
use super::mask::Mask;
use super::meta::{changed_metadata, key, metadata, metadata_input, reference, wire_enum};
use super::non_empty;
use crate::app::simple::Relabel;
use crate::grpc::pb::osac::public::v1 as pb;

/// A create's object: its name, labels and spec.
pub(super) fn create<S>(id: String, m: Option<pb::Metadata>, spec: S) -> CreateObject<S> {
    CreateObject { type_url: None, id: non_empty(id), metadata: m.map(|m| metadata_input(m, &Mask::none())), spec, status: None }
}

/// A network reference as the model holds it (its id, else its name).
pub(super) fn network_key(r: Option<&pb::VirtualNetworkLocalReference>) -> String {
    r.and_then(|r| key(&r.id, &r.name)).unwrap_or_default()
}

/// The network `key` names, as a typed reference.
pub(super) fn network_ref(key: &str) -> pb::VirtualNetworkLocalReference {
    let (id, name) = reference(key);
    pb::VirtualNetworkLocalReference { id, name }
}

impl Served for VirtualNetwork {
    type Pb = pb::VirtualNetwork;
    const MESSAGE: &'static str = "osac.public.v1.VirtualNetwork";

    fn to_pb(_: &DescriptorPool, n: Self) -> pb::VirtualNetwork {
        let (spec, st) = (n.spec, n.status);
        pb::VirtualNetwork {
            id: n.id,
            metadata: Some(metadata(n.metadata)),
            spec: Some(pb::VirtualNetworkSpec { network_class: spec.network_class, ipv4_cidr: spec.ipv4_cidr, ipv6_cidr: spec.ipv6_cidr }),
            status: Some(pb::VirtualNetworkStatus {
                state: wire_enum(st.state.as_str(), pb::VirtualNetworkState::from_str_name),
                message: st.message,
                users: st.users,
            }),
        }
    }

    fn id(n: &pb::VirtualNetwork) -> &str {
        &n.id
    }

    fn create_request(n: pb::VirtualNetwork) -> Result<CreateObject<VirtualNetworkSpec>, ValidationErrors> {
        Ok(create(n.id, n.metadata, spec_of_network(n.spec.unwrap_or_default())))
    }

    fn patch_request(n: pb::VirtualNetwork, mask: &Mask) -> Result<Relabel, ValidationErrors> {
        relabel(n.id, n.metadata, &spec_of_network(n.spec.unwrap_or_default()), mask)
    }
}

fn spec_of_network(s: pb::VirtualNetworkSpec) -> VirtualNetworkSpec {
    VirtualNetworkSpec { network_class: s.network_class, ipv4_cidr: s.ipv4_cidr, ipv6_cidr: s.ipv6_cidr }
}

impl Served for Subnet {
    type Pb = pb::Subnet;
    const MESSAGE: &'static str = "osac.public.v1.Subnet";

    fn to_pb(_: &DescriptorPool, n: Self) -> pb::Subnet {
        let (spec, st) = (n.spec, n.status);
        pb::Subnet {
            id: n.id,
            metadata: Some(metadata(n.metadata)),
            spec: Some(pb::SubnetSpec {
                virtual_network: Some(network_ref(&spec.virtual_network)),
                ipv4_cidr: spec.ipv4_cidr,
                ipv6_cidr: spec.ipv6_cidr,
            }),
            status: Some(pb::SubnetStatus {
                state: wire_enum(st.state.as_str(), pb::SubnetState::from_str_name),
                message: st.message,
                users: st.users,
            }),
        }
    }

    fn id(n: &pb::Subnet) -> &str {
        &n.id
    }

    fn create_request(n: pb::Subnet) -> Result<CreateObject<SubnetSpec>, ValidationErrors> {
        Ok(create(n.id, n.metadata, spec_of_subnet(n.spec.unwrap_or_default())))
    }

    fn patch_request(n: pb::Subnet, mask: &Mask) -> Result<Relabel, ValidationErrors> {
        relabel(n.id, n.metadata, &spec_of_subnet(n.spec.unwrap_or_default()), mask)
    }
}

fn spec_of_subnet(s: pb::SubnetSpec) -> SubnetSpec {
    SubnetSpec { virtual_network: network_key(s.virtual_network.as_ref()), ipv4_cidr: s.ipv4_cidr, ipv6_cidr: s.ipv6_cidr }
}

impl Served for SecurityGroup {
    type Pb = pb::SecurityGroup;
    const MESSAGE: &'static str = "osac.public.v1.SecurityGroup";

    fn to_pb(_: &DescriptorPool, g: Self) -> pb::SecurityGroup {
        let (spec, st) = (g.spec, g.status);
        pb::SecurityGroup {
            id: g.id,
            metadata: Some(metadata(g.metadata)),
            spec: Some(pb::SecurityGroupSpec {
                virtual_network: Some(network_ref(&spec.virtual_network)),
                ingress: spec.ingress.into_iter().map(rule_pb).collect(),
                egress: spec.egress.into_iter().map(rule_pb).collect(),
            }),
            status: Some(pb::SecurityGroupStatus {
                state: wire_enum(st.state.as_str(), pb::SecurityGroupState::from_str_name),
                message: st.message,
                users: st.users,
            }),
        }
    }

    fn id(g: &pb::SecurityGroup) -> &str {
        &g.id
    }

    fn create_request(g: pb::SecurityGroup) -> Result<CreateObject<SecurityGroupSpec>, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let s = g.spec.unwrap_or_default();
        let spec = SecurityGroupSpec {
            virtual_network: network_key(s.virtual_network.as_ref()),
            ingress: rules(s.ingress, "object.spec.ingress", &mut errs),
            egress: rules(s.egress, "object.spec.egress", &mut errs),
        };
        errs.into_result(create(g.id, g.metadata, spec))
    }

    fn patch_request(g: pb::SecurityGroup, mask: &Mask) -> Result<PatchSecurityGroup, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let s = g.spec.unwrap_or_default();
        if mask.wants("spec.virtual_network", s.virtual_network.is_some()) {
            errs.push("object.spec.virtual_network", "cannot be changed: a security group keeps its network");
        }
        let mut out = PatchSecurityGroup { id: non_empty(g.id), metadata: changed_metadata(g.metadata, mask), ..Default::default() };
        if mask.wants("spec.ingress", !s.ingress.is_empty()) {
            out.spec.ingress = Some(rules(s.ingress, "object.spec.ingress", &mut errs));
        }
        if mask.wants("spec.egress", !s.egress.is_empty()) {
            out.spec.egress = Some(rules(s.egress, "object.spec.egress", &mut errs));
        }
        errs.into_result(out)
    }
}

/// A direction's rules, each one's protocol required (named by its index).
fn rules(rules: Vec<pb::SecurityRule>, field: &str, errs: &mut ValidationErrors) -> Vec<SecurityRule> {
    let each = rules.into_iter().enumerate();
    each.filter_map(|(i, r)| {
        let protocol = match pb::Protocol::try_from(r.protocol).unwrap_or_default() {
            pb::Protocol::Tcp => Protocol::Tcp,
            pb::Protocol::Udp => Protocol::Udp,
            pb::Protocol::Icmp => Protocol::Icmp,
            pb::Protocol::All => Protocol::All,
            pb::Protocol::Unspecified => {
                errs.push(format!("{field}[{i}].protocol"), "is required: PROTOCOL_TCP, PROTOCOL_UDP, PROTOCOL_ICMP or PROTOCOL_ALL");
                return None;
            }
        };
        Some(SecurityRule { protocol, port_from: r.port_from, port_to: r.port_to, ipv4_cidr: r.ipv4_cidr, ipv6_cidr: r.ipv6_cidr })
    })
    .collect()
}

fn rule_pb(r: SecurityRule) -> pb::SecurityRule {
    let protocol = match r.protocol {
        Protocol::Tcp => pb::Protocol::Tcp,
        Protocol::Udp => pb::Protocol::Udp,
        Protocol::Icmp => pb::Protocol::Icmp,
        Protocol::All => pb::Protocol::All,
    };
    pb::SecurityRule {
        protocol: protocol.into(),
        port_from: r.port_from,
        port_to: r.port_to,
        ipv4_cidr: r.ipv4_cidr,
        ipv6_cidr: r.ipv6_cidr,
    }
}

served! {
    /// `osac.public.v1.VirtualNetworks`.
    VirtualNetworks: VirtualNetwork, pb::virtual_networks_server::VirtualNetworks, pb {
        VirtualNetworksListRequest, VirtualNetworksListResponse, VirtualNetworksGetRequest, VirtualNetworksGetResponse,
        VirtualNetworksCreateRequest, VirtualNetworksCreateResponse, VirtualNetworksUpdateRequest, VirtualNetworksUpdateResponse,
        VirtualNetworksDeleteRequest, VirtualNetworksDeleteResponse,
    }
}

served! {
    /// `osac.public.v1.Subnets`.
    Subnets: Subnet, pb::subnets_server::Subnets, pb {
        SubnetsListRequest, SubnetsListResponse, SubnetsGetRequest, SubnetsGetResponse, SubnetsCreateRequest, SubnetsCreateResponse,
        SubnetsUpdateRequest, SubnetsUpdateResponse, SubnetsDeleteRequest, SubnetsDeleteResponse,
    }
}

served! {
    /// `osac.public.v1.SecurityGroups`.
    SecurityGroups: SecurityGroup, pb::security_groups_server::SecurityGroups, pb {
        SecurityGroupsListRequest, SecurityGroupsListResponse, SecurityGroupsGetRequest, SecurityGroupsGetResponse,
        SecurityGroupsCreateRequest, SecurityGroupsCreateResponse, SecurityGroupsUpdateRequest, SecurityGroupsUpdateResponse,
        SecurityGroupsDeleteRequest, SecurityGroupsDeleteResponse,
    }
}
