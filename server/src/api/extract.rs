//! Request extractors whose rejections name the field and the reason.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use axum::http::StatusCode;

use crate::error::{ApiError, Code};

/// A JSON body; a bad one is refused with 400 naming the field that is wrong.
pub struct ApiJson<T>(pub T);

/// The path of a serde error, or `body` at the root or where the parser
/// had not reached a field yet (`?` in the path).
fn field_of(path: &serde_path_to_error::Path) -> String {
    let p = path.to_string();
    if p == "." || p.is_empty() || p.contains('?') { "body".into() } else { p }
}

/// Whether the body read failed because the body timeout (the router's
/// `RequestBodyTimeoutLayer`) ran out: its error is somewhere in the chain.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() {
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
        let bytes = Bytes::from_request(req, state).await.map_err(unreadable)?;
        decode(&enveloped(bytes)).map(Self)
    }
}

/// The body as the seed's envelope: `{"object": …}` as sent, or the bare
/// object wrapped in one (grpc-gateway's `body: "object"`), so that fields
/// are named `object.…` either way. Anything else is left to [`decode`].
fn enveloped(bytes: Bytes) -> Bytes {
    /// Reads a JSON object's keys, skipping every value.
    #[derive(serde::Deserialize)]
    struct Probe {
        object: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_slice::<Probe>(&bytes) {
        Ok(Probe { object: None }) => [&b"{\"object\":"[..], &bytes, b"}"].concat().into(),
        _ => bytes,
    }
}

/// Decodes one JSON document (nothing after it but white space) into `T`;
/// a bad one is a 400 naming the field that is wrong.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.is_empty() {
        return Err(ApiError::field("body", "is empty: expected a JSON object"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize(&mut *de) {
        Ok(v) => {
            // One JSON document, nothing after it but white space.
            de.end().map_err(|e| ApiError::field("body", format!("has data after the JSON document: {e}")))?;
            Ok(v)
        }
        Err(e) => {
            let field = field_of(e.path());
            let inner = e.into_inner();
            let reason = if inner.is_syntax() || inner.is_eof() {
                format!("is not valid JSON: {inner}")
            } else {
                // serde's messages end with " at line L column C"; the field path says where.
                let msg = inner.to_string();
                match msg.rfind(" at line ") {
                    Some(i) => msg[..i].to_owned(),
                    None => msg,
                }
            };
            Err(ApiError::field(field, reason))
        }
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
