//! What every kind served by the shared operations has in common: the
//! list and its state filter, reading one, relabelling one, deleting one
//! that nothing uses, and finding one a spec names.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::Utc;
use serde::Deserialize;
use tracing::info;
use vmaas_model::{MetadataInput, Object, ObjectKind, ValidationErrors, VirtualNetwork, reference};

use super::listing::{ListRequest, Listed, States};
use super::scope::scope;
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::state::AppState;
use crate::store::record::Record;
use crate::store::{Filter, NetworkRecord, Row, Scope, StoreError};

/// The state named `text` among `states` (full wire names), by its full
/// name or its last word.
fn parse_state(text: &str, states: &[&'static str]) -> Result<&'static str, ApiError> {
    let up = text.to_ascii_uppercase();
    states.iter().copied().find(|st| *st == up || st.ends_with(&format!("_STATE_{up}"))).ok_or_else(|| {
        let words: Vec<&str> = states.iter().map(|s| s.split("_STATE_").nth(1).unwrap_or(s)).collect();
        ApiError::field("state", format!("unknown state {text:?}: expected one of {}", words.join(", ")))
    })
}

/// A page of the caller's objects of kind `K` (`states`: the kind's state names).
pub(crate) async fn list<K: Object>(s: &AppState, caller: &Caller, req: ListRequest, states: &[&'static str]) -> Result<Listed, ApiError> {
    let state = req.state.as_deref().map(|t| parse_state(t, states)).transpose()?.map(str::to_owned);
    let (scope, name) = (scope(caller), req.name.clone());
    // A kind may derive its stored state from its spec: evaluated on each.
    req.run(States::Renamed, |r| async move {
        let filter = Filter { name, state, narrow: r.narrow, offset: r.offset, limit: r.limit };
        Ok(s.store.list_json(K::KIND, &scope, &filter).await?)
    })
    .await
}

/// One of the caller's objects of kind `K`, as JSON.
pub(crate) async fn read<K: Object>(s: &AppState, caller: &Caller, id: &str) -> Result<Arc<str>, ApiError> {
    Ok(s.store.get_json(K::KIND, id, &scope(caller)).await?)
}

/// Starts deleting one of the caller's objects of kind `K`, unless
/// something uses it (409 naming the users).
pub(crate) async fn remove<K: Object>(s: &AppState, caller: &Caller, id: &str) -> Result<Record<K>, ApiError> {
    let row = s.store.get(K::KIND, id, &scope(caller)).await?;
    s.store.ensure_unused(&row).await?;
    let rec = s.store.mark_record_deleted::<K>(id, &scope(caller), Utc::now()).await?;
    s.queue.enqueue(K::KIND, id);
    info!(id = %id, name = %rec.name, kind = K::KIND.as_str(), "deletion requested");
    Ok(rec)
}

/// A 409 naming the VMs that use the `what` `name` (its id `target`), if
/// any do; `instead` says what to do.
pub(crate) async fn unused_by_vms(s: &AppState, target: &str, what: &str, name: &str, instead: &str) -> Result<(), ApiError> {
    let users = s.store.linked_to(ObjectKind::VirtualMachine, target).await?;
    if users.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = users.iter().take(5).map(|v| format!("{:?} ({})", v.name, v.tenant)).collect();
    let more = if users.len() > 5 { format!(" and {} more", users.len() - 5) } else { String::new() };
    let message = format!("{what} {name:?} is used by virtual machines {}{more}: {instead}", names.join(", "));
    Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message))
}

/// A change of an object whose spec is fixed at create: its labels and
/// annotations; the spec may be sent back as it is, not changed.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Relabel {
    /// Accepted and ignored.
    #[serde(rename = "@type", default)]
    #[allow(dead_code)]
    type_url: Option<String>,
    /// Must be the id in the path, if sent.
    #[serde(default)]
    id: Option<String>,
    /// `labels` and `annotations` (each replaced whole when given), `version`.
    #[serde(default)]
    metadata: Option<MetadataInput>,
    /// Fields sent must equal the object's.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    spec: Option<serde_json::Value>,
    /// Accepted and ignored: the server's.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    #[allow(dead_code)]
    status: Option<serde_json::Value>,
}

impl Relabel {
    /// A relabel of the object `id` (when given): its new `metadata`, and
    /// the `spec` fields sent (each must equal the object's).
    pub(crate) fn new(id: Option<String>, metadata: Option<MetadataInput>, spec: serde_json::Map<String, serde_json::Value>) -> Self {
        let spec = (!spec.is_empty()).then_some(serde_json::Value::Object(spec));
        Self { type_url: None, id, metadata, spec, status: None }
    }
}

/// A body's `object.id`, when sent, must be `path`, the id in the path.
pub(crate) fn check_id(path: &str, sent: Option<&str>, errs: &mut ValidationErrors) {
    if let Some(other) = sent.filter(|other| *other != path) {
        errs.push("object.id", format!("must match the id in the path ({path:?}), got {other:?}"));
    }
}

/// [`check_id`] as an error of its own.
pub(crate) fn require_id(path: &str, sent: Option<&str>) -> Result<(), ApiError> {
    let mut errs = ValidationErrors::default();
    check_id(path, sent, &mut errs);
    errs.into_result(()).map_err(ApiError::invalid)
}

