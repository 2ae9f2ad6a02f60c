//! The API's JSON of a stored object, by kind: the store keeps a spec and
//! a status as JSON, and makes the object the API answers from them here.
//! Kinds declared with an [`Object`] need no code; VMs and templates have
//! their own (in the store).

use crate::kind::{Object, ObjectKind};
use crate::object::Metadata;

/// Makes the API's JSON of an object from its id, metadata, and its spec
/// and status as stored (JSON).
pub type ApiJson = fn(String, Metadata, &str, &str) -> serde_json::Result<String>;

/// The API's JSON of an object of kind `K` from its stored parts.
pub fn object_json<K: Object>(id: String, metadata: Metadata, spec: &str, status: &str) -> serde_json::Result<String> {
    let object = K::assemble(id, metadata, serde_json::from_str(spec)?, serde_json::from_str(status)?);
    serde_json::to_string(&object)
}

impl ObjectKind {
    /// How the API's JSON of one of its objects is made from the stored
    /// parts, for a kind with an [`Object`]; none for VMs and templates.
    pub fn api_json(self) -> Option<ApiJson> {
        use ObjectKind as K;
        Some(match self {
            K::Template | K::VirtualMachine => return None,
            K::VirtualNetwork => object_json::<crate::network::VirtualNetwork>,
            K::Subnet => object_json::<crate::subnet::Subnet>,
            K::SecurityGroup => object_json::<crate::security_group::SecurityGroup>,
            K::ExternalIp => object_json::<crate::external_ip::ExternalIp>,
            K::ExternalIpAttachment => object_json::<crate::external_ip::ExternalIpAttachment>,
            K::LoadBalancer => object_json::<crate::load_balancer::LoadBalancer>,
            K::NatGateway => object_json::<crate::nat_gateway::NatGateway>,
            K::Volume => object_json::<crate::volume::Volume>,
            K::VolumeAttachment => object_json::<crate::volume::VolumeAttachment>,
            K::Image => object_json::<crate::image::Image>,
            K::ComputeInstanceSnapshot => object_json::<crate::snapshot::ComputeInstanceSnapshot>,
            K::InstanceType => object_json::<crate::instance_type::InstanceType>,
            K::ComputeInstanceCatalogItem => object_json::<crate::catalog_item::ComputeInstanceCatalogItem>,
        })
    }
}
