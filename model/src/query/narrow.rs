//! What a filter says of the columns every stored object has (its id,
//! name, creation time, labels and state), so the store reads only the rows that
//! can match: the conjuncts of the filter's top-level `&&` that name one of
//! them in a simple way. The rest of the filter is evaluated on what the
//! store returns; when nothing is left over, the narrowing is the filter
//! and the store can count and page by itself.

use std::collections::BTreeSet;

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue, operators};
use chrono::{DateTime, Utc};

use super::check::field_path;

/// A bound on the creation time: the instant, and whether it is included.
pub type TimeBound = (DateTime<Utc>, bool);

/// The columns of a stored object a narrowing tests.
#[derive(Debug, Clone, Copy)]
pub struct Columns<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// When it was made.
    pub created: DateTime<Utc>,
    /// Its labels.
    pub labels: &'a std::collections::BTreeMap<String, String>,
    /// Its `status.state`, as stored.
    pub state: &'a str,
}

/// Conditions on an object's columns that every object a filter selects
/// meets; [`Narrowing::exact`] when they are the whole filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Narrowing {
    /// The id is one of these.
    pub ids: Option<BTreeSet<String>>,
    /// The name is one of these.
    pub names: Option<BTreeSet<String>>,
    /// The name starts with this.
    pub name_prefix: Option<String>,
    /// Created after (or at, when inclusive) this instant.
    pub created_after: Option<TimeBound>,
    /// Created before (or at, when inclusive) this instant.
    pub created_before: Option<TimeBound>,
    /// Labels the object has: the key, and the value when one is named.
    pub labels: Vec<(String, Option<String>)>,
    /// `status.state` is one of these (as the filter spells them: a view
    /// whose states are not the stored ones drops them, see
    /// [`Narrowing::without_states`]).
    pub states: Option<BTreeSet<String>>,
    /// Whether these conditions are the whole filter.
    pub exact: bool,
}

impl Narrowing {
    /// Whether nothing narrows (every object remains).
    pub fn is_empty(&self) -> bool {
        self.ids.is_none()
            && self.names.is_none()
            && self.name_prefix.is_none()
            && self.created_after.is_none()
            && self.created_before.is_none()
            && self.labels.is_empty()
            && self.states.is_none()
    }

    /// The narrowing without its states, for a view whose `status.state`
    /// is not the stored state: the filter is then evaluated on each object.
    pub fn without_states(mut self) -> Self {
        if self.states.take().is_some() {
            self.exact = false;
        }
        self
    }

    /// Whether an object with these columns meets every condition.
    pub fn admits(&self, row: Columns<'_>) -> bool {
        let Columns { id, name, created, labels, state } = row;
        self.ids.as_ref().is_none_or(|s| s.contains(id))
            && self.states.as_ref().is_none_or(|s| s.contains(state))
            && self.names.as_ref().is_none_or(|s| s.contains(name))
            && self.name_prefix.as_deref().is_none_or(|p| name.starts_with(p))
            && self.created_after.is_none_or(|(t, inc)| created > t || (inc && created == t))
            && self.created_before.is_none_or(|(t, inc)| created < t || (inc && created == t))
            && self.labels.iter().all(|(k, v)| labels.get(k).is_some_and(|have| v.as_ref().is_none_or(|v| v == have)))
    }

