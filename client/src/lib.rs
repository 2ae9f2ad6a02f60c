//! # vmaas-client
//!
//! A typed client for the fulfillment API, shared by the CLI, the Terraform
//! provider, the end-to-end tests and the benchmarks.
//!
//! - [`Client`]: one method per API operation, plus [`Client::find_vm`]
//!   (by name or id) and [`Client::wait_vm`] (until a state, woken by events).
//! - `events`: the server's event stream, [`Client::watch_events`].
//! - `networks`: the virtual network calls, [`Client::wait_network`] among them.
//! - `objects`: the calls every simple kind shares (subnets, security groups).
//! - [`tls`]: whom it trusts over HTTPS, also for the console's `wss://`.
//! - `stop`: waits that end when asked ([`Client::with_stop`]).
//! - [`retry`]: requests tried again when that is safe (a restarting
//!   server, 503, 429 with `Retry-After`), [`Client::with_retry`].
//! - [`Error`]: the API's `{code, message, details}` errors, kept intact.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod device_login;
mod events;
mod exports;
mod images;

pub use events::Watch;
pub use exports::Download;
mod networks;
mod objects;
pub mod retry;
mod stop;
pub mod tls;
mod wait;

pub use retry::RetryPolicy;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use vmaas_model::{
    ConditionStatus, ConditionType, CreateVirtualMachine, Envelope, FieldError, Page, PatchVirtualMachine, VirtualMachine,
    VirtualMachineTemplate,
};

/// Prefix of every API route.
pub const PREFIX: &str = "/api/fulfillment/v1";

/// What went wrong calling the API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error.
    #[error("{message} (HTTP {status})")]
    Api {
        /// HTTP status.
        status: u16,
        /// gRPC code number.
        code: u8,
        /// The server's message.
        message: String,
        /// One entry per bad field.
        details: Vec<FieldError>,
    },
    /// The server could not be reached, or the transfer failed.
    #[error("cannot reach the vmaas server at {endpoint}: {reason}")]
    Transport {
        /// The endpoint.
        endpoint: String,
        /// The cause and what caused it, down to the root (e.g. the
        /// certificate a TLS handshake refused).
        reason: String,
    },
    /// The answer was not what the API promises.
    #[error("unexpected answer from the server: {0}")]
    Decode(String),
    /// A wait ran out of time.
    #[error("timed out after {waited:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
        /// The last state and condition seen.
        last: String,
    },
    /// A wait ended in a state that cannot lead where it was going.
    #[error("{what}: the VM is FAILED: {reason}")]
    Failed {
        /// What was awaited.
        what: String,
        /// The FAILED condition's reason and message.
        reason: String,
    },
    /// A bad argument to the client itself (e.g. an unparsable endpoint).
    #[error("{0}")]
    Usage(String),
    /// A wait was asked to stop ([`Client::with_stop`]).
    #[error("interrupted: asked to stop while waiting (what was made is kept)")]
    Interrupted,
}

impl Error {
    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether this is a 404.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
}

/// A console session, from `POST …/console_sessions`.
#[derive(Debug, Clone, serde::Deserialize, Serialize)]
pub struct ConsoleSession {
    /// The single-use ticket.
    pub ticket: String,
    /// When it expires.
    pub expires_at: String,
    /// The WebSocket path, ticket included.
    pub url: String,
    /// `CONSOLE_TYPE_SERIAL` or `CONSOLE_TYPE_VNC`.
    #[serde(default, rename = "type")]
    pub kind: String,
}

/// What a wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    /// READY.
    Ready,
    /// STOPPED.
    Stopped,
    /// PAUSED.
    Paused,
    /// Gone (404).
    Deleted,
}

impl From<vmaas_model::PowerState> for WaitFor {
    /// What a VM asked to be in `state` is waited for until.
    fn from(state: vmaas_model::PowerState) -> Self {
        match state {
            vmaas_model::PowerState::Started => Self::Ready,
            vmaas_model::PowerState::Stopped => Self::Stopped,
            vmaas_model::PowerState::Paused => Self::Paused,
        }
    }
}

/// Filters of a VM list.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VmQuery {
    /// Exact name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// State, e.g. `READY`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Items to skip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Items to return.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// A CEL expression each item must hold for (the API's `filter`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

impl Error {
    /// A transport error naming `endpoint`, with `e`'s chain of causes.
    pub(crate) fn transport(endpoint: &str, e: &reqwest::Error) -> Self {
        let mut reason = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            let text = s.to_string();
            if !reason.contains(&text) {
                reason.push_str(": ");
                reason.push_str(&text);
            }
            source = s.source();
        }
        Error::Transport { endpoint: endpoint.to_owned(), reason }
    }
}

