//! VMs as KubeVirt `VirtualMachine`s: rendered by the model (the same
//! rendering the Crossplane function uses), applied server-side into the
//! tenant's namespace with the server's labels, finalizer and restart
//! generation; observed from the watched VM, VMI and floating-IP Service.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kube::core::DynamicObject;
use serde_json::{Value, json};
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, Requests, Requeue, VmObservation, VmSpec, VmTarget};
use vmaas_model::k8s::names::derived;
use vmaas_model::k8s::observe::observe_vm;
use vmaas_model::k8s::policy::security_policy;
use vmaas_model::k8s::render::{PodNetwork, VmOptions, render_vm};
use vmaas_model::k8s::volume::{VolumeDisk as KubeDisk, attach};
use vmaas_model::machine::DEFAULT_IMAGE;
use vmaas_model::{ObjectKind, Observation, Phase, PowerState, Reason};

use crate::SubnetMode;
use crate::clone::{self, Cloning};
use crate::cluster::as_json;
use crate::names::{FINALIZER, ID_LABEL, METALLB_IPS, RESTART_ANNOTATION, generation, label_value, labels, selector_of};
use crate::shared::Shared;
use crate::watch::Watched;
use crate::{migration, restore};

/// The NIC whose address is the VM's internal one.
const FIRST_NIC: &str = "default";
/// How often a VM on its way somewhere is looked at even without a change.
const SETTLING: Duration = Duration::from_secs(15);

/// The VM driver.
pub struct Vms(pub(crate) Arc<Shared>);

/// What one render of a VM depends on beyond its target.
struct Render<'a> {
    /// The request generations acted on.
    acted: Requests,
    /// A restore is under way: the VM is rendered stopped.
    halted: bool,
    /// The claims its disks are, by disk (a clone's, a moved VM's).
    claims: &'a BTreeMap<String, String>,
    /// Its disks that arrived with it from another cluster.
    arrived: std::collections::BTreeSet<String>,
}

/// What one VM renders into, ready to apply.
struct Manifests {
    ns: String,
    vm: Value,
    service: Option<Value>,
    policy: Option<Value>,
    /// Its NICs' MultiNetworkPolicies (subnets as secondary networks).
    multi_policies: Vec<Value>,
    /// The cluster instance type and preference the VM references.
    shapes: Vec<Value>,
}

