//! `vmaas catalog-item`: curated offerings over a template. Tenants list
//! and read the published ones (and make VMs of them with `vmaas vm create
//! --catalog-item`); administrators see every one, publish, withdraw and
//! delete them (they write them as JSON, or with Terraform).

use clap::Subcommand;
use serde_json::json;
use vmaas_client::Client;
use vmaas_model::ComputeInstanceCatalogItem;

use crate::Format;
use crate::net::{one, page};

/// Where catalog items are served.
pub(crate) const PATH: &str = "/compute_instance_catalog_items";

/// `vmaas catalog-item …`.
#[derive(Subcommand, Debug)]
pub enum CatalogItemCmd {
    /// List the catalog items you see (administrators: every one).
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        item: String,
    },
    /// Offer one to tenants (administrators).
    Publish {
        /// Name or id.
        item: String,
    },
    /// Withdraw one from tenants (administrators); VMs made of it keep it.
    Unpublish {
        /// Name or id.
        item: String,
    },
    /// Delete one (administrators); refused while VMs use it.
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        item: String,
    },
}

const HEADER: [&str; 6] = ["NAME", "TITLE", "TEMPLATE", "PUBLISHED", "FIELDS", "ID"];

fn row(i: &ComputeInstanceCatalogItem) -> Vec<String> {
    let fields: Vec<&str> = i.spec.field_definitions.iter().map(|d| d.path.as_str()).collect();
    let published = if i.spec.published { "yes" } else { "no" };
    vec![i.metadata.name.clone(), i.spec.title.clone(), i.spec.template.clone(), published.into(), fields.join(","), i.id.clone()]
}

/// Runs a `vmaas catalog-item` command.
pub async fn catalog_item(client: &Client, cmd: CatalogItemCmd, format: Format) -> anyhow::Result<()> {
    let find = |item: String| async move { client.find_object::<ComputeInstanceCatalogItem>(PATH, &item).await };
    let i: ComputeInstanceCatalogItem = match cmd {
        CatalogItemCmd::List(l) => {
            let items = client.list_objects_where::<ComputeInstanceCatalogItem>(PATH, l.filter()?.as_deref()).await?;
            return page(format, &items, row, &HEADER);
        }
        CatalogItemCmd::Get { item } => find(item).await?,
        CatalogItemCmd::Publish { item } => client.patch_object(PATH, &find(item).await?.id, &json!({"published": true})).await?,
        CatalogItemCmd::Unpublish { item } => client.patch_object(PATH, &find(item).await?.id, &json!({"published": false})).await?,
        CatalogItemCmd::Delete { item } => client.delete_object(PATH, &find(item).await?.id).await?,
    };
    one(format, &i, row(&i), &HEADER)
}
