//! `security_groups`: rules for the NICs of one of a tenant's virtual
//! networks (OSAC's `SecurityGroup`). A PATCH replaces its rules, and every
//! NIC that has the group enforces the new rules at once (its VMs are
//! reconciled); a group in use cannot be deleted.

use chrono::Utc;
use tracing::info;
use vmaas_model::{ObjectKind, PatchSecurityGroup, SecurityGroup, ValidationErrors};

use crate::app::kind::Kind;
use crate::app::scope::owned_by;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::SecurityGroupRecord;

impl Kind for SecurityGroup {
    type Patch = PatchSecurityGroup;

    fn check_spec(spec: &Self::Spec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: SecurityGroupRecord) -> Result<SecurityGroupRecord, ApiError> {
        let net = simple::network(s, &owned_by(&caller.tenant), &rec.spec.virtual_network).await?;
        rec.spec.virtual_network = net.id.clone();
        s.store.insert_record(&rec, vec![(net.id.clone(), "virtual_network".to_owned())]).await?;
        s.queue.enqueue(ObjectKind::SecurityGroup, &rec.id);
        s.queue.enqueue(ObjectKind::VirtualNetwork, &net.id);
        info!(security_group = %rec.id, name = %rec.name, network = %net.id, "security group created");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: PatchSecurityGroup) -> Result<SecurityGroupRecord, ApiError> {
        let (current, expected) = simple::changing::<Self>(s, caller, id, p.metadata.as_ref()).await?;
        let mut spec = current.spec.clone();
        if let Some(rules) = p.spec.ingress {
            spec.ingress = rules;
        }
        if let Some(rules) = p.spec.egress {
            spec.egress = rules;
        }
        spec.check("object.spec").map_err(ApiError::invalid)?;
        let current = simple::relabelled(current, p.metadata.as_ref())?;
        let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
        s.queue.enqueue(ObjectKind::SecurityGroup, id);
        // The NICs that have it take the new rules with their VMs' next reconcile: now.
        for vm in s.store.referrers(id).await?.iter().filter(|r| r.kind == ObjectKind::VirtualMachine) {
            s.queue.enqueue(ObjectKind::VirtualMachine, &vm.id);
        }
        info!(security_group = %id, name = %updated.name, version = updated.version, "security group rules replaced");
        Ok(updated)
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::network::reconcile::<Self>(r, id))
    }
}
