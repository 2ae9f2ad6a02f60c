//! A kind served over REST, declared once: [`Resource`] is what a kind
//! adds to the shared handlers (its own checks, what its create makes and
//! what its change does), and [`routes`] serves it at the collection its
//! [`vmaas_model::Descriptor`] names, with list, get, create, patch and
//! delete. The OpenAPI operations are generated from the same declaration
//! ([`super::resource_doc`]).
//!
//! The shared prologue of a create is here, once: the name (a DNS label,
//! from `metadata.name` or `id`), the labels, the spec's own checks and the
//! kind's checks that need the store, all reported together with the
//! fields they name; then the kind makes the object.

use std::future::Future;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;
use vmaas_model::{CreateObject, Envelope, Labels, Object, ValidationErrors};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::query::ListQuery;
use super::shared::checked_name_by;
use super::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::record::Record;

/// What the OpenAPI document says of a kind's operations beyond what its
/// descriptor gives.
pub(super) struct Docs {
    /// The create's summary (the first line) and description.
    pub create: &'static str,
    /// The patch's summary and description.
    pub patch: &'static str,
    /// The delete's summary and description.
    pub remove: &'static str,
    /// Answers of a create beyond 201 and 400, e.g. `(409, "The name is taken")`.
    pub create_errors: &'static [(u16, &'static str)],
    /// Answers of a patch beyond 200, 400 and 404.
    pub patch_errors: &'static [(u16, &'static str)],
    /// Answers of a delete beyond 202 and 404.
    pub remove_errors: &'static [(u16, &'static str)],
}

/// The patch of a kind whose spec is fixed at create: labels and annotations.
pub(super) const FIXED_SPEC: &str = "Change the labels and annotations (its spec is fixed at create).";

/// A kind served by the shared handlers: its store [`Object`] plus what
/// differs from kind to kind.
pub(super) trait Resource:
    Object<Spec: DeserializeOwned + ToSchema + Send + Sync> + ToSchema + Sized + Send + Sync + 'static
{
    /// The object of a PATCH.
    type Patch: DeserializeOwned + ToSchema + Send + 'static;

    /// Every state's wire name, for `?state=`.
    const STATES: &'static [&'static str];

    /// What the OpenAPI document says of it.
    const DOCS: Docs;

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

/// The routes of `K`: `/{plural}` and `/{plural}/{id}`.
pub(super) fn routes<K: Resource>() -> Router<AppState> {
    let plural = K::KIND.descriptor().plural;
    Router::new()
        .route(&format!("/{plural}"), get(list::<K>).post(create::<K>))
        .route(&format!("/{plural}/{{id}}"), get(read::<K>).patch(patch::<K>).delete(remove::<K>))
}

async fn list<K: Resource>(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    simple::list::<K>(&s, &caller, q, K::STATES).await
}

async fn read<K: Resource>(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<K>(&s, &caller, &id).await
}

async fn create<K: Resource>(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<K::Spec>>>,
) -> Result<(StatusCode, Json<Envelope<K>>), ApiError> {
    may_change::<K>(&caller)?;
    let new = checked::<K>(&s, &caller, req.object).await?;
    let rec = K::create(&s, &caller, new).await?;
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Refuses a tenant's change of a global kind (403): administrators
/// publish those, every tenant reads them.
fn may_change<K: Resource>(caller: &Caller) -> Result<(), ApiError> {
    match K::KIND.is_tenant_scoped() {
        true => Ok(()),
        false => caller.require_admin(&format!("change {}", K::KIND.descriptor().human_plural)),
    }
}

/// The record a create asks for, once its name, labels and spec pass
/// every check; else a 400 naming every field that does not.
async fn checked<K: Resource>(s: &AppState, caller: &Caller, obj: CreateObject<K::Spec>) -> Result<Record<K>, ApiError> {
    let mut errs = ValidationErrors::default();
    let name = checked_name_by(obj.requested_name(), K::KIND.descriptor().name_rule, &mut errs);
    let labels = Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Some(m) = &obj.metadata {
        let tenant = if K::KIND.is_tenant_scoped() { caller.tenant.as_str() } else { "" };
        m.check_owned(tenant, std::slice::from_ref(&caller.subject), true, &mut errs);
    }
    match K::check_spec(&obj.spec) {
        Ok(()) => K::check(s, caller, &obj.spec, &mut errs).await?,
        Err(e) => errs.extend(e),
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let tenant = if K::KIND.is_tenant_scoped() { caller.tenant.as_str() } else { "" };
    let mut rec = Record::new(uuid::Uuid::new_v4().to_string(), tenant, &name, &caller.subject, obj.spec, Utc::now());
    rec.labels = labels;
    Ok(rec)
}

async fn patch<K: Resource>(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<K::Patch>>,
) -> Result<Json<Envelope<K>>, ApiError> {
    may_change::<K>(&caller)?;
    let rec = K::patch(&s, &caller, &id, req.object).await?;
    Ok(Json(Envelope { object: rec.to_api() }))
}

async fn remove<K: Resource>(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<K>>), ApiError> {
    may_change::<K>(&caller)?;
    let rec = K::remove(&s, &caller, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
