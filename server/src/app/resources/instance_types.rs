//! `instance_types`: named machine shapes (OSAC's `InstanceType`), global:
//! administrators publish them and move them through their lifecycle
//! (ACTIVE, DEPRECATED with a replacement, OBSOLETE); every tenant lists
//! them. Their shape is fixed at create. Nothing runs them: they are READY
//! as stored, so the reconciler has nothing to do.

use chrono::Utc;
use tracing::info;
use vmaas_model::{
    InstanceType, InstanceTypeReference, InstanceTypeSpec, InstanceTypeState, Object, ObjectKind, PatchInstanceType, ValidationErrors,
};

use crate::app::kind::Kind;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{Outcome, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::{Record, Scope};

/// A stored instance type.
type InstanceTypeRecord = Record<InstanceType>;

impl Kind for InstanceType {
    type Patch = PatchInstanceType;

    fn check_spec(spec: &InstanceTypeSpec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn check(s: &AppState, _caller: &Caller, spec: &InstanceTypeSpec, errs: &mut ValidationErrors) -> Result<(), ApiError> {
        check_replacement(s, spec, None, errs).await.map(|_| ())
    }

    async fn create(s: &AppState, _caller: &Caller, mut rec: InstanceTypeRecord) -> Result<InstanceTypeRecord, ApiError> {
        let mut errs = ValidationErrors::default();
        let replacement = check_replacement(s, &rec.spec, None, &mut errs).await?;
        errs.into_result(()).map_err(ApiError::invalid)?;
        rec.spec = with_replacement(rec.spec, replacement).settled(rec.created_at);
        s.store.insert_record(&rec, Vec::new()).await?;
        info!(instance_type = %rec.id, name = %rec.name, cores = rec.spec.cores, memory_gib = rec.spec.memory_gib, "instance type published");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: PatchInstanceType) -> Result<InstanceTypeRecord, ApiError> {
        let (current, expected) = simple::changing::<Self>(s, caller, id, p.metadata.as_ref()).await?;
        let mut errs = ValidationErrors::default();
        let spec = match current.spec.patched(&p.spec) {
            Ok(spec) => spec,
            Err(e) => {
                errs.extend(e);
                current.spec.clone()
            }
        };
        let replacement = check_replacement(s, &spec, Some(&current.id), &mut errs).await?;
        errs.into_result(()).map_err(ApiError::invalid)?;
        let spec = with_replacement(spec, replacement).settled(Utc::now());
        let current = simple::relabelled(current, p.metadata.as_ref())?;
        let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
        info!(instance_type = %id, state = %updated.spec.state, version = updated.version, "instance type changed");
        // Its VMs' statuses name its deprecation: they are looked at again.
        for vm in s.store.linked_to(ObjectKind::VirtualMachine, &updated.id).await? {
            s.queue.enqueue(ObjectKind::VirtualMachine, &vm.id);
        }
        Ok(updated)
    }

    async fn remove(s: &AppState, _caller: &Caller, id: &str) -> Result<InstanceTypeRecord, ApiError> {
        let rec = s.store.get_record::<Self>(id, &Scope::All).await?;
        simple::unused_by_vms(s, &rec.id, "instance type", &rec.name, "deprecate it instead").await?;
        s.store.delete_now(Self::KIND, &rec.id).await?;
        info!(instance_type = %rec.id, name = %rec.name, "instance type deleted");
        Ok(rec)
    }

    fn reconcile<'a>(_: &'a Reconciler, _: &'a str) -> PassFuture<'a> {
        Box::pin(async { Ok((Outcome::Unchanged, None)) })
    }
}

/// The replacement `spec` names, resolved (its id and name), if it names
/// one; a replacement that is not there, is the type itself (`own_id`) or
/// is OBSOLETE goes into `errs`.
async fn check_replacement(
    s: &AppState,
    spec: &InstanceTypeSpec,
    own_id: Option<&str>,
    errs: &mut ValidationErrors,
) -> Result<Option<InstanceTypeReference>, ApiError> {
    const FIELD: &str = "object.spec.deprecation.replacement";
    let Some(wanted) = spec.deprecation.as_ref().and_then(|d| d.replacement.as_ref()) else { return Ok(None) };
    let Some(found) = simple::find::<InstanceType>(s, &Scope::All, wanted.key()).await? else {
        errs.push(FIELD, format!("there is no instance type {:?}", wanted.key()));
        return Ok(None);
    };
    if own_id == Some(found.id.as_str()) {
        errs.push(FIELD, "an instance type cannot replace itself");
    } else if found.spec.state == InstanceTypeState::Obsolete {
        errs.push(FIELD, format!("instance type {:?} is OBSOLETE: name one that is offered", found.name));
    }
    Ok(Some(InstanceTypeReference { id: found.id, name: found.name }))
}

/// `spec` with its replacement as resolved (id and name).
fn with_replacement(mut spec: InstanceTypeSpec, replacement: Option<InstanceTypeReference>) -> InstanceTypeSpec {
    if let (Some(d), Some(r)) = (spec.deprecation.as_mut(), replacement) {
        d.replacement = Some(r);
    }
    spec
}
