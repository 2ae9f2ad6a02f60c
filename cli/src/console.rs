//! `vmaas vm console`: the serial console over the server's WebSocket.
//!
//! On a terminal it is interactive (raw mode; Ctrl-] leaves). Otherwise it
//! sends its standard input and prints what the guest prints until the guest
//! has been quiet for a while: for scripts.

use std::io::{IsTerminal, Read, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use vmaas_client::Client;

/// Ctrl-]: leaves an interactive console.
const ESCAPE: u8 = 0x1d;

/// How to run the console.
pub struct Options {
    /// Force the non-interactive mode.
    pub batch: bool,
    /// In batch mode: stop after this long without output.
    pub idle: Duration,
    /// In batch mode: print the buffered output first.
    pub history: bool,
}

/// Puts the terminal back in cooked mode when dropped.
struct RawMode;

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// A connection the console's WebSocket runs over: TCP, or TLS over TCP.
pub(crate) trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// A console's WebSocket.
pub(crate) type Socket = WebSocketStream<Box<dyn Io>>;

/// Opens the WebSocket at `url`; a `wss://` one over TLS, trusting what
/// the client trusts (its CA file, or anything with `--insecure`).
pub(crate) async fn connect(client: &Client, url: &str) -> anyhow::Result<Socket> {
    let request = url.into_client_request()?;
    let secure = request.uri().scheme_str() == Some("wss");
    let host = request.uri().host().context("the console URL has no host")?.trim_matches(['[', ']']).to_owned();
    let port = request.uri().port_u16().unwrap_or(if secure { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    tcp.set_nodelay(true)?;
    let io: Box<dyn Io> = if secure {
        let name = rustls_pki_types::ServerName::try_from(host.clone()).with_context(|| format!("{host:?} is not a server name"))?;
        let tls = tokio_rustls::TlsConnector::from(client.trust().rustls_config()?);
        Box::new(tls.connect(name, tcp).await.context("TLS")?)
    } else {
        Box::new(tcp)
    };
    let (ws, _) = tokio_tungstenite::client_async(request, io).await?;
    Ok(ws)
}

/// Runs the console of VM `id` (named `name`).
pub async fn run(client: &Client, id: &str, name: &str, opts: Options) -> anyhow::Result<()> {
    let session = client.console_session(id).await?;
    let url = client.console_url(&session);
    let ws = connect(client, &url).await.with_context(|| format!("connecting to the console of {name:?}"))?;
    let (mut tx, mut rx) = ws.split();
    let interactive = !opts.batch && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if interactive {
        eprintln!("Connected to the console of {name}. Press Ctrl-] to leave.\r");
        let _raw = {
            crossterm::terminal::enable_raw_mode().context("switching the terminal to raw mode")?;
            RawMode
        };
        let (in_tx, mut in_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin();
            let mut buf = [0u8; 1024];
            while let Ok(n) = stdin.read(&mut buf) {
                if n == 0 || in_tx.blocking_send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let mut out = std::io::stdout();
        loop {
            tokio::select! {
                input = in_rx.recv() => {
                    let Some(bytes) = input else { break };
                    if let Some(i) = bytes.iter().position(|b| *b == ESCAPE) {
                        if i > 0 { tx.send(Message::Binary(bytes[..i].to_vec().into())).await?; }
                        break;
                    }
                    tx.send(Message::Binary(bytes.into())).await?;
                }
                msg = rx.next() => match msg {
                    Some(Ok(Message::Binary(b))) => { out.write_all(&b)?; out.flush()?; }
                    Some(Ok(Message::Text(t))) => { out.write_all(t.as_bytes())?; out.flush()?; }
                    Some(Ok(Message::Close(_))) | None => { eprintln!("\r\nThe console closed (the VM stopped?).\r"); break; }
                    Some(Err(e)) => bail!("console connection: {e}"),
                    Some(Ok(_)) => {}
                },
            }
        }
        eprintln!("\r\nLeft the console of {name}.\r");
        let _ = tx.send(Message::Close(None)).await;
        return Ok(());
    }

    // Batch mode.
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).context("reading standard input")?;
    let mut out = std::io::stdout();
    // The first message is the buffered history.
    let first = tokio::time::timeout(Duration::from_millis(500), rx.next()).await;
    if let Ok(Some(Ok(Message::Binary(b)))) = &first
        && opts.history
    {
        out.write_all(b)?;
    }
    if !input.is_empty() {
        tx.send(Message::Binary(input.into())).await?;
    }
    loop {
        match tokio::time::timeout(opts.idle, rx.next()).await {
            Err(_) => break,
            Ok(Some(Ok(Message::Binary(b)))) => out.write_all(&b)?,
            Ok(Some(Ok(Message::Text(t)))) => out.write_all(t.as_bytes())?,
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) => break,
            Ok(Some(Err(e))) => bail!("console connection: {e}"),
            Ok(Some(Ok(_))) => {}
        }
    }
    out.flush()?;
    let _ = tx.send(Message::Close(None)).await;
    Ok(())
}
