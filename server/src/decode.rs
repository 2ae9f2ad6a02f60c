//! JSON into typed requests, a bad document refused with a 400 naming the
//! field that is wrong: what the API's extractors and the application's
//! views (a template laid over by a mask, a compute instance in VM names)
//! decode with.

use serde::de::DeserializeOwned;

use crate::error::ApiError;

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

/// The path of a serde error, or `body` at the root or where the parser
/// had not reached a field yet (`?` in the path).
pub(crate) fn field_of(path: &serde_path_to_error::Path) -> String {
    let p = path.to_string();
    if p == "." || p.is_empty() || p.contains('?') { "body".into() } else { p }
}