    /// Takes one conjunct into the narrowing; false when it says nothing
    /// the narrowing can hold (it stays for the evaluation).
    fn take(&mut self, e: &IdedExpr) -> bool {
        match &e.expr {
            Expr::Call(c) if c.target.is_none() => self.take_call(c),
            Expr::Call(c) if c.func_name == "startsWith" && self.name_prefix.is_none() => {
                match (c.target.as_deref().and_then(field_path).as_deref(), c.args.as_slice()) {
                    (Some([m, n]), [arg]) if m == "metadata" && n == "name" => {
                        self.name_prefix = string(arg);
                        self.name_prefix.is_some()
                    }
                    _ => false,
                }
            }
            Expr::Select(s) if s.test => match field_path(&s.operand).as_deref() {
                Some([m, l]) if m == "metadata" && l == "labels" && plain_key(&s.field) => {
                    self.labels.push((s.field.clone(), None));
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }

    fn take_call(&mut self, c: &CallExpr) -> bool {
        let [a, b] = c.args.as_slice() else { return false };
        match c.func_name.as_str() {
            operators::EQUALS => self.equals(a, b) || self.equals(b, a),
            operators::IN => self.within(a, b),
            op @ (operators::LESS | operators::LESS_EQUALS | operators::GREATER | operators::GREATER_EQUALS) => {
                self.created(a, op, b) || self.created(b, flipped(op), a)
            }
            _ => false,
        }
    }

    /// `FIELD == 'text'` for the id, the name, the state or a label.
    fn equals(&mut self, field: &IdedExpr, value: &IdedExpr) -> bool {
        let (Some(path), Some(v)) = (field_path(field), string(value)) else { return false };
        match path.as_slice() {
            [id] if id == "id" => intersect(&mut self.ids, [v]),
            [m, n] if m == "metadata" && n == "name" => intersect(&mut self.names, [v]),
            [s, st] if s == "status" && st == "state" => intersect(&mut self.states, [v]),
            [m, l, key] if m == "metadata" && l == "labels" && plain_key(key) => {
                self.labels.push((key.clone(), Some(v)));
                true
            }
            _ => false,
        }
    }

    /// `FIELD in ['a', 'b']` for the id, the name or the state; `'key' in this.metadata.labels`.
    fn within(&mut self, item: &IdedExpr, set: &IdedExpr) -> bool {
        if let (Some(key), Some(path)) = (string(item), field_path(set)) {
            return match path.as_slice() {
                [m, l] if m == "metadata" && l == "labels" && plain_key(&key) => {
                    self.labels.push((key, None));
                    true
                }
                _ => false,
            };
        }
        let (Some(path), Expr::List(list)) = (field_path(item), &set.expr) else { return false };
        let Some(values) = list.elements.iter().map(string).collect::<Option<Vec<String>>>() else { return false };
        match path.as_slice() {
            [id] if id == "id" => intersect(&mut self.ids, values),
            [m, n] if m == "metadata" && n == "name" => intersect(&mut self.names, values),
            [s, st] if s == "status" && st == "state" => intersect(&mut self.states, values),
            _ => false,
        }
    }

    /// `this.metadata.creation_timestamp OP timestamp('…')`.
    fn created(&mut self, field: &IdedExpr, op: &str, value: &IdedExpr) -> bool {
        let (Some(path), Some(t)) = (field_path(field), timestamp(value)) else { return false };
        if !matches!(path.as_slice(), [m, c] if m == "metadata" && c == "creation_timestamp") {
            return false;
        }
        let bound = match op {
            operators::GREATER | operators::GREATER_EQUALS => &mut self.created_after,
            _ => &mut self.created_before,
        };
        if bound.is_some() {
            return false;
        }
        *bound = Some((t, op == operators::GREATER_EQUALS || op == operators::LESS_EQUALS));
        true
    }
}

/// The narrowing of a parsed filter.
pub(super) fn of(expr: &IdedExpr) -> Narrowing {
    let mut conjuncts = Vec::new();
    flatten(expr, &mut conjuncts);
    let mut n = Narrowing::default();
    let mut left = 0;
    for c in conjuncts {
        if !n.take(c) {
            left += 1;
        }
    }
    n.exact = left == 0;
    n
}

fn flatten<'a>(e: &'a IdedExpr, out: &mut Vec<&'a IdedExpr>) {
    match &e.expr {
        Expr::Call(c) if c.func_name == operators::LOGICAL_AND && c.target.is_none() => c.args.iter().for_each(|a| flatten(a, out)),
        _ => out.push(e),
    }
}

/// `a OP b` as `b OP' a`.
fn flipped(op: &str) -> &'static str {
    match op {
        operators::LESS => operators::GREATER,
        operators::LESS_EQUALS => operators::GREATER_EQUALS,
        operators::GREATER => operators::LESS,
        _ => operators::LESS_EQUALS,
    }
}

/// Keeps in `set` only `values` (all of them when there was no set).
fn intersect(set: &mut Option<BTreeSet<String>>, values: impl IntoIterator<Item = String>) -> bool {
    let new: BTreeSet<String> = values.into_iter().collect();
    *set = Some(match set.take() {
        Some(old) => old.intersection(&new).cloned().collect(),
        None => new,
    });
    true
}

/// Whether `key` could be a label's key (letters, digits, `-._/`): only
/// such keys are narrowed on, so a database's JSON path always parses.
fn plain_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= 317 && key.chars().all(|c| c.is_ascii_alphanumeric() || "-._/".contains(c))
}

