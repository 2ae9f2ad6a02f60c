//! External IP pools: ranges of addresses the host can serve, configured by
//! the administrator (`--external-ip-pool [NAME=]CIDR`, repeatable; the
//! first is the default pool, named `default` unless named). External IPs
//! and load balancers take their addresses from them.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::str::FromStr;

use vmaas_model::network::Cidr;
use vmaas_model::{ExternalIp, LoadBalancer};
use vmaas_store::{Store, StoreError};

use crate::AdmissionError;

/// Name of a pool given without one.
pub const DEFAULT_POOL: &str = "default";

/// The default pool's range.
pub const DEFAULT_RANGE: &str = "127.43.0.0/16";

/// One pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Its name (also its id in the API).
    pub name: String,
    /// Its range, as given.
    pub text: String,
    /// Its range.
    pub cidr: Cidr,
}

impl FromStr for Pool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, text) = match s.split_once('=') {
            Some((n, c)) => (n.trim(), c.trim()),
            None => (DEFAULT_POOL, s.trim()),
        };
        vmaas_model::validation::check_dns_label(name).map_err(|e| format!("pool name {name:?}: {e}"))?;
        let cidr = Cidr::parse(text, 4).map_err(|e| e.to_string())?;
        Ok(Self { name: name.to_owned(), text: text.to_owned(), cidr })
    }
}

impl Pool {
    /// How many addresses it holds.
    pub fn size(&self) -> i64 {
        i64::try_from(self.cidr.ipv4_host_count()).unwrap_or(i64::MAX)
    }

    /// The first address not in `used`.
    pub fn first_free(&self, used: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        self.cidr.ipv4_hosts().find(|a| !used.contains(a))
    }
}

/// Every pool, the default first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pools(Vec<Pool>);

impl Pools {
    /// The pools given; an error names a duplicate name or an overlap.
    pub fn new(list: Vec<Pool>) -> Result<Self, String> {
        for (i, a) in list.iter().enumerate() {
            for b in &list[..i] {
                if a.name == b.name {
                    return Err(format!("external IP pool {:?} is given twice", a.name));
                }
                if a.cidr.overlaps(&b.cidr) {
                    return Err(format!("external IP pools {:?} ({}) and {:?} ({}) overlap", b.name, b.text, a.name, a.text));
                }
            }
        }
        Ok(Self(list))
    }

    /// The default when none is configured: `127.43.0.0/16`, on loopback.
    pub fn loopback() -> Self {
        Self(vec![Pool {
            name: DEFAULT_POOL.into(),
            text: DEFAULT_RANGE.into(),
            cidr: Cidr::parse(DEFAULT_RANGE, 4).expect("a valid range"),
        }])
    }

    /// Every pool.
    pub fn all(&self) -> &[Pool] {
        &self.0
    }

    /// The pool named `name`; empty: the default one.
    pub fn get(&self, name: &str) -> Option<&Pool> {
        if name.is_empty() { self.0.first() } else { self.0.iter().find(|p| p.name == name) }
    }
}

/// Every address taken in any pool: by external IPs and load balancers.
pub async fn taken(store: &Store) -> Result<BTreeSet<Ipv4Addr>, StoreError> {
    let ips = store.all_records::<ExternalIp>().await?.into_iter().filter_map(|r| r.status.address.parse().ok());
    let lbs = store.all_records::<LoadBalancer>().await?.into_iter().filter_map(|r| r.status.address.parse().ok());
    Ok(ips.chain(lbs).collect())
}

/// The first free address of `pool`: one no external IP or load balancer
/// holds, and none of `held` (what other processes of this host hold);
/// else [`AdmissionError::NoneFree`].
pub async fn allocate(store: &Store, pool: &Pool, held: impl IntoIterator<Item = Ipv4Addr>) -> Result<Ipv4Addr, AdmissionError> {
    let mut used = taken(store).await?;
    used.extend(held.into_iter().filter(|a| pool.cidr.contains((*a).into())));
    pool.first_free(&used)
        .ok_or_else(|| AdmissionError::NoneFree(format!("external IP pool {:?} ({}) has no free address", pool.name, pool.text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_named_ranges_that_do_not_overlap() {
        let a: Pool = "127.43.0.0/30".parse().unwrap();
        assert_eq!((a.name.as_str(), a.size()), (DEFAULT_POOL, 2));
        let b: Pool = "lab=127.44.0.0/24".parse().unwrap();
        let pools = Pools::new(vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(pools.get("").unwrap().name, "default");
        assert_eq!(pools.get("lab").unwrap().text, "127.44.0.0/24");
        assert!(pools.get("nope").is_none());
        let used = BTreeSet::from(["127.43.0.1".parse().unwrap()]);
        assert_eq!(a.first_free(&used), Some("127.43.0.2".parse().unwrap()));
        let full = BTreeSet::from(["127.43.0.1".parse().unwrap(), "127.43.0.2".parse().unwrap()]);
        assert_eq!(a.first_free(&full), None);
        let e = Pools::new(vec![b.clone(), "x=127.44.0.128/25".parse().unwrap()]).unwrap_err();
        assert!(e.contains("overlap"), "{e}");
        assert!("Bad_Name=127.0.0.0/24".parse::<Pool>().is_err());
        assert!("127.0.0.1/24".parse::<Pool>().unwrap_err().contains("host bits"));
    }
}
