//! The connection to the cluster and the few verbs the drivers use on it:
//! server-side apply as field manager `vmaas` (never forced: see
//! [`crate::conflict`]), delete, and removing the
//! server's finalizer under optimistic concurrency. Every object is handled
//! as a [`DynamicObject`] of one of the [`Resources`], so the same code
//! applies a KubeVirt VM, a Service or a UDN.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, Config};
use serde_json::{Value, json};
use tracing::warn;
use vmaas_backend::BackendError;

use crate::conflict::{self, Conflict};
use crate::names::{FINALIZER, MANAGED_BY, MANAGER};

/// The kinds of object the backend makes or reads.
#[derive(Debug, Clone)]
pub struct Resources {
    /// `kubevirt.io/v1` VirtualMachine.
    pub vm: ApiResource,
    /// `kubevirt.io/v1` VirtualMachineInstance.
    pub vmi: ApiResource,
    /// `kubevirt.io/v1` VirtualMachineInstanceMigration.
    pub migration: ApiResource,
    /// `cdi.kubevirt.io/v1beta1` DataVolume.
    pub data_volume: ApiResource,
    /// `cdi.kubevirt.io/v1beta1` DataSource.
    pub data_source: ApiResource,
    /// `k8s.ovn.org/v1` UserDefinedNetwork.
    pub udn: ApiResource,
    /// `v1` Service.
    pub service: ApiResource,
    /// `v1` Namespace.
    pub namespace: ApiResource,
    /// `networking.k8s.io/v1` NetworkPolicy.
    pub network_policy: ApiResource,
    /// `discovery.k8s.io/v1` EndpointSlice.
    pub endpoint_slice: ApiResource,
    /// `v1` Node.
    pub node: ApiResource,
    /// KubeVirt's cluster-wide instance types.
    pub instancetype: ApiResource,
    /// KubeVirt's cluster-wide preferences.
    pub preference: ApiResource,
    /// KubeVirt's VirtualMachineSnapshot.
    pub vm_snapshot: ApiResource,
    /// KubeVirt's VirtualMachineRestores.
    pub vm_restore: ApiResource,
    /// KubeVirt's VirtualMachineClones.
    pub vm_clone: ApiResource,
    /// KubeVirt's VirtualMachineExports.
    pub vm_export: ApiResource,
    /// Secrets (export tokens, registry credentials).
    pub secret: ApiResource,
    /// OVN-K's ClusterUserDefinedNetworks (subnets as secondary networks).
    pub cudn: ApiResource,
    /// MultiNetworkPolicies (security groups on secondary networks).
    pub multi_policy: ApiResource,
    /// OVN-K's EgressIPs (NAT gateways).
    pub egress_ip: ApiResource,
}

fn crd(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            vm: crd("kubevirt.io", "v1", "VirtualMachine", "virtualmachines"),
            vmi: crd("kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances"),
            migration: crd("kubevirt.io", "v1", "VirtualMachineInstanceMigration", "virtualmachineinstancemigrations"),
            data_volume: crd("cdi.kubevirt.io", "v1beta1", "DataVolume", "datavolumes"),
            data_source: crd("cdi.kubevirt.io", "v1beta1", "DataSource", "datasources"),
            udn: crd("k8s.ovn.org", "v1", "UserDefinedNetwork", "userdefinednetworks"),
            service: ApiResource::erase::<Service>(&()),
            namespace: ApiResource::erase::<Namespace>(&()),
            network_policy: ApiResource::erase::<NetworkPolicy>(&()),
            endpoint_slice: ApiResource::erase::<EndpointSlice>(&()),
            node: ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
            instancetype: crd(
                "instancetype.kubevirt.io",
                "v1beta1",
                "VirtualMachineClusterInstancetype",
                "virtualmachineclusterinstancetypes",
            ),
            preference: crd("instancetype.kubevirt.io", "v1beta1", "VirtualMachineClusterPreference", "virtualmachineclusterpreferences"),
            vm_snapshot: crd("snapshot.kubevirt.io", "v1beta1", "VirtualMachineSnapshot", "virtualmachinesnapshots"),
            vm_export: crd("export.kubevirt.io", "v1beta1", "VirtualMachineExport", "virtualmachineexports"),
            secret: ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
            vm_clone: crd("clone.kubevirt.io", "v1beta1", "VirtualMachineClone", "virtualmachineclones"),
            vm_restore: crd("snapshot.kubevirt.io", "v1beta1", "VirtualMachineRestore", "virtualmachinerestores"),
            cudn: crd("k8s.ovn.org", "v1", "ClusterUserDefinedNetwork", "clusteruserdefinednetworks"),
            multi_policy: crd("k8s.cni.cncf.io", "v1beta1", "MultiNetworkPolicy", "multi-networkpolicies"),
            egress_ip: crd("k8s.ovn.org", "v1", "EgressIP", "egressips"),
        }
    }
}

