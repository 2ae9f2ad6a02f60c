//! `vmaas template sync DIR`: publish a directory of template files, the
//! GitOps way. Files added, changed or removed become templates created,
//! updated or deleted on the server; running it twice changes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use vmaas_client::Client;
use vmaas_model::{Template, VirtualMachineTemplate};

/// What a sync did (or would do, in a dry run).
#[derive(Debug, Default, serde::Serialize)]
pub struct Report {
    /// Templates created.
    pub created: Vec<String>,
    /// Templates changed.
    pub updated: Vec<String>,
    /// Templates removed because their file is gone.
    pub deleted: Vec<String>,
    /// Templates already as in the directory.
    pub unchanged: Vec<String>,
    /// Templates that could not be removed (e.g. still used by VMs).
    pub kept: Vec<String>,
}

/// Parses one document: a template, bare or wrapped as `{"object": ...}`.
fn parse_doc(doc: serde_norway::Deserializer<'_>) -> Result<VirtualMachineTemplate, String> {
    let mut v = serde_json::Value::deserialize(doc).map_err(|e| e.to_string())?;
    if let Some(inner) = v.get_mut("object").map(serde_json::Value::take) {
        v = inner;
    }
    serde_path_to_error::deserialize(v).map_err(|e| match e.path().to_string().as_str() {
        "." => e.into_inner().to_string(),
        path => format!("{path}: {}", e.into_inner()),
    })
}

/// Reads and checks every `*.yaml`, `*.yml` and `*.json` file in `dir`.
pub fn read_dir(dir: &Path) -> anyhow::Result<BTreeMap<String, (PathBuf, VirtualMachineTemplate)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading template directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")))
        .collect();
    files.sort();
    let mut out: BTreeMap<String, (PathBuf, VirtualMachineTemplate)> = BTreeMap::new();
    let mut problems = Vec::new();
    for f in files {
        let (templates, mut file_problems) = read_file(&f)?;
        problems.append(&mut file_problems);
        for t in templates {
            if let Some((other, _)) = out.get(&t.id) {
                problems.push(format!("{}: template {:?} is also defined in {}", f.display(), t.id, other.display()));
                continue;
            }
            out.insert(t.id.clone(), (f.clone(), t));
        }
    }
    if !problems.is_empty() {
        bail!("the template directory has problems; nothing was changed:\n  {}", problems.join("\n  "));
    }
    Ok(out)
}

/// Reads the templates of one file, checking each; returns the good ones and
/// a description of every problem.
fn read_file(f: &Path) -> anyhow::Result<(Vec<VirtualMachineTemplate>, Vec<String>)> {
    let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
    let mut good = Vec::new();
    let mut problems = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(&text).enumerate() {
        let t = match parse_doc(doc) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{} (document {}): {e}", f.display(), i + 1));
                continue;
            }
        };
        match Template::compile(t.clone()) {
            Ok(_) => good.push(t),
            Err(errs) => problems.extend(errs.iter().map(|e| format!("{}: template {:?}: {e}", f.display(), t.id))),
        }
    }
    Ok((good, problems))
}

/// Reads a file holding exactly one valid template.
pub fn read_dir_file(f: &Path) -> anyhow::Result<VirtualMachineTemplate> {
    let (mut good, problems) = read_file(f)?;
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    match (good.pop(), good.is_empty()) {
        (Some(t), true) => Ok(t),
        _ => bail!("{}: expected exactly one template", f.display()),
    }
}

/// Makes the server's templates match `dir`. With `prune`, templates not in
/// `dir` are deleted. With `dry_run`, nothing is changed.
pub async fn sync(client: &Client, dir: &Path, prune: bool, dry_run: bool) -> anyhow::Result<Report> {
    let wanted = read_dir(dir)?;
    let existing: BTreeMap<String, VirtualMachineTemplate> =
        client.all_templates().await?.into_iter().map(|t| (t.id.clone(), t.published())).collect();
    let mut report = Report::default();
    for (id, (_, t)) in &wanted {
        match existing.get(id) {
            None => {
                if !dry_run {
                    client.create_template(t).await.with_context(|| format!("creating template {id:?}"))?;
                }
                report.created.push(id.clone());
            }
            Some(cur) if cur == t => report.unchanged.push(id.clone()),
            Some(_) => {
                if !dry_run {
                    client.update_template(t).await.with_context(|| format!("updating template {id:?}"))?;
                }
                report.updated.push(id.clone());
            }
        }
    }
    if prune {
        for id in existing.keys().filter(|id| !wanted.contains_key(*id)) {
            if dry_run {
                report.deleted.push(id.clone());
                continue;
            }
            match client.delete_template(id).await {
                Ok(()) => report.deleted.push(id.clone()),
                Err(e) if e.status() == Some(409) => {
                    eprintln!("warning: keeping template {id:?}: {e}");
                    report.kept.push(id.clone());
                }
                Err(e) => return Err(e).with_context(|| format!("deleting template {id:?}")),
            }
        }
    }
    Ok(report)
}