impl Shared {
    /// The objects of `t` as `r` has them.
    fn manifests(&self, t: &VmTarget, r: &Render<'_>, (ns, network): (String, PodNetwork)) -> Result<Manifests, BackendError> {
        let secondary = self.cfg.subnets == SubnetMode::Secondary;
        let (address, nics) = match secondary {
            true => (None, self.secondary_nics(t, &ns)?),
            false => (self.fixed_address(t, &ns)?, vec![]),
        };
        let mut machine = t.spec.machine.clone();
        if machine.boot.image == DEFAULT_IMAGE {
            machine.boot.image = self.cfg.default_image.clone();
        }
        if let Some(image) = &t.spec.imported_image {
            machine.boot.image = crate::image::data_source_name(image);
        }
        let options = VmOptions {
            name: t.name.clone(),
            namespace: ns.clone(),
            power: if r.halted { PowerState::Stopped } else { t.spec.power },
            network,
            address,
            pod_mac: (!nics.is_empty()).then(|| vmaas_backend::Attachment::mac_for(&format!("{}/pod", t.id), 0)),
            attachments: nics,
            data_source_namespace: self.cfg.images_namespace.clone(),
            storage_class: self.cfg.storage_class.clone(),
            floating_ip: self.cfg.floating_ip.clone(),
            shapes: vmaas_model::k8s::render::Shapes::Cluster,
            claims: r.claims.clone(),
            arrived: r.arrived.clone(),
            tenant_labels: t.spec.labels.clone(),
            tenant_annotations: t.spec.annotations.clone(),
        };
        let mut rendered = render_vm(&machine, &options);
        let disks: Vec<KubeDisk> = t.spec.volumes.iter().map(|v| KubeDisk { volume: v.volume.clone(), serial: v.serial.clone() }).collect();
        attach(&mut rendered.vm, &disks);
        let invalid = |e| BackendError::invalid("rendering the KubeVirt VM", e);
        let mut vm = serde_json::to_value(&rendered.vm).map_err(invalid)?;
        let shapes = std::mem::take(&mut rendered.shape_objects);
        let own = labels(ObjectKind::VirtualMachine, &t.id);
        for (k, v) in &own {
            vm["metadata"]["labels"][k] = json!(v);
            vm["spec"]["template"]["metadata"]["labels"][k] = json!(v);
        }
        for (k, v) in
            [(RESTART_ANNOTATION, r.acted.restart), (migration::ANNOTATION, r.acted.migrate), (restore::ANNOTATION, r.acted.restore)]
        {
            vm["metadata"]["annotations"][k] = json!(v.to_string());
        }
        if !r.claims.is_empty() {
            vm["metadata"]["annotations"][clone::CLAIMS] = json!(serde_json::to_string(&r.claims).map_err(invalid)?);
        }
        if vm["spec"].get("instancetype").is_some() {
            // What the instance type gives (its domain has none of it), for
            // the cluster's room (`room.rs`).
            vm["metadata"]["annotations"][crate::room::VCPUS_ANNOTATION] = json!(machine.cpu.vcpus().to_string());
            vm["metadata"]["annotations"][crate::room::MEMORY_ANNOTATION] = json!(machine.memory.as_str());
            if !machine.gpus.is_empty() {
                let gpus = crate::room::gpus_annotation(machine.gpus.iter().map(|g| g.device_name.as_str()));
                vm["metadata"]["annotations"][crate::room::GPUS_ANNOTATION] = json!(gpus);
            }
        }
        if secondary {
            // A NAT gateway's EgressIP selects the pods of its network's VMs.
            for a in &t.spec.attachments {
                vm["spec"]["template"]["metadata"]["labels"][crate::nat::network_label(&a.network)] = json!("true");
            }
        }
        vm["metadata"]["finalizers"] = json!([FINALIZER]);
        let service = match rendered.service {
            Some(s) => {
                let mut s = serde_json::to_value(&s).map_err(invalid)?;
                s["apiVersion"] = json!("v1");
                s["kind"] = json!("Service");
                for (k, v) in &own {
                    s["metadata"]["labels"][k] = json!(v);
                }
                if !t.spec.external_ips.is_empty() {
                    let ips: Vec<String> = t.spec.external_ips.iter().map(ToString::to_string).collect();
                    s["metadata"]["annotations"][METALLB_IPS] = json!(ips.join(","));
                }
                Some(s)
            }
            None => None,
        };
        let policy = t.spec.attachments.first().and_then(|a| a.firewall.as_ref()).map(|f| {
            let mut p =
                security_policy(&derived(&t.name, "security-groups"), &ns, &json!({ ID_LABEL: label_value(&t.id) }), &f.ingress, &f.egress);
            p["metadata"]["labels"] = json!(own);
            p
        });
        let multi_policies = if secondary { self.multi_policies(t, &ns)? } else { vec![] };
        Ok(Manifests { ns, vm, service, policy, multi_policies, shapes })
    }

    /// Where VM `t` runs: its subnet's namespace, on the subnet's network
    /// (a primary UDN), or its tenant's on the pod network (and, subnets
    /// being secondary networks, on each of its subnets).
    pub(crate) async fn placement(&self, t: &VmTarget) -> Result<(String, PodNetwork), BackendError> {
        if self.cfg.subnets == SubnetMode::Secondary {
            return Ok((self.home(&t.tenant, None).await?, PodNetwork::Masquerade));
        }
        match t.spec.attachments.as_slice() {
            [] => Ok((self.home(&t.tenant, None).await?, PodNetwork::Masquerade)),
            [a] => Ok((self.home(&t.tenant, Some(&a.subnet)).await?, PodNetwork::PrimaryUdn)),
            _ => Err(BackendError::invalid(
                "placing the VM",
                "with subnets as primary UDNs (--subnet-networks primary-udn) a VM is on one subnet, its namespace's primary network; it has several (--subnet-networks secondary puts a VM on several)",
            )),
        }
    }

