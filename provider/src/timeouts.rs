//! The `timeouts` block of every resource that waits: how long create,
//! update and destroy wait for the server (`"90s"`, `"10m"`, `"1h"`), with
//! defaults per kind ([`Defaults`]: an image import may take an hour, as
//! the server allows it). A wait also ends at once when OpenTofu or
//! Terraform asks the provider to stop (`vmaas_client::Client::pause`).

use std::time::Duration;

use rmpv::Value;

use crate::diag::{error, path};
use crate::proto::schema::{Block, NestedBlock, nested_block::NestingMode};
use crate::proto::{Diagnostic, StringKind};
use crate::schema::{Mode, STRING, attr};
use crate::value::{get, string};

/// How long an operation waits when neither the block nor the kind says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// A kind's limits when its `timeouts` block does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// Until a new object is ready.
    pub create: Duration,
    /// Until a changed one is.
    pub update: Duration,
    /// Until a deleted one is gone.
    pub delete: Duration,
}

/// Ten minutes for each operation.
pub const TEN_MINUTES: Defaults = Defaults { create: DEFAULT_TIMEOUT, update: DEFAULT_TIMEOUT, delete: DEFAULT_TIMEOUT };

/// The operations a block sets, by attribute name.
const OPERATIONS: [&str; 3] = ["create", "update", "delete"];

/// The `timeouts` block: each operation's limit, or why its text is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    /// Until the object is ready after its create.
    pub create: Result<Duration, String>,
    /// Until it is after a change.
    pub update: Result<Duration, String>,
    /// Until it is gone.
    pub delete: Result<Duration, String>,
}

impl Timeouts {
    /// The block of `state` (absent: `defaults`).
    pub fn decode(state: &Value, defaults: &Defaults) -> Self {
        let one = |which: &str, default: Duration| match string(get(get(state, "timeouts"), which)) {
            None => Ok(default),
            Some(t) => humantime::parse_duration(&t).map_err(|e| format!("{t:?} is not a duration (e.g. \"10m\", \"90s\"): {e}")),
        };
        Self { create: one("create", defaults.create), update: one("update", defaults.update), delete: one("delete", defaults.delete) }
    }

    /// The limit of `which` (`create`, `update` or `delete`).
    pub fn of(&self, which: &str) -> &Result<Duration, String> {
        match which {
            "create" => &self.create,
            "update" => &self.update,
            _ => &self.delete,
        }
    }

    /// The limit of `which`, or a diagnostic naming the attribute.
    pub fn limit(&self, which: &str, diags: &mut Vec<Diagnostic>) -> Option<Duration> {
        match self.of(which) {
            Ok(t) => Some(*t),
            Err(e) => {
                diags.push(error(format!("invalid timeouts.{which}"), e.clone(), Some(path(&["timeouts", which]))));
                None
            }
        }
    }

    /// Diagnostics for every operation of `config`'s block that is not a duration.
    pub fn check(config: &Value) -> Vec<Diagnostic> {
        let t = Self::decode(config, &TEN_MINUTES);
        let mut diags = Vec::new();
        for which in OPERATIONS {
            t.limit(which, &mut diags);
        }
        diags
    }
}

/// The `timeouts` block to keep in a state: the one the user wrote in
/// `inputs` (planned or prior), none for an import.
pub fn written(inputs: Option<&Value>) -> Value {
    inputs.map(|i| get(i, "timeouts").clone()).unwrap_or(Value::Nil)
}

/// `prior`'s state with `planned`'s `timeouts` block: the change when only
/// the block changed (nothing to ask of the server).
pub fn only_block_changed(prior: &Value, planned: &Value) -> Value {
    let mut st = prior.clone();
    crate::value::set(&mut st, "timeouts", written(Some(planned)));
    st
}

/// `d` as a user writes it: `90s`, `10m`, `1h`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The block's schema, saying what each operation waits for (`what`: `the
/// image`, say) and its default.
pub fn block(what: &str, defaults: &Defaults) -> NestedBlock {
    let doc = |op: &str, until: &str, d: Duration| format!("How long {op} waits for {what} to be {until} (default `{}`).", human(d));
    NestedBlock {
        type_name: "timeouts".into(),
        block: Some(Block {
            version: 0,
            attributes: vec![
                attr("create", STRING, Mode::Optional, &doc("create", "ready", defaults.create)),
                attr("update", STRING, Mode::Optional, &doc("an update", "ready again", defaults.update)),
                attr("delete", STRING, Mode::Optional, &doc("destroy", "gone", defaults.delete)),
            ],
            block_types: vec![],
            description: "Timeouts, as durations such as `90s`, `10m` or `1h`.".into(),
            description_kind: StringKind::Markdown as i32,
            deprecated: false,
        }),
        nesting: NestingMode::Single as i32,
        min_items: 0,
        max_items: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    #[test]
    fn a_block_overrides_the_kinds_defaults_and_bad_text_names_the_attribute() {
        let hour = Defaults { create: Duration::from_secs(3600), ..TEN_MINUTES };
        let none = Timeouts::decode(&object(vec![("timeouts", Value::Nil)]), &hour);
        assert_eq!((none.create.clone(), none.delete.clone()), (Ok(Duration::from_secs(3600)), Ok(DEFAULT_TIMEOUT)));
        let set = object(vec![("timeouts", object(vec![("create", Value::from("90s")), ("delete", Value::from("soon"))]))]);
        let t = Timeouts::decode(&set, &hour);
        assert_eq!(t.create, Ok(Duration::from_secs(90)));
        assert_eq!(t.update, Ok(DEFAULT_TIMEOUT));
        let diags = Timeouts::check(&set);
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert!(diags[0].summary == "invalid timeouts.delete" && diags[0].detail.contains("\"soon\" is not a duration"), "{diags:?}");
    }

    #[test]
    fn defaults_read_as_written() {
        assert_eq!(
            (human(Duration::from_secs(3600)), human(DEFAULT_TIMEOUT), human(Duration::from_secs(90))),
            ("1h".into(), "10m".into(), "90s".into())
        );
        let b = block("the image", &Defaults { create: Duration::from_secs(3600), ..TEN_MINUTES });
        let create = &b.block.as_ref().unwrap().attributes[0];
        assert_eq!(create.description, "How long create waits for the image to be ready (default `1h`).");
    }
}
