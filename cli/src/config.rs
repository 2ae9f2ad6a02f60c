//! Where the CLI finds its server, token and whom to trust over HTTPS:
//! flags, then environment (`VMAAS_ENDPOINT`, `VMAAS_TOKEN`,
//! `VMAAS_CA_FILE`, `VMAAS_INSECURE`), then the config file: its top-level
//! settings, or those of the named profile `--profile` (`VMAAS_PROFILE`)
//! picks under `profiles:`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Server used when nothing else says.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:8000";

/// The config file's contents: the default profile's settings at the top,
/// named profiles under `profiles`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// PEM file of a CA (or the server's self-signed certificate) to trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Skip the certificate check of an `https` endpoint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// Named profiles (`--profile NAME`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, Profile>,
}

/// One server, and how to reach it.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// PEM file of a CA (or the server's self-signed certificate) to trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Skip the certificate check of an `https` endpoint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

impl FileConfig {
    /// The profile `name` (the top-level settings when none).
    pub fn profile(&self, name: Option<&str>) -> Result<Profile, crate::exit::Usage> {
        match name {
            None => Ok(Profile {
                endpoint: self.endpoint.clone(),
                token: self.token.clone(),
                ca_file: self.ca_file.clone(),
                insecure: self.insecure,
            }),
            Some(n) => self.profiles.get(n).cloned().ok_or_else(|| {
                let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
                crate::exit::Usage(format!(
                    "--profile {n:?}: no such profile in the config file (it has: {}); `vmaas --profile {n} login` makes it",
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                ))
            }),
        }
    }

    /// Replaces the profile `name` (the top-level settings when none).
    pub fn set_profile(&mut self, name: Option<&str>, p: Profile) {
        match name {
            None => {
                self.endpoint = p.endpoint;
                self.token = p.token;
                self.ca_file = p.ca_file;
                self.insecure = p.insecure;
            }
            Some(n) => {
                self.profiles.insert(n.to_owned(), p);
            }
        }
    }
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

/// What the flags say, before the config file fills the gaps.
#[derive(Debug, Default)]
pub struct Flags {
    /// `--endpoint`.
    pub endpoint: Option<String>,
    /// `--token`.
    pub token: Option<String>,
    /// `--ca-file`.
    pub ca_file: Option<PathBuf>,
    /// `--insecure`.
    pub insecure: bool,
    /// `--profile`.
    pub profile: Option<String>,
}

/// The client the flags and the config file at `path` describe.
pub fn client(flags: Flags, path: &Path) -> anyhow::Result<vmaas_client::Client> {
    let file = load(path)?.profile(flags.profile.as_deref())?;
    let endpoint = flags.endpoint.or(file.endpoint).unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    let token = flags.token.or(file.token).filter(|t| !t.is_empty());
    if endpoint.is_empty() {
        return Err(crate::exit::Usage("the endpoint is empty: pass --endpoint or set VMAAS_ENDPOINT".into()).into());
    }
    let ca = match flags.ca_file.or(file.ca_file) {
        Some(f) => Some(std::fs::read(&f).with_context(|| format!("reading the CA file {}", f.display()))?),
        None => None,
    };
    Ok(vmaas_client::Client::with_tls(&endpoint, token, flags.insecure || file.insecure, ca.as_deref())?)
}
