//! Labels and annotations of an object: OSAC's `metadata.labels` (matched
//! by `filter`, e.g. `this.metadata.labels['env'] == 'prod'`) and
//! `metadata.annotations` (kept as given), with Kubernetes' rules for keys
//! and label values, so that the same labels can travel to a cluster.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{MetadataInput, ValidationErrors};

/// A map of strings.
pub type StringMap = BTreeMap<String, String>;

/// Longest label value, and longest name part of a key.
const NAME_MAX: usize = 63;

/// Longest key prefix (a DNS subdomain).
const PREFIX_MAX: usize = 253;

/// Most bytes all of an object's annotations may take.
const ANNOTATIONS_MAX: usize = 256 * 1024;

/// Longest display name (OSAC's `metadata.display_name`).
const DISPLAY_NAME_MAX: usize = 63;

/// Longest description (OSAC's `metadata.description`).
const DESCRIPTION_MAX: usize = 256;

/// What a tenant writes of an object's metadata beside its name: labels,
/// annotations, and OSAC's display name and description.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labels {
    /// Labels: keys and values as Kubernetes allows them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: StringMap,
    /// Annotations: keys as for labels, any values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: StringMap,
    /// A name for people, free text of at most 63 characters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What it is for, free text (Markdown) of at most 256 characters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

impl Labels {
    /// Whether there are neither labels nor annotations.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.display_name.is_empty() && self.description.is_empty()
    }

    /// What a create request's metadata gives; problems go into `errs`
    /// under `object.metadata`.
    pub fn from_input(input: Option<&MetadataInput>, errs: &mut ValidationErrors) -> Self {
        Self::default().patched(input, errs)
    }

    /// `self` with what a change's metadata replaces: `labels` and
    /// `annotations`, each replaced whole when given.
    pub fn patched(&self, input: Option<&MetadataInput>, errs: &mut ValidationErrors) -> Self {
        let mut out = self.clone();
        let Some(m) = input else { return out };
        if let Some(labels) = &m.labels {
            check_map("object.metadata.labels", labels, true, errs);
            out.labels = labels.clone();
        }
        if let Some(annotations) = &m.annotations {
            check_map("object.metadata.annotations", annotations, false, errs);
            let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
            if size > ANNOTATIONS_MAX {
                errs.push("object.metadata.annotations", format!("take {size} bytes, more than the {ANNOTATIONS_MAX} allowed"));
            }
            out.annotations = annotations.clone();
        }
        for (field, given, max, kept) in [
            ("display_name", &m.display_name, DISPLAY_NAME_MAX, &mut out.display_name),
            ("description", &m.description, DESCRIPTION_MAX, &mut out.description),
        ] {
            let Some(text) = given else { continue };
            match text.chars().count() {
                n if n > max => errs.push(format!("object.metadata.{field}"), format!("has {n} characters, more than the {max} allowed")),
                _ => *kept = text.clone(),
            }
        }
        out
    }
}

/// Checks the keys (`[prefix/]name`) of the map at `field` and, when
/// `values` (a map of labels), its values; each problem goes into `errs`
/// under `field.key`.
pub fn check_map(field: &str, map: &StringMap, values: bool, errs: &mut ValidationErrors) {
    for (k, v) in map {
        if let Err(reason) = check_key(k) {
            errs.push(format!("{field}.{k}"), format!("is not a valid key: {reason}"));
        } else if let Some(Err(reason)) = values.then(|| check_name(v, true)) {
            errs.push(format!("{field}.{k}"), format!("is not a valid label value: {reason}"));
        }
    }
}

/// Why a label's key or value (or an annotation's key) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// The prefix before `/` is not a DNS subdomain of at most [`PREFIX_MAX`] characters.
    #[error("the prefix {0:?} must be a DNS subdomain of at most {PREFIX_MAX} characters")]
    Prefix(String),
    /// The name is empty.
    #[error("the name is empty")]
    Empty,
    /// Longer than [`NAME_MAX`].
    #[error("{0} characters, more than {NAME_MAX}")]
    TooLong(usize),
    /// It starts or ends with something other than a letter or digit.
    #[error("must begin and end with a letter or a digit")]
    Ends,
    /// A character other than letters, digits, `-`, `_` and `.`.
    #[error("{0:?} is not allowed (letters, digits, '-', '_' and '.')")]
    Character(char),
}

