//! Templates: everyone lists and reads them; administrators publish,
//! replace, change (OSAC's `Update` with a field mask) and remove them.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use serde_json::{Map, Value};
use tracing::info;
use vmaas_model::{Envelope, Template, ValidationErrors, VirtualMachineTemplate};

use super::listing::{ListRequest, Listed, id_of};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Checks a published template, prefixing every field path with `object.`.
fn check(t: &VirtualMachineTemplate) -> Result<VirtualMachineTemplate, ApiError> {
    let wire = t.clone().published();
    Template::compile(wire.clone()).map_err(|errs| {
        let mut out = ValidationErrors::default();
        for e in errs.0 {
            out.push(format!("object.{}", e.field), e.reason);
        }
        ApiError::invalid(out)
    })?;
    Ok(wire)
}

/// A page of templates, each rendered by `view` (filtered and sorted in that view).
pub(crate) async fn list(s: &AppState, req: ListRequest, view: fn(Value) -> Value) -> Result<Listed, ApiError> {
    Ok(list_viewed(s, req, view).await?.0)
}

/// [`list`], and the page's templates themselves (each as the model has it).
pub(crate) async fn list_viewed(
    s: &AppState,
    req: ListRequest,
    view: fn(Value) -> Value,
) -> Result<(Listed, Vec<VirtualMachineTemplate>), ApiError> {
    let read = std::sync::Mutex::new(Vec::new());
    let seen = &read;
    let listed = req
        .run_unnarrowed(|r| async move {
            let (items, total) = s.store.list_templates(r.offset, r.limit).await?;
            let mut shown = Vec::with_capacity(items.len());
            for t in items.iter().map(|t| t.to_api()) {
                shown.push(Arc::from(view(serde_json::to_value(&t).map_err(ApiError::internal)?).to_string()));
                seen.lock().map_err(|_| ApiError::internal("a template list was poisoned"))?.push(t);
            }
            Ok((shown, total))
        })
        .await?;
    let all = read.into_inner().map_err(|_| ApiError::internal("a template list was poisoned"))?;
    let mut by_id: HashMap<String, VirtualMachineTemplate> = all.into_iter().map(|t| (t.id.clone(), t)).collect();
    let page = listed.items.iter().filter_map(|j| id_of(j)).filter_map(|id| by_id.remove(&id)).collect();
    Ok((listed, page))
}

/// The template `id`.
pub(crate) async fn read(s: &AppState, id: &str) -> Result<VirtualMachineTemplate, ApiError> {
    Ok(s.store.get_template(id).await?.to_api())
}

/// Publishes `t` (administrators only).
pub(crate) async fn create(s: &AppState, caller: &Caller, t: &VirtualMachineTemplate) -> Result<VirtualMachineTemplate, ApiError> {
    caller.require_admin("publish templates")?;
    let wire = check(t)?;
    let r = s.store.insert_template(&wire, Utc::now()).await?;
    info!(template = %wire.id, by = %caller.subject, "template published");
    Ok(r.to_api())
}

/// Replaces the template `id` with `t` (administrators only), if it is
/// still at `t`'s `metadata.version` (when sent).
pub(crate) async fn update(
    s: &AppState,
    caller: &Caller,
    id: &str,
    t: &VirtualMachineTemplate,
) -> Result<VirtualMachineTemplate, ApiError> {
    caller.require_admin("change templates")?;
    crate::app::simple::require_id(id, Some(&t.id))?;
    replace(s, caller, t, t.metadata.as_ref().and_then(|m| m.version)).await
}

/// Checks `t` as a whole and stores it over the template of its id, if
/// that is still at `version` (when given).
async fn replace(
    s: &AppState,
    caller: &Caller,
    t: &VirtualMachineTemplate,
    version: Option<i64>,
) -> Result<VirtualMachineTemplate, ApiError> {
    let wire = check(t)?;
    let r = s.store.update_template(&wire, version, Utc::now()).await?;
    info!(template = %wire.id, version = r.version, by = %caller.subject, "template updated");
    Ok(r.to_api())
}

/// Changes the fields of the template `id` that `mask` names (comma-separated
/// dotted paths; a named field `fields` lacks is cleared), or without a
/// mask every field `fields` carries (administrators only).
/// `metadata.version`, when sent, must be current.
pub(crate) async fn patch(
    s: &AppState,
    caller: &Caller,
    id: &str,
    fields: &Map<String, Value>,
    mask: Option<&str>,
) -> Result<VirtualMachineTemplate, ApiError> {
    caller.require_admin("change templates")?;
    let sent = fields.get("id").map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
    crate::app::simple::require_id(id, sent.as_deref())?;
    let current = s.store.get_template(id).await?;
    let sent = fields.get("metadata").and_then(|m| m.get("version")).and_then(Value::as_i64);
    let mut merged = serde_json::to_value(current.to_api()).map_err(ApiError::internal)?;
    super::mask::apply(&mut merged, fields, mask);
    let body = serde_json::to_vec(&serde_json::json!({ "object": merged })).map_err(ApiError::internal)?;
    let next: Envelope<VirtualMachineTemplate> = crate::decode::decode(&body)?;
    // Laid over the version read: a change in between is a 409, not lost.
    replace(s, caller, &next.object, Some(sent.unwrap_or(current.version))).await
}

/// Removes the template `id`, which no VM may use (administrators only).
pub(crate) async fn remove(s: &AppState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    caller.require_admin("delete templates")?;
    s.store.delete_template(id).await?;
    info!(template = %id, by = %caller.subject, "template deleted");
    Ok(())
}
