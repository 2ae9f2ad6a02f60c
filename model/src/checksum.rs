//! The checksum an export's bytes come with, which the client chooses:
//! SHA-256 (the default, and what a kept export already knows) or CRC-32,
//! which costs a sixth as much to compute on both sides and still catches
//! bytes damaged or lost on the way (not a change made on purpose).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// Which checksum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Checksum {
    /// SHA-256, in `X-Checksum-Sha256` (hex) and `Digest: sha-256=` (base64).
    #[default]
    Sha256,
    /// CRC-32 (IEEE 802.3, as zlib and S3's `x-amz-checksum-crc32` use it),
    /// in `X-Checksum-Crc32` (8 hex digits).
    Crc32,
}

impl Checksum {
    /// The header (or trailer) carrying it in hex.
    pub fn header(self) -> &'static str {
        match self {
            Self::Sha256 => "x-checksum-sha256",
            Self::Crc32 => "x-checksum-crc32",
        }
    }

    /// A hasher of it, empty.
    pub fn hasher(self) -> Hasher {
        match self {
            Self::Sha256 => Hasher::Sha256(Box::default()),
            Self::Crc32 => Hasher::Crc32(crc32fast::Hasher::new()),
        }
    }

    /// Its name as a query asks for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Crc32 => "crc32",
        }
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sha256 => "SHA-256",
            Self::Crc32 => "CRC-32",
        })
    }
}

/// A name that is no checksum's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a checksum: sha256 or crc32")]
pub struct UnknownChecksum(pub String);

impl FromStr for Checksum {
    type Err = UnknownChecksum;

    /// `sha256` or `crc32`, as a query or `--checksum` names it.
    fn from_str(s: &str) -> Result<Self, UnknownChecksum> {
        [Self::Sha256, Self::Crc32].into_iter().find(|c| c.as_str() == s).ok_or_else(|| UnknownChecksum(s.to_owned()))
    }
}

/// A checksum being computed over bytes fed in order.
#[derive(Clone)]
pub enum Hasher {
    /// SHA-256.
    Sha256(Box<sha2::Sha256>),
    /// CRC-32.
    Crc32(crc32fast::Hasher),
}

impl Hasher {
    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::Crc32(h) => h.update(bytes),
        }
    }

    /// The checksum of everything fed, in lowercase hex.
    pub fn hex(self) -> String {
        match self {
            Self::Sha256(h) => h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
            Self::Crc32(h) => format!("{:08x}", h.finalize()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(c: Checksum, parts: &[&[u8]]) -> String {
        let mut h = c.hasher();
        parts.iter().for_each(|p| h.update(p));
        h.hex()
    }

    #[test]
    fn each_checksum_is_the_standard_one_whatever_the_pieces() {
        // The check values of both: "123456789".
        assert_eq!(of(Checksum::Crc32, &[b"1234", b"56789"]), "cbf43926");
        assert_eq!(of(Checksum::Sha256, &[b"123456789"]), "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225");
        assert_eq!(of(Checksum::Sha256, &[b"12", b"3456789"]), of(Checksum::Sha256, &[b"123456789"]));
        assert_eq!(of(Checksum::Crc32, &[]), "00000000");
    }

    #[test]
    fn a_query_names_them_in_lowercase_and_nothing_else() {
        assert_eq!(serde_json::from_str::<Checksum>("\"crc32\"").unwrap(), Checksum::Crc32);
        assert_eq!(serde_json::from_str::<Checksum>("\"sha256\"").unwrap(), Checksum::Sha256);
        assert!(serde_json::from_str::<Checksum>("\"md5\"").is_err());
        assert_eq!(Checksum::default(), Checksum::Sha256);
        assert_eq!(Checksum::Crc32.as_str(), "crc32");
        assert_eq!("crc32".parse::<Checksum>(), Ok(Checksum::Crc32));
        assert_eq!("sha256".parse::<Checksum>(), Ok(Checksum::Sha256));
        assert!("CRC32".parse::<Checksum>().unwrap_err().to_string().contains("sha256 or crc32"));
    }
}