/// `[prefix/]name`: a DNS subdomain prefix of at most 253 characters, and a name.
pub fn check_key(key: &str) -> Result<(), LabelError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if p.is_empty() || p.len() > PREFIX_MAX || !p.split('.').all(label_ok) {
            return Err(LabelError::Prefix(p.to_owned()));
        }
    }
    check_name(name, false)
}

/// A name part or a label value: at most 63 characters, alphanumerics at
/// both ends, `-`, `_` and `.` between (a value may be empty).
pub fn check_name(s: &str, empty_ok: bool) -> Result<(), LabelError> {
    if s.is_empty() {
        return if empty_ok { Ok(()) } else { Err(LabelError::Empty) };
    }
    if s.len() > NAME_MAX {
        return Err(LabelError::TooLong(s.len()));
    }
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !ends(s.chars().next()) || !ends(s.chars().last()) {
        return Err(LabelError::Ends);
    }
    if let Some(c) = s.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(LabelError::Character(c));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> MetadataInput {
        let map = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        MetadataInput { labels: Some(map(labels)), annotations: Some(map(annotations)), ..Default::default() }
    }

    #[test]
    fn kubernetes_keys_and_values_are_taken() {
        let mut errs = ValidationErrors::default();
        let i = input(&[("env", "prod"), ("app.kubernetes.io/name", "web_1.a"), ("empty", "")], &[("example.com/note", "any text: ok")]);
        let l = Labels::from_input(Some(&i), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(l.labels["app.kubernetes.io/name"], "web_1.a");
        assert_eq!(l.annotations["example.com/note"], "any text: ok");
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let mut errs = ValidationErrors::default();
        let long = "x".repeat(64);
        let i = input(&[("-env", "a"), ("Bad_Prefix/x", "b"), ("ok", "has space"), ("v", &long)], &[("", "x")]);
        Labels::from_input(Some(&i), &mut errs);
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "object.metadata.labels.-env",
                "object.metadata.labels.Bad_Prefix/x",
                "object.metadata.labels.ok",
                "object.metadata.labels.v",
                "object.metadata.annotations."
            ]
        );
        assert!(errs.0[2].reason.contains("' ' is not allowed"), "{}", errs.0[2].reason);
    }

    #[test]
    fn a_change_replaces_only_what_it_gives() {
        let mut errs = ValidationErrors::default();
        let before = Labels::from_input(Some(&input(&[("a", "1")], &[("n", "x")])), &mut errs);
        let only_labels = MetadataInput { labels: Some([("b".to_string(), "2".to_string())].into()), ..Default::default() };
        let after = before.patched(Some(&only_labels), &mut errs);
        assert_eq!(after.labels, [("b".to_string(), "2".to_string())].into());
        assert_eq!(after.annotations, before.annotations);
        assert_eq!(before.patched(None, &mut errs), before);
        assert!(errs.is_empty());
    }

    #[test]
    fn display_names_and_descriptions_are_kept_within_osacs_limits() {
        let mut errs = ValidationErrors::default();
        let named = MetadataInput { display_name: Some("Web é".into()), description: Some("d".repeat(256)), ..Default::default() };
        let kept = Labels::from_input(Some(&named), &mut errs);
        assert!(errs.is_empty(), "{errs}");
        assert_eq!((kept.display_name.as_str(), kept.description.len()), ("Web é", 256));
        let relabelled = kept.patched(Some(&input(&[("a", "1")], &[])), &mut errs);
        assert_eq!(relabelled.display_name, "Web é", "a change that does not give it keeps it");
        let long = MetadataInput { display_name: Some("x".repeat(64)), description: Some("d".repeat(257)), ..Default::default() };
        let refused = kept.patched(Some(&long), &mut errs);
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["object.metadata.display_name", "object.metadata.description"]);
        assert_eq!(refused.display_name, "Web é", "a refused one is not taken");
    }
}
