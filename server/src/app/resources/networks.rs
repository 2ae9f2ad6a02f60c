//! `virtual_networks`: a tenant's private address spaces (OSAC's
//! `VirtualNetwork`). Each tenant sees and changes only its own.

use tracing::info;
use vmaas_model::{ObjectKind, ValidationErrors, VirtualNetwork};

use crate::app::kind::Kind;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::NetworkRecord;

impl Kind for VirtualNetwork {
    type Patch = simple::Relabel;

    fn check_spec(spec: &Self::Spec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn check(s: &AppState, _caller: &Caller, spec: &Self::Spec, errs: &mut ValidationErrors) -> Result<(), ApiError> {
        let class = &spec.network_class;
        let offered = s.backend.capabilities().network_classes;
        if !class.is_empty() && !offered.contains(class) {
            let what = match offered.is_empty() {
                true => "none".to_owned(),
                false => offered.join(", "),
            };
            let why =
                format!("{class:?} is not offered by the {} backend (it offers {what}): leave it empty for the default", s.backend.name());
            errs.push("object.spec.network_class", why);
        }
        Ok(())
    }

    async fn create(s: &AppState, _caller: &Caller, rec: NetworkRecord) -> Result<NetworkRecord, ApiError> {
        s.store.insert_record(&rec, Vec::new()).await?;
        s.queue.enqueue(ObjectKind::VirtualNetwork, &rec.id);
        info!(network = %rec.id, name = %rec.name, tenant = %rec.tenant, "virtual network created");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: simple::Relabel) -> Result<NetworkRecord, ApiError> {
        simple::relabel::<Self>(s, caller, id, p).await
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::network::reconcile::<Self>(r, id))
    }
}
