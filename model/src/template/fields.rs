//! The spec fields a template parameter can set: one table row per field,
//! with its name, the parameter that sets it by default, its type and how
//! it writes a checked value into a [`MachineSpec`]. A new field is one row.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::machine::MachineSpec;
use crate::spec::{ExposedPort, Gpu};
use crate::value::TypedValue;
use crate::value::{ParameterType, describe};

/// One settable field.
struct FieldDef {
    /// Its name in `spec_defaults` and `maps_to`, e.g. `memory`.
    name: &'static str,
    /// The parameter that sets it when the parameter says nothing else, e.g. `vm_memory`.
    well_known: &'static str,
    /// The parameter type it takes.
    ty: ParameterType,
    /// Writes a value of type `ty` into the machine.
    set: fn(&mut MachineSpec, &TypedValue) -> Result<(), SetError>,
}

const FIELDS: &[FieldDef] = &[
    FieldDef { name: "cpu_cores", well_known: "vm_cpu_cores", ty: ParameterType::Integer, set: set_cpu_cores },
    FieldDef { name: "memory", well_known: "vm_memory", ty: ParameterType::Quantity, set: set_memory },
    FieldDef { name: "disk_size", well_known: "vm_disk_size", ty: ParameterType::Quantity, set: set_disk_size },
    FieldDef { name: "image", well_known: "vm_image", ty: ParameterType::String, set: set_image },
    FieldDef { name: "gpus", well_known: "vm_gpus", ty: ParameterType::List, set: set_gpus },
    FieldDef { name: "exposed_ports", well_known: "vm_exposed_ports", ty: ParameterType::List, set: set_exposed_ports },
    FieldDef { name: "ssh_keys", well_known: "vm_ssh_keys", ty: ParameterType::List, set: set_ssh_keys },
    FieldDef { name: "user_data", well_known: "vm_user_data", ty: ParameterType::String, set: set_user_data },
];

fn set_cpu_cores(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::Integer(n) = v else { return Err(mismatch("cpu_cores", v)) };
    m.cpu.cores = u32::try_from(*n).map_err(|_| SetError::CpuCores(*n))?;
    Ok(())
}

fn set_memory(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::Quantity(q) = v else { return Err(mismatch("memory", v)) };
    m.memory = q.clone();
    Ok(())
}

fn set_disk_size(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::Quantity(q) = v else { return Err(mismatch("disk_size", v)) };
    m.root_disk_mut().size = q.clone();
    Ok(())
}

fn set_image(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::String(s) = v else { return Err(mismatch("image", v)) };
    m.boot.image = s.clone();
    Ok(())
}

fn set_gpus(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::List(l) = v else { return Err(mismatch("gpus", v)) };
    m.gpus =
        l.iter().enumerate().map(|(i, d)| Gpu { name: format!("gpu{i}"), device_name: d.clone(), pci_device_selector: None }).collect();
    Ok(())
}

fn set_exposed_ports(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::List(l) = v else { return Err(mismatch("exposed_ports", v)) };
    m.exposed_ports = l.iter().map(|s| ExposedPort::parse(s)).collect::<Result<_, _>>()?;
    Ok(())
}

fn set_ssh_keys(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::List(l) = v else { return Err(mismatch("ssh_keys", v)) };
    crate::nocloud::check_ssh_keys(l)?;
    m.cloud_init.ssh_keys = l.clone();
    Ok(())
}

fn set_user_data(m: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
    let TypedValue::String(s) = v else { return Err(mismatch("user_data", v)) };
    crate::nocloud::check_user_data(s)?;
    m.cloud_init.user_data = Some(s.clone());
    Ok(())
}

fn mismatch(field: &'static str, v: &TypedValue) -> SetError {
    SetError::Mismatch { field, value: describe(&v.to_json()) }
}

/// Why a value cannot be written into a spec field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// A value of another type than the field takes.
    #[error("spec field {field} cannot take {value}")]
    Mismatch {
        /// The field.
        field: &'static str,
        /// The value, described.
        value: String,
    },
    /// A CPU count out of range.
    #[error("must be between 1 and {max}, got {0}", max = u32::MAX)]
    CpuCores(i64),
    /// An exposed port that does not parse.
    #[error(transparent)]
    Port(#[from] crate::spec::PortError),
    /// SSH keys or user data refused.
    #[error(transparent)]
    GuestConfig(#[from] crate::nocloud::GuestConfigError),
}

/// The reason, as a field error takes it.
impl From<SetError> for String {
    fn from(e: SetError) -> String {
        e.to_string()
    }
}

/// A name that is no spec field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown spec field {name:?}: expected one of {expected}")]
pub struct UnknownField {
    /// The name.
    pub name: String,
    /// The fields there are.
    pub expected: String,
}

/// The spec field a parameter sets: one of the rows of a fixed table,
/// written by name (`cpu_cores`, `memory`, `disk_size`, `image`, `gpus`,
/// `exposed_ports`, `ssh_keys`, `user_data`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpecField(usize);

impl SpecField {
    /// Every field, in table order.
    pub fn all() -> impl Iterator<Item = Self> {
        (0..FIELDS.len()).map(Self)
    }

    fn def(self) -> &'static FieldDef {
        &FIELDS[self.0]
    }

    /// The field called `name` in `spec_defaults`.
    pub fn named(name: &str) -> Option<Self> {
        Self::all().find(|f| f.as_str() == name)
    }

    /// The spec field a parameter named `name` sets when it says nothing
    /// else: `vm_cpu_cores`, `vm_memory`, `vm_disk_size`, `vm_image`,
    /// `vm_gpus`, `vm_exposed_ports`, `vm_ssh_keys`, `vm_user_data`.
    pub fn well_known(name: &str) -> Option<Self> {
        Self::all().find(|f| f.def().well_known == name)
    }

    /// The parameter type this field takes.
    pub fn parameter_type(self) -> ParameterType {
        self.def().ty
    }

    /// The field's name in `spec_defaults`.
    pub fn as_str(self) -> &'static str {
        self.def().name
    }

    /// Writes a checked value of this field's type into `machine`.
    pub fn apply(self, machine: &mut MachineSpec, v: &TypedValue) -> Result<(), SetError> {
        (self.def().set)(machine, v)
    }
}

impl fmt::Debug for SpecField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpecField({})", self.as_str())
    }
}

impl fmt::Display for SpecField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SpecField {
    type Err = UnknownField;
    fn from_str(s: &str) -> Result<Self, UnknownField> {
        Self::named(s).ok_or_else(|| {
            let names: Vec<&str> = Self::all().map(Self::as_str).collect();
            UnknownField { name: s.to_owned(), expected: names.join(", ") }
        })
    }
}

impl Serialize for SpecField {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SpecField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_has_a_well_known_parameter_and_takes_its_type() {
        for f in SpecField::all() {
            assert_eq!(SpecField::well_known(&format!("vm_{}", f.as_str())), Some(f));
            assert_eq!(f.as_str().parse::<SpecField>(), Ok(f));
        }
        let mut m = MachineSpec::default();
        let memory = SpecField::named("memory").unwrap();
        assert!(memory.apply(&mut m, &TypedValue::Integer(4)).unwrap_err().to_string().contains("cannot take the number 4"));
        assert!("colour".parse::<SpecField>().unwrap_err().to_string().contains("expected one of cpu_cores, memory"));
        assert_eq!(serde_json::to_string(&memory).unwrap(), "\"memory\"");
    }
}
