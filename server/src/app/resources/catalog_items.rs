//! `compute_instance_catalog_items`: curated offerings over a template
//! (OSAC's `ComputeInstanceCatalogItem`), global: administrators write
//! them and see every one; tenants list and read the published ones and
//! create VMs from them ([`at_create`]), which keep the fields an item
//! fixes for their life ([`at_patch`]). Nothing runs them: the reconciler
//! has nothing to do. An item is refused deletion while VMs use it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use chrono::Utc;
use serde_json::Value;
use tracing::info;
use vmaas_model::catalog_item::{CatalogField, PatchCatalogItem, whole};
use vmaas_model::{CatalogItemSpec, ComputeInstanceCatalogItem, Object, ValidationErrors, VirtualMachineSpec};

use crate::app::kind::Kind;
use crate::app::listing::{ListRequest, Listed};
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{Outcome, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::{Record, Scope, StoreError};

/// A stored catalog item.
type CatalogItemRecord = Record<ComputeInstanceCatalogItem>;

/// The states a catalog item is stored with, for `?state=`.
pub(crate) const STATES: &[&str] = &["PUBLISHED", "UNPUBLISHED"];

/// Where a VM names its catalog item.
const VM_FIELD: &str = "object.spec.catalog_item";

impl Kind for ComputeInstanceCatalogItem {
    type Patch = PatchCatalogItem;

    fn check_spec(spec: &CatalogItemSpec) -> Result<(), ValidationErrors> {
        spec.check("object")
    }

    async fn check(s: &AppState, _caller: &Caller, spec: &CatalogItemSpec, errs: &mut ValidationErrors) -> Result<(), ApiError> {
        check_against(s, spec, errs).await
    }

    async fn create(s: &AppState, _caller: &Caller, mut rec: CatalogItemRecord) -> Result<CatalogItemRecord, ApiError> {
        rec.spec.template = template_id(s, &rec.spec.template).await?.unwrap_or_default();
        s.store.insert_record(&rec, Vec::new()).await?;
        info!(catalog_item = %rec.id, name = %rec.name, template = %rec.spec.template, published = rec.spec.published, "catalog item made");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, mut p: PatchCatalogItem) -> Result<CatalogItemRecord, ApiError> {
        let metadata = p.metadata.take();
        let (current, expected) = simple::changing::<Self>(s, caller, id, metadata.as_ref()).await?;
        let mut spec = current.spec.patched(p);
        let mut errs = ValidationErrors::default();
        if let Err(e) = spec.check("object") {
            errs.extend(e);
        }
        check_against(s, &spec, &mut errs).await?;
        errs.into_result(()).map_err(ApiError::invalid)?;
        spec.template = template_id(s, &spec.template).await?.unwrap_or_default();
        let current = simple::relabelled(current, metadata.as_ref())?;
        let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
        info!(catalog_item = %id, published = updated.spec.published, version = updated.version, "catalog item changed");
        Ok(updated)
    }

    async fn remove(s: &AppState, _caller: &Caller, id: &str) -> Result<CatalogItemRecord, ApiError> {
        let rec = s.store.get_record::<Self>(id, &Scope::All).await?;
        simple::unused_by_vms(s, &rec.id, "catalog item", &rec.name, "unpublish it instead").await?;
        s.store.delete_now(Self::KIND, &rec.id).await?;
        info!(catalog_item = %rec.id, name = %rec.name, "catalog item deleted");
        Ok(rec)
    }

    fn reconcile<'a>(_: &'a Reconciler, _: &'a str) -> PassFuture<'a> {
        Box::pin(async { Ok((Outcome::Unchanged, None)) })
    }
}

/// A page of the catalog items `caller` sees: administrators every one,
/// tenants the published ones.
pub(crate) async fn list(s: &AppState, caller: &Caller, mut req: ListRequest) -> Result<Listed, ApiError> {
    if !caller.is_admin() {
        match req.state.as_deref().map(str::to_ascii_uppercase) {
            None => req.state = Some(STATES[0].into()),
            Some(st) if st == STATES[0] => {}
            Some(_) => return Ok(Listed::default()),
        }
    }
    simple::list::<ComputeInstanceCatalogItem>(s, caller, req, STATES).await
}

/// The catalog item `id` as JSON, if `caller` sees it.
pub(crate) async fn read(s: &AppState, caller: &Caller, id: &str) -> Result<std::sync::Arc<str>, ApiError> {
    let rec = s.store.get_record::<ComputeInstanceCatalogItem>(id, &Scope::All).await?;
    if !rec.spec.published && !caller.is_admin() {
        return Err(ApiError::not_found("catalog item", id));
    }
    simple::read::<ComputeInstanceCatalogItem>(s, caller, id).await
}

/// Applies the catalog item a VM create names (`spec.catalog_item`), if
/// it names one: the VM gets the item's template (naming another is a
/// 400) and its defaults; a field the item fixes may not be given, and one
/// it lets the tenant set must meet its schema. The spec then holds the
/// item's id. Problems go into `errs`.
pub(crate) async fn at_create(
    s: &AppState,
    caller: &Caller,
    spec: &mut VirtualMachineSpec,
    errs: &mut ValidationErrors,
) -> Result<(), ApiError> {
    let Some(wanted) = spec.catalog_item.clone() else { return Ok(()) };
    let Some(item) = visible(s, caller, &wanted).await? else {
        errs.push(VM_FIELD, format!("there is no catalog item {wanted:?}"));
        return Ok(());
    };
    if !spec.template.is_empty() && spec.template != item.spec.template {
        errs.push("object.spec.template", format!("must be left out: catalog item {:?} makes VMs of {:?}", item.name, item.spec.template));
    }
    spec.template = item.spec.template.clone();
    item.spec.apply(spec, valid, errs);
    spec.catalog_item = Some(item.id);
    Ok(())
}

/// Refuses a change of a VM (`current` → `next`) to a field its catalog
/// item fixes, or to the item it names (`asked`, by name or id).
pub(crate) async fn at_patch(
    s: &AppState,
    current: &VirtualMachineSpec,
    next: &VirtualMachineSpec,
    asked: Option<&str>,
    errs: &mut ValidationErrors,
) -> Result<(), ApiError> {
    let item = match current.catalog_item.as_deref() {
        Some(id) => simple::find::<ComputeInstanceCatalogItem>(s, &Scope::All, id).await?,
        None => None,
    };
    if let Some(asked) = asked.map(str::trim).filter(|a| !a.is_empty())
        && item.as_ref().is_none_or(|i| i.id != asked && i.name != asked)
    {
        errs.push(VM_FIELD, "cannot change: a VM keeps the catalog item it was made from");
    }
    if let Some(item) = item {
        item.spec.check_kept(current, next, errs);
    }
    Ok(())
}

/// The catalog item named `reference` (an id, else a name) if `caller`
/// sees it: a tenant sees published items only.
async fn visible(s: &AppState, caller: &Caller, reference: &str) -> Result<Option<CatalogItemRecord>, ApiError> {
    let found = simple::find::<ComputeInstanceCatalogItem>(s, &Scope::All, reference.trim()).await?;
    Ok(found.filter(|i| i.spec.published || caller.is_admin()))
}

/// Checks of an item that need the store: its template exists; each
/// validation schema compiles, and a default meets its schema.
async fn check_against(s: &AppState, spec: &CatalogItemSpec, errs: &mut ValidationErrors) -> Result<(), ApiError> {
    if !spec.template.trim().is_empty() && template_id(s, &spec.template).await?.is_none() {
        errs.push("object.template", format!("there is no template {:?}", spec.template));
    }
    for (i, d) in spec.field_definitions.iter().enumerate().filter(|(_, d)| !d.validation_schema.is_empty()) {
        let at = format!("object.field_definitions[{i}]");
        match compile(&d.validation_schema) {
            Err(why) => errs.push(format!("{at}.validation_schema"), why.to_string()),
            Ok(schema) => {
                let default = d.default.clone().filter(|_| CatalogField::parse(&d.path).is_some()).map(whole);
                if let Some(why) = default.as_ref().and_then(|v| schema.iter_errors(v).next()) {
                    errs.push(format!("{at}.default"), format!("does not meet its own validation schema: {why}"));
                }
            }
        }
    }
    Ok(())
}

/// The id of the template `reference` names, if there is one.
async fn template_id(s: &AppState, reference: &str) -> Result<Option<String>, ApiError> {
    match s.store.get_template(reference.trim()).await {
        Ok(t) => Ok(Some(t.template.id)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A validation schema compiled as draft 2020-12 (references to other
/// documents are not fetched), or why it does not compile.
fn compile(schema: &str) -> Result<jsonschema::Validator, SchemaError> {
    let doc: Value = serde_json::from_str(schema).map_err(SchemaError::NotJson)?;
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012).build(&doc).map_err(|e| SchemaError::NotSchema(Box::new(e)))
}

/// Whether `value` meets `schema` (one compiled at the item's create).
fn valid(schema: &str, value: &Value) -> Result<(), SchemaError> {
    let schema = compiled(schema)?;
    match schema.iter_errors(value).next() {
        Some(e) => Err(SchemaError::Unmet(e.to_string())),
        None => Ok(()),
    }
}

/// Why a validation schema does not compile, or a value does not meet it.
#[derive(Debug, thiserror::Error)]
enum SchemaError {
    /// The schema's text is not JSON.
    #[error("is not JSON: {0}")]
    NotJson(serde_json::Error),
    /// The schema is JSON but not a JSON Schema.
    #[error("is not a JSON Schema: {0}")]
    NotSchema(Box<jsonschema::ValidationError<'static>>),
    /// The value breaks it: the first rule it breaks.
    #[error("{0}")]
    Unmet(String),
}

/// Schema text kept compiled at most, in bytes: past it the cache starts over.
const COMPILED_BYTES: usize = 4 << 20;

/// Compiled schemas by their text, and the bytes of text they hold.
type Compiled = (HashMap<String, Arc<jsonschema::Validator>>, usize);

/// `schema` compiled, from a cache of the schemas VMs were checked
/// against lately: a VM's create does not compile its item's schemas again.
fn compiled(schema: &str) -> Result<Arc<jsonschema::Validator>, SchemaError> {
    static CACHE: LazyLock<Mutex<Compiled>> = LazyLock::new(Mutex::default);
    if let Some(v) = CACHE.lock().unwrap_or_else(|p| p.into_inner()).0.get(schema) {
        return Ok(v.clone());
    }
    let v = Arc::new(compile(schema)?);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if cache.1 + schema.len() > COMPILED_BYTES {
        *cache = Default::default();
    }
    if cache.0.insert(schema.to_owned(), v.clone()).is_none() {
        cache.1 += schema.len();
    }
    Ok(v)
}
