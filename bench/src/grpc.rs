//! The gRPC half of `vmaas-bench api`: unary `fulfillment.v1.VirtualMachines/Get`
//! and `osac.public.v1.ComputeInstances/Get` on vmaas-server (served typed:
//! prost messages to the application layer, no answer cache) against a bare
//! tonic handler that answers a prebuilt response of the same size. Both
//! sides use the same client (one HTTP/2 connection per worker) and a codec
//! that passes encoded messages through, so the difference is the server's work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::http::uri::PathAndQuery;
use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};
use vmaas_server::serve::{HttpLimits, serve};

use super::Figures;

/// The methods measured.
pub const VM_GET: &str = "/fulfillment.v1.VirtualMachines/Get";
/// OSAC's current view of the same VMs.
pub const INSTANCE_GET: &str = "/osac.public.v1.ComputeInstances/Get";

/// Passes encoded messages through.
#[derive(Clone, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// `GetRequest{id}`, encoded.
fn get_request(id: &str) -> Bytes {
    let mut b = vec![0x0a, u8::try_from(id.len()).unwrap_or(0)];
    b.extend_from_slice(id.as_bytes());
    Bytes::from(b)
}

/// Serves `router` (HTTP/1.1 and h2c) on a loopback port.
async fn serve_h2(router: axum::Router) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(serve(listener, router, HttpLimits::default(), None, std::future::pending()));
    Ok(format!("http://{addr}"))
}

/// A bare tonic handler answering `method` with `answer`.
fn bare(method: &'static str, answer: Bytes) -> axum::Router {
    let svc = tower::service_fn(move |req: axum::http::Request<axum::body::Body>| {
        let answer = answer.clone();
        async move {
            let handler = tower::service_fn(move |_: Request<Bytes>| {
                let answer = answer.clone();
                async move { Ok::<_, Status>(Response::new(answer)) }
            });
            let rsp = tonic::server::Grpc::new(Raw).unary(handler, req).await;
            Ok::<_, std::convert::Infallible>(rsp.map(axum::body::Body::new))
        }
    });
    axum::Router::new().route_service(method, svc)
}

/// One unary call of `method`.
async fn call(ch: &mut tonic::client::Grpc<Channel>, method: &'static str, body: Bytes, token: &str) -> Result<Bytes, Status> {
    ch.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
    let mut req = Request::new(body);
    let auth = format!("Bearer {token}").parse().map_err(|_| Status::internal("token"))?;
    req.metadata_mut().insert("authorization", auth);
    Ok(ch.unary(req, PathAndQuery::from_static(method), Raw).await?.into_inner())
}

/// Drives `connections` workers, one HTTP/2 connection each, through `ids` for `duration`.
async fn load(
    name: &str,
    method: &'static str,
    url: &str,
    ids: Arc<Vec<String>>,
    token: &str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    let start = Instant::now() + Duration::from_millis(300);
    let (measure_from, end) = (start + Duration::from_secs(1), start + Duration::from_secs(1) + duration);
    let mut tasks = Vec::new();
    for w in 0..connections {
        let channel = Endpoint::from_shared(url.to_owned())?.connect().await.context("connect")?;
        let (ids, token) = (ids.clone(), token.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut ch = tonic::client::Grpc::new(channel);
            let (mut lat, mut errors, mut i) = (Vec::with_capacity(1 << 16), 0u64, w);
            tokio::time::sleep_until(start.into()).await;
            while Instant::now() < end {
                let t0 = Instant::now();
                let ok = call(&mut ch, method, get_request(&ids[i % ids.len()]), &token).await.is_ok();
                i += 7;
                match (t0 >= measure_from, ok) {
                    (true, true) => lat.push(t0.elapsed().as_micros() as u32),
                    (true, false) => errors += 1,
                    _ => {}
                }
            }
            (lat, errors)
        }));
    }
    Figures::gather(name, tasks, duration).await
}

/// The best of two alternating runs of vmaas's gRPC `method` (a Get) and
/// of the bare handler (answering vmaas's own response to the first id).
pub async fn figures(
    vmaas: axum::Router,
    method: &'static str,
    ids: Vec<String>,
    token: &str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<[Figures; 2]> {
    let url = serve_h2(vmaas).await?;
    let mut ch = tonic::client::Grpc::new(Endpoint::from_shared(url.clone())?.connect().await?);
    let answer = call(&mut ch, method, get_request(&ids[0]), token).await.context("the first gRPC Get")?;
    let bare_url = serve_h2(bare(method, answer)).await?;
    // `/osac.public.v1.ComputeInstances/Get` is named `ComputeInstances/Get`.
    let (service, call) = method.trim_start_matches('/').split_once('/').context("a method is /SERVICE/METHOD")?;
    let name = format!("vmaas gRPC {}/{call}", service.rsplit('.').next().unwrap_or(service));
    let ids = Arc::new(ids);
    let (mut best_bare, mut best): (Option<Figures>, Option<Figures>) = (None, None);
    for _ in 0..2 {
        let b = load("bare tonic, one object", method, &bare_url, ids.clone(), token, connections, duration).await?;
        let v = load(&name, method, &url, ids.clone(), token, connections, duration).await?;
        if best_bare.as_ref().is_none_or(|x| b.rps > x.rps) {
            best_bare = Some(b);
        }
        if best.as_ref().is_none_or(|x| v.rps > x.rps) {
            best = Some(v);
        }
    }
    Ok([best_bare.context("no run")?, best.context("no run")?])
}
