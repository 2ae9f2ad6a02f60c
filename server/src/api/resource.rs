//! A kind served over REST, declared once: [`Resource`] is what the API
//! adds to an application [`Kind`] (its state names and what the OpenAPI
//! document says of it), and [`routes`] serves it at the collection its
//! [`vmaas_model::Descriptor`] names, with list, get, create, patch and
//! delete, each a call into [`crate::app`]. The OpenAPI operations are
//! generated from the same declaration ([`super::resource_doc`]).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use utoipa::ToSchema;
use vmaas_model::{CreateObject, Envelope};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::query::{ListQuery, page};
use super::shared::{enveloped, raw_json};
use crate::app::kind::{self, Kind};
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

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

/// A kind served by the shared handlers: an application [`Kind`] whose
/// spec and patch have schemas, plus its state names and documents.
pub(super) trait Resource: Kind<Spec: ToSchema, Patch: ToSchema + DeserializeOwned> + ToSchema {
    /// Every state's wire name, for `?state=`.
    const STATES: &'static [&'static str];

    /// What the OpenAPI document says of it.
    const DOCS: Docs;
}

/// The routes of `K`: `/{plural}` and `/{plural}/{id}`.
pub(super) fn routes<K: Resource>() -> Router<AppState> {
    let plural = K::KIND.descriptor().plural;
    Router::new()
        .route(&format!("/{plural}"), get(list::<K>).post(create::<K>))
        .route(&format!("/{plural}/{{id}}"), get(read::<K>).patch(patch::<K>).delete(remove::<K>))
}

async fn list<K: Resource>(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    Ok(page(simple::list::<K>(&s, &caller, q.request()?, K::STATES).await?))
}

async fn read<K: Resource>(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(raw_json(enveloped(&simple::read::<K>(&s, &caller, &id).await?)))
}

async fn create<K: Resource>(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<K::Spec>>>,
) -> Result<(StatusCode, Json<Envelope<K>>), ApiError> {
    let rec = kind::create::<K>(&s, &caller, req.object).await?;
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

async fn patch<K: Resource>(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<K::Patch>>,
) -> Result<Json<Envelope<K>>, ApiError> {
    let rec = kind::patch::<K>(&s, &caller, &id, req.object).await?;
    Ok(Json(Envelope { object: rec.to_api() }))
}

async fn remove<K: Resource>(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<K>>), ApiError> {
    let rec = kind::remove::<K>(&s, &caller, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
