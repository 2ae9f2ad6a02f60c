//! WebSockets to a VirtualMachineInstance's subresources (`console`,
//! `vnc`), which virt-api serves behind the API server's aggregation layer
//! (`subresources.kubevirt.io/v1`) in the `plain.kubevirt.io` protocol.
//! The serial console ([`crate::console`]) and the display
//! ([`crate::display`]) both open theirs here.

use std::sync::Arc;

use hyper_util::rt::TokioIo;
use kube::api::{DynamicObject, ListParams};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use vmaas_backend::BackendError;

use crate::shared::Shared;

/// KubeVirt's subresource subprotocol.
const PROTOCOL: &str = "plain.kubevirt.io";

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
