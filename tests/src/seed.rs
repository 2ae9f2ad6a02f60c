//! Seed 000's examples as written: its template and its VM, shared by the
//! end-to-end tests that must keep them working.

use reqwest::Method;
use serde_json::{Value, json};

use crate::Server;
use crate::vms::V1;

/// Seed 000's template `simple_vm`, as its JSON example writes it.
pub fn template() -> Value {
    serde_json::from_str(include_str!("../../model/tests/data/seed000_template.json")).expect("seed 000's template is JSON")
}

/// Seed 000's VM, named `name`.
pub fn vm(name: &str) -> Value {
    json!({
      "object": {
        "id": name,
        "spec": {
          "state": "started",
          "template": "simple_vm",
          "template_parameters": {
            "vm_cpu_cores": { "value": 4 },
            "vm_disk_size": { "value": "30Gi" },
            "vm_memory": { "value": "4Gi" }
          }
        }
      }
    })
}

/// Publishes [`template`] with the administrator's token `admin`; panics unless 201.
pub async fn publish(s: &Server, admin: &str) {
    let (st, body) = s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(admin), Some(template())).await;
    assert_eq!(st, 201, "{body}");
}
