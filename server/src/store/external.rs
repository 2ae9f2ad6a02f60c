//! External IPs, their attachments to VMs and load balancers in the store.
//! An attachment refers to its external IP and a load balancer to its
//! subnet, so neither can be deleted while used; VMs are not pinned by
//! them (a VM's deletion detaches it: its attachments fail, balancers skip it).

use vmaas_model::external_ip::{EXTERNAL_IP_ATTACHMENT_TYPE_URL, EXTERNAL_IP_TYPE_URL};
use vmaas_model::load_balancer::LOAD_BALANCER_TYPE_URL;
use vmaas_model::{
    ExternalIp, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpAttachmentStatus, ExternalIpSpec, ExternalIpStatus, LoadBalancer,
    LoadBalancerSpec, LoadBalancerStatus, Metadata, ObjectKind,
};

use super::record::{Kind, Record};

/// The external IP kind.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalIpKind;

impl Kind for ExternalIpKind {
    const KIND: ObjectKind = ObjectKind::ExternalIp;
    type Spec = ExternalIpSpec;
    type Status = ExternalIpStatus;
    type Api = ExternalIp;

    fn state(status: &ExternalIpStatus) -> &'static str {
        status.state.as_str()
    }

    fn api(id: String, metadata: Metadata, spec: ExternalIpSpec, status: ExternalIpStatus) -> ExternalIp {
        ExternalIp { type_url: EXTERNAL_IP_TYPE_URL.into(), id, metadata, spec, status }
    }
}

/// The external IP attachment kind.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachmentKind;

impl Kind for AttachmentKind {
    const KIND: ObjectKind = ObjectKind::ExternalIpAttachment;
    type Spec = ExternalIpAttachmentSpec;
    type Status = ExternalIpAttachmentStatus;
    type Api = ExternalIpAttachment;

    fn state(status: &ExternalIpAttachmentStatus) -> &'static str {
        status.state.as_str()
    }

    fn api(id: String, metadata: Metadata, spec: ExternalIpAttachmentSpec, status: ExternalIpAttachmentStatus) -> ExternalIpAttachment {
        ExternalIpAttachment { type_url: EXTERNAL_IP_ATTACHMENT_TYPE_URL.into(), id, metadata, spec, status }
    }
}

/// The load balancer kind.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadBalancerKind;

impl Kind for LoadBalancerKind {
    const KIND: ObjectKind = ObjectKind::LoadBalancer;
    type Spec = LoadBalancerSpec;
    type Status = LoadBalancerStatus;
    type Api = LoadBalancer;

    fn state(status: &LoadBalancerStatus) -> &'static str {
        status.state.as_str()
    }

    fn api(id: String, metadata: Metadata, spec: LoadBalancerSpec, status: LoadBalancerStatus) -> LoadBalancer {
        LoadBalancer { type_url: LOAD_BALANCER_TYPE_URL.into(), id, metadata, spec, status }
    }
}

/// A stored external IP.
pub type ExternalIpRecord = Record<ExternalIpKind>;
/// A stored attachment.
pub type AttachmentRecord = Record<AttachmentKind>;
/// A stored load balancer.
pub type LoadBalancerRecord = Record<LoadBalancerKind>;

/// The role of an attachment's reference to its external IP.
pub const ATTACHMENT_OF: &str = "external_ip";
/// The role of a load balancer's reference to its subnet.
pub const BALANCER_ON: &str = "subnet";