/// A client of one server, with one token.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    endpoint: String,
    token: Option<String>,
    trust: tls::Trust,
    /// Ends waits when it turns true ([`Client::with_stop`]).
    stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// How requests are tried again.
    retry: RetryPolicy,
}

/// A one-line summary of a VM's status: `PROGRESSING (Booting: the guest is booting)`.
pub fn describe_status(vm: &VirtualMachine) -> String {
    let s = &vm.status;
    let interesting = [ConditionType::Failed, ConditionType::Progressing, ConditionType::Degraded]
        .into_iter()
        .filter_map(|k| s.condition(k))
        .find(|c| c.status == ConditionStatus::True);
    match interesting {
        Some(c) => format!("{} ({}: {})", s.state.short(), c.reason.as_deref().unwrap_or("-"), c.message),
        None => s.state.short().to_owned(),
    }
}

impl Client {
    /// A client of `endpoint` (e.g. `http://127.0.0.1:8000`) sending `token`.
    pub fn new(endpoint: &str, token: Option<String>) -> Result<Self, Error> {
        Self::with_tls(endpoint, token, false, None)
    }

    /// Like [`Client::new`], for HTTPS endpoints: `insecure` skips the
    /// certificate check; `ca_pem` adds a CA to trust.
    pub fn with_tls(endpoint: &str, token: Option<String>, insecure: bool, ca_pem: Option<&[u8]>) -> Result<Self, Error> {
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(Error::Usage(format!("endpoint {endpoint:?} must start with http:// or https://")));
        }
        let trust = tls::Trust { insecure, ca_pem: ca_pem.map(<[u8]>::to_vec) };
        let builder = trust.http_builder()?;
        // Idle connections are let go before the server's own idle limit
        // (its --http-header-timeout, 10 s by default) closes them, so a
        // request never goes out on a connection the server is closing.
        let http = builder
            .pool_idle_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("vmaas-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Usage(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self { http, endpoint, token, trust, stop: None, retry: RetryPolicy::default() })
    }

    /// The same client, trying requests again as `retry` says
    /// ([`RetryPolicy::default`] unless set).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Whom the client trusts over HTTPS (for the console's `wss://`).
    pub fn trust(&self) -> &tls::Trust {
        &self.trust
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends a request; the body of a success, or the API's error.
    async fn send<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        query: Option<&VmQuery>,
        body: Option<&B>,
    ) -> Result<(StatusCode, bytes::Bytes), Error> {
        let url = format!("{}{}{}", self.endpoint, PREFIX, path);
        let mut req = self.http.request(method, &url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(q) = query {
            req = req.query(q);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        self.exchange(req).await
    }

    /// Sends `req`, again after a pause where [`retry`] says it is safe;
    /// the status and body of a success, else the server's error.
    async fn exchange(&self, req: reqwest::RequestBuilder) -> Result<(StatusCode, bytes::Bytes), Error> {
        let transport = |e| Error::transport(&self.endpoint, &e);
        let mut req = req.build().map_err(transport)?;
        let method = req.method().clone();
        let mut pauses = self.retry.backoff();
        loop {
            // A streamed body cannot be sent twice: such a request is tried once.
            let spare = req.try_clone();
            let outcome = self.http.execute(req).await;
            let again = match &outcome {
                Ok(resp) => self.retry.answer(&method, resp.status(), resp.headers()),
                Err(e) => self.retry.transport(&method, e).then_some(None),
            };
            let (Some(asked), Some(spare), Some(backoff)) = (again, spare, pauses.next()) else {
                let resp = outcome.map_err(transport)?;
                let status = resp.status();
                if !status.is_success() {
                    return Err(self.error_of(resp).await);
                }
                return Ok((status, resp.bytes().await.map_err(transport)?));
            };
            let pause = asked.unwrap_or(backoff);
            let why = match &outcome {
                Ok(resp) => resp.status().to_string(),
                Err(e) => Error::transport(&self.endpoint, e).to_string(),
            };
            tracing::debug!(%method, url = %spare.url(), %why, ?pause, "trying again");
            self.pause(pause).await?;
            req = spare;
        }
    }

    /// The server's error in an answer that is not a success.
    async fn error_of(&self, resp: reqwest::Response) -> Error {
        let status = resp.status();
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => return Error::transport(&self.endpoint, &e),
        };
        #[derive(serde::Deserialize)]
        struct Body {
            code: u8,
            message: String,
            #[serde(default)]
            details: Vec<FieldError>,
        }
        match serde_json::from_slice::<Body>(&bytes) {
            Ok(b) => Error::Api { status: status.as_u16(), code: b.code, message: b.message, details: b.details },
            Err(_) => {
                Error::Api { status: status.as_u16(), code: 2, message: String::from_utf8_lossy(&bytes).into_owned(), details: vec![] }
            }
        }
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: Option<&VmQuery>,
        body: Option<&B>,
    ) -> Result<Option<T>, Error> {
        let (status, bytes) = self.send(method, path, query, body).await?;
        if status == StatusCode::NO_CONTENT || bytes.is_empty() {
            return Ok(None);
        }
        serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::Decode(format!("{path}: {e}")))
    }

