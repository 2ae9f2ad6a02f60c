//! Rendering: a table for people, JSON or YAML for scripts.

use clap::ValueEnum;
use comfy_table::presets::NOTHING;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;
use vmaas_client::describe_status;
use vmaas_model::{VirtualMachine, VirtualMachineTemplate};

/// The output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns.
    #[default]
    Table,
    /// JSON, as the API returns it.
    Json,
    /// YAML.
    Yaml,
}

/// Prints `value` as JSON or YAML.
pub fn structured<T: Serialize>(format: Format, value: &T) -> anyhow::Result<()> {
    match format {
        Format::Json | Format::Table => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Yaml => print!("{}", serde_norway::to_string(value)?),
    }
    Ok(())
}

fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_style(NOTHING).set_content_arrangement(ContentArrangement::Disabled).set_header(header.iter().copied());
    for r in rows {
        t.add_row(r);
    }
    // Trim the padding comfy-table adds at line ends.
    t.to_string().lines().map(|l| l.trim_end().trim_start_matches(' ')).collect::<Vec<_>>().join("\n")
}

/// A byte count as people read it: `312.5 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut v, mut u) = (n as f64, 0);
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// Prints rows under `header`.
pub fn rows(header: &[&str], rows: Vec<Vec<String>>) -> anyhow::Result<()> {
    println!("{}", table(header, rows));
    Ok(())
}

/// Prints VMs.
pub fn vms(format: Format, vms: &[VirtualMachine], total: u64) -> anyhow::Result<()> {
    if format != Format::Table {
        return structured(format, &serde_json::json!({ "items": vms, "size": vms.len(), "total": total }));
    }
    let rows = vms
        .iter()
        .map(|v| {
            vec![
                v.metadata.name.clone(),
                v.status.state.short().to_owned(),
                v.spec.template.clone(),
                v.status.internal_ip.clone().unwrap_or_else(|| "-".into()),
                v.status.external_ip.clone().unwrap_or_else(|| "-".into()),
                v.id.clone(),
            ]
        })
        .collect();
    println!("{}", table(&["NAME", "STATE", "TEMPLATE", "INTERNAL IP", "EXTERNAL IP", "ID"], rows));
    if (vms.len() as u64) < total {
        eprintln!("({} of {total} shown; use --offset/--limit)", vms.len());
    }
    Ok(())
}

/// Prints one VM.
pub fn vm(format: Format, v: &VirtualMachine) -> anyhow::Result<()> {
    if format != Format::Table {
        return structured(format, v);
    }
    let params: Vec<String> =
        v.spec.template_parameters.iter().map(|(k, p)| format!("{k}={}", p.json().unwrap_or_else(|_| p.value.clone()))).collect();
    let mut rows = vec![
        vec!["Name".into(), v.metadata.name.clone()],
        vec!["ID".into(), v.id.clone()],
        vec!["Tenant".into(), v.metadata.tenant.clone()],
        vec!["Template".into(), v.spec.template.clone()],
        vec!["Parameters".into(), if params.is_empty() { "-".into() } else { params.join(" ") }],
        vec!["Desired".into(), v.spec.state.as_str().into()],
        vec!["Status".into(), describe_status(v)],
        vec!["Internal IP".into(), v.status.internal_ip.clone().unwrap_or_else(|| "-".into())],
        vec!["External IP".into(), v.status.external_ip.clone().unwrap_or_else(|| "-".into())],
        vec!["Created".into(), v.metadata.creation_timestamp.to_rfc3339()],
        vec!["Version".into(), v.metadata.version.to_string()],
    ];
    if let Some(p) = &v.spec.placement {
        rows.push(vec!["Placement".into(), p.describe()]);
    }
    if let Some(at) = v.spec.expires_at {
        rows.push(vec!["Expires".into(), expires(at, chrono::Utc::now())]);
    }
    if let Some(c) = &v.status.cluster {
        rows.push(vec!["Cluster".into(), c.clone()]);
    }
    for c in &v.status.conditions {
        let (kind, status) = (c.kind.short(), c.status.short());
        let detail = match (&c.reason, c.message.is_empty()) {
            (Some(r), false) => format!(" {r}: {}", c.message),
            (Some(r), true) => format!(" {r}"),
            _ => String::new(),
        };
        rows.push(vec![format!("Condition {kind}"), format!("{status}{detail}")]);
    }
    println!("{}", table(&["FIELD", "VALUE"], rows));
    Ok(())
}

/// When a VM expires, and how soon (`2026-11-27T04:00:00+00:00 (in 29m)`).
fn expires(at: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> String {
    let left = at - now;
    let when = if left > chrono::Duration::zero() { format!("in {}", vmaas_model::vm::expiry::format_ttl(left)) } else { "due".into() };
    format!("{} ({when})", at.to_rfc3339())
}

/// Prints templates.
pub fn templates(format: Format, ts: &[VirtualMachineTemplate], total: u64) -> anyhow::Result<()> {
    if format != Format::Table {
        return structured(format, &serde_json::json!({ "items": ts, "size": ts.len(), "total": total }));
    }
    let rows = ts
        .iter()
        .map(|t| {
            let params: Vec<&str> = t.parameters.iter().map(|p| p.name.as_str()).collect();
            vec![t.id.clone(), t.title.clone(), params.join(",")]
        })
        .collect();
    println!("{}", table(&["ID", "TITLE", "PARAMETERS"], rows));
    Ok(())
}

/// Prints one template.
pub fn template(format: Format, t: &VirtualMachineTemplate) -> anyhow::Result<()> {
    if format != Format::Table {
        return structured(format, t);
    }
    println!("{} — {}\n", t.id, t.title);
    if !t.description.is_empty() {
        println!("{}\n", t.description);
    }
    let compiled = vmaas_model::Template::compile(t.clone().published()).ok();
    let rows = t
        .parameters
        .iter()
        .map(|p| {
            let kind = compiled.as_ref().and_then(|c| c.parameter(&p.name)).map(|c| c.kind.parameter_type().to_string());
            vec![
                p.name.clone(),
                kind.unwrap_or_else(|| "?".into()),
                if p.required { "yes".into() } else { "no".into() },
                p.default.as_ref().map(|d| d.value.to_string()).unwrap_or_else(|| "-".into()),
                if p.title.is_empty() { p.description.clone() } else { p.title.clone() },
            ]
        })
        .collect();
    println!("{}", table(&["PARAMETER", "TYPE", "REQUIRED", "DEFAULT", "DESCRIPTION"], rows));
    Ok(())
}

#[cfg(test)]
mod expiry_tests {
    use super::expires;

    #[test]
    fn an_end_says_how_soon() {
        let now: chrono::DateTime<chrono::Utc> = "2026-11-27T03:30:00Z".parse().unwrap();
        let at = now + chrono::Duration::minutes(90);
        assert_eq!(expires(at, now), "2026-11-27T05:00:00+00:00 (in 1h30m)");
        assert_eq!(expires(now, now), "2026-11-27T03:30:00+00:00 (due)");
    }
}
