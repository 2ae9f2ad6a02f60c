//! `load_balancers`: an address from the default external IP pool whose
//! ports spread connections over the caller's VMs on one subnet
//! (`spec.targets`, each checked to have a NIC there). A PATCH replaces the
//! targets or the port mappings; the subnet cannot be deleted while a load
//! balancer is on it.

use chrono::Utc;
use tracing::info;
use vmaas_model::load_balancer::{check_mappings, check_targets};
use vmaas_model::{LoadBalancer, LoadBalancerSpec, LoadBalancerStatus, ObjectKind, PatchLoadBalancer, Subnet, ValidationErrors};

use crate::app::kind::Kind;
use crate::app::scope::owned_by;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::{BALANCER_ON, LoadBalancerRecord, Scope, SubnetRecord};

impl Kind for LoadBalancer {
    type Patch = PatchLoadBalancer;

    fn check_spec(spec: &LoadBalancerSpec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: LoadBalancerRecord) -> Result<LoadBalancerRecord, ApiError> {
        let scope = owned_by(&caller.tenant);
        let subnet = simple::find::<Subnet>(s, &scope, rec.spec.subnet.trim())
            .await?
            .filter(|n| n.deleted_at.is_none())
            .ok_or_else(|| ApiError::field("object.spec.subnet", format!("you have no subnet {:?}", rec.spec.subnet)))?;
        rec.spec.targets = resolve_targets(s, &scope, &rec.spec.targets, &subnet).await?;
        rec.spec.subnet = subnet.id.clone();
        let pool = s.pools.get("").ok_or_else(|| ApiError::internal("no external IP pool is configured"))?;
        let adm = s.admit().await?;
        let s = adm.state().clone();
        // Its address comes from the shared pool: it counts as an external IP.
        crate::quota::enforce(&s.store, &caller.tenant, crate::quota::Amounts::external_ip()).await?;
        let address = super::external_ips::allocate(&s, pool).await?;
        rec.status = LoadBalancerStatus { address: address.to_string(), ..Default::default() };
        s.store.insert_record(&rec, vec![(subnet.id.clone(), BALANCER_ON.to_owned())]).await?;
        adm.commit().await?;
        s.queue.enqueue(ObjectKind::LoadBalancer, &rec.id);
        s.queue.enqueue(ObjectKind::Subnet, &subnet.id);
        for vm in &rec.spec.targets {
            s.queue.enqueue(ObjectKind::VirtualMachine, vm);
        }
        info!(load_balancer = %rec.id, name = %rec.name, %address, targets = rec.spec.targets.len(), "load balancer created");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: PatchLoadBalancer) -> Result<LoadBalancerRecord, ApiError> {
        let (current, expected) = simple::changing::<Self>(s, caller, id, p.metadata.as_ref()).await?;
        let mut errs = ValidationErrors::default();
        if let Some(t) = &p.spec.targets {
            check_targets(t, "object.spec.targets", &mut errs);
        }
        if let Some(m) = &p.spec.port_mappings {
            check_mappings(m, "object.spec.port_mappings", &mut errs);
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(errs));
        }
        let mut spec = current.spec.clone();
        if let Some(t) = p.spec.targets {
            let refs = owned_by(&current.tenant);
            let subnet = s.store.get_record::<Subnet>(&current.spec.subnet, &refs).await?;
            spec.targets = resolve_targets(s, &refs, &t, &subnet).await?;
        }
        if let Some(m) = p.spec.port_mappings {
            spec.port_mappings = m;
        }
        let current = simple::relabelled(current, p.metadata.as_ref())?;
        let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
        for vm in current.spec.targets.iter().chain(&updated.spec.targets) {
            s.queue.enqueue(ObjectKind::VirtualMachine, vm);
        }
        s.queue.enqueue(ObjectKind::LoadBalancer, id);
        info!(load_balancer = %id, version = updated.version, "load balancer changed");
        Ok(updated)
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::external::reconcile_balancer(r, id))
    }
}

/// The caller's VMs named in `targets`, as ids, each with a NIC on `subnet`.
async fn resolve_targets(s: &AppState, scope: &Scope, targets: &[String], subnet: &SubnetRecord) -> Result<Vec<String>, ApiError> {
    let mut ids: Vec<String> = Vec::with_capacity(targets.len());
    for (i, t) in targets.iter().enumerate() {
        let field = format!("object.spec.targets[{i}]");
        let row = simple::row(s, scope, ObjectKind::VirtualMachine, t, &field).await?;
        let vm = s.store.get_vm(&row.id, scope).await?;
        if !vm.spec.network_attachments.iter().any(|a| a.subnet == subnet.id) {
            return Err(ApiError::field(field, format!("virtual machine {:?} has no NIC on subnet {:?}", vm.name, subnet.name)));
        }
        if ids.contains(&vm.id) {
            return Err(ApiError::field(field, format!("virtual machine {:?} is a target twice", vm.name)));
        }
        ids.push(vm.record.id);
    }
    Ok(ids)
}
