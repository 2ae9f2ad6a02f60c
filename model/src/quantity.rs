//! Kubernetes-style resource quantities (`4Gi`, `4096Mi`, `1.5G`, `500m`, `1e9`).
//!
//! A [`Quantity`] keeps the text the user wrote, so that what is stored and
//! returned is byte-for-byte what was sent (Terraform sees no drift), and an
//! exact numeric value, so that `4Gi` and `4096Mi` compare equal.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Number of nano-units in one unit: values are kept exactly in nano-units.
const NANO: i128 = 1_000_000_000;

/// Why a text is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is empty.
    #[error("a quantity cannot be empty")]
    Empty,
    /// The text does not have the shape `<number><suffix>`.
    #[error("{0:?} is not a quantity: expected a number with an optional suffix such as Ki, Mi, Gi, Ti, k, M, G or T (e.g. \"4Gi\")")]
    Syntax(String),
    /// The suffix is not one of the known ones.
    #[error("{text:?} has an unknown suffix {suffix:?}: use one of Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E")]
    Suffix {
        /// The whole text.
        text: String,
        /// The offending suffix.
        suffix: String,
    },
    /// The value does not fit.
    #[error("{0:?} is too large")]
    Overflow(String),
}

/// A resource quantity: the text as written plus its exact value.
///
/// Equality and ordering compare values, not text: `"4Gi" == "4096Mi"`.
#[derive(Clone)]
pub struct Quantity {
    text: String,
    nanos: i128,
}

impl Quantity {
    /// Parses a quantity, keeping `text` as the canonical representation.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let nanos = parse_nanos(text)?;
        Ok(Self { text: text.to_owned(), nanos })
    }

    /// A quantity of `bytes` written with the largest binary suffix that divides it.
    pub fn from_bytes(bytes: u64) -> Self {
        const UNITS: [(&str, u64); 6] =
            [("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
        let text = UNITS
            .iter()
            .find(|(_, m)| bytes != 0 && bytes.is_multiple_of(*m))
            .map(|(s, m)| format!("{}{}", bytes / m, s))
            .unwrap_or_else(|| bytes.to_string());
        Self { text, nanos: i128::from(bytes) * NANO }
    }

    /// The text exactly as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value rounded up to whole units (bytes for memory and disks), if it
    /// is not negative and fits in a `u64`.
    pub fn to_units_ceil(&self) -> Option<u64> {
        if self.nanos < 0 {
            return None;
        }
        let whole = self.nanos / NANO + i128::from(self.nanos % NANO != 0);
        u64::try_from(whole).ok()
    }

    /// The value in nano-units, exactly.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quantity({:?})", self.text)
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(u64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(t) => Quantity::parse(&t).map_err(serde::de::Error::custom),
            Raw::Int(n) => Ok(Quantity { text: n.to_string(), nanos: i128::from(n) * NANO }),
        }
    }
}

