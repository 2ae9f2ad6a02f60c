//! `osac.public.v1`'s address services, typed: external IPs, their
//! attachments and NAT gateways, each a [`Served`] kind served by
//! [`served!`].

use prost_reflect::DescriptorPool;
use vmaas_model::external_ip::{ExternalIpAttachmentPatchSpec, PatchExternalIpAttachment};
use vmaas_model::{
    CreateObject, ExternalIp, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpSpec, NatGateway, NatGatewaySpec, ValidationErrors,
};

use super::kinds::{Served, relabel, served};
use super::mask::Mask;
use super::meta::{changed_metadata, key, metadata, reference, wire_enum};
use super::networking::{create, network_key, network_ref};
use super::non_empty;
use crate::app::simple::Relabel;
use crate::grpc::pb::osac::public::v1 as pb;
use pb::external_ip_attachment_spec::Target;

/// An external IP reference as the model holds it (its id, else its name).
fn ip_key(r: Option<&pb::ExternalIpLocalReference>) -> String {
    r.and_then(|r| key(&r.id, &r.name)).unwrap_or_default()
}

/// The external IP `key` names, as a typed reference.
fn ip_ref(key: &str) -> pb::ExternalIpLocalReference {
    let (id, name) = reference(key);
    pb::ExternalIpLocalReference { id, name }
}

impl Served for ExternalIp {
    type Pb = pb::ExternalIp;
    const MESSAGE: &'static str = "osac.public.v1.ExternalIP";

    fn to_pb(_: &DescriptorPool, ip: Self) -> pb::ExternalIp {
        let (spec, st) = (ip.spec, ip.status);
        let pool = (!spec.pool.is_empty()).then(|| pb::ExternalIpPoolReference { name: spec.pool, ..Default::default() });
        pb::ExternalIp {
            id: ip.id,
            metadata: Some(metadata(ip.metadata)),
            spec: Some(pb::ExternalIpSpec { pool }),
            status: Some(pb::ExternalIpStatus {
                state: wire_enum(st.state.as_str(), pb::ExternalIpState::from_str_name),
                message: st.message,
                address: st.address,
                pool: st.pool,
                attached: st.attached,
            }),
        }
    }

    fn id(ip: &pb::ExternalIp) -> &str {
        &ip.id
    }

    fn create_request(ip: pb::ExternalIp) -> Result<CreateObject<ExternalIpSpec>, ValidationErrors> {
        Ok(create(ip.id, ip.metadata, spec_of_ip(ip.spec.unwrap_or_default())))
    }

    fn patch_request(ip: pb::ExternalIp, mask: &Mask) -> Result<Relabel, ValidationErrors> {
        relabel(ip.id, ip.metadata, &spec_of_ip(ip.spec.unwrap_or_default()), mask)
    }
}

fn spec_of_ip(s: pb::ExternalIpSpec) -> ExternalIpSpec {
    ExternalIpSpec { pool: s.pool.and_then(|p| key(&p.id, &p.name)).unwrap_or_default() }
}

impl Served for ExternalIpAttachment {
    type Pb = pb::ExternalIpAttachment;
    const MESSAGE: &'static str = "osac.public.v1.ExternalIPAttachment";

    fn to_pb(_: &DescriptorPool, a: Self) -> pb::ExternalIpAttachment {
        let (spec, st) = (a.spec, a.status);
        let target = spec.compute_instance.map(|k| {
            let (id, name) = reference(&k);
            Target::ComputeInstance(pb::ComputeInstanceLocalReference { id, name })
        });
        pb::ExternalIpAttachment {
            id: a.id,
            metadata: Some(metadata(a.metadata)),
            spec: Some(pb::ExternalIpAttachmentSpec { external_ip: Some(ip_ref(&spec.external_ip)), target, target_endpoint: 0 }),
            status: Some(pb::ExternalIpAttachmentStatus {
                state: wire_enum(st.state.as_str(), pb::ExternalIpAttachmentState::from_str_name),
                external_ip_address: st.external_ip_address,
                message: st.message,
            }),
        }
    }

    fn id(a: &pb::ExternalIpAttachment) -> &str {
        &a.id
    }

