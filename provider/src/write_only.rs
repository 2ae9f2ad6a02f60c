//! Write-only attributes (plugin protocol 6.8): given in the configuration,
//! used by the apply that needs them, never kept in a plan or a state. The
//! provider's server does it for every resource: a resource marks an
//! attribute `write_only` in its schema and finds its value in `planned`
//! while it applies; everywhere else the attribute is null.

use rmpv::Value;

use crate::diag::{error, path};
use crate::proto::{Diagnostic, Schema};
use crate::value::{get, set};

/// The top-level write-only attributes of `schema`.
pub fn names(schema: &Schema) -> Vec<String> {
    schema.block.as_ref().map(|b| b.attributes.iter().filter(|a| a.write_only).map(|a| a.name.clone()).collect()).unwrap_or_default()
}

/// `state` (a plan, a new state) with every write-only attribute null.
pub fn cleared(mut state: Value, names: &[String]) -> Value {
    if matches!(state, Value::Map(_)) {
        for n in names {
            set(&mut state, n, Value::Nil);
        }
    }
    state
}

/// `planned` with the write-only attributes' values from `config`: what an
/// apply works from.
pub fn with_config(mut planned: Value, config: &Value, names: &[String]) -> Value {
    if matches!(planned, Value::Map(_)) {
        for n in names {
            set(&mut planned, n, get(config, n).clone());
        }
    }
    planned
}

/// Errors for write-only attributes set in `config` when the client cannot
/// keep them out of its state (`allowed` false: OpenTofu or Terraform older
/// than 1.11), each naming the attribute.
pub fn refused(config: &Value, names: &[String], allowed: bool) -> Vec<Diagnostic> {
    if allowed {
        return Vec::new();
    }
    names
        .iter()
        .filter(|n| !get(config, n).is_nil())
        .map(|n| {
            error(
                format!("{n} is write-only"),
                format!(
                    "{n} is a write-only attribute, which needs OpenTofu 1.11 or Terraform 1.11 or later (this client would keep it in its state); use the attribute without the _wo suffix, or upgrade"
                ),
                Some(path(&[n])),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    #[test]
    fn write_only_values_reach_the_apply_and_nothing_else() {
        let names = vec!["secret_wo".to_owned()];
        let config = object(vec![("name", Value::from("a")), ("secret_wo", Value::from("s3cret"))]);
        let planned = cleared(config.clone(), &names);
        assert!(get(&planned, "secret_wo").is_nil());
        assert_eq!(get(&with_config(planned.clone(), &config, &names), "secret_wo").as_str(), Some("s3cret"));
        assert_eq!(refused(&config, &names, false).len(), 1);
        assert!(refused(&config, &names, true).is_empty());
        assert!(refused(&planned, &names, false).is_empty(), "an unset write-only attribute is fine on any client");
    }
}