    /// The address the server's IPAM gave VM `t` on its subnet, in CIDR
    /// form with the prefix of the subnet's UDN, for OVN-K to give the
    /// guest. A subnet whose UDN is not seen yet: wait (a launcher pod's
    /// address is decided once, when it is made).
    fn fixed_address(&self, t: &VmTarget, ns: &str) -> Result<Option<String>, BackendError> {
        let Some(a) = t.spec.attachments.first() else { return Ok(None) };
        let udn = self.udns.get(ns, crate::subnet::UDN).map(|u| as_json(&u));
        let cidr = udn.as_ref().and_then(|u| u["spec"]["layer2"]["subnets"][0].as_str().map(str::to_owned));
        let prefix = cidr.as_deref().and_then(|c| c.split_once('/')).map(|(_, p)| p.to_owned());
        match prefix {
            Some(p) => Ok(Some(format!("{}/{p}", a.ip))),
            None => Err(BackendError::transient("giving the VM its address", "its subnet's network is not in the cluster yet")),
        }
    }

    /// Applies `wanted` (VM `t`'s policies of the kind `watched` holds:
    /// NetworkPolicies or MultiNetworkPolicies, in `ns`) where the
    /// cluster's differ in spec or in an annotation vmaas sets, and deletes
    /// the VM's others (a NIC without security groups: everything passes).
    async fn sync_policies(&self, watched: &Watched, t: &VmTarget, ns: &str, wanted: &[Value]) -> Result<(), BackendError> {
        let ar = watched.resource();
        let seen = watched.of(&t.id);
        let name = |o: &DynamicObject| o.metadata.name.clone().unwrap_or_default();
        for p in wanted {
            let current = seen.iter().find(|o| p["metadata"]["name"] == name(o).as_str()).map(|o| as_json(o));
            let annotations = p["metadata"]["annotations"].as_object().into_iter().flatten();
            let same =
                current.is_some_and(|c| c["spec"] == p["spec"] && annotations.clone().all(|(k, v)| &c["metadata"]["annotations"][k] == v));
            if !same {
                self.cluster.apply(ar, p).await?;
            }
        }
        for o in seen.iter().filter(|o| !wanted.iter().any(|p| p["metadata"]["name"] == name(o).as_str())) {
            self.cluster.delete(ar, ns, &name(o)).await?;
        }
        Ok(())
    }

    /// Acts on a pending restart of `t` (KubeVirt VM `current`): KubeVirt
    /// makes a new VMI for a VM that should run, so deleting the VMI
    /// restarts it. Returns the restart generation acted on.
    async fn restart(&self, t: &VmTarget, ns: &str, current: Option<&DynamicObject>) -> Result<u64, BackendError> {
        let wanted = t.spec.requests.restart;
        let acted = current.map(|vm| generation(vm, RESTART_ANNOTATION)).unwrap_or(wanted);
        if acted < wanted && t.spec.power == PowerState::Started {
            self.cluster.delete(&self.cluster.res.vmi, ns, &t.name).await?;
            info!(vm = %t.id, "restart: deleted the VMI");
        }
        Ok(acted.max(wanted))
    }

