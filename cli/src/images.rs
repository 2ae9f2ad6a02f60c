//! `vmaas image`: the OS images VMs can boot from.

use clap::Subcommand;
use vmaas_client::Client;
use vmaas_model::image::Image;

use crate::Format;
use crate::net::{one, page};

const IMAGES: &str = "/images";

/// `vmaas image …`
#[derive(Debug, Subcommand)]
pub enum ImageCmd {
    /// List the images VMs can boot from (`vm_image`).
    #[command(alias = "ls")]
    List,
    /// Show one image.
    Get {
        /// Its name.
        name: String,
    },
}

const HEADER: [&str; 6] = ["NAME", "STATE", "FORMAT", "SIZE", "VMS", "DESCRIPTION"];

fn row(i: &Image) -> Vec<String> {
    let state = i.status.state.as_str().trim_start_matches("IMAGE_STATE_").to_owned();
    let size = format!("{}Mi", i.status.virtual_size.div_ceil(1 << 20));
    vec![i.metadata.name.clone(), state, i.status.format.clone(), size, i.status.references.to_string(), i.spec.description.clone()]
}

/// Runs a `vmaas image` command.
pub async fn image(client: &Client, cmd: ImageCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        ImageCmd::List => page(format, &client.list_objects::<Image>(IMAGES).await?, row, &HEADER),
        ImageCmd::Get { name } => {
            let i: Image = client.get_object(IMAGES, &name).await?;
            one(format, &i, row(&i), &HEADER)
        }
    }
}