/// Multiplier of a suffix, as `(numerator, denominator)` relative to one unit.
fn suffix_scale(suffix: &str) -> Option<(i128, i128)> {
    Some(match suffix {
        "" => (1, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        _ => return None,
    })
}

fn parse_nanos(text: &str) -> Result<i128, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let syntax = || QuantityError::Syntax(text.to_owned());
    let overflow = || QuantityError::Overflow(text.to_owned());
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &text[int_start..i];
    let mut frac_digits = "";
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &text[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(syntax());
    }
    let rest = &text[i..];

    // Mantissa as an exact fraction: digits / 10^frac_len.
    let mut mantissa: i128 = 0;
    for d in int_digits.bytes().chain(frac_digits.bytes()) {
        mantissa = mantissa.checked_mul(10).and_then(|m| m.checked_add(i128::from(d - b'0'))).ok_or_else(overflow)?;
    }
    let frac_len = u32::try_from(frac_digits.len()).map_err(|_| overflow())?;

    // Decimal exponent (`1e3`, `5E-2`) or a unit suffix.
    let (num, mut den, mut exp10): (i128, i128, i32) = if let Some(exp) =
        rest.strip_prefix('e').or_else(|| rest.strip_prefix('E')).filter(|e| {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }) {
        let e: i32 = exp.parse().map_err(|_| overflow())?;
        if !(-30..=30).contains(&e) {
            return Err(overflow());
        }
        (1, 1, e)
    } else {
        let (n, d) = suffix_scale(rest).ok_or_else(|| {
            if rest.bytes().all(|b| b.is_ascii_alphabetic()) {
                QuantityError::Suffix { text: text.to_owned(), suffix: rest.to_owned() }
            } else {
                syntax()
            }
        })?;
        (n, d, 0)
    };
    exp10 -= i32::try_from(frac_len).map_err(|_| overflow())?;

    // value = mantissa * num / den * 10^exp10, in nanos: * 10^9.
    exp10 += 9;
    let mut value = mantissa.checked_mul(num).ok_or_else(overflow)?;
    while exp10 > 0 {
        value = value.checked_mul(10).ok_or_else(overflow)?;
        exp10 -= 1;
    }
    while exp10 < 0 {
        den = den.checked_mul(10).ok_or_else(overflow)?;
        exp10 += 1;
    }
    // Round up to the next nano-unit, as Kubernetes does.
    let nanos = value / den + i128::from(value % den != 0);
    Ok(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn binary_and_decimal_suffixes() {
        let gi = Quantity::parse("4Gi").unwrap();
        assert_eq!(gi, Quantity::parse("4096Mi").unwrap());
        assert_eq!(gi.to_units_ceil(), Some(4 * 1024 * 1024 * 1024));
        assert_eq!(Quantity::parse("1.5Gi").unwrap().to_units_ceil(), Some(1_610_612_736));
        assert_eq!(Quantity::parse("2G").unwrap().to_units_ceil(), Some(2_000_000_000));
        assert_eq!(Quantity::parse("1e3").unwrap(), Quantity::parse("1k").unwrap());
        assert_eq!(Quantity::parse("500m").unwrap().nanos(), 500_000_000);
        assert_eq!(Quantity::parse(".5").unwrap().nanos(), 500_000_000);
        assert!(Quantity::parse("1Gi").unwrap() < Quantity::parse("1025Mi").unwrap());
        assert_eq!(Quantity::parse("4096Mi").unwrap().as_str(), "4096Mi");
    }

    #[test]
    fn rejects_garbage_with_reason() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        assert!(matches!(Quantity::parse("4GB"), Err(QuantityError::Suffix { .. })));
        assert!(matches!(Quantity::parse("Gi"), Err(QuantityError::Syntax(_))));
        assert!(matches!(Quantity::parse("4 Gi"), Err(QuantityError::Syntax(_))));
        assert!(matches!(Quantity::parse("1.2.3"), Err(QuantityError::Syntax(_))));
        assert!(matches!(Quantity::parse("99999999999999999999999999999Ei"), Err(QuantityError::Overflow(_))));
        let msg = Quantity::parse("4GB").unwrap_err().to_string();
        assert!(msg.contains("\"GB\""), "{msg}");
    }

    #[test]
    fn from_bytes_picks_the_largest_binary_suffix() {
        assert_eq!(Quantity::from_bytes(4 << 30).as_str(), "4Gi");
        assert_eq!(Quantity::from_bytes(1536 << 20).as_str(), "1536Mi");
        assert_eq!(Quantity::from_bytes(1000).as_str(), "1000");
        assert_eq!(Quantity::from_bytes(0).as_str(), "0");
    }

    #[test]
    fn serde_keeps_the_text() {
        let q: Quantity = serde_json::from_str("\"4096Mi\"").unwrap();
        assert_eq!(serde_json::to_string(&q).unwrap(), "\"4096Mi\"");
        let n: Quantity = serde_json::from_str("1024").unwrap();
        assert_eq!(n.to_units_ceil(), Some(1024));
        assert!(serde_json::from_str::<Quantity>("\"4GB\"").is_err());
    }

    const BINARY: [(&str, u64); 5] = [("", 1), ("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40)];
    const DECIMAL: [(&str, u64); 4] = [("k", 1_000), ("M", 1_000_000), ("G", 1_000_000_000), ("T", 1_000_000_000_000)];

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,24}") {
            let _ = Quantity::parse(&s);
        }

        #[test]
        fn integer_with_suffix_has_the_exact_value(n in 0u64..1_000_000, idx in 0usize..9) {
            let (suffix, mult) = if idx < 5 { BINARY[idx] } else { DECIMAL[idx - 5] };
            let q = Quantity::parse(&format!("{n}{suffix}")).unwrap();
            prop_assert_eq!(q.to_units_ceil(), Some(n * mult));
            prop_assert_eq!(q.as_str(), format!("{n}{suffix}"));
        }

        #[test]
        fn binary_suffixes_agree_with_each_other(n in 0u64..1_000_000) {
            let gi = Quantity::parse(&format!("{n}Gi")).unwrap();
            let mi = Quantity::parse(&format!("{}Mi", n * 1024)).unwrap();
            let ki = Quantity::parse(&format!("{}Ki", n * 1024 * 1024)).unwrap();
            prop_assert_eq!(&gi, &mi);
            prop_assert_eq!(&mi, &ki);
        }

        #[test]
        fn from_bytes_round_trips(b in 0u64..(1u64 << 50)) {
            let q = Quantity::from_bytes(b);
            prop_assert_eq!(Quantity::parse(q.as_str()).unwrap().to_units_ceil(), Some(b));
        }

        #[test]
        fn ordering_matches_numbers(a in 0u64..1u64 << 40, b in 0u64..1u64 << 40) {
            let qa = Quantity::parse(&a.to_string()).unwrap();
            let qb = Quantity::parse(&format!("{}Ki", b)).unwrap();
            prop_assert_eq!(qa.cmp(&qb), a.cmp(&(b * 1024)));
        }
    }
}
