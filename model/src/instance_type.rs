//! Instance types: named machine shapes, in the shape of OSAC's
//! `osac.public.v1.InstanceType` (seed 001's "instance class", e.g.
//! `general.large`): CPU cores, memory in GiB and, optionally, GPUs.
//! Administrators publish them; every tenant lists them and names one in a
//! VM. Their shape (`cores`, `memory_gib`, `gpu`) is fixed at create; their
//! lifecycle is `ACTIVE` → `DEPRECATED` (still usable; a replacement is
//! named) → `OBSOLETE` (refused for new VMs), with the time of each step.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use crate::validation::ValidationErrors;

/// The `@type` of an instance type in API responses.
pub const INSTANCE_TYPE_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.InstanceType";

/// The most cores an instance type may have.
pub const MAX_CORES: u32 = 1024;
/// The most memory an instance type may have, in GiB.
pub const MAX_MEMORY_GIB: u32 = 16384;
/// The most GPUs of an instance type (as OSAC's `GpuSpec.count`).
pub const MAX_GPUS: u32 = 16;
/// The longest description.
pub const MAX_DESCRIPTION: usize = 4096;

crate::wire_states! {
    /// Where an instance type is in its lifecycle.
    InstanceTypeState {
        /// Offered for new VMs.
        Active = "INSTANCE_TYPE_STATE_ACTIVE",
        /// Still accepted; VMs of it are told of the replacement.
        Deprecated = "INSTANCE_TYPE_STATE_DEPRECATED",
        /// Refused for new VMs; kept for the VMs that have it.
        Obsolete = "INSTANCE_TYPE_STATE_OBSOLETE",
    }
}

/// GPUs of an instance type, as OSAC's `GpuSpec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// The PCI vendor and device ids of the GPU, e.g. `10DE:20B0`.
    pub pci_device_selector: String,
    /// The Kubernetes device plugin's resource name, e.g. `nvidia.com/A100`.
    pub resource_name: String,
    /// How many, 1 to 16.
    pub count: u32,
}

/// Another instance type, by id or name (a plain string is taken as either,
/// as the server resolves it); the server answers with both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceTypeReference {
    /// Its id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl InstanceTypeReference {
    /// What the reference names: its id, else its name.
    pub fn key(&self) -> &str {
        if self.id.is_empty() { &self.name } else { &self.id }
    }
}

impl<'de> Deserialize<'de> for InstanceTypeReference {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A map only: serde's derived structs also take a list of their
        // fields' values, which a reference must not.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Plain(String),
            Typed(std::collections::BTreeMap<String, String>),
        }
        let expected = "expected an instance type's name or id, or {\"id\": …} or {\"name\": …}";
        match Either::deserialize(d).map_err(|_| serde::de::Error::custom(expected))? {
            Either::Plain(name) => Ok(Self { id: String::new(), name }),
            Either::Typed(mut t) => {
                let (id, name) = (t.remove("id").unwrap_or_default(), t.remove("name").unwrap_or_default());
                match t.keys().next() {
                    Some(other) => Err(serde::de::Error::custom(format!("{expected}; {other:?} is not a field of it"))),
                    None => Ok(Self { id, name }),
                }
            }
        }
    }
}

/// When an instance type was deprecated and made obsolete, and what
/// replaces it, as OSAC's `InstanceTypeDeprecation`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InstanceTypeDeprecation {
    /// The spec's state, mirrored (output only).
    #[serde(default)]
    pub state: InstanceTypeState,
    /// The instance type to move to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<InstanceTypeReference>,
    /// When it became DEPRECATED (set by the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_timestamp: Option<DateTime<Utc>>,
    /// When it becomes, or became, OBSOLETE: given by the administrator, or
    /// set by the server when the state turns OBSOLETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obsolescence_timestamp: Option<DateTime<Utc>>,
}

/// What an administrator publishes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InstanceTypeSpec {
    /// CPU cores; fixed at create. Absent is 0, refused naming the field
    /// (protobuf's JSON leaves a 0 out).
    #[serde(default)]
    pub cores: u32,
    /// Memory in GiB; fixed at create (absent: 0, refused likewise).
    #[serde(default)]
    pub memory_gib: u32,
    /// What it is for, in Markdown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Where it is in its lifecycle (default ACTIVE).
    #[serde(default)]
    pub state: InstanceTypeState,
    /// Its replacement and the times of its lifecycle, once deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<InstanceTypeDeprecation>,
    /// Its GPUs, if any; fixed at create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSpec>,
}

