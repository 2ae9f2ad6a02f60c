//! `order`: sort keys over the object's JSON, most significant first.

use std::cmp::Ordering;

use serde_json::Value;

use super::check::field_path;
use super::{ENV, MAX_FILTER_DEPTH, MAX_FILTER_LEN, QueryError};

/// A parsed `order`: sort keys, most significant first.
#[derive(Debug, Clone, PartialEq)]
pub struct Order(Vec<(Vec<String>, bool)>);

impl Order {
    /// Parses `FIELD [asc|desc], …` (at most [`MAX_FILTER_LEN`] bytes); a
    /// field is `this.a.b` or `this.a['b']`.
    pub fn parse(text: &str) -> Result<Self, QueryError> {
        if text.len() > MAX_FILTER_LEN {
            return Err(QueryError::TooLong(text.len()));
        }
        let mut keys = Vec::new();
        for part in text.split(',') {
            let words: Vec<&str> = part.split_whitespace().collect();
            let (field, desc) = match words.as_slice() {
                [f] => (*f, false),
                [f, d] if d.eq_ignore_ascii_case("asc") => (*f, false),
                [f, d] if d.eq_ignore_ascii_case("desc") => (*f, true),
                _ => return Err(QueryError::OrderPart(part.trim().to_owned())),
            };
            keys.push((path(field)?, desc));
        }
        Ok(Self(keys))
    }

    /// Compares two objects (their JSON) by the keys.
    pub fn compare(&self, a: &Value, b: &Value) -> Ordering {
        self.0.iter().fold(Ordering::Equal, |acc, (path, desc)| {
            acc.then_with(|| {
                let o = sort_order(lookup(a, path), lookup(b, path));
                if *desc { o.reverse() } else { o }
            })
        })
    }
}

/// The path a sort key names.
fn path(field: &str) -> Result<Vec<String>, QueryError> {
    let not_a_field = || QueryError::NotAField(field.to_owned());
    let depth = u16::try_from(MAX_FILTER_DEPTH).unwrap_or(u16::MAX);
    let expr = ENV.parser().enable_ident_escape_syntax(true).max_recursion_depth(depth).parse(field).map_err(|_| not_a_field())?;
    field_path(&expr).ok_or_else(not_a_field)
}

fn lookup<'a>(object: &'a Value, path: &[String]) -> &'a Value {
    path.iter().fold(object, |v, k| v.get(k.as_str()).unwrap_or(&Value::Null))
}

/// A total order for sorting: null, then booleans, numbers, strings, and
/// anything else last. RFC 3339 times in UTC sort as text in time order.
fn sort_order(a: &Value, b: &Value) -> Ordering {
    let rank = |v: &Value| match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        _ => 4,
    };
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        _ => a.as_f64().zip(b.as_f64()).and_then(|(x, y)| x.partial_cmp(&y)).unwrap_or(Ordering::Equal),
    })
}
