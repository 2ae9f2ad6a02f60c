//! The gateway: each gRPC method of the project's `.proto` files is served
//! by the REST route its HTTP rule names, in process, so that both protocols
//! share one implementation of every check, every tenancy rule and every
//! error. Requests are decoded by their descriptors (no generated code),
//! sent as JSON, and the JSON answer is read back into the response type.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use bytes::Bytes;
use futures::future::BoxFuture;
use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor};
use tonic::Status;
use tower::ServiceExt;

use super::cache::Encodings;
use super::codec::{DynamicCodec, Reply};
use super::rule::Rule;
use super::{json, status, watch};
use crate::state::AppState;

/// One method served.
struct Served {
    method: MethodDescriptor,
    rule: Option<Rule>,
}

/// What every call reaches.
pub struct Inner {
    /// The project's descriptors.
    pub pool: DescriptorPool,
    /// The server's state (for event streams).
    pub state: AppState,
    methods: HashMap<String, Arc<Served>>,
    rest: axum::Router,
    max_message: usize,
    encodings: Encodings,
}

/// A tower service answering the gRPC methods of every service in `pool`.
#[derive(Clone)]
pub struct Gateway(Arc<Inner>);

impl Gateway {
    /// Serves the services of `pool` through `rest`; messages are at most `max_message` bytes.
    pub fn new(pool: DescriptorPool, state: AppState, rest: axum::Router, max_message: usize) -> Self {
        let http = pool.get_extension_by_name("google.api.http");
        let mut methods = HashMap::new();
        for service in pool.services() {
            for method in service.methods() {
                let rule = http.as_ref().and_then(|h| Rule::of(&method, h));
                methods.insert(format!("/{}/{}", service.full_name(), method.name()), Arc::new(Served { method, rule }));
            }
        }
        Self(Arc::new(Inner { pool, state, methods, rest, max_message, encodings: Encodings::default() }))
    }

    /// The full names of the services served.
    pub fn services(&self) -> Vec<String> {
        self.0.pool.services().filter(|s| s.methods().len() > 0).map(|s| s.full_name().to_owned()).collect()
    }
}

impl tower::Service<axum::http::Request<Body>> for Gateway {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<Body>) -> Self::Future {
        let inner = self.0.clone();
        Box::pin(async move { Ok(inner.serve(req).await.map(Body::new)) })
    }
}

impl Inner {
    /// Answers one gRPC call.
    async fn serve(self: Arc<Self>, req: axum::http::Request<Body>) -> axum::http::Response<tonic::body::Body> {
        let Some(served) = self.methods.get(req.uri().path()).cloned() else {
            return Status::unimplemented(format!("no method {}", req.uri().path())).into_http();
        };
        let codec = DynamicCodec::new(served.method.input());
        let mut grpc = tonic::server::Grpc::new(codec).max_decoding_message_size(self.max_message).max_encoding_message_size(usize::MAX);
        if served.method.is_client_streaming() && served.method.is_server_streaming() {
            let (state, method) = (self.state.clone(), served.method.clone());
            let svc = tower::service_fn(move |r| super::proxy::connect(state.clone(), method.clone(), r));
            grpc.streaming(svc, req).await
        } else if served.method.is_server_streaming() {
            let (pool, state, method) = (self.pool.clone(), self.state.clone(), served.method.clone());
            let svc = tower::service_fn(move |r| watch::watch(pool.clone(), state.clone(), method.clone(), r));
            grpc.server_streaming(svc, req).await
        } else {
            let me = self.clone();
            let svc = tower::service_fn(move |r| me.clone().unary(served.clone(), r));
            grpc.unary(svc, req).await
        }
    }

    /// Serves a unary call through its REST route.
    async fn unary(self: Arc<Self>, served: Arc<Served>, req: tonic::Request<DynamicMessage>) -> Result<tonic::Response<Reply>, Status> {
        let name = served.method.full_name();
        let rule = served.rule.as_ref().ok_or_else(|| Status::unimplemented(format!("{name} has no REST route")))?;
        let (meta, _, msg) = req.into_parts();
        let body = match rule.body.as_deref() {
            Some("*") => {
                // Every field but those the path binds.
                let mut rest = msg.clone();
                for f in rule.path_fields() {
                    rest.clear_field_by_name(&f);
                }
                json::request_body(&rest, "*")?
            }
            Some(field) => json::request_body(&msg, field)?,
            None => Vec::new(),
        };
        let mut http = axum::http::Request::builder().method(rule.method.clone()).uri(rule.uri(&msg)?);
        if let Some(auth) = meta.get("authorization") {
            http = http.header(AUTHORIZATION, auth.as_bytes());
        }
        if !body.is_empty() {
            http = http.header(CONTENT_TYPE, "application/json");
        }
        let http = http.body(Body::from(body)).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let answer = match self.rest.clone().oneshot(http).await {
            Ok(a) => a,
            Err(never) => match never {},
        };
        let (parts, body) = answer.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.map_err(|e| Status::internal(format!("cannot read the answer: {e}")))?;
        if !parts.status.is_success() {
            return Err(status::from_rest(&self.pool, parts.status, &bytes));
        }
        if let Some(encoded) = self.encodings.get(name, &bytes) {
            return Ok(tonic::Response::new(Reply::Encoded(encoded)));
        }
        let reply = json::response(served.method.output(), rule.response_body.as_deref(), &bytes)?;
        let encoded = Bytes::from(prost::Message::encode_to_vec(&reply));
        self.encodings.put(name, bytes, encoded.clone());
        Ok(tonic::Response::new(Reply::Encoded(encoded)))
    }
}
