//! Validation problems: every one names the field path it is about and the reason.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One problem with one field, e.g. `spec.template_parameters.vm_memory.value`:
/// `expected a quantity such as "4Gi", got the integer 4`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldError {
    /// Dotted path of the field, from the root of the request object.
    pub field: String,
    /// Why the value is not accepted, in words a user can act on.
    pub reason: String,
}

impl FieldError {
    /// A problem with `field` for `reason`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { field: field.into(), reason: reason.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// All the problems found in one object, never just the first.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<FieldError>);

impl ValidationErrors {
    /// One problem with one field.
    pub fn one(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ValidationErrors(vec![FieldError::new(field, reason)])
    }

    /// Records a problem.
    pub fn push(&mut self, field: impl Into<String>, reason: impl Into<String>) {
        self.0.push(FieldError::new(field, reason));
    }

    /// Whether no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(value)` when no problem was recorded, else all of them.
    pub fn into_result<T>(self, value: T) -> Result<T, ValidationErrors> {
        if self.0.is_empty() { Ok(value) } else { Err(self) }
    }

    /// Adds all problems from `other`.
    pub fn extend(&mut self, other: ValidationErrors) {
        self.0.extend(other.0);
    }

    /// The problems, in the order they were found.
    pub fn iter(&self) -> impl Iterator<Item = &FieldError> {
        self.0.iter()
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Why a name (a DNS label or subdomain, an identifier, a tenant's name) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing was given.
    #[error("must not be empty")]
    Empty,
    /// Longer than the kind of name allows.
    #[error("must be at most {max} characters, got {len}")]
    TooLong {
        /// The longest allowed.
        max: usize,
        /// Its length.
        len: usize,
    },
    /// A character the kind of name does not allow.
    #[error("{name:?} must contain only {allowed}")]
    Characters {
        /// The name.
        name: String,
        /// What it may contain.
        allowed: &'static str,
    },
    /// It starts or ends with something other than a letter or digit.
    #[error("{0:?} must start and end with a letter or digit")]
    Ends(String),
    /// An identifier that does not start with a lowercase letter.
    #[error("{0:?} must start with a lowercase letter and contain only lowercase letters, digits, '_' and '-'")]
    Identifier(String),
    /// A subdomain with an empty label (two dots, or one at an end).
    #[error("{0:?} must be DNS labels joined by single dots")]
    EmptyLabel(String),
    /// A subdomain whose label is refused.
    #[error("{name:?}: {label} (between the dots)")]
    Label {
        /// The subdomain.
        name: String,
        /// Why its label is refused.
        label: Box<NameError>,
    },
}

/// The reason, as a field error takes it.
impl From<NameError> for String {
    fn from(e: NameError) -> String {
        e.to_string()
    }
}

/// A timestamp outside the years protobuf and RFC 3339 can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("year {0} is out of range: timestamps fall in the years 0001 to 9999")]
pub struct YearOutOfRange(pub i32);

/// The reason, as a field error takes it.
impl From<YearOutOfRange> for String {
    fn from(e: YearOutOfRange) -> String {
        e.to_string()
    }
}

fn at_most(max: usize, name: &str) -> Result<(), NameError> {
    match name.len() {
        0 => Err(NameError::Empty),
        len if len > max => Err(NameError::TooLong { max, len }),
        _ => Ok(()),
    }
}

/// Checks that `name` is a DNS-1123 label (lowercase letters, digits and `-`,
/// starting and ending with an alphanumeric, at most 63 characters), so it
/// can name Kubernetes objects and host names unchanged.
pub fn check_dns_label(name: &str) -> Result<(), NameError> {
    at_most(63, name)?;
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if !name.chars().all(ok_char) {
        return Err(NameError::Characters { name: name.to_owned(), allowed: "lowercase letters, digits and '-'" });
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(NameError::Ends(name.to_owned()));
    }
    Ok(())
}

/// Checks that `name` is a DNS-1123 subdomain: DNS labels joined by dots
/// (`general.small`, `o1.small`), at most 253 characters, as Kubernetes
/// names cluster-wide objects such as instance types.
pub fn check_dns_subdomain(name: &str) -> Result<(), NameError> {
    if name.len() > 253 {
        return Err(NameError::TooLong { max: 253, len: name.len() });
    }
    for label in name.split('.') {
        check_dns_label(label).map_err(|reason| match label.is_empty() {
            true => NameError::EmptyLabel(name.to_owned()),
            false => NameError::Label { name: name.to_owned(), label: Box::new(reason) },
        })?;
    }
    Ok(())
}

/// Checks an identifier for templates and parameters: lowercase letters,
/// digits, `_` and `-`, starting with a letter, at most 63 characters.
pub fn check_identifier(id: &str) -> Result<(), NameError> {
    at_most(63, id)?;
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    if !id.starts_with(|c: char| c.is_ascii_lowercase()) || !id.chars().all(ok_char) {
        return Err(NameError::Identifier(id.to_owned()));
    }
    Ok(())
}

/// The longest tenant name.
pub const TENANT_MAX: usize = 63;

/// Checks a tenant's name (a token's `tenant` claim): 1 to 63 ASCII
/// letters, digits, `-`, `_` and `.`, starting and ending with a letter or
/// digit: a Kubernetes label value unchanged, so the objects made for a
/// tenant can carry its name, and no two names read alike once cleaned.
pub fn check_tenant_name(name: &str) -> Result<(), NameError> {
    at_most(TENANT_MAX, name)?;
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(NameError::Characters { name: name.to_owned(), allowed: "ASCII letters, digits, '-', '_' and '.'" });
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.ends_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(NameError::Ends(name.to_owned()));
    }
    Ok(())
}

/// The years a timestamp may fall in: protobuf's `Timestamp` and RFC 3339
/// hold 0001 to 9999, so a later one could not be sent back.
pub fn check_timestamp(t: &chrono::DateTime<chrono::Utc>) -> Result<(), YearOutOfRange> {
    use chrono::Datelike;
    if (1..=9999).contains(&t.year()) { Ok(()) } else { Err(YearOutOfRange(t.year())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names() {
        for ok in ["acme", "team-a", "Acme.Corp_1", &"a".repeat(63)] {
            assert!(check_tenant_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "acme>#{?&>+", "acme-", "-acme", "a b", "ac/me", &"a".repeat(64), "\u{e9}t\u{e9}"] {
            assert!(check_tenant_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_stay_in_four_digit_years() {
        let t = |y| chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, y, 1, 1, 0, 0, 0).single().unwrap();
        assert!(check_timestamp(&t(2030)).is_ok());
        assert!(check_timestamp(&t(99999)).unwrap_err().to_string().contains("99999"));
    }

    #[test]
    fn dns_subdomains() {
        assert!(check_dns_subdomain("general.small").is_ok() && check_dns_subdomain("o1").is_ok());
        for bad in ["general..small", ".small", "General.small", "a_b.c", ""] {
            assert!(check_dns_subdomain(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dns_labels() {
        assert!(check_dns_label("myvm").is_ok());
        assert!(check_dns_label("web-1").is_ok());
        assert!(check_dns_label("MyVM").unwrap_err().to_string().contains("lowercase"));
        assert!(check_dns_label("-a").unwrap_err().to_string().contains("start and end"));
        assert!(check_dns_label(&"a".repeat(64)).unwrap_err().to_string().contains("63"));
        assert!(check_dns_label("").is_err());
    }

    #[test]
    fn identifiers() {
        assert!(check_identifier("simple_vm").is_ok());
        assert!(check_identifier("ocp_virt_vm").is_ok());
        assert!(check_identifier("1vm").is_err());
        assert!(check_identifier("a b").is_err());
    }

    #[test]
    fn display_joins_every_problem() {
        let mut e = ValidationErrors::default();
        e.push("a", "bad");
        e.push("b", "worse");
        assert_eq!(e.to_string(), "a: bad; b: worse");
        assert!(e.into_result(()).is_err());
    }
}
