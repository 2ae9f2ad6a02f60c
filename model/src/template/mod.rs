//! Virtual machine templates as published by the provider (the wire format),
//! and their checked form, [`Template`], which validates a tenant's parameters
//! and resolves them into a [`MachineSpec`].
//!
//! - [`parameter`]: parameter definitions, their types and constraints.
//! - [`fields`]: the spec fields a parameter can set.

mod fields;
mod hardware;
mod parameter;
pub mod view;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use fields::SpecField;
pub use parameter::{Kind, Parameter, ParameterDefinition, ParameterType, check_value, describe};

use crate::machine::MachineSpec;
use crate::spec::SpecDefaults;
use crate::validation::{ValidationErrors, check_identifier};
use crate::value::{ParameterValue, TypedValue};

/// The `@type` of a template in API responses.
pub const TEMPLATE_TYPE_URL: &str = "type.googleapis.com/fulfillment.v1.VirtualMachineTemplate";

/// A virtual machine template, as the provider publishes it and as the API returns it.
///
/// Only `id` is required; the seed design's example (parameters with just a
/// `name` and a `default`) is a complete template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VirtualMachineTemplate {
    /// Accepted and ignored on input; set on output.
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub type_url: Option<String>,
    /// Identifier tenants reference, e.g. `simple_vm`.
    pub id: String,
    /// Short human title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Longer description, in Markdown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The parameters tenants may (or must) set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParameterDefinition>,
    /// Spec values used where no parameter overrides them.
    #[serde(default, skip_serializing_if = "SpecDefaults::is_empty")]
    pub spec_defaults: SpecDefaults,
    /// Server-managed: ignored on create, compared for optimistic concurrency on update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
}

impl VirtualMachineTemplate {
    /// The template as published: without the server-managed `@type` and
    /// `metadata`, which is what is compared, stored and compiled.
    pub fn published(mut self) -> Self {
        self.type_url = None;
        self.metadata = None;
        self
    }
}

/// Server-managed template metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TemplateMetadata {
    /// When the template was first published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<DateTime<Utc>>,
    /// When the template was last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_timestamp: Option<DateTime<Utc>>,
    /// Incremented on every change; send it back on update to detect lost updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The name OSAC's clients may send: a template is named by its id, so
    /// it must equal the id (accepted, not stored).
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
}

/// A checked template: built only by [`Template::compile`], so every
/// `Template` has well-typed parameters, valid defaults and compiled patterns.
#[derive(Debug, Clone)]
pub struct Template {
    wire: VirtualMachineTemplate,
    parameters: Vec<Parameter>,
    base: MachineSpec,
}

/// The outcome of validating a tenant's parameters against a template.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Every parameter with a value: the tenant's, else the default.
    pub values: BTreeMap<String, TypedValue>,
    /// The VM spec after parameters and defaults were applied.
    pub spec: MachineSpec,
}

