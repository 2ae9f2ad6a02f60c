//! `vmaas volume`: block storage that outlives VMs, attached to one VM at a
//! time (hotplugged while it runs).

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;
use vmaas_client::{Client, Error};
use vmaas_model::volume::VolumePatchSpec;
use vmaas_model::{CreateObject, PatchVolume, Quantity, Volume, VolumeAttachment, VolumeAttachmentSpec, VolumeAttachmentState, VolumeSpec};

use crate::Format;
use crate::net::{named, one, page};

const VOLUMES: &str = "/volumes";
const ATTACHMENTS: &str = "/volume_attachments";

/// `vmaas volume …`.
#[derive(Subcommand, Debug)]
pub enum VolumeCmd {
    /// Create a volume, blank or starting as an image.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// Its size, e.g. 10Gi.
        #[arg(long)]
        size: Quantity,
        /// The image it starts as (a copy-on-write overlay of it).
        #[arg(long)]
        image: Option<String>,
        /// Wait until it is READY.
        #[arg(long)]
        wait: bool,
    },
    /// Attach it to a VM (hotplugged if the VM runs).
    Attach {
        /// The volume, by name or id.
        volume: String,
        /// The VM, by name or id.
        #[arg(long)]
        vm: String,
        /// Delete the volume with the VM.
        #[arg(long)]
        auto_delete: bool,
        /// Wait until the VM has it.
        #[arg(long)]
        wait: bool,
    },
    /// Detach it from its VM (the guest gets a hot-unplug request).
    Detach {
        /// The volume, by name or id.
        volume: String,
        /// Wait until the guest has released it.
        #[arg(long)]
        wait: bool,
    },
    /// Grow it (never shrinks); a running VM sees the new size at once.
    Resize {
        /// The volume, by name or id.
        volume: String,
        /// The new size, e.g. 20Gi.
        #[arg(long)]
        size: Quantity,
    },
    /// List your volumes.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// List the attachments of your volumes.
    Attachments,
    /// Show one, by name or id.
    Get {
        /// Name or id.
        volume: String,
    },
    /// Delete one and its data (refused while attached).
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        volume: String,
    },
}

const HEADER: [&str; 6] = ["NAME", "STATE", "SIZE", "IMAGE", "ATTACHED TO", "ID"];

fn row(v: &Volume) -> Vec<String> {
    let state = v.status.state.as_str().trim_start_matches("VOLUME_STATE_").to_owned();
    let image = v.spec.source_image.clone().unwrap_or_default();
    vec![v.metadata.name.clone(), state, v.spec.size.to_string(), image, v.status.attached_to.clone().unwrap_or_default(), v.id.clone()]
}

const ATTACHMENT_HEADER: [&str; 6] = ["NAME", "STATE", "VOLUME", "VM", "SERIAL", "ID"];

fn attachment_row(a: &VolumeAttachment) -> Vec<String> {
    let state = a.status.state.as_str().trim_start_matches("VOLUME_ATTACHMENT_STATE_").to_owned();
    let serial = a.status.serial.clone().unwrap_or_default();
    vec![a.metadata.name.clone(), state, a.spec.volume.clone(), a.spec.compute_instance.clone(), serial, a.id.clone()]
}

/// How long `--wait` waits.
const WAIT: Duration = Duration::from_secs(300);

