//! Serial consoles through KubeVirt's `virtualmachineinstances/{name}/console`
//! subresource, which virt-api serves behind the API server's aggregation
//! layer (`subresources.kubevirt.io/v1`): a WebSocket of the
//! `plain.kubevirt.io` protocol, raw serial bytes in binary frames both
//! ways. One connection per VM, opened when a viewer first asks and shared
//! by every viewer while it lasts; what it printed since it opened (the
//! last [`HISTORY`] bytes) is the VM's console log.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use kube::api::{DynamicObject, ListParams};
use tokio::sync::{broadcast, mpsc};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Message, Role};
use tracing::{debug, info};
use vmaas_backend::{BackendError, Console};

use crate::Shared;

/// The console output kept per VM (the log), in bytes.
pub const HISTORY: usize = 64 * 1024;

/// KubeVirt's console subprotocol.
const PROTOCOL: &str = "plain.kubevirt.io";

/// One open console connection and its viewers' ends.
struct Session {
    /// The VMI it is connected to (a restarted VM has a new one).
    vmi: String,
    /// Told when the connection must end.
    stop: tokio::sync::Notify,
    history: Mutex<VecDeque<u8>>,
    output: broadcast::Sender<Bytes>,
    input: mpsc::Sender<Bytes>,
}

impl Session {
    fn console(&self) -> Console {
        let history = self.history.lock().map(|h| h.iter().copied().collect()).unwrap_or_default();
        Console { history, output: self.output.subscribe(), input: self.input.clone() }
    }

    fn record(&self, chunk: &[u8]) {
        if let Ok(mut h) = self.history.lock() {
            h.extend(chunk);
            let over = h.len().saturating_sub(HISTORY);
            h.drain(..over);
        }
    }
}

/// The open console connections, by vmaas id.
#[derive(Default)]
pub struct Sessions(Mutex<HashMap<String, Arc<Session>>>);

impl Sessions {
    /// The open connection of `id` to VMI `vmi`; one to another VMI (or
    /// none: the VM stopped) is ended.
    fn live(&self, id: &str, vmi: Option<&str>) -> Option<Arc<Session>> {
        let mut m = self.0.lock().ok()?;
        let s = m.get(id)?.clone();
        if Some(s.vmi.as_str()) == vmi && !s.input.is_closed() {
            return Some(s);
        }
        m.remove(id);
        s.stop.notify_one();
        None
    }

    fn put(&self, id: &str, s: Arc<Session>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(id.to_owned(), s);
        }
    }

    fn drop_if(&self, id: &str, s: &Arc<Session>) {
        if let Ok(mut m) = self.0.lock()
            && m.get(id).is_some_and(|cur| Arc::ptr_eq(cur, s))
        {
            m.remove(id);
        }
    }
}

/// The consoles of the backend's VMs.
pub struct Consoles(pub(crate) Arc<Shared>);

#[async_trait]
impl vmaas_backend::Consoles for Consoles {
    async fn open(&self, id: &str) -> Result<Console, BackendError> {
        self.0.listed()?;
        let vmi = vmi_of(&self.0, id).await?;
        let uid = vmi.as_ref().and_then(|v| v.metadata.uid.clone());
        if let Some(s) = self.0.consoles.live(id, uid.as_deref()) {
            return Ok(s.console());
        }
        let vmi =
            vmi.ok_or_else(|| BackendError::invalid("opening the console", "the VM is not running: it has no VirtualMachineInstance"))?;
        let (ns, name) = crate::cluster::place_of(&vmi);
        let ws = connect(&self.0.cluster.client(), &ns, &name, "console").await?;
        let (output, _) = broadcast::channel(256);
        let (input, typed) = mpsc::channel(64);
        let session =
            Arc::new(Session { vmi: uid.unwrap_or_default(), stop: tokio::sync::Notify::new(), history: Mutex::default(), output, input });
        self.0.consoles.put(id, session.clone());
        info!(vm = %id, vmi = %format!("{ns}/{name}"), "console connected through virt-api");
        tokio::spawn(pump(self.0.clone(), id.to_owned(), session.clone(), ws, typed));
        Ok(session.console())
    }

    async fn display(&self, id: &str) -> Result<vmaas_backend::Display, BackendError> {
        crate::display::open(&self.0, id).await
    }
}

/// VM `id`'s VMI: from the watch, else asked of the API server (another
/// replica may have seen it start, and answered READY, before this
/// replica's watch has caught up).
pub(crate) async fn vmi_of(shared: &Shared, id: &str) -> Result<Option<Arc<DynamicObject>>, BackendError> {
    if let Some(vmi) = shared.vmis.of(id).into_iter().next() {
        return Ok(Some(vmi));
    }
    let params = ListParams::default().labels(&crate::names::selector_of(id));
    let listed = shared.cluster.api(&shared.cluster.res.vmi, "").list(&params).await;
    let listed = listed.map_err(|e| BackendError::transient("looking up the VM's VirtualMachineInstance", e))?;
    Ok(listed.items.into_iter().next().map(Arc::new))
}

/// A KubeVirt WebSocket through the API server.
pub(crate) type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Opens the WebSocket of VMI `ns/name`'s `subresource` (`console`, `vnc`)
/// through the API server.
pub(crate) async fn connect(client: &kube::Client, ns: &str, name: &str, subresource: &str) -> Result<Socket, BackendError> {
    let context = format!("opening the {subresource} of VirtualMachineInstance {ns}/{name}");
    let fail = |e: String| BackendError::transient(context.clone(), e);
    let key = tokio_tungstenite::tungstenite::handshake::client::generate_key();
    let request =
        http::Request::get(format!("/apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/{subresource}"))
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, "websocket")
            .header(http::header::SEC_WEBSOCKET_VERSION, "13")
            .header(http::header::SEC_WEBSOCKET_KEY, key)
            .header(http::header::SEC_WEBSOCKET_PROTOCOL, PROTOCOL)
            .body(kube::client::Body::empty())
            .map_err(|e| fail(e.to_string()))?;
    let response = client.send(request).await.map_err(|e| fail(e.to_string()))?;
    if response.status() == http::StatusCode::NOT_FOUND {
        // The watch has not yet seen the VMI go: the VM has stopped all the same.
        return Err(BackendError::invalid(context.clone(), format!("the VM is not running: VirtualMachineInstance {ns}/{name} is gone")));
    }
    if response.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        return Err(fail(format!("virt-api answered {} (is the aggregated API subresources.kubevirt.io available?)", response.status())));
    }
    let upgraded = hyper::upgrade::on(response).await.map_err(|e| fail(e.to_string()))?;
    Ok(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, None).await)
}

/// Moves bytes between the WebSocket and the viewers until either side ends.
async fn pump(shared: Arc<Shared>, id: String, session: Arc<Session>, ws: Socket, mut typed: mpsc::Receiver<Bytes>) {
    let (mut to_vm, mut from_vm) = ws.split();
    loop {
        tokio::select! {
            frame = from_vm.next() => match frame {
                Some(Ok(Message::Binary(b))) => { session.record(&b); let _ = session.output.send(b); }
                Some(Ok(Message::Text(t))) => { let b = Bytes::from(t.as_str().to_owned()); session.record(&b); let _ = session.output.send(b); }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            input = typed.recv() => match input {
                Some(b) => if to_vm.send(Message::Binary(b)).await.is_err() { break },
                None => break,
            },
            () = session.stop.notified() => {
                let _ = to_vm.send(Message::Close(None)).await;
                break;
            }
        }
    }
    shared.consoles.drop_if(&id, &session);
    debug!(vm = %id, "console connection closed");
}
