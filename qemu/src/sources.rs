//! Where images may be fetched from: the server fetches URLs its tenants
//! give, so it checks every address it would connect to (each one a name
//! resolves to, and each redirect) against the operator's allow list
//! (`--image-source-allow`), and never fetches from link-local, multicast
//! or unspecified addresses (cloud metadata services answer on
//! 169.254.169.254). Names are resolved once and only the allowed
//! addresses are dialled, so a name cannot be re-pointed between the check
//! and the connection.

use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use vmaas_model::network::Cidr;

/// Redirects followed at most.
const MAX_REDIRECTS: usize = 10;

/// The addresses images may be fetched from.
#[derive(Debug, Clone)]
pub struct SourcePolicy {
    allow: Vec<Cidr>,
}

impl Default for SourcePolicy {
    /// Any address but the ones never fetched from.
    fn default() -> Self {
        Self::parse(&["0.0.0.0/0".into(), "::/0".into()]).unwrap_or(Self { allow: Vec::new() })
    }
}

impl SourcePolicy {
    /// Parses networks (`ADDR/LEN`) and single addresses.
    pub fn parse(list: &[String]) -> Result<Self, String> {
        let allow = list.iter().map(|t| parse_net(t.trim())).collect::<Result<Vec<_>, _>>()?;
        Ok(Self { allow })
    }

    /// Whether images may be fetched from `ip`, and if not why.
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        if let Some(kind) = never(ip) {
            return Err(format!("{ip} is a {kind} address; images are never fetched from one"));
        }
        if self.allow.iter().any(|c| c.contains(ip)) {
            return Ok(());
        }
        let list: Vec<String> = self.allow.iter().map(|c| format!("{}/{}", c.addr, c.len)).collect();
        Err(format!("{ip} is not among the addresses images may be fetched from (--image-source-allow {})", list.join(",")))
    }

    /// An HTTP client that only connects where this policy allows.
    pub fn client(self: &Arc<Self>) -> reqwest::Client {
        let (resolver, redirects) = (Checked(self.clone()), self.clone());
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
            }
            match literal_ip(attempt.url()).map(|ip| redirects.check(ip)) {
                Some(Err(e)) => attempt.error(e),
                _ => attempt.follow(),
            }
        });
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .dns_resolver(resolver)
            .redirect(policy)
            .build()
            .unwrap_or_default()
    }

    /// Checks a URL's host when it is an address (names are checked as
    /// they resolve).
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), String> {
        literal_ip(url).map_or(Ok(()), |ip| self.check(ip))
    }
}

/// The class of address never fetched from, if `ip` is one.
fn never(ip: IpAddr) -> Option<&'static str> {
    let v4 = match ip {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(a) => a.to_ipv4_mapped(),
    };
    match (ip, v4) {
        (_, Some(a)) if a.is_link_local() => Some("link-local"),
        (_, Some(a)) if a.is_multicast() || a.is_broadcast() => Some("multicast or broadcast"),
        (_, Some(a)) if a.is_unspecified() => Some("unspecified"),
        (IpAddr::V6(a), None) if a.segments()[0] & 0xffc0 == 0xfe80 => Some("link-local"),
        (IpAddr::V6(a), None) if a.is_multicast() => Some("multicast or broadcast"),
        (IpAddr::V6(a), None) if a.is_unspecified() => Some("unspecified"),
        _ => None,
    }
}

/// `ADDR/LEN` or a single address, as a network.
fn parse_net(text: &str) -> Result<Cidr, String> {
    let bad = || format!("{text:?} is not an address or a network such as 127.0.0.0/8");
    let (addr, len) = text.split_once('/').map_or((text, None), |(a, l)| (a, Some(l)));
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(bad)?,
        None => max,
    };
    Ok(Cidr { addr, len })
}

/// The URL's host, when it is an address.
fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    url.host_str()?.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// Resolves names to the addresses the policy allows; none: an error
/// saying why.
struct Checked(Arc<SourcePolicy>);

impl Resolve for Checked {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| match policy.check(a.ip()) {
                    Ok(()) => true,
                    Err(e) => {
                        refused.get_or_insert(e);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = refused.unwrap_or_else(|| "it has no address".into());
                return Err(format!("{host}: {why}").into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// An error and its causes, as one line (reqwest's own message leaves them out).
pub fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(list: &[&str]) -> SourcePolicy {
        SourcePolicy::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn the_allow_list_decides_and_metadata_addresses_are_never_fetched() {
        let p = policy(&["127.0.0.0/8", "::1"]);
        assert!(p.check("127.0.0.9".parse().unwrap()).is_ok());
        assert!(p.check("::1".parse().unwrap()).is_ok());
        let e = p.check("10.1.2.3".parse().unwrap()).unwrap_err();
        assert!(e.contains("--image-source-allow 127.0.0.0/8,::1/128"), "{e}");
        let any = SourcePolicy::default();
        for (ip, kind) in [
            ("169.254.169.254", "link-local"),
            ("fe80::1", "link-local"),
            ("::ffff:169.254.169.254", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
        ] {
            let e = any.check(ip.parse().unwrap()).unwrap_err();
            assert!(e.contains(kind), "{ip}: {e}");
        }
        assert!(any.check("192.0.2.1".parse().unwrap()).is_ok());
    }

    #[test]
    fn bad_entries_are_named() {
        for bad in ["nope", "127.0.0.0/33", "::/129", "1.2.3.4/x"] {
            let e = SourcePolicy::parse(&[bad.into()]).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn literal_hosts_are_read_from_urls() {
        let ip = |u: &str| literal_ip(&reqwest::Url::parse(u).unwrap());
        assert_eq!(ip("http://[::1]:8080/x"), Some("::1".parse().unwrap()));
        assert_eq!(ip("https://169.254.169.254/latest"), Some("169.254.169.254".parse().unwrap()));
        assert_eq!(ip("https://example.org/x"), None);
    }
}
