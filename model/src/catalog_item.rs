//! Compute instance catalog items, in the shape of OSAC's
//! `osac.public.v1.ComputeInstanceCatalogItem`: an administrator's curated
//! offering over a template. It has a title and a description, names the
//! template, is published (tenants see it) or not, and says of some fields
//! of a VM's spec ([`CatalogField`]) what they default to, whether a
//! tenant may set them and, if so, the JSON Schema a value must meet. A
//! VM created from one (`spec.catalog_item`) gets its template and its
//! defaults, and keeps the fields it fixes for its life.
//!
//! Unlike the other kinds, OSAC's object is flat: `title`, `description`,
//! `template`, `published` and `field_definitions` sit beside `id` and
//! `metadata`, with no `spec` or `status`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validation::ValidationErrors;
use crate::vm::{PowerState, VmDisk, VmImage};
use crate::{CreateObject, InstanceTypeReference, Metadata, MetadataInput, ParameterValue, VirtualMachineSpec};

/// The `@type` of a catalog item in API responses.
pub const CATALOG_ITEM_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.ComputeInstanceCatalogItem";

/// Most field definitions one catalog item may have.
pub const MAX_FIELD_DEFINITIONS: usize = 64;
/// Longest title, in characters.
pub const MAX_TITLE: usize = 256;
/// Longest description or validation schema, in bytes.
pub const MAX_TEXT: usize = 64 * 1024;

/// What an administrator writes of a catalog item (all but `id` and `metadata`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CatalogItemSpec {
    /// A one-line description for a UI or CLI.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// A long description, in Markdown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The template its VMs are made of, by name (`"small"` or `{"name": …}`).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(default, with = "crate::reference::key")]
    pub template: String,
    /// Whether tenants see it and may create VMs from it.
    #[serde(default)]
    pub published: bool,
    /// What it says of the fields of its VMs' specs.
    #[serde(default)]
    pub field_definitions: Vec<FieldDefinition>,
}

/// What a catalog item says of one field of its VMs' specs (OSAC's `FieldDefinition`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FieldDefinition {
    /// The field, in the compute instance spec's names ([`CatalogField`]).
    pub path: String,
    /// Its label in a UI.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// Whether a tenant may set it; if not, the item's default (or the
    /// template's) is the value, for the VM's life.
    #[serde(default)]
    pub editable: bool,
    /// The value when the tenant gives none.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// A JSON Schema (draft 2020-12) a tenant's value must meet.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub validation_schema: String,
}

/// A catalog item as the API returns it: flat, as OSAC's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ComputeInstanceCatalogItem {
    /// Always `type.googleapis.com/osac.public.v1.ComputeInstanceCatalogItem`.
    #[serde(rename = "@type")]
    pub type_url: String,
    /// UUID assigned by the server.
    pub id: String,
    /// Name, timestamps and version.
    pub metadata: Metadata,
    /// Everything else.
    #[serde(flatten)]
    pub spec: CatalogItemSpec,
}

/// Nothing: a catalog item is what its administrator wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogItemStatus {}

impl crate::Object for ComputeInstanceCatalogItem {
    const KIND: crate::ObjectKind = crate::ObjectKind::ComputeInstanceCatalogItem;
    type Spec = CatalogItemSpec;
    type Status = CatalogItemStatus;

    fn state(spec: &CatalogItemSpec, _: &CatalogItemStatus) -> &'static str {
        if spec.published { "PUBLISHED" } else { "UNPUBLISHED" }
    }

    fn assemble(id: String, metadata: Metadata, spec: CatalogItemSpec, _: CatalogItemStatus) -> Self {
        Self { type_url: CATALOG_ITEM_TYPE_URL.into(), id, metadata, spec }
    }
}

/// A change of a catalog item: the fields given replace the item's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PatchCatalogItem {
    /// Labels, annotations, and the version the change is based on.
    #[serde(default)]
    pub metadata: Option<MetadataInput>,
    /// Its title.
    #[serde(default)]
    pub title: Option<String>,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
    /// The template new VMs of it are made of (VMs made already keep theirs).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, with = "crate::reference::opt_key")]
    pub template: Option<String>,
    /// Whether tenants see it.
    #[serde(default)]
    pub published: Option<bool>,
    /// Its field definitions, all of them.
    #[serde(default)]
    pub field_definitions: Option<Vec<FieldDefinition>>,
}