/// Polls until `done` says the object `id` at `path` is where it should be
/// (`Some(None)` for gone), reporting each new state on stderr.
pub(crate) async fn wait_for<T: serde::de::DeserializeOwned>(
    client: &Client,
    path: &str,
    id: &str,
    state: impl Fn(&T) -> String,
    done: impl Fn(Option<&T>) -> Result<bool, String>,
) -> anyhow::Result<Option<T>> {
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    loop {
        let got = match client.get_object::<T>(path, id).await {
            Ok(o) => Some(o),
            Err(Error::Api { status: 404, .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let now = got.as_ref().map(&state).unwrap_or_else(|| "gone".into());
        if now != last {
            eprintln!("… {now}");
            last = now;
        }
        if done(got.as_ref()).map_err(anyhow::Error::msg)? {
            return Ok(got);
        }
        if Instant::now() > deadline {
            return Err(crate::exit::TimedOut(format!("gave up after {WAIT:?}: still {last}")).into());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn volume_state(v: &Volume) -> String {
    let mut s = v.status.state.as_str().trim_start_matches("VOLUME_STATE_").to_owned();
    if let Some(m) = &v.status.message {
        s.push_str(&format!(": {m}"));
    }
    s
}

fn attachment_state(a: &VolumeAttachment) -> String {
    let mut s = a.status.state.as_str().trim_start_matches("VOLUME_ATTACHMENT_STATE_").to_owned();
    if let Some(m) = &a.status.message {
        s.push_str(&format!(": {m}"));
    }
    s
}

/// The attachment holding volume `id`, if any.
async fn attachment_of(client: &Client, id: &str) -> anyhow::Result<Option<VolumeAttachment>> {
    let all = client.list_objects::<VolumeAttachment>(ATTACHMENTS).await?;
    Ok(all.items.into_iter().find(|a| a.spec.volume == id))
}

async fn create(client: &Client, name: String, spec: VolumeSpec, wait: bool) -> anyhow::Result<Volume> {
    let req = CreateObject { type_url: None, id: None, metadata: named(name), spec, status: None };
    let v: Volume = client.create_object(VOLUMES, &req).await?;
    if !wait {
        return Ok(v);
    }
    let ready = wait_for::<Volume>(client, VOLUMES, &v.id, volume_state, |v| match v.map(|v| v.status.state.as_str()) {
        Some("VOLUME_STATE_READY" | "VOLUME_STATE_ATTACHED") => Ok(true),
        Some("VOLUME_STATE_FAILED") => Err(format!("volume failed: {}", v.and_then(|v| v.status.message.clone()).unwrap_or_default())),
        None => Err("the volume is gone".into()),
        _ => Ok(false),
    });
    Ok(ready.await?.unwrap_or(v))
}

async fn attach(client: &Client, volume: &str, vm: String, auto_delete: bool, wait: bool) -> anyhow::Result<VolumeAttachment> {
    let v: Volume = client.find_object(VOLUMES, volume).await?;
    let spec = VolumeAttachmentSpec { volume: v.id.clone(), compute_instance: vm, auto_delete };
    let req = CreateObject { type_url: None, id: None, metadata: named(v.metadata.name.clone()), spec, status: None };
    let a: VolumeAttachment = client.create_object(ATTACHMENTS, &req).await?;
    if !wait {
        return Ok(a);
    }
    let done = wait_for::<VolumeAttachment>(client, ATTACHMENTS, &a.id, attachment_state, |a| match a.map(|a| a.status.state) {
        Some(VolumeAttachmentState::Ready) => Ok(true),
        Some(VolumeAttachmentState::Failed) => Err(format!("attaching failed: {}", a.map(attachment_state).unwrap_or_default())),
        None => Err("the attachment is gone".into()),
        _ => Ok(false),
    });
    Ok(done.await?.unwrap_or(a))
}

async fn detach(client: &Client, volume: &str, wait: bool) -> anyhow::Result<VolumeAttachment> {
    let v: Volume = client.find_object(VOLUMES, volume).await?;
    let a = attachment_of(client, &v.id).await?.with_context(|| format!("volume {volume:?} is not attached"))?;
    let a: VolumeAttachment = client.delete_object(ATTACHMENTS, &a.id).await?;
    if wait {
        wait_for::<VolumeAttachment>(client, ATTACHMENTS, &a.id, attachment_state, |a| Ok(a.is_none())).await?;
    }
    Ok(a)
}

/// Runs a `vmaas volume` command.
pub async fn volume(client: &Client, cmd: VolumeCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        VolumeCmd::Create { name, size, image, wait } => {
            let v = create(client, name, VolumeSpec { size, source_image: image }, wait).await?;
            one(format, &v, row(&v), &HEADER)
        }
        VolumeCmd::Attach { volume, vm, auto_delete, wait } => {
            let a = attach(client, &volume, vm, auto_delete, wait).await?;
            one(format, &a, attachment_row(&a), &ATTACHMENT_HEADER)
        }
        VolumeCmd::Detach { volume, wait } => {
            let a = detach(client, &volume, wait).await?;
            one(format, &a, attachment_row(&a), &ATTACHMENT_HEADER)
        }
        VolumeCmd::Resize { volume, size } => {
            let v: Volume = client.find_object(VOLUMES, &volume).await?;
            let patch = PatchVolume { spec: VolumePatchSpec { size: Some(size) }, ..Default::default() };
            let v: Volume = client.patch_object(VOLUMES, &v.id, &patch).await?;
            one(format, &v, row(&v), &HEADER)
        }
        VolumeCmd::List(l) => page(format, &client.list_objects_where::<Volume>(VOLUMES, l.filter()?.as_deref()).await?, row, &HEADER),
        VolumeCmd::Attachments => {
            page(format, &client.list_objects::<VolumeAttachment>(ATTACHMENTS).await?, attachment_row, &ATTACHMENT_HEADER)
        }
        VolumeCmd::Get { volume } => {
            let v: Volume = client.find_object(VOLUMES, &volume).await?;
            one(format, &v, row(&v), &HEADER)
        }
        VolumeCmd::Delete { volume } => {
            let v: Volume = client.find_object(VOLUMES, &volume).await?;
            let v: Volume = client.delete_object(VOLUMES, &v.id).await?;
            one(format, &v, row(&v), &HEADER)
        }
    }
}
