//! The kinds served by the shared handlers ([`resource::Resource`]): each
//! one's routes and OpenAPI operations come from its declaration.

use super::resource::{self, Resource};
use super::resource_doc;
use crate::state::AppState;
use vmaas_model::{ExternalIp, ExternalIpAttachment, LoadBalancer, SecurityGroup, Subnet, VirtualNetwork, Volume, VolumeAttachment};

/// Calls `$each::<K>` for every kind served by the shared handlers.
macro_rules! each_resource {
    ($each:ident($($arg:expr),*)) => {
        $each::<VirtualNetwork>($($arg),*);
        $each::<Subnet>($($arg),*);
        $each::<SecurityGroup>($($arg),*);
        $each::<ExternalIp>($($arg),*);
        $each::<ExternalIpAttachment>($($arg),*);
        $each::<LoadBalancer>($($arg),*);
        $each::<Volume>($($arg),*);
        $each::<VolumeAttachment>($($arg),*);
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