/// A flat object as OSAC writes it, split into what every object has and
/// the rest (`T`, read strictly: a field it lacks is refused by name).
#[derive(Debug, Clone, PartialEq)]
pub struct Flat<T> {
    /// `id`, if given.
    pub id: Option<String>,
    /// `metadata`, if given.
    pub metadata: Option<MetadataInput>,
    /// Everything else.
    pub rest: T,
}

impl<T: serde::de::DeserializeOwned> Flat<T> {
    /// Reads `object` (`@type` is accepted and ignored); problems name
    /// fields under `object`.
    pub fn read(object: Value) -> Result<Self, ValidationErrors> {
        let fail = |field: &str, e: serde_json::Error| ValidationErrors::one(format!("object{field}"), e.to_string());
        let Value::Object(mut map) = object else { return Err(ValidationErrors::one("object", "must be a JSON object")) };
        map.remove("@type");
        let id = map.remove("id").map(serde_json::from_value::<Option<String>>).transpose().map_err(|e| fail(".id", e))?.flatten();
        let id = id.filter(|id| !id.is_empty());
        let metadata = map.remove("metadata").map(serde_json::from_value).transpose().map_err(|e| fail(".metadata", e))?;
        let rest = serde_json::from_value(Value::Object(map)).map_err(|e| fail("", e))?;
        Ok(Self { id, metadata, rest })
    }
}

impl From<Flat<CatalogItemSpec>> for CreateObject<CatalogItemSpec> {
    fn from(f: Flat<CatalogItemSpec>) -> Self {
        CreateObject { type_url: None, id: f.id, metadata: f.metadata, spec: f.rest, status: None }
    }
}

/// A field of a VM's spec a catalog item may speak of, by its path in
/// OSAC's compute instance spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogField {
    /// `template_parameters.NAME`: a parameter's plain value.
    Parameter(String),
    /// `run_strategy`: `Always` or `Halted`.
    RunStrategy,
    /// `ssh_public_key`.
    SshPublicKey,
    /// `user_data`.
    UserData,
    /// `boot_disk.size_gib`.
    BootDiskSize,
    /// `boot_disk.storage_tier` (applies to a boot disk the VM has).
    BootDiskTier,
    /// `instance_type`: a name or id.
    InstanceType,
    /// `disk_image`: an image's name or id, or a URL.
    DiskImage,
}

/// The paths [`CatalogField::parse`] reads, for messages.
pub const PATHS: &str = "template_parameters.NAME, run_strategy, ssh_public_key, user_data, boot_disk.size_gib, \
                         boot_disk.storage_tier, instance_type, disk_image";

impl CatalogField {
    /// The field at `path`, if a catalog item may speak of it.
    pub fn parse(path: &str) -> Option<Self> {
        Some(match path {
            "run_strategy" => Self::RunStrategy,
            "ssh_public_key" => Self::SshPublicKey,
            "user_data" => Self::UserData,
            "boot_disk.size_gib" => Self::BootDiskSize,
            "boot_disk.storage_tier" => Self::BootDiskTier,
            "instance_type" => Self::InstanceType,
            "disk_image" => Self::DiskImage,
            other => {
                let name = other.strip_prefix("template_parameters.")?;
                crate::validation::check_dns_label(&name.replace('_', "-")).ok()?;
                Self::Parameter(name.to_owned())
            }
        })
    }

    /// The field as a VM request names it (under `object.spec`).
    pub fn vm_field(&self) -> String {
        match self {
            Self::Parameter(name) => format!("template_parameters.{name}"),
            Self::RunStrategy => "state".into(),
            Self::SshPublicKey => "ssh_public_key".into(),
            Self::UserData => "user_data".into(),
            Self::BootDiskSize => "boot_disk.size_gib".into(),
            Self::BootDiskTier => "boot_disk.storage_tier".into(),
            Self::InstanceType => "instance_type".into(),
            Self::DiskImage => "image".into(),
        }
    }