    /// Acts on a pending live migration of `t`: a migration of its VMI
    /// (none when it has no VMI: only a running VM migrates). Returns the
    /// migration generation acted on.
    async fn migrate(&self, t: &VmTarget, ns: &str, current: Option<&DynamicObject>) -> Result<u64, BackendError> {
        let wanted = t.spec.requests.migrate;
        let acted = current.map(|vm| generation(vm, migration::ANNOTATION)).unwrap_or(wanted);
        if acted < wanted {
            let vmi = self.vmis.get(ns, &t.name).filter(|_| t.spec.power == PowerState::Started);
            match vmi.as_deref().map(|v| migration::refusal(&as_json(v))) {
                None => info!(vm = %t.id, "live migration dropped: the VM has no VMI"),
                Some(Some(why)) => {
                    info!(vm = %t.id, reason = %why.message, "live migration refused: KubeVirt says the VM cannot move");
                    self.set_refusal(&t.id, Some(why));
                }
                Some(None) => {
                    let m = migration::manifest(ns, &t.name, &t.id, wanted, t.spec.migrate_to.as_deref());
                    self.cluster.apply(&self.cluster.res.migration, &m).await?;
                    self.set_refusal(&t.id, None);
                    info!(vm = %t.id, node = ?t.spec.migrate_to, "live migration started");
                }
            }
        }
        Ok(acted.max(wanted))
    }

    /// Records (or clears) why the last migration or restore request of `id` was refused.
    pub(crate) fn set_refusal(&self, id: &str, why: Option<Reason>) {
        if let Ok(mut r) = self.refused.lock() {
            match why {
                Some(w) => r.insert(id.to_owned(), w),
                None => r.remove(id),
            };
        }
    }

    /// Applies the cluster instance types and preferences the VM references,
    /// each once per server run while it stays the same.
    async fn apply_shapes(&self, m: &Manifests) -> Result<(), BackendError> {
        for obj in &m.shapes {
            let key =
                format!("shape/{}/{}", obj["kind"].as_str().unwrap_or_default(), obj["metadata"]["name"].as_str().unwrap_or_default());
            let text = obj.to_string();
            if self.applied_text.lock().map(|a| a.get(&key) == Some(&text)).unwrap_or(false) {
                continue;
            }
            let res = &self.cluster.res;
            let ar = if obj["kind"] == "VirtualMachineClusterPreference" { &res.preference } else { &res.instancetype };
            self.cluster.apply(ar, obj).await?;
            if let Ok(mut a) = self.applied_text.lock() {
                a.insert(key, text);
            }
        }
        Ok(())
    }

    /// Applies the VM when it differs from what was last applied (or is not there).
    async fn apply_vm(&self, t: &VmTarget, m: &Manifests, present: bool) -> Result<Option<DynamicObject>, BackendError> {
        let h = crate::fingerprint::of(&m.vm);
        if present && self.applied.lock().map(|a| a.get(&t.id) == Some(&h)).unwrap_or(false) {
            return Ok(None);
        }
        let applied = self.cluster.apply(&self.cluster.res.vm, &m.vm).await?;
        if let Ok(mut a) = self.applied.lock() {
            a.insert(t.id.clone(), h);
        }
        if let Ok(mut c) = self.conflicts.lock() {
            match applied.conflicts.is_empty() {
                true => c.remove(&t.id),
                false => c.insert(t.id.clone(), Reason::new("FieldConflict", crate::conflict::Conflict::describe(&applied.conflicts))),
            };
        }
        let applied = applied.object;
        info!(vm = %t.id, namespace = %m.ns, name = %t.name, "applied the KubeVirt VM");
        Ok(Some(applied))
    }

    /// Takes over the KubeVirt VM KubeVirt's clone made for `t`: `m` applied by force.
    async fn take_over_vm(&self, t: &VmTarget, m: &Manifests) -> Result<DynamicObject, BackendError> {
        let applied = self.cluster.take_over(&self.cluster.res.vm, &m.vm).await?;
        if let Ok(mut a) = self.applied.lock() {
            a.insert(t.id.clone(), crate::fingerprint::of(&m.vm));
        }
        info!(vm = %t.id, namespace = %m.ns, name = %t.name, "took over the KubeVirt VM its clone made");
        Ok(applied)
    }

