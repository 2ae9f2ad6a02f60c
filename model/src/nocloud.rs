//! cloud-init's NoCloud seed of a VM: the three files (`meta-data`,
//! `user-data`, `network-config`) a backend hands the guest, and the checks
//! of what a tenant may put in them.
//!
//! SSH keys travel in `meta-data` (`public-keys`), so the user data reaches
//! the guest exactly as written, be it `#cloud-config`, a script or MIME.
//! The network configuration names every NIC by its MAC, in PCI order
//! (`eth0`, `eth1`, …). A NIC whose address the backend knows before the
//! guest starts (QEMU's user network always gives `10.0.2.15`) gets it as
//! a static address: the guest sets it without a DHCP round trip. The
//! others ask DHCP: the backend's DHCP server (the user-space switch for
//! subnets) hands out the address the API shows, so one source of truth
//! decides it.

use serde::{Deserialize, Serialize};

/// What cloud-init gives the guest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudInit {
    /// User data, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// SSH public keys to authorise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<String>,
}

/// The largest user data accepted, in bytes.
pub const MAX_USER_DATA: usize = 64 * 1024;

/// The most SSH keys a VM takes.
pub const MAX_SSH_KEYS: usize = 32;

/// The longest SSH public key line accepted.
const MAX_KEY_LEN: usize = 16 * 1024;

/// Key types cloud-init and OpenSSH accept in `authorized_keys`.
const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Why SSH keys or user data are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuestConfigError {
    /// A key longer than [`MAX_KEY_LEN`].
    #[error("is {0} bytes long, at most {MAX_KEY_LEN} are allowed")]
    KeyTooLong(usize),
    /// A key with a character that is not printable ASCII (a second line, say).
    #[error("must be one line of printable ASCII, found {0:?}")]
    KeyCharacter(char),
    /// An empty key.
    #[error("must not be empty")]
    KeyEmpty,
    /// A key of a type OpenSSH does not know.
    #[error("must start with a key type ({types}), got {0:?}", types = KEY_TYPES.join(", "))]
    KeyType(String),
    /// A type and nothing after it.
    #[error("has no key after its type")]
    KeyMissing,
    /// What follows the type is not base64.
    #[error("must have the base64 key after its type")]
    KeyBase64,
    /// More than [`MAX_SSH_KEYS`] keys.
    #[error("has {0} keys, at most {MAX_SSH_KEYS} are allowed")]
    TooManyKeys(usize),
    /// Key `index` of a list is refused.
    #[error("item {index} {reason}")]
    Item {
        /// Its place in the list.
        index: usize,
        /// Why.
        reason: Box<GuestConfigError>,
    },
    /// User data longer than [`MAX_USER_DATA`].
    #[error("is {0} bytes long, at most {MAX_USER_DATA} are allowed")]
    UserDataTooLong(usize),
    /// User data with a NUL byte.
    #[error("must not contain a NUL byte")]
    UserDataNul,
}

/// The reason, as a field error takes it.
impl From<GuestConfigError> for String {
    fn from(e: GuestConfigError) -> String {
        e.to_string()
    }
}

/// Checks one SSH public key: one line of `TYPE BASE64 [COMMENT]`, printable
/// ASCII, a known type.
pub fn check_ssh_key(key: &str) -> Result<(), GuestConfigError> {
    if key.len() > MAX_KEY_LEN {
        return Err(GuestConfigError::KeyTooLong(key.len()));
    }
    if let Some(c) = key.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ')) {
        return Err(GuestConfigError::KeyCharacter(c));
    }
    let mut parts = key.split(' ').filter(|p| !p.is_empty());
    let kind = parts.next().ok_or(GuestConfigError::KeyEmpty)?;
    if !KEY_TYPES.contains(&kind) {
        return Err(GuestConfigError::KeyType(kind.to_owned()));
    }
    let body = parts.next().ok_or(GuestConfigError::KeyMissing)?;
    let base64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
    if body.len() < 4 || !body.chars().all(base64) {
        return Err(GuestConfigError::KeyBase64);
    }
    Ok(())
}

/// Checks a list of SSH keys.
pub fn check_ssh_keys(keys: &[String]) -> Result<(), GuestConfigError> {
    if keys.len() > MAX_SSH_KEYS {
        return Err(GuestConfigError::TooManyKeys(keys.len()));
    }
    for (index, k) in keys.iter().enumerate() {
        check_ssh_key(k).map_err(|e| GuestConfigError::Item { index, reason: Box::new(e) })?;
    }
    Ok(())
}

/// Checks user data: its size, and no NUL byte.
pub fn check_user_data(data: &str) -> Result<(), GuestConfigError> {
    if data.len() > MAX_USER_DATA {
        return Err(GuestConfigError::UserDataTooLong(data.len()));
    }
    if data.contains('\0') {
        return Err(GuestConfigError::UserDataNul);
    }
    Ok(())
}

/// The files of a NoCloud seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// `meta-data`: instance id, host name, SSH keys.
    pub meta_data: String,
    /// `user-data`, as the tenant wrote it (empty without any).
    pub user_data: String,
    /// `network-config`, version 1.
    pub network_config: String,
}

impl Seed {
    /// The files by name, as they go on the seed's file system.
    pub fn files(&self) -> [(&'static str, &str); 3] {
        [("meta-data", &self.meta_data), ("user-data", &self.user_data), ("network-config", &self.network_config)]
    }
}

/// Renders YAML the simplest readers take too: one `key: "value"` per
/// line, and each key on its own `  - "…"` line (JSON strings are YAML).
fn meta_data(id: &str, hostname: &str, keys: &[String]) -> String {
    let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let mut out = format!("instance-id: {}\nlocal-hostname: {}\n", q(id), q(hostname));
    if !keys.is_empty() {
        out.push_str("public-keys:\n");
        for k in keys {
            out.push_str(&format!("  - {}\n", q(k)));
        }
    }
    out
}

/// A NIC as the guest sees it: its MAC, and its address when the backend
/// knows it before the guest starts (the guest then sets it itself,
/// without asking DHCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedNic<'a> {
    /// Its MAC.
    pub mac: &'a str,
    /// Its fixed address, if any.
    pub fixed: Option<&'a FixedAddress>,
}

