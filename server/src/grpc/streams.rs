//! The streaming methods, served by their descriptors (no generated code):
//! `Events.Watch` of both event packages (`watch`) and
//! `ConsoleProxy.Connect`, the bidirectional console stream (`proxy`).
//! Every unary method is served typed (`super::typed`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use futures::future::BoxFuture;
use prost_reflect::{DescriptorPool, MethodDescriptor};
use tonic::Status;

use super::codec::DynamicCodec;
use super::watch;
use crate::state::AppState;

/// What every call reaches.
pub struct Inner {
    /// The project's descriptors.
    pub pool: DescriptorPool,
    /// The server's state.
    pub state: AppState,
    methods: HashMap<String, MethodDescriptor>,
    max_message: usize,
}

/// A tower service answering the streaming methods of the services in `pool`.
#[derive(Clone)]
pub struct Streams(Arc<Inner>);

impl Streams {
    /// Serves the streaming methods of `pool`; messages are at most `max_message` bytes.
    pub fn new(pool: DescriptorPool, state: AppState, max_message: usize) -> Self {
        let mut methods = HashMap::new();
        for service in pool.services() {
            for method in service.methods().filter(|m| m.is_server_streaming()) {
                methods.insert(format!("/{}/{}", service.full_name(), method.name()), method);
            }
        }
        Self(Arc::new(Inner { pool, state, methods, max_message }))
    }

    /// The full names of the services with methods (every one is served,
    /// typed or here).
    pub fn services(&self) -> Vec<String> {
        self.0.pool.services().filter(|s| s.methods().len() > 0).map(|s| s.full_name().to_owned()).collect()
    }
}

impl tower::Service<axum::http::Request<Body>> for Streams {
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
    /// Answers one streaming call.
    async fn serve(self: Arc<Self>, req: axum::http::Request<Body>) -> axum::http::Response<tonic::body::Body> {
        let Some(method) = self.methods.get(req.uri().path()).cloned() else {
            return Status::unimplemented(format!("no method {}", req.uri().path())).into_http();
        };
        let codec = DynamicCodec::new(method.input());
        let mut grpc = tonic::server::Grpc::new(codec).max_decoding_message_size(self.max_message).max_encoding_message_size(usize::MAX);
        let (pool, state) = (self.pool.clone(), self.state.clone());
        if method.is_client_streaming() {
            let svc = tower::service_fn(move |r| super::proxy::connect(state.clone(), method.clone(), r));
            grpc.streaming(svc, req).await
        } else {
            let svc = tower::service_fn(move |r| watch::watch(pool.clone(), state.clone(), method.clone(), r));
            grpc.server_streaming(svc, req).await
        }
    }
}
