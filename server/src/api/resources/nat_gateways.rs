//! The REST declaration of [`crate::app::resources::nat_gateways`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{NatGateway, NatGatewayState};

use crate::api::resource::{Docs, FIXED_SPEC, Resource};

impl Resource for NatGateway {
    const STATES: &'static [&'static str] = NatGatewayState::NAMES;
    const DOCS: Docs = Docs {
        create: "Give a virtual network a way out: its guests' outbound flows leave from the external IP named.\nPENDING until the backend routes the network through it.",
        patch: FIXED_SPEC,
        remove: "Delete a NAT gateway: the network's guests reach nothing outside it any more, and the external IP is free again.",
        create_errors: &[(409, "The name is taken, the network has a NAT gateway, or the external IP is in use")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[],
    };
}