    async fn object<B: Serialize, T: DeserializeOwned>(&self, method: Method, path: &str, body: Option<&B>) -> Result<T, Error> {
        self.call::<B, Envelope<T>>(method, path, None, body)
            .await?
            .map(|e| e.object)
            .ok_or_else(|| Error::Decode(format!("{path}: empty body")))
    }

    // ---- templates ----

    /// A page of templates.
    pub async fn list_templates(&self, offset: u64, limit: u64) -> Result<Page<VirtualMachineTemplate>, Error> {
        self.list_templates_where(offset, limit, None).await
    }

    /// A page of the templates `filter` (CEL) holds for.
    pub async fn list_templates_where(&self, offset: u64, limit: u64, filter: Option<&str>) -> Result<Page<VirtualMachineTemplate>, Error> {
        let q = VmQuery { offset: Some(offset), limit: Some(limit), filter: filter.map(str::to_owned), ..Default::default() };
        self.call::<(), _>(Method::GET, "/virtual_machine_templates", Some(&q), None)
            .await?
            .ok_or_else(|| Error::Decode("empty list".into()))
    }

    /// Every template, over as many pages as it takes.
    pub async fn all_templates(&self) -> Result<Vec<VirtualMachineTemplate>, Error> {
        self.all_templates_where(None).await
    }

    /// Every template `filter` (CEL) holds for, over as many pages as it takes.
    pub async fn all_templates_where(&self, filter: Option<&str>) -> Result<Vec<VirtualMachineTemplate>, Error> {
        let mut out = Vec::new();
        loop {
            let page = self.list_templates_where(out.len() as u64, 1000, filter).await?;
            let done = page.items.is_empty() || out.len() as u64 + page.size >= page.total;
            out.extend(page.items);
            if done {
                return Ok(out);
            }
        }
    }

    /// One template.
    pub async fn get_template(&self, id: &str) -> Result<VirtualMachineTemplate, Error> {
        self.object::<(), _>(Method::GET, &format!("/virtual_machine_templates/{id}"), None).await
    }

    /// Publishes a template (administrators).
    pub async fn create_template(&self, t: &VirtualMachineTemplate) -> Result<VirtualMachineTemplate, Error> {
        self.object(Method::POST, "/virtual_machine_templates", Some(&Envelope { object: t })).await
    }

    /// Replaces a template (administrators).
    pub async fn update_template(&self, t: &VirtualMachineTemplate) -> Result<VirtualMachineTemplate, Error> {
        self.object(Method::PUT, &format!("/virtual_machine_templates/{}", t.id), Some(&Envelope { object: t })).await
    }

    /// Removes a template (administrators).
    pub async fn delete_template(&self, id: &str) -> Result<(), Error> {
        self.call::<(), serde_json::Value>(Method::DELETE, &format!("/virtual_machine_templates/{id}"), None, None).await.map(|_| ())
    }

    // ---- virtual machines ----

    /// A page of VMs.
    pub async fn list_vms(&self, q: &VmQuery) -> Result<Page<VirtualMachine>, Error> {
        self.call::<(), _>(Method::GET, "/virtual_machines", Some(q), None).await?.ok_or_else(|| Error::Decode("empty list".into()))
    }

    /// One VM by id.
    pub async fn get_vm(&self, id: &str) -> Result<VirtualMachine, Error> {
        self.object::<(), _>(Method::GET, &format!("/virtual_machines/{id}"), None).await
    }

    /// One VM by id (a UUID) or by name.
    pub async fn find_vm(&self, name_or_id: &str) -> Result<VirtualMachine, Error> {
        if uuid::Uuid::parse_str(name_or_id).is_ok() {
            return self.get_vm(name_or_id).await;
        }
        let page = self.list_vms(&VmQuery { name: Some(name_or_id.to_owned()), ..Default::default() }).await?;
        page.items.into_iter().next().ok_or_else(|| Error::Api {
            status: 404,
            code: 5,
            message: format!("virtual machine {name_or_id:?} not found"),
            details: vec![],
        })
    }

    /// Creates a VM.
    pub async fn create_vm(&self, vm: &CreateVirtualMachine) -> Result<VirtualMachine, Error> {
        self.object(Method::POST, "/virtual_machines", Some(&Envelope { object: vm })).await
    }