    /// Applies the floating-IP Service, owned by the KubeVirt VM `owner`,
    /// or deletes it when the VM has none.
    async fn sync_service(&self, t: &VmTarget, m: &Manifests, owner: Option<&DynamicObject>) -> Result<(), BackendError> {
        let res = &self.cluster.res;
        let seen = self.services.of(&t.id);
        let Some(mut svc) = m.service.clone() else {
            for s in seen {
                self.cluster.delete(&res.service, &m.ns, s.metadata.name.as_deref().unwrap_or_default()).await?;
            }
            return Ok(());
        };
        if let Some(uid) = owner.and_then(|o| o.metadata.uid.clone()) {
            svc["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": t.name, "uid": uid, "controller": true}]);
        }
        let name = svc["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let mut current = seen.iter().find(|s| s.metadata.name.as_deref() == Some(name.as_str()));
        if current.is_some_and(|c| releases_address(c, &svc)) {
            // MetalLB keeps a Service's address while it stays valid, even
            // once no longer asked for: the Service is made again, so the
            // external IP is free for the VM it moves to.
            self.cluster.delete(&res.service, &m.ns, &name).await?;
            current = None;
        }
        if current.is_none_or(|c| !same_service(c, &svc)) {
            self.cluster.apply(&res.service, &svc).await?;
        }
        Ok(())
    }
}

/// Whether the watched Service holds an address it asked MetalLB for and
/// `want` no longer asks for (an external IP detached or moved).
fn releases_address(seen: &DynamicObject, want: &Value) -> bool {
    let seen = as_json(seen);
    let asked = |v: &Value| -> Vec<String> {
        v["metadata"]["annotations"][METALLB_IPS].as_str().map(|a| a.split(',').map(|s| s.trim().to_owned()).collect()).unwrap_or_default()
    };
    let (before, now) = (asked(&seen), asked(want));
    let held = seen["status"]["loadBalancer"]["ingress"].as_array().into_iter().flatten().filter_map(|i| i["ip"].as_str());
    held.into_iter().any(|ip| before.iter().any(|b| b == ip) && !now.iter().any(|n| n == ip))
}

/// Whether the watched Service already has what `want` asks (ports, annotations, owner).
fn same_service(seen: &DynamicObject, want: &Value) -> bool {
    let seen = as_json(seen);
    let annotations_held =
        want["metadata"]["annotations"].as_object().is_none_or(|a| a.iter().all(|(k, v)| seen["metadata"]["annotations"][k] == *v));
    // The address asked of MetalLB goes when the external IP does.
    let asked_held = seen["metadata"]["annotations"][METALLB_IPS] == want["metadata"]["annotations"][METALLB_IPS];
    let owner_held =
        want["metadata"]["ownerReferences"].is_null() || seen["metadata"]["ownerReferences"] == want["metadata"]["ownerReferences"];
    let ports =
        |v: &Value| v["spec"]["ports"].as_array().map(|p| p.iter().map(|p| (p["port"].clone(), p["protocol"].clone())).collect::<Vec<_>>());
    annotations_held && asked_held && owner_held && ports(&seen) == ports(want)
}

impl Shared {
    /// VM `t` as the cluster last showed it, DEGRADED for `why` (the
    /// cluster does not answer): nothing is asked of the cluster.
    fn last_seen(&self, t: &VmTarget, ns: &str, why: Reason) -> (VmObservation, Requeue) {
        let current = self.vms.get(ns, &t.name);
        let mut observation = self.observed(t, ns, current.as_deref().map(as_json));
        observation.degraded = Some(why);
        let acted = |annotation| current.as_deref().map(|c| generation(c, annotation)).unwrap_or_default();
        let acted =
            Requests { restart: acted(RESTART_ANNOTATION), migrate: acted(migration::ANNOTATION), restore: acted(restore::ANNOTATION) };
        let volumes = self.presence(ns, &t.spec.volumes);
        (VmObservation { observation, acted, volumes }, Requeue::after(crate::health::EVERY * 3))
    }