    fn create_request(a: pb::ExternalIpAttachment) -> Result<CreateObject<ExternalIpAttachmentSpec>, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let s = a.spec.unwrap_or_default();
        endpoint(s.target_endpoint, &mut errs);
        let mut spec = ExternalIpAttachmentSpec { external_ip: ip_key(s.external_ip.as_ref()), ..Default::default() };
        match s.target {
            Some(Target::ComputeInstance(r)) => spec.compute_instance = key(&r.id, &r.name),
            Some(Target::Cluster(r)) => spec.cluster = key(&r.id, &r.name),
            Some(Target::BaremetalInstance(r)) => spec.baremetal_instance = key(&r.id, &r.name),
            None => {}
        }
        errs.into_result(create(a.id, a.metadata, spec))
    }

    fn patch_request(a: pb::ExternalIpAttachment, mask: &Mask) -> Result<PatchExternalIpAttachment, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let s = a.spec.unwrap_or_default();
        if mask.wants("spec.external_ip", s.external_ip.is_some()) {
            errs.push("object.spec.external_ip", "cannot be changed: an attachment keeps its external IP");
        }
        endpoint(s.target_endpoint, &mut errs);
        let vm = match s.target {
            Some(Target::ComputeInstance(r)) => key(&r.id, &r.name),
            Some(Target::Cluster(_) | Target::BaremetalInstance(_)) => {
                errs.push("object.spec.compute_instance", "is the only target offered: clusters and bare-metal instances are not served");
                None
            }
            None => None,
        };
        let spec = ExternalIpAttachmentPatchSpec { compute_instance: vm.filter(|_| mask.wants("spec.compute_instance", true)) };
        let out =
            PatchExternalIpAttachment { id: non_empty(a.id), metadata: changed_metadata(a.metadata, mask), spec, ..Default::default() };
        errs.into_result(out)
    }
}

/// An attachment's endpoint: only the default (the VM's own address) is served.
fn endpoint(e: i32, errs: &mut ValidationErrors) {
    if e != 0 {
        errs.push("object.spec.target_endpoint", "is not offered: an address reaches the whole VM");
    }
}

impl Served for NatGateway {
    type Pb = pb::NatGateway;
    const MESSAGE: &'static str = "osac.public.v1.NATGateway";

    fn to_pb(_: &DescriptorPool, g: Self) -> pb::NatGateway {
        let (spec, st) = (g.spec, g.status);
        pb::NatGateway {
            id: g.id,
            metadata: Some(metadata(g.metadata)),
            spec: Some(pb::NatGatewaySpec {
                virtual_network: Some(network_ref(&spec.virtual_network)),
                external_ip: Some(ip_ref(&spec.external_ip)),
            }),
            status: Some(pb::NatGatewayStatus {
                state: wire_enum(st.state.as_str(), pb::NatGatewayState::from_str_name),
                message: st.message,
                address: st.address,
            }),
        }
    }

    fn id(g: &pb::NatGateway) -> &str {
        &g.id
    }

    fn create_request(g: pb::NatGateway) -> Result<CreateObject<NatGatewaySpec>, ValidationErrors> {
        Ok(create(g.id, g.metadata, spec_of_gateway(g.spec.unwrap_or_default())))
    }

    fn patch_request(g: pb::NatGateway, mask: &Mask) -> Result<Relabel, ValidationErrors> {
        relabel(g.id, g.metadata, &spec_of_gateway(g.spec.unwrap_or_default()), mask)
    }
}

fn spec_of_gateway(s: pb::NatGatewaySpec) -> NatGatewaySpec {
    NatGatewaySpec { virtual_network: network_key(s.virtual_network.as_ref()), external_ip: ip_key(s.external_ip.as_ref()) }
}

served! {
    /// `osac.public.v1.ExternalIPs`.
    ExternalIps: ExternalIp, pb::external_i_ps_server::ExternalIPs, pb {
        ExternalIPsListRequest, ExternalIPsListResponse, ExternalIPsGetRequest, ExternalIPsGetResponse, ExternalIPsCreateRequest,
        ExternalIPsCreateResponse, ExternalIPsUpdateRequest, ExternalIPsUpdateResponse, ExternalIPsDeleteRequest, ExternalIPsDeleteResponse,
    }
}

served! {
    /// `osac.public.v1.ExternalIPAttachments`.
    ExternalIpAttachments: ExternalIpAttachment, pb::external_ip_attachments_server::ExternalIpAttachments, pb {
        ExternalIpAttachmentsListRequest, ExternalIpAttachmentsListResponse, ExternalIpAttachmentsGetRequest,
        ExternalIpAttachmentsGetResponse, ExternalIpAttachmentsCreateRequest, ExternalIpAttachmentsCreateResponse,
        ExternalIpAttachmentsUpdateRequest, ExternalIpAttachmentsUpdateResponse, ExternalIpAttachmentsDeleteRequest,
        ExternalIpAttachmentsDeleteResponse,
    }
}

served! {
    /// `osac.public.v1.NATGateways`.
    NatGateways: NatGateway, pb::nat_gateways_server::NatGateways, pb {
        NatGatewaysListRequest, NatGatewaysListResponse, NatGatewaysGetRequest, NatGatewaysGetResponse, NatGatewaysCreateRequest,
        NatGatewaysCreateResponse, NatGatewaysUpdateRequest, NatGatewaysUpdateResponse, NatGatewaysDeleteRequest, NatGatewaysDeleteResponse,
    }
}
