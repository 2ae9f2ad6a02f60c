//! `vmaas vm vnc`: the VM's screen for a VNC viewer on this machine. It
//! listens on a local TCP address (loopback by default) and, for each
//! viewer that connects, opens a graphical console session (a VNC ticket)
//! and carries RFB between the viewer and the server's WebSocket, as
//! `virtctl vnc --proxy-only` does. There is no VNC password: whoever
//! reaches the address sees and types into the VM, so keep it on loopback.

use std::net::SocketAddr;

use anyhow::Context;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use vmaas_client::Client;

/// Serves the screen of VM `id` (named `name`) on `listen`; with `once`,
/// for one viewer only.
pub async fn run(client: &Client, id: &str, name: &str, listen: SocketAddr, once: bool) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listening on {listen}"))?;
    let at = listener.local_addr()?;
    if !at.ip().is_loopback() {
        eprintln!("warning: {at} is not a loopback address: anyone who reaches it sees and types into {name} (VNC has no password here)");
    }
    // The address on stdout, alone, for scripts; the rest on stderr.
    println!("{at}");
    eprintln!("The screen of {name} is at vnc://{at}: point a VNC viewer there (Ctrl-C stops).");
    loop {
        let (viewer, from) = listener.accept().await.context("accepting a viewer")?;
        viewer.set_nodelay(true)?;
        let session = client.display_session(id).await.with_context(|| format!("opening the screen of {name:?}"))?;
        let ws = crate::console::connect(client, &client.console_url(&session))
            .await
            .with_context(|| format!("connecting to the screen of {name:?}"))?;
        eprintln!("viewer {from} connected");
        if once {
            return relay(viewer, ws).await;
        }
        tokio::spawn(async move {
            if let Err(e) = relay(viewer, ws).await {
                eprintln!("viewer {from}: {e:#}");
            }
        });
    }
}

/// RFB between the viewer's TCP connection and the WebSocket, until either ends.
async fn relay(mut viewer: tokio::net::TcpStream, ws: crate::console::Socket) -> anyhow::Result<()> {
    let (mut tx, mut rx) = ws.split();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            n = viewer.read(&mut buf) => match n? {
                0 => break,
                n => tx.send(Message::Binary(buf[..n].to_vec().into())).await?,
            },
            msg = rx.next() => match msg {
                Some(Ok(Message::Binary(b))) => viewer.write_all(&b).await?,
                Some(Ok(Message::Close(_))) | None => break,
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = tx.send(Message::Close(None)).await;
    Ok(())
}
