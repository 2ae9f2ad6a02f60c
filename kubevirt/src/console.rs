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
use tokio::sync::{broadcast, mpsc};
use tokio_tungstenite::tungstenite::protocol::Message;
use tracing::{debug, info};
use vmaas_backend::{BackendError, Console};

use crate::shared::Shared;
use crate::subresource::{Socket, connect, vmi_of};

/// The console output kept per VM (the log), in bytes.
pub const HISTORY: usize = 64 * 1024;

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
pub struct Consoles(pub(crate) Arc<Shared>, pub(crate) Arc<Sessions>);

#[async_trait]
impl vmaas_backend::Consoles for Consoles {
    async fn open(&self, id: &str) -> Result<Console, BackendError> {
        self.0.listed()?;
        let vmi = vmi_of(&self.0, id).await?;
        let uid = vmi.as_ref().and_then(|v| v.metadata.uid.clone());
        if let Some(s) = self.1.live(id, uid.as_deref()) {
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
        self.1.put(id, session.clone());
        info!(vm = %id, vmi = %format!("{ns}/{name}"), "console connected through virt-api");
        tokio::spawn(pump(self.1.clone(), id.to_owned(), session.clone(), ws, typed));
        Ok(session.console())
    }

    async fn display(&self, id: &str) -> Result<vmaas_backend::Display, BackendError> {
        crate::display::open(&self.0, id).await
    }
}

/// Moves bytes between the WebSocket and the viewers until either side ends.
async fn pump(sessions: Arc<Sessions>, id: String, session: Arc<Session>, ws: Socket, mut typed: mpsc::Receiver<Bytes>) {
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
    sessions.drop_if(&id, &session);
    debug!(vm = %id, "console connection closed");
}
