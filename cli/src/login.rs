//! `vmaas login`: saves the endpoint, token, CA file and `--insecure` in
//! the config file (in a named profile with `--profile`); with `--device`,
//! the token comes from signing in at an OIDC provider with the
//! device-authorization grant: the user opens the page shown, enters the
//! code, and the provider's ID token is saved.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use vmaas_client::device_login::DeviceLogin;
use vmaas_client::tls::Trust;

use crate::config;

/// How to sign in at an OIDC provider (`--device`).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct DeviceArgs {
    /// Sign in at the OIDC provider `--issuer` with the device-authorization grant.
    #[arg(long, requires = "issuer")]
    pub device: bool,
    /// The OIDC provider's issuer URL.
    #[arg(long, env = "VMAAS_OIDC_ISSUER")]
    pub issuer: Option<String>,
    /// The client id registered at the provider for the CLI.
    #[arg(long = "client-id", env = "VMAAS_OIDC_CLIENT_ID", default_value = "vmaas-cli")]
    pub client_id: String,
    /// The client's secret, for providers that register the CLI as a confidential client.
    #[arg(long = "client-secret", env = "VMAAS_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub client_secret: Option<String>,
    /// The scopes to ask for.
    #[arg(long, default_value = "openid profile email")]
    pub scope: String,
}

/// What `login` saves, as the global flags give it.
pub(crate) struct Given {
    pub server: Option<String>,
    pub token: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub insecure: bool,
    pub profile: Option<String>,
}

/// Saves `given` (and the token `device` signs in for) into the profile.
pub(crate) async fn run(cfg_path: &Path, given: Given, device: &DeviceArgs) -> anyhow::Result<()> {
    let mut file = config::load(cfg_path)?;
    let name = given.profile.as_deref();
    // A new profile starts empty; an existing one keeps what is not given.
    let mut p = file.profile(name).unwrap_or_default();
    if let Some(e) = given.server {
        p.endpoint = Some(e);
    }
    if let Some(ca) = &given.ca_file {
        p.ca_file = Some(std::path::absolute(ca).with_context(|| format!("the CA file {}", ca.display()))?);
    }
    p.insecure |= given.insecure;
    p.token = match (device.device, given.token) {
        (true, _) => Some(sign_in(device, &p).await?),
        (false, Some(t)) => Some(t),
        (false, None) => p.token,
    };
    file.set_profile(name, p);
    config::save(cfg_path, &file)?;
    match name {
        Some(n) => eprintln!("saved profile {n:?} in {}", cfg_path.display()),
        None => eprintln!("saved {}", cfg_path.display()),
    }
    Ok(())
}

/// Signs in with the device grant; the ID token.
async fn sign_in(device: &DeviceArgs, p: &config::Profile) -> anyhow::Result<String> {
    let issuer = device.issuer.clone().context("--device needs --issuer")?;
    let ca_pem = p.ca_file.as_ref().map(std::fs::read).transpose().context("reading the CA file")?;
    let http = Trust { insecure: p.insecure, ca_pem }.http_builder()?.build().context("building the HTTP client")?;
    let login = DeviceLogin {
        issuer,
        client_id: device.client_id.clone(),
        client_secret: device.client_secret.clone(),
        scope: device.scope.clone(),
    };
    let pending = login.start(&http).await?;
    let c = &pending.code;
    let mut err = std::io::stderr();
    writeln!(err, "To sign in, open {} and enter the code {}", c.verification_uri, c.user_code)?;
    if let Some(full) = &c.verification_uri_complete {
        writeln!(err, "(or open {full})")?;
    }
    writeln!(err, "waiting for the sign-in (the code expires in {} s)…", c.expires_in)?;
    err.flush()?;
    let token = login.finish(&http, &pending).await?;
    eprintln!("signed in");
    Ok(token)
}
