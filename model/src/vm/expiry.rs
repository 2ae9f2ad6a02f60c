//! Ephemeral VMs: a VM given `spec.ttl` (a duration such as `30m`) or
//! `spec.expires_at` (RFC 3339) is deleted by the server when it expires,
//! with its auto-delete volumes. The server turns a TTL into `expires_at`
//! when it is given (at create, or a PATCH that extends it), so the VM's
//! end is one instant however it was asked for. A tenant's quota may set
//! a maximum TTL: its VMs then all expire, by then at the latest.

use chrono::{DateTime, Duration, Utc};

use crate::validation::ValidationErrors;

/// Why a duration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TtlError {
    /// Not numbers each followed by a unit.
    #[error("{0:?} is not a duration: expected numbers with units s, m, h or d, e.g. 30m or 1h30m")]
    Syntax(String),
    /// Zero.
    #[error("must be longer than 0")]
    Zero,
    /// Longer than any clock can hold.
    #[error("{0:?} is too long")]
    TooLong(String),
}

/// Parses a duration such as `45s`, `30m`, `1h30m` or `7d`.
pub fn parse_ttl(text: &str) -> Result<Duration, TtlError> {
    let syntax = || TtlError::Syntax(text.to_owned());
    let (mut total, mut digits) = (0i64, String::new());
    if text.is_empty() {
        return Err(syntax());
    }
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: i64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(syntax()),
        };
        let n: i64 = std::mem::take(&mut digits).parse().map_err(|_| syntax())?;
        total = n.checked_mul(unit).and_then(|s| total.checked_add(s)).ok_or_else(|| TtlError::TooLong(text.to_owned()))?;
    }
    if !digits.is_empty() {
        return Err(syntax());
    }
    if total == 0 {
        return Err(TtlError::Zero);
    }
    // Ten years is past any VM's life and well inside chrono's range.
    if total > 10 * 366 * 86_400 {
        return Err(TtlError::TooLong(text.to_owned()));
    }
    Ok(Duration::seconds(total))
}

/// A duration as the shortest text `parse_ttl` reads back (`1h30m`).
pub fn format_ttl(d: Duration) -> String {
    let mut s = d.num_seconds();
    let mut out = String::new();
    for (unit, secs) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= secs {
            out.push_str(&format!("{}{unit}", s / secs));
            s %= secs;
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

/// What a create or a change asks about a VM's end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiryAsk<'a> {
    /// `spec.ttl`, if given.
    pub ttl: Option<&'a str>,
    /// `spec.expires_at`, if given.
    pub expires_at: Option<DateTime<Utc>>,
}

/// The instant a VM expires, from what was asked at `now` under the
/// tenant's maximum TTL (`None` without one): the asked end, or `now +
/// max` when none is asked and there is a maximum. Errors name
/// `{prefix}.ttl` or `{prefix}.expires_at`.
pub fn settle(
    ask: &ExpiryAsk<'_>,
    now: DateTime<Utc>,
    max: Option<Duration>,
    prefix: &str,
    errs: &mut ValidationErrors,
) -> Option<DateTime<Utc>> {
    let ttl_field = format!("{prefix}.ttl");
    let at_field = format!("{prefix}.expires_at");
    let (end, field) = match (ask.ttl, ask.expires_at) {
        (Some(_), Some(_)) => {
            errs.push(ttl_field, "give ttl or expires_at, not both");
            return None;
        }
        (Some(t), None) => match parse_ttl(t) {
            Ok(d) => (now + d, ttl_field),
            Err(e) => {
                errs.push(ttl_field, e.to_string());
                return None;
            }
        },
        (None, Some(at)) if at <= now => {
            errs.push(at_field, format!("{} is not in the future", at.to_rfc3339()));
            return None;
        }
        (None, Some(at)) => (at, at_field),
        (None, None) => return max.map(|m| now + m),
    };
    if let Some(m) = max.filter(|m| end - now > *m) {
        errs.push(field, format!("is more than this tenant's maximum TTL of {}", format_ttl(m)));
        return None;
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_units_and_refuse_the_rest() {
        assert_eq!(parse_ttl("30m").unwrap(), Duration::minutes(30));
        assert_eq!(parse_ttl("1h30m").unwrap(), Duration::minutes(90));
        assert_eq!(parse_ttl("2d").unwrap(), Duration::days(2));
        assert_eq!(parse_ttl("45s").unwrap(), Duration::seconds(45));
        for bad in ["", "30", "m", "1x", "1.5h", "-1h", "h1"] {
            assert!(matches!(parse_ttl(bad), Err(TtlError::Syntax(_))), "{bad}");
        }
        assert_eq!(parse_ttl("0m"), Err(TtlError::Zero));
        assert!(matches!(parse_ttl("99999999999999d"), Err(TtlError::TooLong(_))));
        assert_eq!(format_ttl(Duration::minutes(90)), "1h30m");
        assert_eq!(format_ttl(Duration::days(1) + Duration::seconds(5)), "1d5s");
    }

    #[test]
    fn an_end_is_asked_once_and_within_the_tenants_maximum() {
        let now = Utc::now();
        let mut errs = ValidationErrors::default();
        let ttl = ExpiryAsk { ttl: Some("30m"), expires_at: None };
        assert_eq!(settle(&ttl, now, None, "spec", &mut errs), Some(now + Duration::minutes(30)));
        assert_eq!(settle(&ExpiryAsk::default(), now, None, "spec", &mut errs), None, "no end asked, no maximum: it lives on");
        assert_eq!(settle(&ExpiryAsk::default(), now, Some(Duration::hours(8)), "spec", &mut errs), Some(now + Duration::hours(8)));
        assert!(errs.is_empty());
        let long = ExpiryAsk { ttl: Some("9h"), expires_at: None };
        assert_eq!(settle(&long, now, Some(Duration::hours(8)), "spec", &mut errs), None);
        let both = ExpiryAsk { ttl: Some("1h"), expires_at: Some(now + Duration::hours(1)) };
        assert_eq!(settle(&both, now, None, "spec", &mut errs), None);
        let past = ExpiryAsk { ttl: None, expires_at: Some(now - Duration::seconds(1)) };
        assert_eq!(settle(&past, now, None, "spec", &mut errs), None);
        let said: Vec<String> = errs.iter().map(|e| format!("{}: {}", e.field, e.reason)).collect();
        assert_eq!(said[0], "spec.ttl: is more than this tenant's maximum TTL of 8h");
        assert_eq!(said[1], "spec.ttl: give ttl or expires_at, not both");
        assert!(said[2].starts_with("spec.expires_at: ") && said[2].ends_with("is not in the future"), "{said:?}");
    }
}
