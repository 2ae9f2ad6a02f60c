//! Reconciling external IPs, their attachments and load balancers.
//!
//! External IPs and attachments are the server's alone: an address is
//! allocated at create and served by the VM it is attached to (its VM's
//! reconcile gives the backend the addresses, [`exposure`]). Load balancers
//! run in the backend's balancer driver, which reports the healthy targets.

use std::net::Ipv4Addr;
use std::time::Duration;

use chrono::Utc;
use tracing::{info, warn};
use vmaas_backend::{BalancerObservation, BalancerProblem, BalancerSpec, Cleanup, Mapping, Requeue, Target};
use vmaas_model::external_ip::AUTO_LABEL;
use vmaas_model::load_balancer::LbProtocol;
use vmaas_model::{
    ExternalIp, ExternalIpAttachment, ExternalIpAttachmentState, ExternalIpAttachmentStatus, LoadBalancer, LoadBalancerState,
    LoadBalancerStatus, ObjectKind,
};

use super::status::{get, write};
use super::{Outcome, Pass, Reconciler};
use crate::store::{AttachmentRecord, LoadBalancerRecord, Scope, StoreError, VmRecord};

/// How soon an object is looked at again after a transient failure.
const RETRY: Duration = Duration::from_secs(1);

/// What a VM serves beyond its own address: the external IPs attached to
/// it, and the TCP ports its load balancers reach.
pub(super) async fn exposure(r: &Reconciler, vm: &VmRecord) -> Result<(Vec<Ipv4Addr>, Vec<u16>), StoreError> {
    let mut ips = Vec::new();
    for a in r.store.linked_records::<ExternalIpAttachment>(&vm.id).await? {
        if a.deleted_at.is_some() || a.spec.compute_instance.as_deref() != Some(vm.id.as_str()) {
            continue;
        }
        if let Ok(ip) = a.status.external_ip_address.parse() {
            ips.push(ip);
        }
    }
    let mut ports: Vec<u16> = Vec::new();
    for lb in r.store.linked_records::<LoadBalancer>(&vm.id).await? {
        if lb.deleted_at.is_some() || !lb.spec.targets.contains(&vm.id) {
            continue;
        }
        let tcp = lb.spec.port_mappings.iter().filter(|m| m.protocol == LbProtocol::Tcp);
        ports.extend(tcp.filter_map(|m| u16::try_from(m.internal_port).ok()));
    }
    ips.sort_unstable();
    ips.dedup();
    ports.sort_unstable();
    ports.dedup();
    Ok((ips, ports))
}

