//! `spec.clone_of` on a VM's create: the source (one of the tenant's VMs,
//! or one of its READY snapshots) is found by id or name and stored as its
//! id, and the clone takes the source's template and parameters unless it
//! names its own. The backend copies the disks at the clone's first start.

use vmaas_model::{ObjectKind, ValidationErrors, VirtualMachineSpec};

use crate::app::resources::snapshots;
use crate::app::scope::owned_by;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::VmRecord;

const FIELD: &str = "object.spec.clone_of";

/// Resolves `spec.clone_of` for a create by `tenant` (errors go to
/// `errs`, naming the field), and fills in the source's template and
/// parameters when `spec` has none; without a clone, a template is required.
pub(super) async fn at_create(
    s: &AppState,
    tenant: &str,
    spec: &mut VirtualMachineSpec,
    errs: &mut ValidationErrors,
) -> Result<(), ApiError> {
    let Some(mut c) = spec.clone_of.take() else {
        if spec.template.trim().is_empty() && spec.catalog_item.is_none() {
            errs.push(
                "object.spec.template",
                "is required: a template id (or spec.catalog_item, or spec.clone_of, whose template a clone takes)",
            );
        }
        return Ok(());
    };
    if let Err(e) = c.check(FIELD) {
        errs.extend(e);
        return Ok(());
    }
    if !s.backend.capabilities().clones {
        errs.push(FIELD, format!("the {} backend does not clone VMs", s.backend.name()));
        return Ok(());
    }
    let source = match (&c.snapshot, &c.compute_instance) {
        (Some(r), _) => from_snapshot(s, tenant, r, errs).await?,
        (None, Some(r)) => {
            let row =
                crate::app::simple::row(s, &owned_by(tenant), ObjectKind::VirtualMachine, r, &format!("{FIELD}.compute_instance")).await?;
            let vm = VmRecord::from_row(&row)?;
            Some((vm.record.id, vm.record.spec.template, vm.record.spec.template_parameters))
        }
        (None, None) => None,
    };
    let Some((id, template, parameters)) = source else { return Ok(()) };
    if c.snapshot.is_some() {
        c.snapshot = Some(id);
    } else {
        c.compute_instance = Some(id);
    }
    if spec.template.trim().is_empty() {
        spec.template = template;
        if spec.template_parameters.is_empty() {
            spec.template_parameters = parameters;
        }
    }
    spec.clone_of = Some(c);
    Ok(())
}

/// The READY snapshot `reference` names, as `(id, template, parameters)`.
async fn from_snapshot(
    s: &AppState,
    tenant: &str,
    reference: &str,
    errs: &mut ValidationErrors,
) -> Result<Option<(String, String, std::collections::BTreeMap<String, vmaas_model::ParameterValue>)>, ApiError> {
    let snap = match snapshots::named(s, tenant, reference).await? {
        Ok(snap) => snap,
        Err(why) => {
            errs.push(format!("{FIELD}.snapshot"), why);
            return Ok(None);
        }
    };
    if let Err(why) = snapshots::usable(&snap) {
        errs.push(format!("{FIELD}.snapshot"), why);
        return Ok(None);
    }
    Ok(Some((snap.id, snap.status.template.unwrap_or_default(), snap.status.template_parameters)))
}
