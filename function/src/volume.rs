//! `XVolume`s (from `Volume` claims): block storage that outlives VMs. A
//! volume is a CDI DataVolume of its own in its private network's
//! namespace, where the VMs on that network live; a VM that lists it in
//! `spec.volumes` gets it as a hotpluggable disk (see [`volumes_of`]). A
//! `ClusterUsage` keeps the network while the volume exists, and one per
//! VM keeps the volume while a VM uses it.

use function_sdk_rust::proto::v1::RunFunctionResponse;
use function_sdk_rust::{request, resource, response};
use serde_json::{Value, json};
use vmaas_model::k8s::volume::{ImageSources, VolumeDisk, data_volume, data_volume_name, observe_data_volume};
use vmaas_model::validation::check_dns_label;
use vmaas_model::volume::disk_serial;
use vmaas_model::{ValidationErrors, VolumeSpec, VolumeState};

use crate::call::{Call, fatal, is_named, is_secondary, put, require_private, require_tenants};
use crate::render::network_namespace;
use crate::status::NetworkState;
use crate::usage::usage;
use crate::xr::{Owner, VmXrSpec, VolumeXrSpec};

/// Type of the function's condition on a volume XR.
pub const VOLUME_CONDITION: &str = "VolumeReady";

/// The shared model's spec of a volume XR, checked, with the XR's field names.
fn checked(spec: &VolumeXrSpec) -> Result<VolumeSpec, ValidationErrors> {
    let v = VolumeSpec { size: spec.size.clone(), source_image: spec.source_image.clone() };
    let mut errs = match v.check("spec") {
        Ok(()) => ValidationErrors::default(),
        Err(mut e) => {
            e.0.iter_mut().for_each(|f| f.field = f.field.replace("source_image", "sourceImage"));
            e
        }
    };
    if let Err(e) = check_dns_label(&spec.network) {
        errs.push("spec.network", format!("{:?} is not a VirtualPrivateSubnet's name: {e}", spec.network));
    }
    errs.into_result(v)
}

/// The serial a volume XR's disk has in every guest.
pub fn serial_of(volume_xr: &Value) -> String {
    disk_serial(volume_xr["metadata"]["name"].as_str().unwrap_or_default())
}

/// The names of the VM claims of `owner`'s tenant that list the volume.
fn users(vms: &[Value], owner: &Owner) -> Vec<String> {
    let mut out: Vec<String> = vms
        .iter()
        .filter(|vm| Owner::of(vm).tenant == owner.tenant)
        .filter(|vm| VmXrSpec::from_xr(&vm["spec"]).is_ok_and(|s| s.volumes.contains(&owner.name)))
        .map(|vm| Owner::of(vm).name)
        .collect();
    out.sort();
    out
}

/// Composes an `XVolume`.
pub(crate) fn run(call: &Call<'_>, mut rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let owner = Owner::of(call.xr);
    let spec = match VolumeXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    let volume = match checked(&spec) {
        Ok(v) => v,
        Err(e) => return fatal(rsp, format!("invalid Volume: {e}")),
    };
    require_private(&mut rsp, &owner, "network", &spec.network);
    require_tenants(&mut rsp, "vms", "XVirtualMachine", &owner);
    let Some(net) = request::get_required_resources(call.req, "network").unwrap_or_default().into_iter().next() else {
        let why = format!("spec.network: no VirtualPrivateSubnet {:?} in namespace {:?} (yet)", spec.network, owner.tenant);
        response::warning(&mut rsp, format!("{why}: the volume is created once it exists"));
        return Ok(rsp);
    };
    if is_secondary(&net) {
        let why = format!(
            "spec.network: VirtualPrivateSubnet {:?} is of role Secondary: a volume lives in a primary network's namespace",
            spec.network
        );
        return fatal(rsp, why);
    }
    let ns = network_namespace(&owner.tenant, &spec.network);
    let sources =
        ImageSources { data_source_namespace: call.input.data_source_namespace.clone(), storage_class: call.input.storage_class.clone() };
    let (state, message) = observe_data_volume(call.observed("datavolume").as_ref());
    put(&mut rsp, "datavolume", &data_volume(&owner.name, &ns, &volume, &sources), state == VolumeState::Ready)?;
    put(&mut rsp, "usage", &usage("XVirtualPrivateSubnet", &net, "XVolume", call.xr, "network"), call.observed("usage").is_some())?;
    let vms = request::get_required_resources(call.req, "vms").unwrap_or_default();
    let attached_to = users(&vms, &owner);
    let short = state.as_str().trim_start_matches("VOLUME_STATE_");
    let mut status = json!({"state": short, "namespace": ns, "dataVolume": data_volume_name(&owner.name),
        "serial": serial_of(call.xr), "size": spec.size.as_str(), "attachedTo": attached_to});
    if let Some(m) = &message {
        status["message"] = json!(m);
    }
    resource::update_status(response::desired_composite(&mut rsp), &status)?;
    let reason = if state == VolumeState::Ready { "Ready" } else { "Pending" };
    let c = if state == VolumeState::Ready {
        response::condition_true(&mut rsp, VOLUME_CONDITION, reason)
    } else {
        response::condition_false(&mut rsp, VOLUME_CONDITION, if state == VolumeState::Failed { "Failed" } else { reason })
    };
    c.message = message;
    response::normal(&mut rsp, format!("rendered the volume of {}: {short}", owner.describe()));
    Ok(rsp)
}

/// The volumes a VM XR lists, found among its tenant's volume XRs: the
/// disks to put on it and the XRs it uses; an error (fatal) names a volume
/// on another network; a volume not there yet is a warning, left out.
pub(crate) fn volumes_of(
    owner: &Owner,
    spec: &VmXrSpec,
    network: &str,
    all: &[Value],
    warnings: &mut Vec<String>,
) -> Result<(Vec<VolumeDisk>, Vec<Value>), String> {
    let (mut disks, mut used) = (Vec::new(), Vec::new());
    for (i, name) in spec.volumes.iter().enumerate() {
        let Some(v) = all.iter().find(|v| is_named(v, owner, name)) else {
            warnings.push(format!("spec.volumes[{i}]: no Volume {name:?} in namespace {:?} (yet)", owner.tenant));
            continue;
        };
        let on = v["spec"]["network"].as_str().unwrap_or_default();
        if on != network {
            return Err(format!("spec.volumes[{i}]: Volume {name:?} is on network {on:?}, not on the VM's network {network:?}"));
        }
        if NetworkState::of_xr(v).state != "READY" {
            warnings.push(format!("spec.volumes[{i}]: Volume {name:?} is not ready yet"));
        }
        disks.push(VolumeDisk { volume: name.clone(), serial: serial_of(v) });
        used.push(v.clone());
    }
    Ok((disks, used))
}
