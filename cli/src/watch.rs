//! `vmaas vm get NAME --watch`: the VM, then one line per change (or one
//! event per line with `-o json|yaml`), from the server's event stream,
//! until the VM is deleted or the command is interrupted.

use std::time::Duration;

use vmaas_client::{Client, describe_status};
use vmaas_model::VirtualMachine;

use crate::output::{self, Format};

/// How long one watch stays open.
const OPEN_FOR: Duration = Duration::from_secs(24 * 3600);

/// Prints VM `reference` and then each of its changes.
pub async fn vm(client: &Client, reference: &str, format: Format) -> anyhow::Result<()> {
    let id = client.find_vm(reference).await?.id;
    // Opened before the VM is read again, so no change falls in between.
    let mut watch = client.watch_events(&format!("event.virtual_machine.id == '{id}'"), OPEN_FOR).await?;
    output::vm(format, &client.get_vm(&id).await?)?;
    while let Some(e) = watch.next().await {
        let kind = e["type"].as_str().unwrap_or_default().trim_start_matches("EVENT_TYPE_OBJECT_").to_owned();
        match format {
            Format::Json => println!("{}", serde_json::to_string(&e)?),
            Format::Yaml => print!("---\n{}", serde_norway::to_string(&e)?),
            Format::Table => match serde_json::from_value::<VirtualMachine>(e["virtual_machine"].clone()) {
                Ok(vm) => println!("{kind:<7}  {}", describe_status(&vm)),
                Err(_) => println!("{kind}"),
            },
        }
        if kind == "DELETED" {
            break;
        }
    }
    Ok(())
}
