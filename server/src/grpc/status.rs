//! The API's errors as gRPC statuses: the same code and message as the
//! REST API's, and the field violations as a `google.rpc.BadRequest`
//! detail in `grpc-status-details-bin` (what gRPC clients decode rich
//! errors from).

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Value as Field};
use tonic::{Code, Status};

use crate::error::ApiError;

/// An error as the REST API writes it.
struct RestError {
    code: i32,
    message: String,
    details: Vec<Violation>,
}

/// A field the error names, and why.
struct Violation {
    field: String,
    description: String,
}

/// The status of an error the server raised itself.
pub fn from_api(pool: &DescriptorPool, e: ApiError) -> Status {
    let details = e.details.into_iter().map(|d| Violation { field: d.field, description: d.reason }).collect();
    with_details(pool, RestError { code: e.code as i32, message: e.message, details })
}

/// `err` as a status, its violations as a `BadRequest` detail.
fn with_details(pool: &DescriptorPool, err: RestError) -> Status {
    let code = Code::from_i32(err.code);
    if err.details.is_empty() {
        return Status::new(code, err.message);
    }
    match details(pool, &err) {
        Some(bytes) => Status::with_details(code, err.message, bytes.into()),
        None => Status::new(code, err.message),
    }
}

/// `google.rpc.Status` with one `BadRequest` listing the violations, encoded.
fn details(pool: &DescriptorPool, err: &RestError) -> Option<Vec<u8>> {
    let bad_request = pool.get_message_by_name("google.rpc.BadRequest")?;
    let violation = pool.get_message_by_name("google.rpc.BadRequest.FieldViolation")?;
    let mut br = DynamicMessage::new(bad_request);
    let list = err
        .details
        .iter()
        .map(|d| {
            let mut v = DynamicMessage::new(violation.clone());
            v.set_field_by_name("field", Field::String(d.field.clone()));
            v.set_field_by_name("description", Field::String(d.description.clone()));
            v.set_field_by_name("reason", Field::String(d.description.clone()));
            Field::Message(v)
        })
        .collect();
    br.set_field_by_name("field_violations", Field::List(list));
    let any = prost_types_any("type.googleapis.com/google.rpc.BadRequest", br.encode_to_vec(), pool)?;
    let mut status = DynamicMessage::new(pool.get_message_by_name("google.rpc.Status")?);
    status.set_field_by_name("code", Field::I32(err.code));
    status.set_field_by_name("message", Field::String(err.message.clone()));
    status.set_field_by_name("details", Field::List(vec![Field::Message(any)]));
    Some(status.encode_to_vec())
}

fn prost_types_any(type_url: &str, value: Vec<u8>, pool: &DescriptorPool) -> Option<DynamicMessage> {
    let mut any = DynamicMessage::new(pool.get_message_by_name("google.protobuf.Any")?);
    any.set_field_by_name("type_url", Field::String(type_url.to_owned()));
    any.set_field_by_name("value", Field::Bytes(value.into()));
    Some(any)
}
