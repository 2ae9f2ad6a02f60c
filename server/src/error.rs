//! API errors as `google.rpc.Status` JSON: `{"code": <gRPC code>,
//! "message": "...", "details": [...]}`, each detail a
//! `google.rpc.BadRequest.FieldViolation` (`@type`, `field`, `description`;
//! `reason` repeats the description for the seed's clients), with the HTTP
//! status that matches the code.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use vmaas_model::{FieldError, ValidationErrors};

use crate::store::StoreError;

/// gRPC status codes used by the API, with their numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Code {
    /// The request is malformed or a value is invalid (400).
    InvalidArgument = 3,
    /// No such object, or not yours (404).
    NotFound = 5,
    /// An object with that name exists (409).
    AlreadyExists = 6,
    /// The caller may not do this (403).
    PermissionDenied = 7,
    /// The host or a quota has no room for what is asked (429, as gRPC gateways map it).
    ResourceExhausted = 8,
    /// The object is not in a state that allows this (409).
    FailedPrecondition = 9,
    /// A concurrent change won: re-read and retry (409).
    Aborted = 10,
    /// The route does not exist or the method is not supported (404/405).
    Unimplemented = 12,
    /// A bug or an unexpected failure (500).
    Internal = 13,
    /// A dependency is down (503).
    Unavailable = 14,
    /// No valid credentials (401).
    Unauthenticated = 16,
}

/// An error as the API returns it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ApiError {
    /// The HTTP status.
    #[serde(skip)]
    pub status: StatusCode,
    /// The gRPC status code number.
    #[schema(value_type = u8)]
    #[serde(serialize_with = "code_number")]
    pub code: Code,
    /// What went wrong.
    pub message: String,
    /// One entry per bad field.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "violations")]
    #[schema(value_type = Vec<Object>)]
    pub details: Vec<FieldError>,
    /// How long the caller should wait before trying again, sent as
    /// `Retry-After` (whole seconds, at least one): on 503, and on 429 from
    /// the request rate limit. A 429 for a quota has none: trying again
    /// cannot succeed until the tenant frees something.
    #[serde(skip)]
    pub retry_after: Option<std::time::Duration>,
}

/// What a 503 tells the caller to wait before trying again.
pub const UNAVAILABLE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The `@type` of each detail.
const FIELD_VIOLATION: &str = "type.googleapis.com/google.rpc.BadRequest.FieldViolation";

fn violations<S: serde::Serializer>(details: &[FieldError], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(details.len()))?;
    for d in details {
        let item = serde_json::json!({"@type": FIELD_VIOLATION, "field": d.field, "description": d.reason, "reason": d.reason});
        seq.serialize_element(&item)?;
    }
    seq.end()
}

fn code_number<S: serde::Serializer>(c: &Code, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u8(*c as u8)
}

impl ApiError {
    /// An error with a status, a code and a message.
    pub fn new(status: StatusCode, code: Code, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), details: Vec::new(), retry_after: None }
    }

    /// 400 for one bad field.
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::invalid(ValidationErrors::one(field, reason))
    }

    /// 400 listing every bad field.
    pub fn invalid(errs: ValidationErrors) -> Self {
        let message = match errs.0.len() {
            1 => format!("invalid request: {}", errs),
            n => format!("invalid request: {n} problems: {errs}"),
        };
        Self { status: StatusCode::BAD_REQUEST, code: Code::InvalidArgument, message, details: errs.0, retry_after: None }
    }

    /// 404, worded the same whether the object does not exist or belongs to another tenant.
    pub fn not_found(kind: &str, id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, Code::NotFound, format!("{kind} {id:?} not found"))
    }

    /// 401.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, Code::Unauthenticated, message)
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, Code::PermissionDenied, message)
    }

    /// 409 for a state that forbids the operation.
    pub fn precondition(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, Code::FailedPrecondition, message)
    }

    /// 429 RESOURCE_EXHAUSTED, naming the resource that ran out.
    pub fn exhausted(field: impl Into<String>, reason: impl Into<String>) -> Self {
        let errs = ValidationErrors::one(field, reason);
        let message = format!("resource exhausted: {errs}");
        Self { status: StatusCode::TOO_MANY_REQUESTS, code: Code::ResourceExhausted, message, details: errs.0, retry_after: None }
    }

    /// 503 UNAVAILABLE: something the answer needs does not answer yet;
    /// retry after [`UNAVAILABLE_RETRY`].
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable, message).retry_after(UNAVAILABLE_RETRY)
    }

    /// 429 RESOURCE_EXHAUSTED for a caller past its request rate: try again after `wait`.
    pub fn rate_limited(message: impl Into<String>, wait: std::time::Duration) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, Code::ResourceExhausted, message).retry_after(wait)
    }

    /// The same error, telling the caller to wait `wait` before trying again.
    pub fn retry_after(mut self, wait: std::time::Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// 500, logging the cause and hiding it from the caller.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        tracing::error!(error = %err, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, Code::Internal, "internal error; see the server log")
    }
}

impl From<vmaas_admission::AdmissionError> for ApiError {
    fn from(e: vmaas_admission::AdmissionError) -> Self {
        use vmaas_admission::AdmissionError as A;
        match e {
            A::Exhausted { field, message } => Self::exhausted(field, message),
            A::NoneFree(m) => Self::new(StatusCode::CONFLICT, Code::ResourceExhausted, m),
            A::Held(m) => Self::new(StatusCode::CONFLICT, Code::FailedPrecondition, m),
            A::Invalid(errs) => Self::invalid(errs),
            e @ A::Corrupt { .. } => Self::internal(e),
            A::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { kind, id } => Self::not_found(kind, &id),
            StoreError::AlreadyExists(m) => Self::new(StatusCode::CONFLICT, Code::AlreadyExists, m),
            StoreError::Conflict(m) => Self::new(StatusCode::CONFLICT, Code::Aborted, m),
            StoreError::InUse(m) => Self::precondition(m),
            StoreError::MissingReference(m) => Self::precondition(m),
            e if e.is_unavailable() => {
                tracing::warn!(error = %e, "the database does not answer");
                Self::unavailable("the database does not answer: retry later")
            }
            other => Self::internal(other),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(&self)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"vmaas\""));
        }
        if let Some(wait) = self.retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, retry_after_value(wait));
        }
        resp
    }
}

/// `wait` as `Retry-After` takes it: whole seconds, rounded up, at least one.
pub fn retry_after_value(wait: std::time::Duration) -> HeaderValue {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    HeaderValue::from(secs.max(1))
}
