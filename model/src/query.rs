//! List queries as OSAC's clients send them: `filter`, a CEL expression
//! over the object as its JSON shows it (`this.metadata.name == 'web'`,
//! `this.id in ['a', 'b']`, `this.status.state == VIRTUAL_MACHINE_STATE_READY`,
//! `this.metadata.creation_timestamp > timestamp('2026-11-01T00:00:00Z')`,
//! `has(this.metadata.labels.env)`), and `order`, SQL-like sort keys
//! (`this.metadata.name desc, this.id`).
//!
//! The filter is real CEL, parsed and evaluated by the `cel` crate (no
//! hand-written grammar): logic, comparisons, arithmetic, `in`, `has()`,
//! `size()`, the string methods, `timestamp()` and `duration()`, and the
//! `exists`, `all`, `exists_one`, `map` and `filter` macros over the
//! object's own lists and maps. vmaas adds three things:
//! - **limits**, checked before anything is evaluated: at most
//!   [`MAX_FILTER_LEN`] bytes, [`MAX_FILTER_DEPTH`] levels of nesting,
//!   [`MAX_FILTER_TERMS`] operators and calls; a macro ranges over the
//!   object (not over a literal) and holds no other macro, so one filter's
//!   cost is bounded by the object's size;
//! - **enum values by name**: an upper-case identifier such as
//!   `VIRTUAL_MACHINE_STATE_READY` is the string of that name;
//! - **times as times**: a field named `…_timestamp`, `…_at` or `…_time`
//!   holding RFC 3339 text is a CEL `timestamp`.
//!
//! An expression that fails while it is evaluated (a field the object
//! lacks, a comparison of a string with a number) does not match, as CEL's
//! errors absorb into `||` and `&&` (`has(this.x) && this.x == 1`). Both
//! `this` and `event` name the object (an event, for a watch).

mod check;
mod convert;
mod narrow;
mod order;

use std::sync::{Arc, LazyLock};

use cel::common::ast::IdedExpr;
use cel::{Context, Env, Value};

pub use narrow::{Columns, Narrowing, TimeBound};
pub use order::Order;

/// The longest filter or order accepted, in bytes.
pub const MAX_FILTER_LEN: usize = 4096;

/// How deep expressions may nest in a filter (parentheses, `!`, calls).
pub const MAX_FILTER_DEPTH: usize = 32;

/// The most operators and calls one filter may hold.
pub const MAX_FILTER_TERMS: usize = 256;

/// Why a `filter` or an `order` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Longer than [`MAX_FILTER_LEN`].
    #[error("it has {0} bytes, more than the {MAX_FILTER_LEN} accepted")]
    TooLong(usize),
    /// Not CEL: where and why, as the parser says it.
    #[error("{0}")]
    Syntax(String),
    /// Nested deeper than [`MAX_FILTER_DEPTH`].
    #[error("expressions nest more than {MAX_FILTER_DEPTH} deep")]
    TooDeep,
    /// More than [`MAX_FILTER_TERMS`] operators and calls.
    #[error("more than {MAX_FILTER_TERMS} operators and calls")]
    TooManyTerms,
    /// A macro over a literal, or a macro inside another.
    #[error("`{0}` must range over the object's own fields, and hold no other macro")]
    Macro(String),
    /// An `order` key that is not a field of the object.
    #[error("{0:?} is not a field (this.a.b or this.a['b'])")]
    NotAField(String),
    /// An `order` part that is not `FIELD`, `FIELD asc` or `FIELD desc`.
    #[error("{0:?} is not FIELD, FIELD asc or FIELD desc")]
    OrderPart(String),
}

impl From<QueryError> for String {
    fn from(e: QueryError) -> Self {
        e.to_string()
    }
}

/// The standard environment every filter is evaluated in (built once).
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A parsed `filter`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter(IdedExpr);

impl Filter {
    /// Parses a filter. Longer than [`MAX_FILTER_LEN`], nested deeper than
    /// [`MAX_FILTER_DEPTH`], with more than [`MAX_FILTER_TERMS`] terms or a
    /// macro that could cost more than the object's size, it is refused
    /// before it costs anything; a syntax error says where it is.
    pub fn parse(text: &str) -> Result<Self, QueryError> {
        parse(text).map(Self)
    }

    /// Whether `object` (its JSON) passes: the filter evaluates to `true`.
    pub fn matches(&self, object: &serde_json::Value) -> bool {
        matches!(self.evaluate(object), Ok(Value::Bool(true)))
    }

    /// What the filter says of the columns every stored object has, for
    /// the store to read only the rows that can match.
    pub fn narrowing(&self) -> Narrowing {
        narrow::of(&self.0)
    }

    /// The value of the filter over `object`, or why it has none.
    pub fn evaluate(&self, object: &serde_json::Value) -> Result<Value, cel::ExecutionError> {
        let mut context = Context::with_env(Arc::clone(&ENV));
        let value = convert::to_cel(object, None);
        context.add_variable_from_value("this", value.clone());
        context.add_variable_from_value("event", value);
        Value::resolve(&self.0, &context)
    }
}

/// Parses `text` within the limits, and rewrites enum names into strings.
fn parse(text: &str) -> Result<IdedExpr, QueryError> {
    if text.len() > MAX_FILTER_LEN {
        return Err(QueryError::TooLong(text.len()));
    }
    check::nesting(text)?;
    let depth = u16::try_from(MAX_FILTER_DEPTH * 2).unwrap_or(u16::MAX);
    let mut expr = ENV.parser().enable_ident_escape_syntax(true).max_recursion_depth(depth).parse(text).map_err(check::syntax)?;
    check::limits(&expr)?;
    check::enum_names(&mut expr);
    Ok(expr)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod conformance;
