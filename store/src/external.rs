//! External IPs, their attachments to VMs and load balancers in the store.
//! An attachment refers to its external IP and a load balancer to its
//! subnet, so neither can be deleted while used; VMs are not pinned by
//! them (a VM's deletion detaches it: its attachments fail, balancers skip it).

use vmaas_model::external_ip::{EXTERNAL_IP_ATTACHMENT_TYPE_URL, EXTERNAL_IP_TYPE_URL};
use vmaas_model::load_balancer::LOAD_BALANCER_TYPE_URL;
use vmaas_model::{
    ExternalIp, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpAttachmentStatus, ExternalIpSpec, ExternalIpStatus, LoadBalancer,
    LoadBalancerSpec, LoadBalancerStatus, ObjectKind,
};

use super::record::Record;

crate::record_kind! {
    /// The external IP kind.
    ExternalIpKind: ObjectKind::ExternalIp, ExternalIpSpec, ExternalIpStatus, ExternalIp, EXTERNAL_IP_TYPE_URL
}

crate::record_kind! {
    /// The external IP attachment kind.
    AttachmentKind: ObjectKind::ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpAttachmentStatus, ExternalIpAttachment,
        EXTERNAL_IP_ATTACHMENT_TYPE_URL
}

crate::record_kind! {
    /// The load balancer kind.
    LoadBalancerKind: ObjectKind::LoadBalancer, LoadBalancerSpec, LoadBalancerStatus, LoadBalancer, LOAD_BALANCER_TYPE_URL
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