fn string(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(str::to_owned(s)),
        _ => None,
    }
}

/// `timestamp('…')` with RFC 3339 text, as an instant.
fn timestamp(e: &IdedExpr) -> Option<DateTime<Utc>> {
    match &e.expr {
        Expr::Call(c) if c.func_name == "timestamp" && c.target.is_none() && c.args.len() == 1 => {
            DateTime::parse_from_rfc3339(&string(&c.args[0])?).ok().map(|t| t.with_timezone(&Utc))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::super::Filter;

    fn object(id: &str, name: &str, created: &str, labels: Value) -> Value {
        let state = if name.starts_with("web") { "READY" } else { "STOPPED" };
        json!({"id": id, "metadata": {"name": name, "creation_timestamp": created, "labels": labels}, "spec": {}, "status": {"state": state}})
    }

    /// Whether the narrowing admits the object, from the object's JSON.
    fn admits(f: &Filter, o: &Value) -> bool {
        let labels: BTreeMap<String, String> = serde_json::from_value(o["metadata"]["labels"].clone()).unwrap_or_default();
        let created = chrono::DateTime::parse_from_rfc3339(o["metadata"]["creation_timestamp"].as_str().unwrap_or_default()).unwrap();
        f.narrowing().admits(super::Columns {
            id: o["id"].as_str().unwrap_or_default(),
            name: o["metadata"]["name"].as_str().unwrap_or_default(),
            created: created.into(),
            labels: &labels,
            state: o["status"]["state"].as_str().unwrap_or_default(),
        })
    }

    #[test]
    fn the_narrowing_admits_every_match_and_is_the_filter_when_exact() {
        let objects = [
            object("a", "web-1", "2026-11-23T10:00:00.5Z", json!({"env": "prod", "app.kubernetes.io/name": "web"})),
            object("b", "web-2", "2026-11-23T10:00:00Z", json!({"env": "dev"})),
            object("c", "db-1", "2026-11-24T00:00:00Z", json!({})),
        ];
        let cases = [
            ("this.id == 'a'", true),
            ("'b' == this.id", true),
            ("this.id in ['a', 'c'] && this.id in ['c']", true),
            ("this.metadata.name in ['web-1', 'db-1']", true),
            ("this.metadata.name.startsWith('web')", true),
            ("this.metadata.labels['env'] == 'prod'", true),
            ("this.metadata.labels.`app.kubernetes.io/name` == 'web'", true),
            ("'env' in this.metadata.labels", true),
            ("has(this.metadata.labels.env)", true),
            ("this.metadata.creation_timestamp > timestamp('2026-11-23T10:00:00Z')", true),
            ("this.metadata.creation_timestamp >= timestamp('2026-11-23T11:00:00+01:00')", true),
            ("timestamp('2026-11-24T00:00:00Z') > this.metadata.creation_timestamp", true),
            ("this.metadata.creation_timestamp <= timestamp('2026-11-23T10:00:00.5Z') && this.metadata.name.startsWith('w')", true),
            ("this.status.state == 'READY'", true),
            ("this.status.state in ['STOPPED', 'FAILED'] && this.metadata.labels.env == 'dev'", true),
            ("this.status.state in ['STOPPED', 'READY'] && this.status.state == 'READY'", true),
            ("this.metadata.name.startsWith('web') && this.spec.x == 1", false),
            ("this.metadata.name == 'web-1' || this.id == 'c'", false),
            ("this.metadata.name.endsWith('-1')", false),
            ("this.metadata.name.startsWith('w') && this.metadata.name.startsWith('web')", false),
        ];
        for (text, exact) in cases {
            let f = Filter::parse(text).unwrap();
            assert_eq!(f.narrowing().exact, exact, "{text}: {:?}", f.narrowing());
            assert_eq!(f.narrowing().is_empty(), text.contains("||") || text.contains("endsWith"), "{text}");
            for o in &objects {
                let (m, a) = (f.matches(o), admits(&f, o));
                assert!(!m || a, "{text} matches {} but the narrowing leaves it out", o["id"]);
                if exact {
                    assert_eq!(m, a, "{text} on {}", o["id"]);
                }
            }
        }
    }
}