    /// Changes a VM's spec.
    pub async fn patch_vm(&self, id: &str, patch: &PatchVirtualMachine) -> Result<VirtualMachine, Error> {
        self.object(Method::PATCH, &format!("/virtual_machines/{id}"), Some(&Envelope { object: patch })).await
    }

    /// Changes a VM's spec based on the version just read, so a concurrent
    /// change is never overwritten unseen: on a 409 (someone else changed it
    /// in between) it reads the VM again and retries, up to `attempts` times.
    pub async fn patch_vm_versioned(&self, id: &str, patch: &PatchVirtualMachine, attempts: u32) -> Result<VirtualMachine, Error> {
        let retries = usize::try_from(attempts.saturating_sub(1)).unwrap_or(usize::MAX);
        let conflicts = RetryPolicy { retries, min_delay: Duration::from_millis(50), max_delay: Duration::from_secs(1), ..self.retry };
        let mut pauses = conflicts.backoff();
        loop {
            let current = self.get_vm(id).await?;
            let mut p = patch.clone();
            p.metadata.get_or_insert_with(Default::default).version = Some(current.metadata.version);
            match (self.patch_vm(id, &p).await, pauses.next()) {
                (Err(Error::Api { status: 409, code: 10, .. }), Some(pause)) => self.pause(pause).await?,
                (outcome, _) => return outcome,
            }
        }
    }

    /// Restarts a running VM.
    pub async fn restart_vm(&self, id: &str) -> Result<VirtualMachine, Error> {
        self.object::<(), _>(Method::POST, &format!("/virtual_machines/{id}/restart"), None).await
    }

    /// Moves a running VM to another host without stopping it
    /// (administrators; `node`: the one to move to, else the scheduler's choice).
    pub async fn migrate_vm(&self, id: &str, node: Option<&str>) -> Result<VirtualMachine, Error> {
        let body = serde_json::json!({ "target_node": node });
        self.object(Method::POST, &format!("/virtual_machines/{id}/migrate"), Some(&body)).await
    }

    /// Starts deleting a VM.
    pub async fn delete_vm(&self, id: &str) -> Result<VirtualMachine, Error> {
        self.object::<(), _>(Method::DELETE, &format!("/virtual_machines/{id}"), None).await
    }

    /// Starts deleting a VM, keeping its snapshots.
    pub async fn delete_vm_keeping_snapshots(&self, id: &str) -> Result<VirtualMachine, Error> {
        self.object::<(), _>(Method::DELETE, &format!("/virtual_machines/{id}?retain_snapshots=true"), None).await
    }

    /// Restores VM `id`'s disks from one of its snapshots (`stop`: stop it
    /// for the restore if it runs; it starts again afterwards).
    pub async fn restore_vm(&self, id: &str, snapshot: &str, stop: bool) -> Result<VirtualMachine, Error> {
        let body = serde_json::json!({ "snapshot": snapshot, "stop": stop });
        self.object(Method::POST, &format!("/virtual_machines/{id}/restore"), Some(&body)).await
    }

    /// Opens a console session: a single-use ticket for the console WebSocket.
    pub async fn console_session(&self, id: &str) -> Result<ConsoleSession, Error> {
        self.call::<(), ConsoleSession>(Method::POST, &format!("/virtual_machines/{id}/console_sessions"), None, None)
            .await?
            .ok_or_else(|| Error::Decode("empty console session".into()))
    }

    /// A session of VM `id`'s graphical console (RFB over a WebSocket).
    pub async fn display_session(&self, id: &str) -> Result<ConsoleSession, Error> {
        let body = serde_json::json!({"type": "CONSOLE_TYPE_VNC"});
        self.call::<serde_json::Value, ConsoleSession>(Method::POST, &format!("/virtual_machines/{id}/console_sessions"), None, Some(&body))
            .await?
            .ok_or_else(|| Error::Decode("empty console session".into()))
    }

    /// The WebSocket URL of a console session.
    pub fn console_url(&self, session: &ConsoleSession) -> String {
        let ws = self.endpoint.replacen("https://", "wss://", 1).replacen("http://", "ws://", 1);
        let origin = match ws.find("://").map(|i| i + 3).and_then(|i| ws[i..].find('/').map(|j| i + j)) {
            Some(end) => &ws[..end],
            None => ws.as_str(),
        };
        format!("{origin}{}", session.url)
    }

    /// The buffered console output of VM `id`.
    pub async fn console_log(&self, id: &str) -> Result<Vec<u8>, Error> {
        let (_, bytes) = self.send::<()>(Method::GET, &format!("/virtual_machines/{id}/console_log"), None, None).await?;
        Ok(bytes.to_vec())
    }
}
