//! The REST declaration of [`crate::app::resources::load_balancers`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{LoadBalancer, LoadBalancerState};

use crate::api::resource::{Docs, Resource};

impl Resource for LoadBalancer {
    const STATES: &'static [&'static str] = LoadBalancerState::NAMES;
    const DOCS: Docs = Docs {
        create: "Create a load balancer; its address is in `status.address` at once.",
        patch: "Replace a load balancer's targets and/or port mappings.",
        remove: "Delete a load balancer: it stops listening and its address is freed.",
        create_errors: &[
            (409, "The name is taken, or the default pool is exhausted"),
            (429, "The tenant's external_ips quota (external IPs and load balancers) is reached"),
        ],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[],
    };
}
