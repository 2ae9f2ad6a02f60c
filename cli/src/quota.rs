//! `vmaas quota`: a tenant's limits and what it holds (administrators set
//! them; a tenant reads its own).

use clap::Subcommand;
use serde_json::{Map, Value, json};
use vmaas_client::Client;
use vmaas_model::Quantity;

use crate::Format;
use crate::output;

/// `vmaas quota …`.
#[derive(Subcommand, Debug)]
pub enum QuotaCmd {
    /// A tenant's limits and usage.
    Get {
        /// The tenant.
        tenant: String,
    },
    /// Set a tenant's limits (administrators); a limit not given is unlimited.
    Set {
        /// The tenant.
        tenant: String,
        /// Virtual machines.
        #[arg(long)]
        vms: Option<u64>,
        /// Cores over all VMs.
        #[arg(long)]
        cores: Option<u64>,
        /// Memory over all VMs, e.g. 16Gi.
        #[arg(long)]
        memory: Option<Quantity>,
        /// Disk over all VMs' disks and volumes, e.g. 500Gi.
        #[arg(long)]
        disk: Option<Quantity>,
        /// External IPs.
        #[arg(long)]
        external_ips: Option<u64>,
    },
    /// Remove a tenant's quota: unlimited again (administrators).
    Delete {
        /// The tenant.
        tenant: String,
    },
}

/// Runs `vmaas quota …`.
pub async fn quota(client: &Client, cmd: QuotaCmd, format: Format) -> anyhow::Result<()> {
    let q = match cmd {
        QuotaCmd::Get { tenant } => client.quota(&tenant).await?,
        QuotaCmd::Set { tenant, vms, cores, memory, disk, external_ips } => {
            let mut spec = Map::new();
            for (k, v) in [
                ("virtual_machines", vms.map(Value::from)),
                ("cores", cores.map(Value::from)),
                ("memory", memory.map(|m| json!(m))),
                ("disk", disk.map(|d| json!(d))),
                ("external_ips", external_ips.map(Value::from)),
            ] {
                if let Some(v) = v {
                    spec.insert(k.to_owned(), v);
                }
            }
            client.set_quota(&tenant, &Value::Object(spec)).await?
        }
        QuotaCmd::Delete { tenant } => client.delete_quota(&tenant).await?,
    };
    if format != Format::Table {
        return output::structured(format, &q);
    }
    let show = |v: &Value| match v {
        Value::Null => "unlimited".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let rows = ["virtual_machines", "cores", "memory", "disk", "external_ips"]
        .iter()
        .map(|r| vec![(*r).to_owned(), show(&q["spec"][r]), show(&q["status"]["usage"][r])])
        .collect();
    output::rows(&["RESOURCE", "LIMIT", "USED"], rows)
}
