//! The kinds served by the shared handlers ([`Resource`]), one file each,
//! and the one table that registers them: each kind's routes, OpenAPI
//! operations and reconcile come from its declaration. A new kind is a new
//! file here and its lines below (its `mod` and its `each_resource!` call) (`docs/architecture.md`, "Adding a kind").

use vmaas_model::ObjectKind;

use super::resource::{self, Resource};
use super::resource_doc;
use crate::reconciler::ReconcileFn;
use crate::state::AppState;

pub(in crate::api) mod external_ips;
mod instance_types;
mod ip_attachments;
mod load_balancers;
mod nat_gateways;
mod networks;
mod security_groups;
pub(in crate::api) mod snapshots;
mod subnets;
mod volume_attachments;
mod volumes;

/// Calls `$each::<K>` for every kind served by the shared handlers.
macro_rules! each_resource {
    ($each:ident($($arg:expr),*)) => {
        $each::<vmaas_model::VirtualNetwork>($($arg),*);
        $each::<vmaas_model::Subnet>($($arg),*);
        $each::<vmaas_model::SecurityGroup>($($arg),*);
        $each::<vmaas_model::ExternalIp>($($arg),*);
        $each::<vmaas_model::ExternalIpAttachment>($($arg),*);
        $each::<vmaas_model::LoadBalancer>($($arg),*);
        $each::<vmaas_model::NatGateway>($($arg),*);
        $each::<vmaas_model::Volume>($($arg),*);
        $each::<vmaas_model::VolumeAttachment>($($arg),*);
        $each::<vmaas_model::InstanceType>($($arg),*);
        $each::<vmaas_model::ComputeInstanceSnapshot>($($arg),*);
    };
}

/// Every such kind's routes.
pub(super) fn routes() -> axum::Router<AppState> {
    let mut router = axum::Router::new();
    fn add<K: Resource>(router: &mut axum::Router<AppState>) {
        *router = std::mem::take(router).merge(resource::routes::<K>());
    }
    each_resource!(add(&mut router));
    router
}

/// Every such kind's operations, added to `doc`.
pub(super) fn document(doc: &mut utoipa::openapi::OpenApi) {
    use resource_doc::add;
    each_resource!(add(doc));
}

/// How every such kind is reconciled, for the reconciler.
pub(crate) fn reconcilers() -> Vec<(ObjectKind, ReconcileFn)> {
    let mut all = Vec::new();
    fn add<K: Resource>(all: &mut Vec<(ObjectKind, ReconcileFn)>) {
        all.push((K::KIND, K::reconcile));
    }
    each_resource!(add(&mut all));
    all
}