/// How a caller names the fields a sizing error is about.
pub struct SizingFields<'a> {
    /// The field of a template parameter, by its name.
    pub parameter: &'a dyn Fn(&str) -> String,
    /// The field naming the instance type.
    pub instance_type: &'a str,
}

impl InstanceTypeSpec {
    /// Checks what the spec says by itself, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if !(1..=MAX_CORES).contains(&self.cores) {
            errs.push(format!("{prefix}.cores"), format!("must be between 1 and {MAX_CORES}, got {}", self.cores));
        }
        if !(1..=MAX_MEMORY_GIB).contains(&self.memory_gib) {
            errs.push(format!("{prefix}.memory_gib"), format!("must be between 1 and {MAX_MEMORY_GIB}, got {}", self.memory_gib));
        }
        if self.description.len() > MAX_DESCRIPTION {
            errs.push(format!("{prefix}.description"), format!("must be at most {MAX_DESCRIPTION} bytes"));
        }
        if let Some(gpu) = &self.gpu {
            gpu.check(&format!("{prefix}.gpu"), &mut errs);
        }
        let replacement = self.deprecation.as_ref().and_then(|d| d.replacement.as_ref());
        if self.state == InstanceTypeState::Active && replacement.is_some() {
            errs.push(format!("{prefix}.deprecation.replacement"), "is for a DEPRECATED or OBSOLETE instance type; this one is ACTIVE");
        }
        if replacement.is_some_and(|r| r.key().trim().is_empty()) {
            errs.push(format!("{prefix}.deprecation.replacement"), "must name an instance type by id or name");
        }
        let times = self
            .deprecation
            .iter()
            .flat_map(|d| [("deprecation_timestamp", &d.deprecation_timestamp), ("obsolescence_timestamp", &d.obsolescence_timestamp)]);
        for (field, t) in times {
            if let Some(Err(reason)) = t.as_ref().map(crate::validation::check_timestamp) {
                errs.push(format!("{prefix}.deprecation.{field}"), reason);
            }
        }
        errs.into_result(())
    }

    /// The spec as stored: the deprecation's state mirrors the spec's, and
    /// the times of the lifecycle's steps are set (`now` for a step taken
    /// without one); an ACTIVE type has no deprecation.
    pub fn settled(mut self, now: DateTime<Utc>) -> Self {
        if self.state == InstanceTypeState::Active {
            self.deprecation = None;
            return self;
        }
        let d = self.deprecation.get_or_insert_with(InstanceTypeDeprecation::default);
        d.state = self.state;
        d.deprecation_timestamp.get_or_insert(now);
        if self.state == InstanceTypeState::Obsolete {
            d.obsolescence_timestamp.get_or_insert(now);
        }
        self
    }

    /// This spec with `patch` applied and checked: the shape is fixed, so a
    /// `cores`, `memory_gib` or `gpu` that differs is refused, naming it.
    pub fn patched(&self, patch: &InstanceTypePatchSpec) -> Result<Self, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let fixed = "is fixed at create: publish a new instance type and deprecate this one";
        if patch.cores.is_some_and(|c| c != self.cores) {
            errs.push("object.spec.cores", fixed);
        }
        if patch.memory_gib.is_some_and(|m| m != self.memory_gib) {
            errs.push("object.spec.memory_gib", fixed);
        }
        if patch.gpu.as_ref().is_some_and(|g| Some(g) != self.gpu.as_ref()) {
            errs.push("object.spec.gpu", fixed);
        }
        let mut next = self.clone();
        if let Some(description) = &patch.description {
            next.description.clone_from(description);
        }
        if let Some(state) = patch.state {
            next.state = state;
        }
        if next.state == InstanceTypeState::Active && patch.deprecation.is_none() {
            next.deprecation = None;
        }
        if let Some(d) = &patch.deprecation {
            let kept = next.deprecation.get_or_insert_with(InstanceTypeDeprecation::default);
            if d.replacement.is_some() {
                kept.replacement.clone_from(&d.replacement);
            }
            if d.obsolescence_timestamp.is_some() {
                kept.obsolescence_timestamp = d.obsolescence_timestamp;
            }
        }
        if let Err(e) = next.check("object.spec") {
            errs.extend(e);
        }
        errs.into_result(next)
    }
}

