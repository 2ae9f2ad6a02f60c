//! The metrics and audit log of unary calls: each call counted under its
//! method's path, and each that changes something audited with its caller.

use std::convert::Infallible;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, Response};
use futures::future::BoxFuture;
use tower::ServiceExt;

use crate::audit::Pending;
use crate::metrics::HttpLabels;
use crate::state::AppState;

/// The methods served typed; any other name is counted as `unmatched`, so
/// that clients cannot grow the label set.
const METHODS: [&str; 6] = ["List", "Get", "Create", "Update", "Delete", "Restore"];

/// `inner` with each call recorded.
#[derive(Clone)]
pub struct Observed<S> {
    state: AppState,
    inner: S,
}

impl<S> Observed<S> {
    /// Records the calls `inner` answers.
    pub fn new(state: AppState, inner: S) -> Self {
        Self { state, inner }
    }
}

impl<S> tower::Service<Request<Body>> for Observed<S>
where
    S: tower::Service<Request<Body>, Response = Response<tonic::body::Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        let (state, inner) = (self.state.clone(), self.inner.clone());
        Box::pin(async move {
            let started = Instant::now();
            let path = req.uri().path().to_owned();
            let method = path.rsplit('/').next().unwrap_or_default();
            let known = METHODS.contains(&method);
            let audit = Pending::start_if(state.audit.as_ref(), known && !matches!(method, "List" | "Get"), &mut req);
            let resp = inner.oneshot(req).await?;
            let status = http_status(&resp);
            let route = if known { path } else { "unmatched".to_owned() };
            state.metrics.observe_http(HttpLabels { method: "POST", route, status }, started.elapsed());
            if let Some(a) = audit {
                a.finish(status, started.elapsed()).await;
            }
            Ok(resp.map(Body::new))
        })
    }
}

/// The HTTP status a call's outcome stands for: an error's code is in the
/// response's headers (a unary error has no body); no code there is success.
fn http_status<B>(resp: &Response<B>) -> u16 {
    let code = resp.headers().get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i32>().ok()).unwrap_or(0);
    use tonic::Code;
    match Code::from_i32(code) {
        Code::Ok => 200,
        Code::InvalidArgument | Code::OutOfRange => 400,
        Code::Unauthenticated => 401,
        Code::PermissionDenied => 403,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted | Code::FailedPrecondition => 409,
        Code::ResourceExhausted => 429,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::DeadlineExceeded => 504,
        _ => 500,
    }
}
