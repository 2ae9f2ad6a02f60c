//! Secrets tenants give (a registry's password), sealed before they reach
//! the database: AES-256-GCM under a key derived (HKDF-SHA-256) from the
//! server's secret, the one `--jwt-key-file` holds and every replica shares, and
//! bound to the object they belong to (its id is the associated data), so a
//! sealed value moved to another row does not open. What is stored is
//! `v1:` and the base64 of nonce and ciphertext; nothing here is ever
//! answered.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::prelude::{BASE64_STANDARD, Engine as _};

/// What a sealed value starts with.
const VERSION: &str = "v1:";

/// Why a value cannot be sealed or opened.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// No key could be derived from the server's secret.
    #[error("no sealing key could be derived from the server's secret")]
    Key,
    /// The system's random source failed.
    #[error("no random nonce could be drawn")]
    Random,
    /// The value is not one this server sealed for that object (another
    /// key, another object, or damaged).
    #[error("the sealed value does not open with this server's key for this object")]
    Open,
}

/// Seals and opens secrets with the server's key.
pub struct Sealer {
    /// None only if the key could not be derived, which HKDF-SHA-256 and
    /// AES-256 never refuse for 32 bytes: then nothing seals or opens.
    key: Option<LessSafeKey>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// The sealer of the server whose secret is `secret`.
    pub fn from_secret(secret: &[u8]) -> Self {
        let prk = Salt::new(HKDF_SHA256, b"vmaas").extract(secret);
        let mut bytes = [0u8; 32];
        let derived = prk.expand(&[b"vmaas secrets v1"], &AES_256_GCM).and_then(|okm| okm.fill(&mut bytes));
        let key = derived.and_then(|()| UnboundKey::new(&AES_256_GCM, &bytes)).map(LessSafeKey::new).ok();
        Self { key }
    }

    /// `plain` sealed for the object `owner`.
    pub fn seal(&self, owner: &str, plain: &str) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| SealError::Random)?;
        let key = self.key.as_ref().ok_or(SealError::Key)?;
        let mut data = plain.as_bytes().to_vec();
        key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(owner.as_bytes()), &mut data)
            .map_err(|_| SealError::Random)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!("{VERSION}{}", BASE64_STANDARD.encode(out)))
    }

    /// The value `sealed` holds, sealed for `owner`.
    pub fn open(&self, owner: &str, sealed: &str) -> Result<String, SealError> {
        let bytes = sealed.strip_prefix(VERSION).and_then(|b| BASE64_STANDARD.decode(b).ok()).ok_or(SealError::Open)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
        let mut data = rest.to_vec();
        let key = self.key.as_ref().ok_or(SealError::Key)?;
        let plain = key.open_in_place(nonce, Aad::from(owner.as_bytes()), &mut data).map_err(|_| SealError::Open)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SealError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_for_its_owner_and_key_only() {
        let s = Sealer::from_secret(&[7u8; 32]);
        let sealed = s.seal("image-1", "s3cret").unwrap();
        assert!(sealed.starts_with("v1:") && !sealed.contains("s3cret"), "{sealed}");
        assert_ne!(sealed, s.seal("image-1", "s3cret").unwrap(), "a fresh nonce each time");
        assert_eq!(s.open("image-1", &sealed).unwrap(), "s3cret");
        assert!(s.open("image-2", &sealed).is_err(), "bound to its object");
        assert!(Sealer::from_secret(&[8u8; 32]).open("image-1", &sealed).is_err(), "bound to the key");
        for bad in ["", "v1:", "v1:!!", "v2:AAAA", &sealed[..sealed.len() - 4]] {
            assert!(s.open("image-1", bad).is_err(), "{bad}");
        }
    }
}