    /// What KubeVirt VM `vm` of `t` (in `ns`), its VMI and its floating-IP
    /// Service, as last watched, say of it.
    fn observed(&self, t: &VmTarget, ns: &str, vm: Option<Value>) -> Observation {
        let vmi = self.vmis.get(ns, &t.name).map(|o| as_json(&o));
        let svc = self.services.of(&t.id).first().map(|o| as_json(o));
        observe_vm(vm.as_ref(), vmi.as_ref(), svc.as_ref(), t.spec.power.holds_host(), FIRST_NIC)
    }
}

/// A VM that is not (yet) what it should be, with why.
fn waiting(reason: &str, message: impl Into<String>) -> (VmObservation, Requeue) {
    let observation = Observation::new(Phase::Starting(Reason::new(reason, message)));
    (VmObservation { observation, acted: Requests::default(), volumes: Default::default() }, Requeue::after(Duration::from_secs(1)))
}

#[async_trait]
impl vmaas_backend::Driver<VmSpec, VmObservation> for Vms {
    async fn ensure(&self, t: &VmTarget) -> Result<(VmObservation, Requeue), BackendError> {
        let s = &self.0;
        if let Some(why) = s.health.unreachable() {
            let seen = s.vms.of(&t.id);
            let ns = seen.first().and_then(|v| v.metadata.namespace.clone()).unwrap_or_default();
            return Ok(s.last_seen(t, &ns, why));
        }
        let (ns, network) = s.placement(t).await?;
        if t.spec.attachments.is_empty() {
            s.ensure_namespace(&ns, &t.tenant).await?;
        }
        let current = s.vms.get(&ns, &t.name);
        if let Some(c) = &current {
            if c.metadata.labels.as_ref().and_then(|l| l.get(ID_LABEL)) != Some(&label_value(&t.id)) {
                let held = c.metadata.labels.as_ref().and_then(|l| l.get(ID_LABEL)).map_or("no vmaas object", String::as_str);
                let why = format!(
                    "the KubeVirt VM {ns}/{} belongs to another object ({ID_LABEL}: {held}): a deleted VM's, still being removed, or one made outside vmaas",
                    t.name
                );
                return Ok(waiting("NameInUse", why));
            }
            if c.metadata.deletion_timestamp.is_some() {
                // Deleted in the cluster by someone else: let it go, then make it again.
                s.cluster.release(&s.cluster.res.vm, c).await?;
                return Ok(waiting("Recreating", "the KubeVirt VM was deleted in the cluster; it is made again"));
            }
        }
        let (mut claims, take_over) = match s.clone_step(t, &ns, current.as_deref()).await? {
            Cloning::Claims(claims) => (claims, false),
            Cloning::TakeOver(claims) => (claims, true),
            Cloning::Waiting(why) => return Ok(waiting("Cloning", why)),
            Cloning::Failed(why) => {
                let observation = Observation::new(Phase::Failed(why));
                return Ok((VmObservation { observation, acted: Requests::default(), volumes: Default::default() }, Requeue::AwaitChange));
            }
        };
        let mut arrived = std::collections::BTreeSet::new();
        if let Some(dv) = s.arrived(&t.id) {
            claims.insert("rootdisk".to_owned(), dv);
            arrived.insert("rootdisk".to_owned());
        }
        let restoring = s.restore(t, &ns, current.as_deref()).await?;
        let acted = Requests {
            restart: s.restart(t, &ns, current.as_deref()).await?,
            migrate: s.migrate(t, &ns, current.as_deref()).await?,
            restore: restoring.acted,
        };
        let m =
            s.manifests(t, &Render { acted, halted: restoring.under_way.is_some(), claims: &claims, arrived }, (ns.clone(), network))?;
        s.apply_shapes(&m).await?;
        let applied = match take_over {
            true => Some(s.take_over_vm(t, &m).await?),
            false => s.apply_vm(t, &m, current.is_some()).await?,
        };
        s.sync_service(t, &m, applied.as_ref().or(current.as_deref())).await?;
        s.sync_policies(&s.policies, t, &ns, m.policy.as_slice()).await?;
        if let Some(watched) = &s.multi_policies {
            s.sync_policies(watched, t, &ns, &m.multi_policies).await?;
        }
        s.sync_pause(t, &ns).await?;
        let vm = applied.as_ref().map(as_json).or_else(|| current.as_deref().map(as_json));
        let mut observation = s.observed(t, &ns, vm);
        if s.cfg.subnets == SubnetMode::Secondary && !t.spec.attachments.is_empty() {
            // The server's addresses, which the guest is told: its first NIC's is its own.
            observation.nic_ips = t.spec.attachments.iter().map(|a| a.ip.to_string()).collect();
            observation.internal_ip = observation.nic_ips.first().cloned();
        } else if !t.spec.attachments.is_empty() {
            observation.nic_ips = observation.internal_ip.iter().cloned().collect();
        }
        if observation.phase == Phase::Ready && m.service.is_some() && observation.external_ip.is_none() {
            // Exposed ports are part of being ready: reachable from outside.
            let why = "the guest is ready; its floating IP (a LoadBalancer Service) has no address yet";
            let name = m.service.as_ref().and_then(|s| s["metadata"]["name"].as_str()).unwrap_or_default();
            let why = crate::allocation::explained(&s.cluster, &ns, name, why).await;
            observation.phase = Phase::Starting(Reason::new("FloatingIpPending", &why));
        }
        let refused = s.refused.lock().ok().and_then(|r| r.get(&t.id).cloned());
        match (migration::state(&s.migrations.of(&t.id)), refused) {
            (_, Some(why)) => observation.degraded = Some(why),
            (Ok(Some(r)), None) if matches!(observation.phase, Phase::Ready | Phase::Starting(_)) => {
                observation.phase = Phase::Migrating(r);
            }
            (Err(why), None) => observation.degraded = Some(why),
            _ => {}
        }
        if let Some(why) = restoring.under_way.filter(|_| t.spec.power == PowerState::Started) {
            observation.phase = Phase::Starting(why);
        }
        if observation.degraded.is_none() {
            observation.degraded = s.conflicts.lock().ok().and_then(|c| c.get(&t.id).cloned());
        }
        let requeue = match observation.phase {
            Phase::Ready | Phase::Stopped | Phase::Paused => Requeue::AwaitChange,
            _ => Requeue::after(SETTLING),
        };
        Ok((VmObservation { observation, acted, volumes: s.presence(&ns, &t.spec.volumes) }, requeue))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let s = &self.0;
        let res = &s.cluster.res;
        let selector = selector_of(id);
        for ar in [&res.service, &res.migration, &res.network_policy, &res.vm_restore, &res.vm_clone] {
            s.cluster.delete_all_of(ar, id).await?;
        }
        if s.multi_policies.is_some() {
            s.cluster.delete_all_of(&res.multi_policy, id).await?;
        }
        for vm in s.cluster.list(&res.vm, &selector).await? {
            if vm.metadata.deletion_timestamp.is_none() {
                s.cluster.delete_object(&res.vm, &vm).await?;
            }
        }
        if s.cluster.delete_all_of(&res.vmi, id).await? > 0 {
            return Ok(Cleanup::InProgress);
        }
        // The VMI is gone: nothing hangs off the VM any more.
        let vms = s.cluster.list(&res.vm, &selector).await?;
        for vm in &vms {
            if vm.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER) {
                s.cluster.release(&res.vm, vm).await?;
            }
        }
        if let Ok(mut a) = s.applied.lock() {
            a.remove(id);
        }
        // A moved VM's boot disk, made from no template of the VM's.
        let disks = s.cluster.delete_all_of(&res.data_volume, id).await?;
        Ok(if vms.is_empty() && disks == 0 { Cleanup::Done } else { Cleanup::InProgress })
    }
}
