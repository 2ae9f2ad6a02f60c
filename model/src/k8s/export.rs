//! Exports on Kubernetes: a KubeVirt `VirtualMachineExport` of a VM, a
//! claim or a `VirtualMachineSnapshot`, with the Secret of its token, and
//! the raw image link its status reports for one claim.

use serde_json::{Value, json};

/// A Secret holding export token `token` (key `token`, as KubeVirt reads it).
pub fn token_secret(name: &str, namespace: &str, token: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"token": token},
    })
}

/// The `VirtualMachineExport` `name` of `source` (`apiGroup`, `kind`,
/// `name`) in `namespace`, its token in Secret `secret`; KubeVirt removes
/// it after an hour if the server has not.
pub fn vm_export(name: &str, namespace: &str, source: &Value, secret: &str) -> Value {
    json!({
        "apiVersion": "export.kubevirt.io/v1beta1",
        "kind": "VirtualMachineExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": source, "tokenSecretRef": secret, "ttlDuration": "1h"},
    })
}

/// What a `VirtualMachineExport`'s status says of one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportSeen {
    /// Ready: the claim's raw image URL (the external link, else the internal one).
    Ready(String),
    /// Not yet; the words say why.
    Pending(String),
    /// It will not be: KubeVirt skipped or ended it, or it lacks the claim.
    Failed(String),
}

/// The raw-image URL of the volume of `claim` among a link's volumes
/// (named as the claim, or ending in `-<claim>` when KubeVirt made the
/// claim from a snapshot).
fn raw_url(link: &Value, claim: &str) -> Option<String> {
    let volumes = link["volumes"].as_array()?;
    let suffix = format!("-{claim}");
    let volume = volumes.iter().find(|v| v["name"] == claim).or_else(|| {
        volumes.iter().find(|v| v["name"].as_str().is_some_and(|n| n.ends_with(&suffix))).or(if volumes.len() == 1 {
            volumes.first()
        } else {
            None
        })
    })?;
    let formats = volume["formats"].as_array()?;
    formats.iter().find(|f| f["format"] == "raw").and_then(|f| f["url"].as_str()).map(str::to_owned)
}

/// What `export` (the `VirtualMachineExport`, if it exists) says of `claim`.
pub fn observe_vm_export(export: Option<&Value>, claim: &str) -> ExportSeen {
    let Some(export) = export else { return ExportSeen::Pending("the VirtualMachineExport is being made".into()) };
    let st = &export["status"];
    match st["phase"].as_str().unwrap_or("Pending") {
        "Ready" => {
            let links = &st["links"];
            match raw_url(&links["external"], claim).or_else(|| raw_url(&links["internal"], claim)) {
                Some(url) => ExportSeen::Ready(url),
                None => ExportSeen::Failed(format!("KubeVirt's export has no raw image of claim {claim}")),
            }
        }
        phase @ ("Skipped" | "Terminated") => {
            let why = st["conditions"].as_array().and_then(|c| c.iter().find_map(|c| c["message"].as_str())).unwrap_or("");
            ExportSeen::Failed(format!("KubeVirt's export is {phase}: {why}"))
        }
        phase => ExportSeen::Pending(format!("KubeVirt's export is {phase}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_names_its_source_and_token() {
        let e = vm_export("web-export-1", "vmaas-acme", &json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "web"}), "t");
        assert_eq!(e["spec"]["source"]["kind"], "VirtualMachine");
        assert_eq!(e["spec"]["tokenSecretRef"], "t");
        assert_eq!(token_secret("t", "vmaas-acme", "abc")["stringData"]["token"], "abc");
    }

    #[test]
    fn the_raw_link_of_the_claim_is_read_from_the_status() {
        let raw = |url: &str| json!({"format": "raw", "url": url});
        let ready = json!({"status": {"phase": "Ready", "links": {"external": {"volumes": [
            {"name": "web-data", "formats": [raw("https://x/data/disk.img")]},
            {"name": "web-root", "formats": [{"format": "gzip", "url": "https://x/root/disk.img.gz"}, raw("https://x/root/disk.img")]}]}}}});
        assert_eq!(observe_vm_export(Some(&ready), "web-root"), ExportSeen::Ready("https://x/root/disk.img".into()));
        assert!(matches!(observe_vm_export(Some(&ready), "other"), ExportSeen::Failed(_)));
        let from_snapshot = json!({"status": {"phase": "Ready", "links": {"internal": {"volumes": [
            {"name": "exp-web-root", "formats": [raw("https://y/disk.img")]}, {"name": "exp-web-data", "formats": [raw("https://y/d")]}]}}}});
        assert_eq!(observe_vm_export(Some(&from_snapshot), "web-root"), ExportSeen::Ready("https://y/disk.img".into()));
        assert!(matches!(observe_vm_export(Some(&json!({"status": {"phase": "Pending"}})), "web-root"), ExportSeen::Pending(_)));
        assert!(matches!(observe_vm_export(Some(&json!({"status": {"phase": "Skipped"}})), "web-root"), ExportSeen::Failed(_)));
    }
}