/// Deletes what VM `vm` (gone) was given with `auto_external_ip_attachment`:
/// the attachments linked to it that carry [`AUTO_LABEL`] with its id, and
/// their external IPs that carry it too.
pub(super) async fn release_auto(r: &Reconciler, vm: &str) -> Result<(), StoreError> {
    let mine = |labels: &vmaas_model::Labels| labels.labels.get(AUTO_LABEL).map(String::as_str) == Some(vm);
    for a in r.store.linked_records::<ExternalIpAttachment>(vm).await?.into_iter().filter(|a| mine(&a.labels)) {
        r.store.mark_record_deleted::<ExternalIpAttachment>(&a.id, &Scope::All, Utc::now()).await?;
        r.store.remove(&a.id).await?;
        match r.store.get_record::<ExternalIp>(&a.spec.external_ip, &Scope::All).await {
            Ok(ip) if mine(&ip.labels) => {
                r.store.mark_record_deleted::<ExternalIp>(&ip.id, &Scope::All, Utc::now()).await?;
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        r.queue.enqueue(ObjectKind::ExternalIp, &a.spec.external_ip);
        info!(attachment = %a.id, external_ip = %a.spec.external_ip, "the automatic external IP goes with its VM");
    }
    Ok(())
}

/// An external IP: released when deleted; `attached` while an attachment holds it.
pub(crate) async fn reconcile_ip(r: &Reconciler, id: &str) -> Pass {
    let Some(ip) = get::<ExternalIp>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    if ip.deleted_at.is_some() {
        r.store.remove(&ip.id).await?;
        info!(external_ip = %ip.id, address = %ip.status.address, "external IP released");
        return Ok((Outcome::Removed, None));
    }
    let attached = r.store.referrers(&ip.id).await?.iter().any(|a| a.kind == ObjectKind::ExternalIpAttachment && a.deleted_at.is_none());
    let mut status = ip.status.clone();
    status.attached = attached;
    Ok((write(r, &ip, status).await?, None))
}

/// An attachment: READY while its VM exists; on deletion, its VM and
/// address are looked at again (the VM drops the address).
pub(crate) async fn reconcile_attachment(r: &Reconciler, id: &str) -> Pass {
    let Some(a) = get::<ExternalIpAttachment>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    if a.deleted_at.is_some() {
        r.store.remove(&a.id).await?;
        wake_neighbours(r, &a);
        info!(attachment = %a.id, "external IP detached");
        return Ok((Outcome::Removed, None));
    }
    let vm = match a.spec.compute_instance.as_deref() {
        Some(vm) => match r.store.get_vm(vm, &Scope::All).await {
            Ok(v) => Some(v),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    let mut status = ExternalIpAttachmentStatus { external_ip_address: a.status.external_ip_address.clone(), ..Default::default() };
    match vm.filter(|v| v.deleted_at.is_none()) {
        Some(_) => status.state = ExternalIpAttachmentState::Ready,
        None => {
            status.state = ExternalIpAttachmentState::Failed;
            status.message = Some("its virtual machine is gone: move the attachment to another one with PATCH, or delete it".into());
        }
    }
    Ok((write(r, &a, status).await?, None))
}

fn wake_neighbours(r: &Reconciler, a: &AttachmentRecord) {
    r.queue.enqueue(ObjectKind::ExternalIp, &a.spec.external_ip);
    if let Some(vm) = &a.spec.compute_instance {
        r.queue.enqueue(ObjectKind::VirtualMachine, vm);
    }
}

/// What the balancer driver is given.
fn balancer_spec(lb: &LoadBalancerRecord) -> Option<BalancerSpec> {
    let address = lb.status.address.parse().ok()?;
    let mappings = lb
        .spec
        .port_mappings
        .iter()
        .filter_map(|m| {
            Some(Mapping {
                protocol: m.protocol,
                external_port: u16::try_from(m.external_port).ok()?,
                internal_port: u16::try_from(m.internal_port).ok()?,
            })
        })
        .collect();
    Some(BalancerSpec { address, mappings, targets: lb.spec.targets.clone(), subnet: lb.spec.subnet.clone() })
}

/// The status a load balancer shows for what the backend saw of it.
fn balancer_status(lb: &LoadBalancerRecord, seen: BalancerObservation) -> LoadBalancerStatus {
    let mut s = LoadBalancerStatus { address: lb.status.address.clone(), ..Default::default() };
    (s.state, s.message) = match seen.problem {
        None => (LoadBalancerState::Ready, None),
        Some(BalancerProblem::Pending(m)) => (LoadBalancerState::Pending, Some(m)),
        Some(BalancerProblem::Failed(m)) => (LoadBalancerState::Failed, Some(m)),
    };
    s.healthy_targets = seen.healthy;
    s
}

/// A load balancer that failed for `message`, with no healthy target.
fn failed(message: String) -> BalancerObservation {
    BalancerObservation { problem: Some(BalancerProblem::Failed(message)), healthy: Vec::new() }
}

/// A load balancer: one step of its driver, then its status.
pub(crate) async fn reconcile_balancer(r: &Reconciler, id: &str) -> Pass {
    let Some(lb) = get::<LoadBalancer>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    let driver = r.backend.load_balancers();
    if lb.deleted_at.is_some() {
        if let Some(d) = &driver {
            match d.delete(&lb.id).await {
                Ok(Cleanup::Done) => {}
                Ok(Cleanup::InProgress) => return Ok((Outcome::Unchanged, Some(RETRY))),
                Err(e) => {
                    warn!(load_balancer = %lb.id, error = %e, "removing a load balancer failed; will retry");
                    return Ok((Outcome::BackendError, Some(RETRY)));
                }
            }
        }
        r.store.remove(&lb.id).await?;
        r.queue.enqueue(ObjectKind::Subnet, &lb.spec.subnet);
        for vm in &lb.spec.targets {
            r.queue.enqueue(ObjectKind::VirtualMachine, vm);
        }
        info!(load_balancer = %lb.id, name = %lb.name, "load balancer removed");
        return Ok((Outcome::Removed, None));
    }
    let Some(driver) = driver else {
        let status = balancer_status(&lb, failed(format!("the {} backend does not run load balancers", r.backend.name())));
        return Ok((write(r, &lb, status).await?, None));
    };
    let Some(spec) = balancer_spec(&lb) else {
        return Ok((write(r, &lb, balancer_status(&lb, failed("its address or ports do not parse".into()))).await?, None));
    };
    let target = Target { id: lb.id.clone(), tenant: lb.tenant.clone(), name: lb.name.clone(), version: lb.version, spec };
    match driver.ensure(&target).await {
        Ok((seen, next)) => {
            let next = match next {
                Requeue::After(d) => Some(d),
                Requeue::AwaitChange => None,
            };
            Ok((write(r, &lb, balancer_status(&lb, seen)).await?, next))
        }
        Err(e) => {
            warn!(load_balancer = %lb.id, error = %e, "backend error on a load balancer");
            let seen = if e.is_transient() {
                BalancerObservation { problem: Some(BalancerProblem::Pending(e.to_string())), healthy: Vec::new() }
            } else {
                failed(e.to_string())
            };
            write(r, &lb, balancer_status(&lb, seen)).await?;
            Ok((Outcome::BackendError, e.is_transient().then_some(RETRY)))
        }
    }
}
