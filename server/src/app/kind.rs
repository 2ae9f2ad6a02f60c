//! A kind made by the shared operations: [`Kind`] is what a kind adds to
//! them (its own checks, what its create makes and what its change does),
//! and [`create`], [`patch`] and [`remove`] run them for any kind.
//!
//! The shared prologue of a create is here, once: the name (a DNS label,
//! from `metadata.name` or `id`), the labels, the spec's own checks and the
//! kind's checks that need the store, all reported together with the
//! fields they name; then the kind makes the object.

use std::future::Future;

use chrono::Utc;
use serde::de::DeserializeOwned;
use vmaas_model::{CreateObject, Labels, Object, ValidationErrors};

use super::scope::checked_name_by;
use super::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::record::Record;

/// A kind made by the shared operations: its store [`Object`] plus what
/// differs from kind to kind.
pub(crate) trait Kind: Object<Spec: DeserializeOwned + Send + Sync> + Sized + Send + Sync + 'static {
    /// The object of a PATCH.
    type Patch: DeserializeOwned + Send + 'static;

    /// The spec's own checks, naming fields under `object.spec`.
    fn check_spec(spec: &Self::Spec) -> Result<(), ValidationErrors>;

    /// Checks of a create's spec that need the store or the backend, once
    /// the spec passed its own; each problem goes into `errs`.
    fn check(
        _s: &AppState,
        _caller: &Caller,
        _spec: &Self::Spec,
        _errs: &mut ValidationErrors,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        async { Ok(()) }
    }

    /// Makes `new` (checked, named, labelled; its spec as the tenant sent
    /// it): resolves what it names, takes what it needs, stores it and
    /// wakes the reconciler. Returns the object as stored.
    fn create(s: &AppState, caller: &Caller, new: Record<Self>) -> impl Future<Output = Result<Record<Self>, ApiError>> + Send;

    /// Applies a PATCH to the caller's object `id`; returns it as stored.
    fn patch(s: &AppState, caller: &Caller, id: &str, p: Self::Patch) -> impl Future<Output = Result<Record<Self>, ApiError>> + Send;

    /// Starts deleting the caller's object `id`, unless something uses it.
    fn remove(s: &AppState, caller: &Caller, id: &str) -> impl Future<Output = Result<Record<Self>, ApiError>> + Send {
        simple::remove::<Self>(s, caller, id)
    }

    /// One reconcile of the object `id`: what the reconciler runs for the
    /// kind (the generic steps of [`crate::reconciler::network`] for a kind with a
    /// [`Simple`](crate::reconciler::network::Simple) driver, or its own).
    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a>;
}

/// Creates the `K` that `obj` asks for, once its name, labels and spec
/// pass every check (else a 400 naming every field that does not).
pub(crate) async fn create<K: Kind>(s: &AppState, caller: &Caller, obj: CreateObject<K::Spec>) -> Result<Record<K>, ApiError> {
    may_change::<K>(caller)?;
    let new = checked::<K>(s, caller, obj).await?;
    K::create(s, caller, new).await
}

/// Applies the change `p` to the caller's `K` `id`.
pub(crate) async fn patch<K: Kind>(s: &AppState, caller: &Caller, id: &str, p: K::Patch) -> Result<Record<K>, ApiError> {
    may_change::<K>(caller)?;
    K::patch(s, caller, id, p).await
}

/// Starts deleting the caller's `K` `id`.
pub(crate) async fn remove<K: Kind>(s: &AppState, caller: &Caller, id: &str) -> Result<Record<K>, ApiError> {
    may_change::<K>(caller)?;
    K::remove(s, caller, id).await
}

/// Refuses a tenant's change of a global kind (403): administrators
/// publish those, every tenant reads them.
fn may_change<K: Kind>(caller: &Caller) -> Result<(), ApiError> {
    match K::KIND.is_tenant_scoped() {
        true => Ok(()),
        false => caller.require_admin(&format!("change {}", K::KIND.descriptor().human_plural)),
    }
}

/// The record a create asks for, once its name, labels and spec pass
/// every check; else a 400 naming every field that does not.
async fn checked<K: Kind>(s: &AppState, caller: &Caller, obj: CreateObject<K::Spec>) -> Result<Record<K>, ApiError> {
    let mut errs = ValidationErrors::default();
    let name = checked_name_by(obj.requested_name(), K::KIND.descriptor().name_rule, &mut errs);
    let labels = Labels::from_input(obj.metadata.as_ref(), &mut errs);
    let tenant = if K::KIND.is_tenant_scoped() { caller.tenant.as_str() } else { "" };
    if let Some(m) = &obj.metadata {
        m.check_owned(tenant, std::slice::from_ref(&caller.subject), true, &mut errs);
    }
    match K::check_spec(&obj.spec) {
        Ok(()) => K::check(s, caller, &obj.spec, &mut errs).await?,
        Err(e) => errs.extend(e),
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let mut rec = Record::new(uuid::Uuid::new_v4().to_string(), tenant, &name, &caller.subject, obj.spec, Utc::now());
    rec.labels = labels;
    Ok(rec)
}
