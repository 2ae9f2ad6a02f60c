//! Whose objects a caller sees and names, and the name a create asks for.

use vmaas_model::ValidationErrors;
use vmaas_model::validation::NameError;

use crate::auth::Caller;
use crate::store::Scope;

/// Where the references of an object owned by `tenant` resolve: that
/// tenant's objects only, whoever asks, so that an administrator's object
/// never names (by id or by name) another tenant's.
pub(crate) fn owned_by(tenant: &str) -> Scope {
    Scope::Tenant(tenant.to_owned())
}

/// What `caller` may see: its own tenant's objects, or every tenant's for administrators.
pub(crate) fn scope(caller: &Caller) -> Scope {
    if caller.is_admin() { Scope::All } else { Scope::Tenant(caller.tenant.clone()) }
}

/// The name a create request asks for, checked as a DNS label; every
/// problem goes into `errs`, naming the field it came from.
pub(crate) fn checked_name(requested: Option<(&str, &'static str)>, errs: &mut ValidationErrors) -> Option<String> {
    checked_name_by(requested, vmaas_model::validation::check_dns_label, errs)
}

/// The name a create request asks for, checked by `rule`.
pub(crate) fn checked_name_by(
    requested: Option<(&str, &'static str)>,
    rule: fn(&str) -> Result<(), NameError>,
    errs: &mut ValidationErrors,
) -> Option<String> {
    match requested {
        None => {
            errs.push("object.metadata.name", "is required (or give the name as object.id)");
            None
        }
        Some((name, field)) => match rule(name) {
            Ok(()) => Some(name.to_owned()),
            Err(reason) => {
                errs.push(field, reason);
                None
            }
        },
    }
}