/// An address a NIC takes as it is, with its gateway and name servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedAddress {
    /// The address with its prefix length, e.g. `10.0.2.15/24`.
    pub address: String,
    /// The default route's gateway, if the NIC carries one.
    pub gateway: Option<String>,
    /// Name servers.
    pub dns: Vec<String>,
}

/// The network configuration: each NIC named `ethN` by its MAC (in PCI
/// order), on its fixed address or else DHCP. Strings are quoted, one
/// key per line, so that the test guest's init reads it too.
fn network_config(nics: &[SeedNic<'_>]) -> String {
    let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let mut out = String::from("version: 1\nconfig:\n");
    for (i, nic) in nics.iter().enumerate() {
        out.push_str(&format!("  - type: physical\n    name: eth{i}\n    mac_address: {}\n    subnets:\n", q(nic.mac)));
        let Some(fixed) = nic.fixed else {
            out.push_str("      - type: dhcp\n");
            continue;
        };
        out.push_str(&format!("      - type: static\n        address: {}\n", q(&fixed.address)));
        if let Some(gw) = &fixed.gateway {
            out.push_str(&format!("        gateway: {}\n", q(gw)));
        }
        if !fixed.dns.is_empty() {
            let dns: Vec<String> = fixed.dns.iter().map(|d| q(d)).collect();
            out.push_str(&format!("        dns_nameservers: [{}]\n", dns.join(", ")));
        }
    }
    out
}

/// The seed of VM `id` called `hostname`, with NICs `nics` in PCI order.
pub fn seed(id: &str, hostname: &str, cloud_init: &CloudInit, nics: &[SeedNic<'_>]) -> Seed {
    Seed {
        meta_data: meta_data(id, hostname, &cloud_init.ssh_keys),
        user_data: cloud_init.user_data.clone().unwrap_or_default(),
        network_config: network_config(nics),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAbc user@host";

    #[test]
    fn keys_are_checked_one_by_one() {
        assert!(check_ssh_key(KEY).is_ok());
        assert!(check_ssh_key("ssh-rsa AAAAB3NzaC1yc2EAAAADAQAB").is_ok());
        assert!(check_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\nssh-rsa AAAA").unwrap_err().to_string().contains("one line"));
        assert!(check_ssh_key("hello AAAAC3NzaC1lZDI1NTE5").unwrap_err().to_string().contains("key type"));
        assert!(check_ssh_key("ssh-ed25519").unwrap_err().to_string().contains("no key"));
        assert!(check_ssh_key("ssh-ed25519 not-base64!!!!!!!!!!!!").unwrap_err().to_string().contains("base64"));
        assert!(check_ssh_key("").unwrap_err().to_string().contains("empty"));
        let many = vec![KEY.to_owned(); MAX_SSH_KEYS + 1];
        assert!(check_ssh_keys(&many).unwrap_err().to_string().contains("at most 32"));
        assert!(check_ssh_keys(&[KEY.into(), "x".into()]).unwrap_err().to_string().starts_with("item 1 "));
    }

    #[test]
    fn user_data_is_bounded() {
        assert!(check_user_data("#cloud-config\n").is_ok());
        assert!(check_user_data(&"x".repeat(MAX_USER_DATA + 1)).unwrap_err().to_string().contains("at most 65536"));
        assert!(check_user_data("a\0b").unwrap_err().to_string().contains("NUL"));
    }

    #[test]
    fn the_seed_carries_name_keys_user_data_and_nics() {
        let ci = CloudInit { user_data: Some("#!/bin/sh\necho hi\n".into()), ssh_keys: vec![KEY.into(), "ssh-rsa AAAA \"q\"".into()] };
        let fixed = FixedAddress { address: "10.0.2.15/24".into(), gateway: Some("10.0.2.2".into()), dns: vec!["10.0.2.3".into()] };
        let nics = [SeedNic { mac: "52:54:00:12:34:56", fixed: Some(&fixed) }, SeedNic { mac: "02:00:00:00:00:07", fixed: None }];
        let s = seed("0b3c", "web-1", &ci, &nics);
        assert_eq!(
            s.meta_data,
            "instance-id: \"0b3c\"\nlocal-hostname: \"web-1\"\npublic-keys:\n  - \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAbc user@host\"\n  - \"ssh-rsa AAAA \\\"q\\\"\"\n"
        );
        assert_eq!(s.user_data, "#!/bin/sh\necho hi\n", "user data as written");
        assert!(s.network_config.contains("name: eth1\n    mac_address: \"02:00:00:00:00:07\""), "{}", s.network_config);
        assert_eq!(s.network_config.matches("type: dhcp").count(), 1);
        assert!(
            s.network_config.contains(
                "name: eth0\n    mac_address: \"52:54:00:12:34:56\"\n    subnets:\n      - type: static\n        address: \"10.0.2.15/24\"\n        gateway: \"10.0.2.2\"\n        dns_nameservers: [\"10.0.2.3\"]\n"
            ),
            "{}",
            s.network_config
        );
        let bare = seed("0b3c", "web-1", &CloudInit::default(), &[]);
        assert!(!bare.meta_data.contains("public-keys"));
        assert_eq!(bare.user_data, "");
        assert_eq!(s.files().map(|(n, _)| n), ["meta-data", "user-data", "network-config"]);
    }
}