/// What an apply did: the object as the cluster has it, and the fields
/// left to other managers.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The object after the apply.
    pub object: DynamicObject,
    /// The fields another manager holds, not applied.
    pub conflicts: Vec<Conflict>,
}

/// A client of the cluster.
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    /// The kinds it handles.
    pub res: Resources,
}

/// Whether `e` is the API server's answer `code`.
pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// A failure of the cluster while doing `context`: refused input (a
/// schema or CEL rule, 422) cannot pass by retrying; anything else may.
pub fn failure(context: impl Into<String>, e: kube::Error) -> BackendError {
    if is_status(&e, 422) || is_status(&e, 400) { BackendError::invalid(context, e) } else { BackendError::transient(context, e) }
}

impl Cluster {
    /// Connects with `kubeconfig`, else the in-cluster configuration (or
    /// `KUBECONFIG`, or `~/.kube/config`).
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Self, BackendError> {
        let config = match kubeconfig {
            Some(path) => {
                let file = Kubeconfig::read_from(path)
                    .map_err(|e| BackendError::invalid(format!("reading the kubeconfig {}", path.display()), e))?;
                Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| BackendError::invalid(format!("using the kubeconfig {}", path.display()), e))?
            }
            None => Config::infer().await.map_err(|e| BackendError::invalid("finding a Kubernetes configuration", e))?,
        };
        let client = Client::try_from(config).map_err(|e| BackendError::invalid("making the Kubernetes client", e))?;
        Ok(Self { client, res: Resources::default() })
    }

    /// The client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The API of `ar` objects in namespace `ns` (cluster-scoped when empty).
    pub fn api(&self, ar: &ApiResource, ns: &str) -> Api<DynamicObject> {
        if ns.is_empty() { Api::all_with(self.client.clone(), ar) } else { Api::namespaced_with(self.client.clone(), ns, ar) }
    }

    /// Server-side apply of `obj` (with its `apiVersion`, `kind`, name and
    /// namespace), never by force: the fields another manager holds are
    /// left to it, the rest applied, and what was left is returned (and
    /// logged) to be reported.
    pub async fn apply(&self, ar: &ApiResource, obj: &Value) -> Result<Applied, BackendError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        let api = self.api(ar, ns);
        let context = || format!("applying {} {ns}/{name}", ar.kind);
        let mut yielded = obj.clone();
        let mut conflicts = Vec::new();
        // Each round leaves the fields the last refusal named; a few suffice.
        for _ in 0..4 {
            match api.patch(name, &PatchParams::apply(MANAGER).validation_strict(), &Patch::Apply(&yielded)).await {
                Ok(mut object) => {
                    strip(&mut object);
                    if !conflicts.is_empty() {
                        warn!(kind = %ar.kind, namespace = ns, name, conflicts = %Conflict::describe(&conflicts), "applied without the fields other managers hold");
                    }
                    return Ok(Applied { object, conflicts });
                }
                Err(e) if is_status(&e, 409) => {
                    let found = Conflict::of(&e);
                    if found.is_empty() || !found.iter().all(|c| conflict::remove(&mut yielded, &c.field)) {
                        return Err(failure(context(), e));
                    }
                    conflicts.extend(found);
                }
                Err(e) => return Err(failure(context(), e)),
            }
        }
        Err(BackendError::transient(context(), Conflict::describe(&conflicts)))
    }

    /// Server-side apply of `obj` by force: the fields it sets become the
    /// server's whoever held them. Only for an object KubeVirt made for
    /// vmaas to take over (a clone's VM); everything else goes through
    /// [`Cluster::apply`], which never forces.
    pub async fn take_over(&self, ar: &ApiResource, obj: &Value) -> Result<DynamicObject, BackendError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        let params = PatchParams::apply(MANAGER).validation_strict().force();
        let mut object = self
            .api(ar, ns)
            .patch(name, &params, &Patch::Apply(obj))
            .await
            .map_err(|e| failure(format!("taking over {} {ns}/{name}", ar.kind), e))?;
        strip(&mut object);
        Ok(object)
    }

    /// Deletes `ns/name` of `ar` (already gone is done).
    pub async fn delete(&self, ar: &ApiResource, ns: &str, name: &str) -> Result<(), BackendError> {
        match self.api(ar, ns).delete(name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(failure(format!("deleting {} {ns}/{name}", ar.kind), e)),
        }
    }

    /// Removes the server's finalizer from `obj`, only if it has not
    /// changed since it was read (its resourceVersion): a conflict is left
    /// for the next pass, which reads it again.
    pub async fn release(&self, ar: &ApiResource, obj: &DynamicObject) -> Result<(), BackendError> {
        let finalizers: Vec<&String> = obj.metadata.finalizers.iter().flatten().filter(|f| *f != FINALIZER).collect();
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.metadata.resource_version}});
        let (ns, name) = place_of(obj);
        match self.api(ar, &ns).patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => Err(failure(format!("removing the finalizer of {} {ns}/{name}", ar.kind), e)),
        }
    }

    /// Every `ar` object labelled with `selector`, in every namespace, read
    /// from the API server itself (not a cache).
    pub async fn list(&self, ar: &ApiResource, selector: &str) -> Result<Vec<DynamicObject>, BackendError> {
        let list = self
            .api(ar, "")
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| failure(format!("listing {} labelled {selector}", ar.kind), e))?;
        Ok(list.items)
    }

    /// Makes namespace `ns` for `tenant`, as `vmaas_model::k8s::render::namespace`
    /// renders it (labelled for a primary UDN when `primary_udn`), with
    /// `labels` besides (those of the vmaas object it belongs to, if any).
    pub async fn namespace(
        &self,
        ns: &str,
        tenant: &str,
        primary_udn: bool,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), BackendError> {
        let mut obj = serde_json::to_value(vmaas_model::k8s::render::namespace(ns, primary_udn, &crate::names::label_value(tenant)))
            .map_err(|e| BackendError::invalid("rendering a namespace", e))?;
        obj["apiVersion"] = json!("v1");
        obj["kind"] = json!("Namespace");
        for (k, v) in labels {
            obj["metadata"]["labels"][k] = json!(v);
        }
        obj["metadata"]["labels"][MANAGED_BY] = json!(MANAGER);
        obj["metadata"]["annotations"][crate::names::TENANT_ANNOTATION] = json!(tenant);
        self.apply(&self.res.namespace, &obj).await.map(drop)
    }

    /// Deletes `o` (an object as listed or watched).
    pub async fn delete_object(&self, ar: &ApiResource, o: &DynamicObject) -> Result<(), BackendError> {
        self.delete(ar, o.metadata.namespace.as_deref().unwrap_or_default(), o.metadata.name.as_deref().unwrap_or_default()).await
    }

    /// Deletes every `ar` object of vmaas object `id`, as the API server
    /// lists them; how many there were.
    pub async fn delete_all_of(&self, ar: &ApiResource, id: &str) -> Result<usize, BackendError> {
        let found = self.list(ar, &crate::names::selector_of(id)).await?;
        for o in &found {
            self.delete_object(ar, o).await?;
        }
        Ok(found.len())
    }
}

/// The namespace (empty when cluster-scoped) and name of `o`.
pub fn place_of(o: &DynamicObject) -> (String, String) {
    (o.metadata.namespace.clone().unwrap_or_default(), o.metadata.name.clone().unwrap_or_default())
}

/// An object as JSON (what the model's `observe` functions read).
pub fn as_json(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// Drops `o`'s `managedFields`: the API server's record of which manager
/// set which field, which vmaas never reads (conflicts come from the apply's
/// answer) and which for a VM is as large as its spec.
pub fn strip(o: &mut DynamicObject) {
    o.metadata.managed_fields = None;
}