impl InstanceTypeSpec {
    /// Why a VM of `template` may not take this type (named `name`): it is
    /// OBSOLETE (unless the VM has it already, `kept`), or the template
    /// allows other types only.
    pub fn refusal(&self, name: &str, template: &crate::Template, kept: bool) -> Option<String> {
        if self.state == InstanceTypeState::Obsolete && !kept {
            let instead =
                self.deprecation.as_ref().and_then(|d| d.replacement.as_ref()).map(|r| format!(" (its replacement: {:?})", r.name));
            return Some(format!("instance type {name:?} is OBSOLETE: refused for new virtual machines{}", instead.unwrap_or_default()));
        }
        let allowed = &template.wire().spec_defaults.instance_types;
        (!allowed.is_empty() && !allowed.iter().any(|a| a == name))
            .then(|| format!("template {:?} allows the instance types {allowed:?}, not {name:?}", template.id()))
    }

    /// Sizes a VM's `machine` as this type (named `name`) says: its cores
    /// and memory replace what the template's defaults gave. A parameter the
    /// tenant gave in `given` that sets the cores or the memory otherwise is
    /// a conflict, reported in `errs` naming the parameter's field
    /// (`fields.parameter` of its name): the tenant gives one of them, or both
    /// the same. A template's sockets and threads stay: the instance
    /// type's vCPUs must divide by them (else an error naming
    /// `fields.instance_type`).
    pub fn size(
        &self,
        name: &str,
        template: &crate::Template,
        given: &std::collections::BTreeMap<String, crate::ParameterValue>,
        fields: &SizingFields<'_>,
        machine: &mut crate::MachineSpec,
        errs: &mut ValidationErrors,
    ) {
        let memory = u64::from(self.memory_gib) << 30;
        let given_by = |field: &str| template.parameter_setting(field).filter(|p| given.contains_key(*p));
        if let Some(p) = given_by("cpu_cores").filter(|_| machine.cpu.cores != self.cores) {
            errs.push(
                (fields.parameter)(p),
                format!(
                    "is {} cores, but instance type {name:?} has {}: give one of them, or both the same",
                    machine.cpu.cores, self.cores
                ),
            );
        }
        if let Some(p) = given_by("memory").filter(|_| machine.memory_bytes() != memory) {
            errs.push(
                (fields.parameter)(p),
                format!(
                    "is {}, but instance type {name:?} has {} GiB: give one of them, or both the same",
                    machine.memory, self.memory_gib
                ),
            );
        }
        // The template's topology stays, its cores per socket taken from the
        // instance type's vCPUs.
        let per_core = machine.cpu.sockets.max(1) * machine.cpu.threads.max(1);
        if !self.cores.is_multiple_of(per_core) {
            errs.push(
                fields.instance_type,
                format!(
                    "instance type {name:?} has {} vCPUs, which the template's {} sockets of {} threads per core do not divide",
                    self.cores, machine.cpu.sockets, machine.cpu.threads
                ),
            );
        }
        machine.cpu.cores = (self.cores / per_core).max(1);
        machine.memory = crate::Quantity::from_bytes(memory);
        machine.instance_type = Some(name.to_owned());
        // A GPU type's GPUs take the place of the template's.
        if let Some(g) = &self.gpu {
            machine.gpus = (0..g.count)
                .map(|i| crate::Gpu {
                    name: format!("gpu{i}"),
                    device_name: g.resource_name.clone(),
                    pci_device_selector: Some(g.pci_device_selector.clone()),
                })
                .collect();
        }
    }
}

impl GpuSpec {
    fn check(&self, prefix: &str, errs: &mut ValidationErrors) {
        let ids: Vec<&str> = self.pci_device_selector.split(':').collect();
        let hex4 = |s: &str| s.len() == 4 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if ids.len() != 2 || !ids.iter().all(|s| hex4(s)) {
            errs.push(
                format!("{prefix}.pci_device_selector"),
                format!("{:?} is not a PCI vendor:device pair, e.g. 10DE:20B0", self.pci_device_selector),
            );
        }
        if self.resource_name.trim().is_empty() {
            errs.push(format!("{prefix}.resource_name"), "is required, e.g. nvidia.com/A100");
        }
        if !(1..=MAX_GPUS).contains(&self.count) {
            errs.push(format!("{prefix}.count"), format!("must be between 1 and {MAX_GPUS}, got {}", self.count));
        }
    }
}

/// What a PATCH of an instance type may change: its description, its
/// state and its deprecation. `cores`, `memory_gib` and `gpu` may be sent
/// back as they are, not changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InstanceTypePatchSpec {
    /// Must equal the current cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// Must equal the current memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<u32>,
    /// Must equal the current GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSpec>,
    /// The new description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The new state: DEPRECATED (with a replacement) or OBSOLETE, or ACTIVE again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<InstanceTypeState>,
    /// The replacement and the obsolescence time (fields given replace the current ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<InstanceTypeDeprecation>,
}

