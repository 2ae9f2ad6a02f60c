//! The `vmaas_virtual_machine` resource's plan and state as one typed
//! value, in the terraform-plugin-framework way: decoded once from
//! Terraform's value ([`VmModel::decode`]), turned into the API's requests
//! from there, and encoded back once from the VM the API returns
//! ([`crate::vm_state::vm_state`]).

use std::collections::BTreeMap;

use rmpv::Value;
use vmaas_client::WaitFor;
use vmaas_model::vm::{MetadataInput, SpecPatch, VmImage};
use vmaas_model::{
    CreateVirtualMachine, InstanceTypeReference, NetworkAttachment, ParameterValue, PatchVirtualMachine, Placement, PowerState,
    VirtualMachineSpec, VmDisk,
};

use crate::value::{get, string};
use crate::vm_state::{nics, placement, planned_keys};

pub use crate::timeouts::{DEFAULT_TIMEOUT, Timeouts};

/// A VM as Terraform plans it or keeps it in its state.
#[derive(Debug, Clone, PartialEq)]
pub struct VmModel {
    /// The API's id, once created.
    pub id: Option<String>,
    /// Its name.
    pub name: String,
    /// The template, by id.
    pub template: String,
    /// The catalog item it is made from, by name or id.
    pub catalog_item: Option<String>,
    /// The parameters as written (text, typed against the template later).
    pub template_parameters: Value,
    /// Started or stopped.
    pub power: PowerState,
    /// Its NICs on subnets.
    pub network_attachments: Vec<NetworkAttachment>,
    /// Its cloud-init user data.
    pub user_data: Option<String>,
    /// Its SSH keys, one per line.
    pub ssh_public_key: Option<String>,
    /// The image it boots, when not the template's.
    pub image: Option<String>,
    /// Where it must run.
    pub placement: Option<Placement>,
    /// Its instance type, by name or id.
    pub instance_type: Option<String>,
    /// How long it lives, as written.
    pub ttl: Option<String>,
    /// The snapshot its disks start as, by id or name (a clone).
    pub clone_of_snapshot: Option<String>,
    /// Its boot disk, when not the template's.
    pub boot_disk: Option<VmDisk>,
    /// Its disks beside the template's.
    pub additional_disks: Vec<VmDisk>,
    /// Whether an external IP is made and attached with it.
    pub auto_external_ip_attachment: bool,
    /// How long each operation waits.
    pub timeouts: Timeouts,
}

impl VmModel {
    /// The model of a plan or a state.
    pub fn decode(v: &Value) -> Self {
        Self {
            id: string(get(v, "id")),
            name: string(get(v, "name")).unwrap_or_default(),
            template: string(get(v, "template")).unwrap_or_default(),
            catalog_item: string(get(v, "catalog_item")),
            template_parameters: get(v, "template_parameters").clone(),
            power: string(get(v, "state")).and_then(|s| s.parse().ok()).unwrap_or(PowerState::Started),
            network_attachments: nics(v),
            // The write-only value, when the apply has it, else the kept one.
            user_data: string(get(v, "user_data_wo")).or_else(|| string(get(v, "user_data"))),
            ssh_public_key: planned_keys(v),
            image: string(get(v, "image")),
            placement: placement(v),
            instance_type: string(get(v, "instance_type")),
            ttl: string(get(v, "ttl")),
            clone_of_snapshot: string(get(v, "clone_of_snapshot")),
            boot_disk: crate::vm_disks::planned_boot_disk(v),
            additional_disks: crate::vm_disks::planned_additional_disks(v),
            auto_external_ip_attachment: get(v, "auto_external_ip_attachment").as_bool().unwrap_or(false),
            timeouts: Timeouts::decode(v, &crate::timeouts::TEN_MINUTES),
        }
    }

    /// What an apply waits for: READY, or STOPPED for a stopped VM.
    pub fn wait_for(&self) -> WaitFor {
        self.power.into()
    }

    /// The create request, with the parameters typed against the template.
    pub fn create_request(&self, template_parameters: BTreeMap<String, ParameterValue>) -> CreateVirtualMachine {
        CreateVirtualMachine {
            type_url: None,
            id: None,
            metadata: Some(MetadataInput { name: Some(self.name.clone()), ..Default::default() }),
            spec: VirtualMachineSpec {
                template: self.template.clone(),
                catalog_item: self.catalog_item.clone(),
                template_parameters,
                state: self.power,
                network_attachments: self.network_attachments.clone(),
                user_data: self.user_data.clone(),
                ssh_public_key: self.ssh_public_key.clone(),
                image: self.image.clone().map(|r| VmImage { source_type: String::new(), source_ref: r }),
                placement: self.placement.clone(),
                instance_type: self.instance_type_reference(),
                ttl: self.ttl.clone(),
                expires_at: None,
                clone_of: self.clone_of_snapshot.clone().map(|s| vmaas_model::CloneOf { snapshot: Some(s), compute_instance: None }),
                boot_disk: self.boot_disk.clone(),
                additional_disks: self.additional_disks.clone(),
                auto_external_ip_attachment: self.auto_external_ip_attachment,
            },
            status: None,
        }
    }

    /// The change an update from `prior` makes: its power state, its
    /// instance type, its placement (a move) and, when it changed, its TTL
    /// (counted from now; none removes the end); anything else replaces the VM.
    pub fn patch(&self, prior: &VmModel) -> PatchVirtualMachine {
        let ttl = (self.ttl != prior.ttl).then(|| self.ttl.clone().unwrap_or_default());
        let boot_disk = self.boot_disk.clone().filter(|d| Some(d) != prior.boot_disk.as_ref());
        // A new placement (with the VM stopped, else the plan replaced it): it moves.
        let placement = (self.placement != prior.placement).then(|| self.placement.clone().unwrap_or_default());
        let spec = SpecPatch {
            state: Some(self.power),
            instance_type: self.instance_type_reference(),
            ttl,
            boot_disk,
            placement,
            ..Default::default()
        };
        PatchVirtualMachine { spec, ..Default::default() }
    }

    /// The instance type as the API takes it (the server finds it by id, else by name).
    fn instance_type_reference(&self) -> Option<InstanceTypeReference> {
        self.instance_type.clone().map(|name| InstanceTypeReference { id: String::new(), name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, Value)]) -> Value {
        Value::Map(pairs.iter().map(|(k, v)| (Value::from(*k), v.clone())).collect())
    }

    #[test]
    fn a_plan_decodes_once_into_the_create_request() {
        let plan = m(&[
            ("name", Value::from("web")),
            ("template", Value::from("tiny")),
            ("state", Value::from("stopped")),
            ("user_data", Value::from("#cloud-config\n")),
            ("timeouts", m(&[("create", Value::from("90s"))])),
        ]);
        let model = VmModel::decode(&plan);
        assert_eq!((model.power, model.wait_for()), (PowerState::Stopped, WaitFor::Stopped));
        assert_eq!(model.timeouts.create, Ok(std::time::Duration::from_secs(90)));
        assert_eq!(model.timeouts.delete, Ok(DEFAULT_TIMEOUT));
        let req = model.create_request(BTreeMap::new());
        assert_eq!(req.metadata.and_then(|m| m.name).as_deref(), Some("web"));
        assert_eq!((req.spec.template.as_str(), req.spec.state), ("tiny", PowerState::Stopped));
        assert_eq!(req.spec.user_data.as_deref(), Some("#cloud-config\n"));
    }
}