/// Replaces the labels and annotations of one of the caller's objects of
/// kind `K`; a spec field that differs from the object's is a 400 naming it.
pub(crate) async fn relabel<K: Object>(s: &AppState, caller: &Caller, id: &str, r: Relabel) -> Result<Record<K>, ApiError> {
    let mut current = s.store.get_record::<K>(id, &scope(caller)).await?;
    let mut errs = ValidationErrors::default();
    check_id(id, r.id.as_deref(), &mut errs);
    let now = serde_json::to_value(&current.spec).map_err(ApiError::internal)?;
    for (field, sent) in r.spec.as_ref().and_then(|v| v.as_object()).into_iter().flatten() {
        let held = now.get(field).unwrap_or(&serde_json::Value::Null);
        // A reference may come back typed or as the plain id it holds.
        let same_key = matches!((reference::key(held), reference::key(sent)), (Ok(Some(a)), Ok(Some(b))) if a == b);
        if held != sent && !same_key {
            errs.push(format!("object.spec.{field}"), format!("is fixed at create: a {} keeps its spec", K::KIND.human()));
        }
    }
    let expected = r.metadata.as_ref().and_then(|m| m.version).unwrap_or(current.version);
    current.labels = current.labels.patched(r.metadata.as_ref(), &mut errs);
    if let Some(m) = &r.metadata {
        m.check_owned(&current.tenant, &current.creators, false, &mut errs);
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(errs));
    }
    let spec = current.spec.clone();
    let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
    info!(id = %id, kind = K::KIND.as_str(), version = updated.version, "labels and annotations replaced");
    Ok(updated)
}

/// `current` with the labels and annotations a change's `metadata` gives
/// (each replaced whole when given), or a 400 naming the bad ones.
pub(crate) fn relabelled<K: Object>(mut current: Record<K>, metadata: Option<&MetadataInput>) -> Result<Record<K>, ApiError> {
    let mut errs = ValidationErrors::default();
    current.labels = current.labels.patched(metadata, &mut errs);
    if let Some(m) = metadata {
        m.check_owned(&current.tenant, &current.creators, false, &mut errs);
    }
    if errs.is_empty() { Ok(current) } else { Err(ApiError::invalid(errs)) }
}

/// What every change of a spec starts with: the caller's object `id` of
/// kind `K`, and the version the change is based on (`metadata.version`,
/// else the current one).
pub(crate) async fn changing<K: Object>(
    s: &AppState,
    caller: &Caller,
    id: &str,
    metadata: Option<&MetadataInput>,
) -> Result<(Record<K>, i64), ApiError> {
    let current = s.store.get_record::<K>(id, &scope(caller)).await?;
    let expected = metadata.and_then(|m| m.version).unwrap_or(current.version);
    Ok((current, expected))
}

/// The caller's object of kind `K` named `reference` (an id, else a name).
pub(crate) async fn find<K: Object>(s: &AppState, scope: &Scope, reference: &str) -> Result<Option<Record<K>>, ApiError> {
    Ok(s.store.find_record::<K>(reference, scope).await?)
}

/// The caller's object of `kind` named `reference` (an id, else a name),
/// as a row (for kinds that are not [`Record`]s, such as VMs), else a 400
/// naming `field`.
pub(crate) async fn row(s: &AppState, scope: &Scope, kind: ObjectKind, reference: &str, field: &str) -> Result<Row, ApiError> {
    let reference = reference.trim();
    match by_id_or_name(s, scope, kind, reference).await?.into_iter().next() {
        Some(r) if r.deleted_at.is_some() => Err(ApiError::field(field, format!("{} {:?} is being deleted", kind.human(), r.name))),
        Some(r) => Ok(r),
        None => Err(ApiError::field(field, format!("you have no {} {reference:?}", kind.human()))),
    }
}

/// The rows of `kind` in `scope` that `reference` names: the one of that
/// id, else every one of that name (none, one, or several an
/// administrator sees in different tenants).
pub(crate) async fn by_id_or_name(s: &AppState, scope: &Scope, kind: ObjectKind, reference: &str) -> Result<Vec<Row>, ApiError> {
    match s.store.get(kind, reference, scope).await {
        Ok(r) => Ok(vec![r]),
        Err(StoreError::NotFound { .. }) => {
            let f = Filter { name: Some(reference.to_owned()), ..Filter::all() };
            Ok(s.store.list(kind, scope, &f).await?.0)
        }
        Err(e) => Err(e.into()),
    }
}

/// The caller's virtual network named by `reference` (id or name) in a
/// spec's `virtual_network`, else a 400 naming `object.spec.virtual_network`.
pub(crate) async fn network(s: &AppState, scope: &Scope, reference: &str) -> Result<NetworkRecord, ApiError> {
    let reference = reference.trim();
    find::<VirtualNetwork>(s, scope, reference).await?.ok_or_else(|| {
        ApiError::field(
            "object.spec.virtual_network",
            format!("you have no virtual network {reference:?}; list them with GET /api/fulfillment/v1/virtual_networks"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_named_fully_or_by_their_last_word() {
        let states = ["SUBNET_STATE_PENDING", "SUBNET_STATE_READY", "SUBNET_STATE_DELETE_FAILED"];
        assert_eq!(parse_state("ready", &states).unwrap(), "SUBNET_STATE_READY");
        assert_eq!(parse_state("SUBNET_STATE_PENDING", &states).unwrap(), "SUBNET_STATE_PENDING");
        assert_eq!(parse_state("delete_failed", &states).unwrap(), "SUBNET_STATE_DELETE_FAILED");
        let e = parse_state("failed", &states).unwrap_err();
        assert!(format!("{e:?}").contains("expected one of PENDING, READY, DELETE_FAILED"), "{e:?}");
    }
}
