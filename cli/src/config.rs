//! Where the CLI finds its server and token: flags, then environment
//! (`VMAAS_ENDPOINT`, `VMAAS_TOKEN`), then the config file.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// Server used when nothing else says.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:8000";

/// The config file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The config file path: `$VMAAS_CONFIG`, else `$XDG_CONFIG_HOME/vmaas/config.yaml`, else `~/.config/vmaas/config.yaml`.
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("VMAAS_CONFIG").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("vmaas/config.yaml")
}

/// Reads the config file; a missing file is an empty config.
pub fn load(path: &Path) -> anyhow::Result<FileConfig> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_norway::from_str(&text).with_context(|| format!("reading config file {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
        Err(e) => Err(e).with_context(|| format!("reading config file {}", path.display())),
    }
}

/// Writes the config file, readable by its owner only.
pub fn save(path: &Path, cfg: &FileConfig) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = serde_norway::to_string(cfg)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    use std::io::Write;
    let mut f = opts.open(path).with_context(|| format!("writing {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

/// The endpoint and token to use.
pub fn resolve(flag_endpoint: Option<String>, flag_token: Option<String>, path: &Path) -> anyhow::Result<(String, Option<String>)> {
    let file = load(path)?;
    let endpoint = flag_endpoint.or(file.endpoint).unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    let token = flag_token.or(file.token).filter(|t| !t.is_empty());
    if endpoint.is_empty() {
        bail!("the endpoint is empty: pass --endpoint or set VMAAS_ENDPOINT");
    }
    Ok((endpoint, token))
}