    /// Its value in `spec`, in the compute instance's terms; `None` when not set.
    pub fn get(&self, spec: &VirtualMachineSpec) -> Option<Value> {
        self.read(spec).map(whole)
    }

    fn read(&self, spec: &VirtualMachineSpec) -> Option<Value> {
        match self {
            Self::Parameter(name) => spec.template_parameters.get(name).map(|p| p.json().unwrap_or_else(|_| p.value.clone())),
            Self::RunStrategy => match spec.state {
                PowerState::Started => None,
                PowerState::Stopped => Some("Halted".into()),
                PowerState::Paused => Some("Paused".into()),
            },
            Self::SshPublicKey => spec.ssh_public_key.clone().map(Value::from),
            Self::UserData => spec.user_data.clone().map(Value::from),
            Self::BootDiskSize => spec.boot_disk.as_ref().map(|d| d.size_gib.into()),
            Self::BootDiskTier => spec.boot_disk.as_ref().and_then(|d| d.storage_tier.clone()).map(Value::from),
            Self::InstanceType => spec.instance_type.as_ref().map(|t| t.key().into()),
            Self::DiskImage => spec.image.as_ref().map(|i| i.source_ref.clone().into()),
        }
    }

    /// Sets it in `spec` to `value`, or says why `value` does not fit it.
    pub fn set(&self, spec: &mut VirtualMachineSpec, value: &Value) -> Result<(), FieldValueError> {
        let value = &whole(value.clone());
        let text = || value.as_str().map(str::to_owned).ok_or_else(|| FieldValueError::NotText(value.clone()));
        match self {
            Self::Parameter(name) => drop(spec.template_parameters.insert(name.clone(), ParameterValue::new(value.clone()))),
            Self::RunStrategy => {
                spec.state = match value.as_str() {
                    Some("Always") => PowerState::Started,
                    Some("Halted") => PowerState::Stopped,
                    _ => return Err(FieldValueError::RunStrategy(value.clone())),
                }
            }
            Self::SshPublicKey => spec.ssh_public_key = Some(text()?),
            Self::UserData => spec.user_data = Some(text()?),
            Self::BootDiskSize => {
                let gib = value.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| FieldValueError::Size(value.clone()))?;
                let tier = spec.boot_disk.take().and_then(|d| d.storage_tier);
                spec.boot_disk = Some(VmDisk { size_gib: gib, storage_tier: tier });
            }
            Self::BootDiskTier => match spec.boot_disk.as_mut() {
                Some(d) => d.storage_tier = Some(text()?),
                None => return Err(FieldValueError::TierWithoutDisk),
            },
            Self::InstanceType => {
                spec.instance_type =
                    Some(serde_json::from_value::<InstanceTypeReference>(value.clone()).map_err(FieldValueError::InstanceType)?);
            }
            Self::DiskImage => spec.image = Some(VmImage { source_type: String::new(), source_ref: text()? }),
        }
        Ok(())
    }
}

/// Why a value does not fit a [`CatalogField`].
#[derive(Debug, thiserror::Error)]
pub enum FieldValueError {
    /// A text field given something else.
    #[error("must be a string, got {0}")]
    NotText(Value),
    /// A run strategy other than the two a VM asks for.
    #[error("must be Always or Halted, got {0}")]
    RunStrategy(Value),
    /// A disk size that is not a whole number of GiB.
    #[error("must be a size in GiB, got {0}")]
    Size(Value),
    /// A storage tier with no boot disk to apply to.
    #[error("applies to a boot disk: give boot_disk.size_gib too")]
    TierWithoutDisk,
    /// Not an instance type reference.
    #[error("{0}")]
    InstanceType(serde_json::Error),
}

/// `v` with its whole numbers as integers: ProtoJSON's `Value` carries
/// every number as a double, and `1.0` is meant as the integer 1.
pub fn whole(v: Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(whole).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, whole(v))).collect()),
        other => other,
    }
}

impl CatalogItemSpec {
    /// The item with `p`'s fields in place of its own.
    pub fn patched(&self, p: PatchCatalogItem) -> Self {
        Self {
            title: p.title.unwrap_or_else(|| self.title.clone()),
            description: p.description.unwrap_or_else(|| self.description.clone()),
            template: p.template.unwrap_or_else(|| self.template.clone()),
            published: p.published.unwrap_or(self.published),
            field_definitions: p.field_definitions.unwrap_or_else(|| self.field_definitions.clone()),
        }
    }

