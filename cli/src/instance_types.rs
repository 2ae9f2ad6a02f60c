//! `vmaas instance-type`: named machine shapes. Everyone lists them;
//! administrators publish them and move them through their lifecycle
//! (deprecate with a replacement, make obsolete, or make active again).

use anyhow::Context;
use clap::Subcommand;
use vmaas_client::Client;
use vmaas_model::instance_type::GpuSpec;
use vmaas_model::{
    CreateObject, InstanceType, InstanceTypeDeprecation, InstanceTypePatchSpec, InstanceTypeReference, InstanceTypeSpec, InstanceTypeState,
    PatchInstanceType,
};

use crate::Format;
use crate::net::{named, one, page};

const PATH: &str = "/instance_types";

/// `vmaas instance-type …`.
#[derive(Subcommand, Debug)]
pub enum InstanceTypeCmd {
    /// Publish an instance type (administrators).
    Create {
        /// Its name, e.g. general.small.
        name: String,
        /// CPU cores.
        #[arg(long)]
        cores: u32,
        /// Memory in GiB.
        #[arg(long)]
        memory_gib: u32,
        /// What it is for.
        #[arg(long, default_value = "")]
        description: String,
        /// GPUs, as PCI_VENDOR:DEVICE,RESOURCE,COUNT (e.g. 10DE:20B0,nvidia.com/A100,1).
        #[arg(long, value_name = "SELECTOR,RESOURCE,COUNT", value_parser = parse_gpu)]
        gpu: Option<GpuSpec>,
    },
    /// List the instance types.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        instance_type: String,
    },
    /// Deprecate one in favour of another (administrators); VMs may still use it.
    Deprecate {
        /// Name or id.
        instance_type: String,
        /// The instance type that replaces it, by name or id.
        #[arg(long)]
        replacement: String,
    },
    /// Make one obsolete (administrators): refused for new VMs.
    Obsolete {
        /// Name or id.
        instance_type: String,
    },
    /// Offer a deprecated or obsolete one again (administrators).
    Activate {
        /// Name or id.
        instance_type: String,
    },
    /// Delete one (administrators).
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        instance_type: String,
    },
}

fn parse_gpu(text: &str) -> Result<GpuSpec, String> {
    let parts: Vec<&str> = text.split(',').collect();
    let [selector, resource, count] = parts[..] else { return Err("expected SELECTOR,RESOURCE,COUNT".into()) };
    let count = count.trim().parse().map_err(|_| format!("{count:?} is not a count"))?;
    Ok(GpuSpec { pci_device_selector: selector.trim().into(), resource_name: resource.trim().into(), count })
}

const HEADER: [&str; 7] = ["NAME", "STATE", "CORES", "MEMORY", "GPUS", "REPLACEMENT", "ID"];

fn row(t: &InstanceType) -> Vec<String> {
    let state = t.spec.state.as_str().trim_start_matches("INSTANCE_TYPE_STATE_").to_owned();
    let gpus = t.spec.gpu.as_ref().map(|g| format!("{}× {}", g.count, g.resource_name)).unwrap_or_default();
    let replacement = t.spec.deprecation.as_ref().and_then(|d| d.replacement.as_ref()).map(|r| r.name.clone()).unwrap_or_default();
    vec![t.metadata.name.clone(), state, t.spec.cores.to_string(), format!("{} GiB", t.spec.memory_gib), gpus, replacement, t.id.clone()]
}

/// Moves instance type `reference` to `state`, with `replacement` when deprecating.
async fn lifecycle(
    client: &Client,
    reference: &str,
    state: InstanceTypeState,
    replacement: Option<String>,
) -> anyhow::Result<InstanceType> {
    let t: InstanceType = client.find_object(PATH, reference).await.with_context(|| format!("instance type {reference:?}"))?;
    let deprecation = replacement
        .map(|name| InstanceTypeDeprecation { replacement: Some(InstanceTypeReference { id: String::new(), name }), ..Default::default() });
    let spec = InstanceTypePatchSpec { state: Some(state), deprecation, ..Default::default() };
    Ok(client.patch_object(PATH, &t.id, &PatchInstanceType { spec, ..Default::default() }).await?)
}

/// Runs a `vmaas instance-type` command.
pub async fn instance_type(client: &Client, cmd: InstanceTypeCmd, format: Format) -> anyhow::Result<()> {
    let t: InstanceType = match cmd {
        InstanceTypeCmd::Create { name, cores, memory_gib, description, gpu } => {
            let spec = InstanceTypeSpec { cores, memory_gib, description, gpu, ..Default::default() };
            client.create_object(PATH, &CreateObject { type_url: None, id: None, metadata: named(name), spec, status: None }).await?
        }
        InstanceTypeCmd::List(l) => {
            return page(format, &client.list_objects_where::<InstanceType>(PATH, l.filter()?.as_deref()).await?, row, &HEADER);
        }
        InstanceTypeCmd::Get { instance_type } => client.find_object(PATH, &instance_type).await?,
        InstanceTypeCmd::Deprecate { instance_type, replacement } => {
            lifecycle(client, &instance_type, InstanceTypeState::Deprecated, Some(replacement)).await?
        }
        InstanceTypeCmd::Obsolete { instance_type } => lifecycle(client, &instance_type, InstanceTypeState::Obsolete, None).await?,
        InstanceTypeCmd::Activate { instance_type } => lifecycle(client, &instance_type, InstanceTypeState::Active, None).await?,
        InstanceTypeCmd::Delete { instance_type } => {
            let t: InstanceType = client.find_object(PATH, &instance_type).await?;
            client.delete_object(PATH, &t.id).await?
        }
    };
    one(format, &t, row(&t), &HEADER)
}