crate::patch_object! {
    /// The object of a PATCH of an instance type.
    PatchInstanceType { spec: InstanceTypePatchSpec }
}

/// What an instance type is now: OSAC keeps its whole state in the spec,
/// so this is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceTypeStatus {}

crate::api_object! {
    /// An instance type as the API returns it.
    InstanceType { spec: InstanceTypeSpec, status: InstanceTypeStatus, type_url: "type.googleapis.com/osac.public.v1.InstanceType" }
}

impl crate::kind::Object for InstanceType {
    const KIND: crate::ObjectKind = crate::ObjectKind::InstanceType;
    type Spec = InstanceTypeSpec;
    type Status = InstanceTypeStatus;

    /// Its lifecycle state, which OSAC keeps in the spec.
    fn state(spec: &InstanceTypeSpec, _: &InstanceTypeStatus) -> &'static str {
        spec.state.as_str()
    }

    fn assemble(id: String, metadata: crate::Metadata, spec: InstanceTypeSpec, status: InstanceTypeStatus) -> Self {
        InstanceType { type_url: INSTANCE_TYPE_TYPE_URL.into(), id, metadata, spec, status }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let spec: InstanceTypeSpec = serde_json::from_value(spec).unwrap();
        spec.check("spec").err().map(|e| e.iter().map(|f| format!("{}: {}", f.field, f.reason)).collect()).unwrap_or_default()
    }

    #[test]
    fn a_shape_is_checked_field_by_field() {
        assert!(errors(json!({"cores": 2, "memory_gib": 4})).is_empty());
        let e = errors(json!({"cores": 0, "memory_gib": 0, "gpu": {"pci_device_selector": "nvidia", "resource_name": "", "count": 17}}));
        for field in ["spec.cores", "spec.memory_gib", "spec.gpu.pci_device_selector", "spec.gpu.resource_name", "spec.gpu.count"] {
            assert!(e.iter().any(|m| m.starts_with(&format!("{field}:"))), "{field} in {e:?}");
        }
        let e = errors(json!({"cores": 1, "memory_gib": 1, "deprecation": {"replacement": "m2.small"}}));
        assert!(e[0].starts_with("spec.deprecation.replacement: ") && e[0].contains("ACTIVE"), "{e:?}");
    }

    #[test]
    fn a_reference_is_a_name_or_an_object() {
        let plain: InstanceTypeReference = serde_json::from_value(json!("m2.small")).unwrap();
        let typed: InstanceTypeReference = serde_json::from_value(json!({"name": "m2.small"})).unwrap();
        assert_eq!(plain, typed);
        assert!(serde_json::from_value::<InstanceTypeReference>(json!({"nmae": "x"})).is_err());
        assert_eq!(serde_json::to_value(&plain).unwrap(), json!({"name": "m2.small"}));
    }

    #[test]
    fn the_lifecycle_sets_its_times_and_the_shape_stays() {
        let t0 = Utc::now();
        let spec: InstanceTypeSpec = serde_json::from_value(json!({"cores": 2, "memory_gib": 4})).unwrap();
        let deprecate = InstanceTypePatchSpec {
            state: Some(InstanceTypeState::Deprecated),
            deprecation: Some(InstanceTypeDeprecation {
                replacement: Some(InstanceTypeReference { id: String::new(), name: "b".into() }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let deprecated = spec.patched(&deprecate).unwrap().settled(t0);
        let d = deprecated.deprecation.clone().unwrap();
        assert_eq!((d.state, d.deprecation_timestamp, d.obsolescence_timestamp), (InstanceTypeState::Deprecated, Some(t0), None));
        let obsolete = InstanceTypePatchSpec { state: Some(InstanceTypeState::Obsolete), ..Default::default() };
        let t1 = t0 + chrono::Duration::seconds(5);
        let d = deprecated.patched(&obsolete).unwrap().settled(t1).deprecation.unwrap();
        assert_eq!((d.deprecation_timestamp, d.obsolescence_timestamp, d.replacement.unwrap().name), (Some(t0), Some(t1), "b".into()));
        let grow = InstanceTypePatchSpec { cores: Some(4), memory_gib: Some(4), ..Default::default() };
        let e = spec.patched(&grow).unwrap_err();
        assert_eq!(e.iter().map(|f| f.field.as_str()).collect::<Vec<_>>(), ["object.spec.cores"]);
        let active = InstanceTypePatchSpec { state: Some(InstanceTypeState::Active), ..Default::default() };
        assert_eq!(deprecated.patched(&active).unwrap().settled(t1).deprecation, None, "ACTIVE again: no deprecation");
    }
}
