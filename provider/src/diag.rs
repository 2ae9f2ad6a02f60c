//! Diagnostics and attribute paths, as Terraform shows them.

use crate::proto::attribute_path::{Step, step::Selector};
use crate::proto::{AttributePath, Diagnostic, diagnostic};

/// An error diagnostic, optionally on an attribute.
pub fn error(summary: impl Into<String>, detail: impl Into<String>, attr: Option<AttributePath>) -> Diagnostic {
    Diagnostic { severity: diagnostic::Severity::Error as i32, summary: summary.into(), detail: detail.into(), attribute: attr }
}

/// The path of nested attributes `steps`.
pub fn path(steps: &[&str]) -> AttributePath {
    AttributePath { steps: steps.iter().map(|s| Step { selector: Some(Selector::AttributeName((*s).to_owned())) }).collect() }
}

/// The path of key `key` of map attribute `attr`.
pub fn map_key_path(attr: &str, key: &str) -> AttributePath {
    AttributePath {
        steps: vec![
            Step { selector: Some(Selector::AttributeName(attr.to_owned())) },
            Step { selector: Some(Selector::ElementKeyString(key.to_owned())) },
        ],
    }
}

/// The path of element `i` of list attribute `attr`.
pub fn index_path(attr: &str, i: usize) -> AttributePath {
    AttributePath {
        steps: vec![
            Step { selector: Some(Selector::AttributeName(attr.to_owned())) },
            Step { selector: Some(Selector::ElementKeyInt(i as i64)) },
        ],
    }
}

/// An error diagnostic for a failed API call, with every field problem the server named.
pub fn api_error(summary: impl Into<String>, e: &vmaas_client::Error) -> Diagnostic {
    let mut d = error(summary, e.to_string(), None);
    if let vmaas_client::Error::Api { details, .. } = e {
        for fe in details {
            d.detail.push_str(&format!("\n{}: {}", fe.field, fe.reason));
        }
    }
    d
}
