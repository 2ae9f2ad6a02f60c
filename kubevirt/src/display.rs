//! Graphical consoles through KubeVirt's `virtualmachineinstances/{name}/vnc`
//! subresource (virt-api, behind the API server's aggregation layer): a
//! WebSocket of the `plain.kubevirt.io` protocol carrying the VMI's VNC
//! (RFB) in binary frames both ways. Each viewer gets a connection of its
//! own, as a byte stream: a task moves the frames' bytes between the
//! WebSocket and one end of an in-memory pipe, the viewer has the other.

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::tungstenite::protocol::Message;
use tracing::{debug, info};
use vmaas_backend::BackendError;

use crate::shared::Shared;
use crate::subresource::{Socket, connect, vmi_of};

/// Bytes the pipe holds each way.
const PIPE: usize = 256 * 1024;

/// A new connection to the display of VM `id`'s VMI.
pub(crate) async fn open(shared: &Shared, id: &str) -> Result<vmaas_backend::Display, BackendError> {
    shared.listed()?;
    let vmi = vmi_of(shared, id).await?;
    let vmi = vmi.ok_or_else(|| BackendError::invalid("opening the display", "the VM is not running: it has no VirtualMachineInstance"))?;
    let (ns, name) = crate::cluster::place_of(&vmi);
    let ws = connect(&shared.cluster.client(), &ns, &name, "vnc").await?;
    let (viewer, ours) = tokio::io::duplex(PIPE);
    info!(vm = %id, vmi = %format!("{ns}/{name}"), "display connected through virt-api");
    tokio::spawn(pump(ws, ours, id.to_owned()));
    Ok(Box::new(viewer))
}

/// Moves RFB between the WebSocket and the pipe until either side ends.
async fn pump(ws: Socket, mut pipe: DuplexStream, id: String) {
    let (mut to_vm, mut from_vm) = ws.split();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            frame = from_vm.next() => match frame {
                Some(Ok(Message::Binary(b))) => if pipe.write_all(&b).await.is_err() { break },
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            n = pipe.read(&mut buf) => match n {
                Ok(0) | Err(_) => {
                    let _ = to_vm.send(Message::Close(None)).await;
                    break;
                }
                Ok(n) => if to_vm.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() { break },
            },
        }
    }
    debug!(vm = %id, "display connection closed");
}