    /// Checks what the spec says by itself, naming fields under `prefix`
    /// (`object`: the object is flat). Validation schemas are the server's
    /// to compile.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.template.trim().is_empty() {
            errs.push(format!("{prefix}.template"), "is required: the name of the template its VMs are made of");
        }
        if self.title.chars().count() > MAX_TITLE {
            errs.push(format!("{prefix}.title"), format!("is longer than {MAX_TITLE} characters"));
        }
        if self.description.len() > MAX_TEXT {
            errs.push(format!("{prefix}.description"), format!("is longer than {MAX_TEXT} bytes"));
        }
        if self.field_definitions.len() > MAX_FIELD_DEFINITIONS {
            errs.push(format!("{prefix}.field_definitions"), format!("has more than {MAX_FIELD_DEFINITIONS} definitions"));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, d) in self.field_definitions.iter().enumerate() {
            let at = format!("{prefix}.field_definitions[{i}]");
            match CatalogField::parse(&d.path) {
                None => errs.push(format!("{at}.path"), format!("{:?} is not a field a catalog item may set: one of {PATHS}", d.path)),
                Some(_) if !seen.insert(d.path.as_str()) => errs.push(format!("{at}.path"), format!("{:?} is defined twice", d.path)),
                Some(field) => {
                    if let Some(Err(why)) = d.default.as_ref().map(|v| field.set(&mut VirtualMachineSpec::new(""), v)) {
                        errs.push(format!("{at}.default"), why.to_string());
                    } else if field == CatalogField::RunStrategy && d.editable && d.default.as_ref().is_some_and(|v| v != "Always") {
                        // A VM asking for Always is not told from one asking nothing.
                        errs.push(
                            format!("{at}.default"),
                            "of an editable run_strategy must be Always: a VM that wants Halted asks for it",
                        );
                    }
                }
            }
            if d.validation_schema.len() > MAX_TEXT {
                errs.push(format!("{at}.validation_schema"), format!("is longer than {MAX_TEXT} bytes"));
            }
        }
        errs.into_result(())
    }

    /// Applies the item to the VM `spec` a tenant asked for: a field it
    /// fixes must be unset (or set to the item's value), a field the
    /// tenant sets must meet its schema (`valid` checks a value against a
    /// schema, and says why not), and unset fields take their defaults.
    /// Problems name the VM's fields under `object.spec`.
    pub fn apply<E: std::fmt::Display>(
        &self,
        spec: &mut VirtualMachineSpec,
        valid: impl Fn(&str, &Value) -> Result<(), E>,
        errs: &mut ValidationErrors,
    ) {
        for d in &self.field_definitions {
            let Some(field) = CatalogField::parse(&d.path) else { continue };
            let at = format!("object.spec.{}", field.vm_field());
            match field.get(spec) {
                Some(given) if !d.editable && d.default.clone().map(whole) != Some(given.clone()) => {
                    errs.push(at, "is fixed by the catalog item: leave it out, the item sets it");
                }
                Some(given) if !d.validation_schema.is_empty() => {
                    if let Err(why) = valid(&d.validation_schema, &given) {
                        errs.push(at, format!("does not meet the catalog item's schema: {why}"));
                    }
                }
                Some(_) => {}
                None => {
                    if let Some(Err(why)) = d.default.as_ref().map(|v| field.set(spec, v)) {
                        errs.push(at, why.to_string());
                    }
                }
            }
        }
    }

    /// Refuses a change from `current` to `next` of a field the item
    /// fixes: its VMs keep those for their life.
    pub fn check_kept(&self, current: &VirtualMachineSpec, next: &VirtualMachineSpec, errs: &mut ValidationErrors) {
        let fixed = self.field_definitions.iter().filter(|d| !d.editable).filter_map(|d| CatalogField::parse(&d.path));
        for field in fixed.filter(|f| f.get(current) != f.get(next)) {
            errs.push(format!("object.spec.{}", field.vm_field()), "is fixed by the VM's catalog item: it cannot change");
        }
    }
}

#[cfg(test)]
mod tests;
