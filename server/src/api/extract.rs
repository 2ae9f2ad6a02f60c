//! Request extractors whose rejections name the field and the reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use axum::http::StatusCode;

use crate::decode::{decode, field_of};
use crate::error::{ApiError, Code};

/// A JSON body; a bad one is refused with 400 naming the field that is wrong.
pub struct ApiJson<T>(pub T);

/// Whether the body read failed because the body timeout (the router's
/// `RequestBodyTimeoutLayer`) ran out: its error is somewhere in the chain.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<super::deadline::TooSlow>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The rejection of a body that cannot be read: 413 when it is too large,
/// 408 when it comes too slowly, 400 otherwise.
fn unreadable(e: axum::extract::rejection::BytesRejection) -> ApiError {
    if timed_out(&e) {
        return ApiError::new(StatusCode::REQUEST_TIMEOUT, Code::InvalidArgument, "the request body was not sent in time");
    }
    let status = e.status();
    let reason = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "is larger than the server accepts (see --max-body-bytes)".to_owned()
    } else {
        e.body_text()
    };
    let mut e = ApiError::field("body", reason);
    if status.is_client_error() {
        e.status = status;
    }
    e
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bare = req.extensions().get::<BareBody>().cloned();
        let bytes = Bytes::from_request(req, state).await.map_err(unreadable)?;
        let (bytes, was_bare) = enveloped(bytes);
        if let (Some(flag), true) = (bare, was_bare) {
            flag.0.store(true, Ordering::Relaxed);
        }
        decode(&bytes).map(Self)
    }
}

/// Set by [`ApiJson`] when the request's body was the bare object, so that
/// [`answer_in_kind`] answers with the bare object too.
#[derive(Clone, Default)]
struct BareBody(Arc<AtomicBool>);

/// Answers a request whose body was the bare object (grpc-gateway's
/// `body: "object"`) with the bare object (its `response_body: "object"`),
/// and the seed's envelope with the envelope; the body of a masked
/// `PATCH` is cut to its mask first ([`update_mask`]). A request without a
/// body (`GET`, `DELETE`) is passed on as it is.
pub async fn answer_in_kind(mut req: Request, next: Next) -> Response {
    let takes_body = matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH);
    if !takes_body {
        return next.run(req).await;
    }
    let flag = BareBody::default();
    req.extensions_mut().insert(flag.clone());
    let req = match update_mask(req).await {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    let rsp = next.run(req).await;
    if !flag.0.load(Ordering::Relaxed) || !rsp.status().is_success() {
        return rsp;
    }
    let (mut parts, body) = rsp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let inner = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(mut m)) if m.len() == 1 => m.remove("object"),
        _ => None,
    };
    match inner.and_then(|o| serde_json::to_vec(&o).ok()) {
        Some(out) => {
            parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
            Response::from_parts(parts, Body::from(out))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// `PATCH …?update_mask=a.b,c` (grpc-gateway's form of OSAC's `Update`):
/// the body keeps only the fields the mask names, with `id` and
/// `metadata.version`, so that a client sending the whole object changes
/// only those; a masked path the body lacks goes on as `null` ("no
/// change"), so that one naming no field is refused (400 naming it) as
/// gRPC refuses it. `virtual_machine_templates` applies its mask itself (a
/// masked field the body lacks is cleared there); a body that is not JSON
/// is left to the handler, whose error names it.
async fn update_mask(req: Request) -> Result<Request, ApiError> {
    let mask = (req.method() == Method::PATCH && !req.uri().path().contains("/virtual_machine_templates/"))
        .then(|| req.uri().query().and_then(mask_of))
        .flatten();
    let Some(paths) = mask else { return Ok(req) };
    let (mut parts, body) = req.into_parts();
    let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), &()).await.map_err(unreadable)?;
    let body = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut v) => {
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            match v.get_mut("object") {
                Some(inner) => *inner = vmaas_model::mask::masked_checked(inner, &paths),
                None => v = vmaas_model::mask::masked_checked(&v, &paths),
            }
            Bytes::from(serde_json::to_vec(&v).map_err(ApiError::internal)?)
        }
        Err(_) => bytes,
    };
    parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    Ok(Request::from_parts(parts, Body::from(body)))
}

/// The paths of the query's `update_mask`, if it names any.
fn mask_of(query: &str) -> Option<Vec<String>> {
    let text = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "update_mask")?.1;
    Some(vmaas_model::mask::paths(&text)).filter(|p| !p.is_empty())
}

/// The body as the seed's envelope: `{"object": …}` as sent, or the bare
/// object wrapped in one (grpc-gateway's `body: "object"`), so that fields
/// are named `object.…` either way (and whether it was bare). Anything
/// else is left to [`decode`].
fn enveloped(bytes: Bytes) -> (Bytes, bool) {
    /// Reads a JSON object's keys, skipping every value.
    #[derive(serde::Deserialize)]
    struct Probe {
        object: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_slice::<Probe>(&bytes) {
        Ok(Probe { object: None }) => ([&b"{\"object\":"[..], &bytes, b"}"].concat().into(), true),
        _ => (bytes, false),
    }
}

/// A query string; a bad one is refused with 400 naming the parameter.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded_parse(q));
        serde_path_to_error::deserialize(de).map(Self).map_err(|e| {
            let field = field_of(e.path());
            let field = if field == "body" { "query".into() } else { field };
            ApiError::field(field, e.into_inner().to_string())
        })
    }
}

fn form_urlencoded_parse(q: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(q.as_bytes())
}
