//! The kinds served by the shared handlers ([`Resource`]), one file each:
//! their REST declarations. Each kind's routes and OpenAPI operations come
//! from its declaration, over the table `crate::each_kind!` (the kinds'
//! operations are in `crate::app::resources`).

use super::resource::{self, Resource};
use super::resource_doc;
use crate::state::AppState;

pub(in crate::api) mod external_ips;
mod instance_types;
mod ip_attachments;
mod load_balancers;
mod nat_gateways;
mod networks;
mod security_groups;
mod snapshots;
mod subnets;
mod volume_attachments;
mod volumes;

/// Every such kind's routes.
pub(super) fn routes() -> axum::Router<AppState> {
    let mut router = axum::Router::new();
    fn add<K: Resource>(router: &mut axum::Router<AppState>) {
        *router = std::mem::take(router).merge(resource::routes::<K>());
    }
    crate::each_kind!(add(&mut router));
    router
}

/// Every such kind's operations, added to `doc`.
pub(super) fn document(doc: &mut utoipa::openapi::OpenApi) {
    use resource_doc::add;
    crate::each_kind!(add(doc));
}