impl Template {
    /// Checks a template as published and compiles it. Reports every problem,
    /// each with its field path (`parameters[1].default.value`).
    pub fn compile(wire: VirtualMachineTemplate) -> Result<Self, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if let Err(reason) = check_identifier(&wire.id) {
            errs.push("id", reason);
        }
        if let Some(name) = wire.metadata.as_ref().and_then(|m| m.name.as_deref()).filter(|n| !n.is_empty() && *n != wire.id) {
            errs.push("metadata.name", format!("must equal the id ({:?}), got {name:?}: a template is named by its id", wire.id));
        }
        let mut parameters = Vec::with_capacity(wire.parameters.len());
        let mut seen = BTreeMap::new();
        let mut targets = BTreeMap::new();
        for (i, p) in wire.parameters.iter().enumerate() {
            let path = format!("parameters[{i}]");
            if let Some(first) = seen.insert(p.name.as_str(), i) {
                errs.push(format!("{path}.name"), format!("duplicates parameters[{first}].name {:?}", p.name));
            }
            if let Some(param) = p.compile(&path, &mut errs) {
                if let Some(t) = param.target
                    && let Some(first) = targets.insert(t, i)
                {
                    errs.push(format!("{path}.maps_to"), format!("spec field {} is already set by parameters[{first}]", t.as_str()));
                }
                parameters.push(param);
            }
        }
        let base = match wire.spec_defaults.compile() {
            Ok(b) => Some(b),
            Err(e) => {
                errs.extend(e);
                None
            }
        };
        match base {
            Some(base) if errs.is_empty() => Ok(Self { wire, parameters, base }),
            _ => Err(errs),
        }
    }

    /// The template's identifier.
    pub fn id(&self) -> &str {
        &self.wire.id
    }

    /// The template as published.
    pub fn wire(&self) -> &VirtualMachineTemplate {
        &self.wire
    }

    /// The checked parameters, in the published order.
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    /// The name of the parameter that sets spec field `field` (`disk_size`), if one does.
    pub fn parameter_setting(&self, field: &str) -> Option<&str> {
        let field = SpecField::named(field)?;
        self.parameters.iter().find(|p| p.target == Some(field)).map(|p| p.name.as_str())
    }

    /// The parameter called `name`.
    pub fn parameter(&self, name: &str) -> Option<&Parameter> {
        self.parameters.iter().find(|p| p.name == name)
    }

    fn valid_names(&self) -> String {
        if self.parameters.is_empty() {
            return "this template takes no parameters".into();
        }
        let mut names: Vec<&str> = self.parameters.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        format!("valid parameters are: {}", names.join(", "))
    }

    /// Validates a tenant's parameters, reporting every problem at once under
    /// `prefix` (e.g. `spec.template_parameters`), then applies the defaults
    /// and resolves the VM spec.
    pub fn resolve(&self, given: &BTreeMap<String, ParameterValue>, prefix: &str) -> Result<Resolved, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        for name in given.keys() {
            if self.parameter(name).is_none() {
                errs.push(format!("{prefix}.{name}"), format!("unknown parameter {name:?}; {}", self.valid_names()));
            }
        }
        let mut values = BTreeMap::new();
        for p in &self.parameters {
            match given.get(&p.name) {
                Some(v) => match v.json().and_then(|j| check_value(&p.kind, &j)) {
                    Ok(t) => {
                        values.insert(p.name.clone(), t);
                    }
                    Err(reason) => errs.push(format!("{prefix}.{}.value", p.name), reason),
                },
                None if p.required => {
                    errs.push(format!("{prefix}.{}", p.name), format!("required parameter is missing (a {})", p.kind.parameter_type()));
                }
                None => {
                    if let Some(d) = &p.default {
                        values.insert(p.name.clone(), d.clone());
                    }
                }
            }
        }
        if !errs.is_empty() {
            errs.0.sort_by(|a, b| a.field.cmp(&b.field));
            return Err(errs);
        }
        let mut spec = self.base.clone();
        for p in &self.parameters {
            if let (Some(target), Some(v)) = (p.target, values.get(&p.name)) {
                let path = format!("{prefix}.{}.value", p.name);
                if let Err(reason) = target.apply(&mut spec, v) {
                    errs.push(path, reason);
                }
            }
        }
        if let Err(e) = spec.check() {
            for fe in e.0 {
                // Name the parameter that set the field, where there is one.
                let field = self
                    .parameters
                    .iter()
                    .find(|p| p.target.is_some_and(|t| fe.field == format!("spec.{}", t.as_str())) && values.contains_key(&p.name))
                    .map(|p| format!("{prefix}.{}.value", p.name))
                    .unwrap_or(fe.field);
                errs.push(field, fe.reason);
            }
        }
        errs.into_result(Resolved { values, spec })
    }

    /// Converts a parameter given as text (the CLI's `-p key=value`, a
    /// Terraform map of strings) into the JSON value of the declared type.
    pub fn value_from_text(&self, name: &str, text: &str) -> Result<Value, crate::value::ValueError> {
        let p = self
            .parameter(name)
            .ok_or_else(|| crate::value::ValueError::UnknownParameter { name: name.to_owned(), valid: self.valid_names() })?;
        TypedValue::from_text(p.kind.parameter_type(), text).map(|t| t.to_json())
    }
}

impl SpecDefaults {
    fn compile(&self) -> Result<MachineSpec, ValidationErrors> {
        let mut spec = MachineSpec::default();
        let mut errs = ValidationErrors::default();
        if let Some(c) = self.cpu_cores {
            spec.cpu.cores = c;
        }
        if let Some(m) = &self.memory {
            spec.memory = m.clone();
        }
        if let Some(d) = &self.disk_size {
            spec.root_disk_mut().size = d.clone();
        }
        if let Some(i) = &self.image {
            spec.boot.image = i.clone();
        }
        spec.gpus = self.gpus.clone();
        spec.exposed_ports = self.exposed_ports.clone();
        spec.cloud_init.ssh_keys = self.ssh_keys.clone();
        spec.cloud_init.user_data = self.user_data.clone();
        for (i, d) in self.data_disks.iter().enumerate() {
            let field = format!("spec_defaults.data_disks[{i}]");
            if let Err(e) = crate::validation::check_dns_label(&d.name) {
                errs.push(format!("{field}.name"), e);
            } else if d.name == crate::machine::ROOT_DISK {
                errs.push(format!("{field}.name"), "\"root\" is the boot disk's name");
            } else {
                spec.disks.push(hardware::data_disk(d, &field, &mut errs));
            }
        }
        self.apply_hardware(&mut spec, &mut errs);
        spec.live = crate::machine::LiveLimits { max_cpu_cores: self.max_cpu_cores, max_memory: self.max_memory.clone() };
        spec.profile = self.profile();
        spec.profile.check("spec_defaults", &mut errs);
        if let Some(p) = &self.readiness_probe {
            match p.compile("spec_defaults.readiness_probe") {
                Ok(p) => spec.readiness_probe = Some(p),
                Err(e) => errs.extend(e),
            }
        }
        if let Err(e) = spec.check() {
            for fe in e.0 {
                errs.push(fe.field.replacen("spec.", "spec_defaults.", 1), fe.reason);
            }
        }
        errs.into_result(spec)
    }
}
