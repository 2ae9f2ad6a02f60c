//! Where images may be fetched from. The server fetches URLs its tenants
//! give, so every address it would connect to (each one a name resolves
//! to, each redirect, and the peer it did connect to) is checked against
//! the operator's allow list (`--image-source-allow`): `public` (the
//! default) lets in globally routable addresses only, and a network
//! (`ADDR/LEN`) or an address lets in what it holds. Loopback, private,
//! link-local (cloud metadata answers on 169.254.169.254), CGNAT,
//! documentation and other special-purpose addresses are therefore never
//! fetched from unless an administrator names them, and the server's own
//! listening sockets never at all. Names are resolved once and only the
//! allowed addresses are dialled, so a name cannot be re-pointed between
//! the check and the connection; redirects are followed here, one hop at a
//! time, each checked like the first URL.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use vmaas_model::network::Cidr;

/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 10;

/// What a tenant is told about any fetch that was refused or failed: the
/// same words whatever answered, so that imports cannot map the host's
/// network. The server's log has the reason.
pub const FETCH_FAILED: &str = "the image could not be fetched from its source: the address is not allowed, nothing answered, or the answer was not a file; an administrator finds the reason in the server's log";

/// How long downloads may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// The longest wait for the next bytes (connecting, the answer's headers, each read).
    pub read: Duration,
    /// The longest a whole download may take.
    pub total: Duration,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self { read: Duration::from_secs(30), total: Duration::from_secs(3600) }
    }
}

/// The addresses images may be fetched from.
#[derive(Debug, Clone)]
pub struct SourcePolicy {
    /// Whether globally routable addresses are allowed (`public`).
    public: bool,
    /// Networks allowed whatever they hold.
    allow: Vec<Cidr>,
    /// The server's own listening sockets, once it listens: never fetched from.
    own: Arc<OnceLock<Vec<SocketAddr>>>,
    /// Registries (`HOST:PORT`) spoken to over plain HTTP rather than HTTPS.
    plain_http: Vec<String>,
    /// Time limits of a download.
    pub limits: FetchLimits,
}

impl Default for SourcePolicy {
    /// Public addresses only.
    fn default() -> Self {
        Self { public: true, allow: Vec::new(), own: Arc::default(), plain_http: Vec::new(), limits: FetchLimits::default() }
    }
}

/// Why an address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// It is of a special-purpose class and no entry of the list names it.
    #[error("{0} is a {1} address, which --image-source-allow {2} does not name")]
    Special(IpAddr, &'static str, String),
    /// A public address, and the list does not hold it.
    #[error("{0} is not among the addresses images may be fetched from (--image-source-allow {1})")]
    NotListed(IpAddr, String),
    /// One of the server's own listening sockets.
    #[error("{0} is this server's own listening socket")]
    Own(SocketAddr),
}

/// An entry of `--image-source-allow` that is none of `public`, an
/// address or a network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not public, an address or a network such as 192.0.2.0/24")]
pub struct BadEntry(pub String);

/// Why a URL may not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum UrlRefused {
    /// It names no host.
    #[error("{0} names no host")]
    NoHost(String),
    /// It names no port, and its scheme has none.
    #[error("{0} names no port")]
    NoPort(String),
    /// Its host name does not resolve.
    #[error("resolving {host}: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// Why.
        source: std::io::Error,
    },
    /// An address it leads to is refused.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// Its host name resolves to nothing.
    #[error("{0} has no address")]
    NoAddress(String),
}

impl SourcePolicy {
    /// Parses `public` and networks (`ADDR/LEN`) or single addresses.
    pub fn parse(list: &[String]) -> Result<Self, BadEntry> {
        let mut p = Self { public: false, ..Self::default() };
        for t in list.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
            if t.eq_ignore_ascii_case("public") {
                p.public = true;
            } else {
                p.allow.push(parse_net(t)?);
            }
        }
        Ok(p)
    }

    /// The same policy, never fetching from the server's own sockets `own`
    /// (an unspecified address stands for every address of this host).
    pub fn with_own(mut self, own: Vec<SocketAddr>) -> Self {
        self.own = Arc::new(OnceLock::from(own));
        self
    }

    /// The same policy, never fetching from the sockets `listening` will
    /// hold once the server listens (its port may be chosen then).
    pub fn with_listening(mut self, listening: Arc<OnceLock<Vec<SocketAddr>>>) -> Self {
        self.own = listening;
        self
    }

    /// The same policy with these time limits.
    pub fn with_limits(mut self, limits: FetchLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The same policy, pulling from the registries `hosts` (`HOST:PORT`)
    /// over plain HTTP; their addresses must still be allowed.
    pub fn with_plain_http(mut self, hosts: Vec<String>) -> Self {
        self.plain_http = hosts;
        self
    }

    /// The registries pulled from over plain HTTP.
    pub fn plain_http_registries(&self) -> &[String] {
        &self.plain_http
    }

    fn listed(&self) -> String {
        let mut list: Vec<String> = self.allow.iter().map(Cidr::to_string).collect();
        if self.public {
            list.insert(0, "public".into());
        }
        if list.is_empty() { "(nothing)".into() } else { list.join(",") }
    }

    /// Whether images may be fetched from `ip`, and if not why.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let ip = canonical(ip);
        if self.allow.iter().any(|c| c.contains(ip)) {
            return Ok(());
        }
        match special(ip) {
            Some(class) => Err(Refused::Special(ip, class, self.listed())),
            None if self.public => Ok(()),
            None => Err(Refused::NotListed(ip, self.listed())),
        }
    }

    /// Whether images may be fetched from the socket `addr`: its address
    /// allowed, and not one of the server's own sockets.
    pub fn check_socket(&self, addr: SocketAddr) -> Result<(), Refused> {
        self.check(addr.ip())?;
        let ip = canonical(addr.ip());
        let own = self
            .own
            .get()
            .into_iter()
            .flatten()
            .any(|o| o.port() == addr.port() && (canonical(o.ip()) == ip || (o.ip().is_unspecified() && local(ip))));
        if own { Err(Refused::Own(addr)) } else { Ok(()) }
    }

    /// Checks every socket `url` names (each address its host resolves to).
    pub async fn check_url(&self, url: &reqwest::Url) -> Result<(), UrlRefused> {
        let host = url.host_str().ok_or_else(|| UrlRefused::NoHost(url.to_string()))?;
        let port = url.port_or_known_default().ok_or_else(|| UrlRefused::NoPort(url.to_string()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs = sockets(host, port).await.map_err(|e| UrlRefused::Resolve { host: host.to_owned(), source: e })?;
        // As the resolver dials only the allowed addresses, one is enough;
        // but a name that leads to the server itself is refused outright.
        let mut refused = None;
        let mut allowed = false;
        for a in addrs {
            match self.check_socket(a) {
                Ok(()) => allowed = true,
                Err(e @ Refused::Own(_)) => return Err(e.into()),
                Err(e) => refused = refused.or(Some(e)),
            }
        }
        match (allowed, refused) {
            (true, _) => Ok(()),
            (false, Some(why)) => Err(why.into()),
            (false, None) => Err(UrlRefused::NoAddress(host.to_owned())),
        }
    }

    /// An HTTP client that only connects where this policy allows, follows
    /// no redirect itself, and waits at most the read limit for bytes.
    pub fn client(self: &Arc<Self>) -> reqwest::Client {
        reqwest::Client::builder()
            .connect_timeout(self.limits.read)
            .read_timeout(self.limits.read)
            .dns_resolver(Checked(self.clone()))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default()
    }
}

/// The sockets `host` (an address, bracketed or not, or a name to
/// resolve) and `port` name; what is dialled must then be checked.
pub async fn sockets(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => Ok(vec![SocketAddr::new(ip, port)]),
        Err(_) => Ok(tokio::net::lookup_host((host, port)).await?.collect()),
    }
}

/// An IPv4 address inside IPv6 (mapped or compatible) as the IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `ip` is an address of this host (one a socket can be bound to).
pub(crate) fn local(ip: IpAddr) -> bool {
    ip.is_loopback() || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// The special-purpose class of `ip`, if it is not a globally routable address.
pub(crate) fn special(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(a) => special_v4(a),
        IpAddr::V6(a) => special_v6(a),
    }
}

fn special_v4(a: Ipv4Addr) -> Option<&'static str> {
    let [o0, o1, o2, _] = a.octets();
    let class = match (o0, o1, o2) {
        _ if a.is_loopback() => "loopback",
        _ if a.is_private() => "private",
        _ if a.is_link_local() => "link-local",
        (100, 64..=127, _) => "shared (CGNAT)",
        _ if a.is_unspecified() || o0 == 0 => "unspecified (\"this network\")",
        _ if a.is_multicast() || a.is_broadcast() => "multicast or broadcast",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking",
        (192, 0, 0) | (192, 88, 99) => "special-purpose",
        (240..=255, _, _) => "reserved",
        _ => return None,
    };
    Some(class)
}

fn special_v6(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    let class = match s[0] {
        _ if a.is_loopback() => "loopback",
        _ if a.is_unspecified() => "unspecified",
        0xfe80..=0xfebf => "link-local",
        0xfc00..=0xfdff => "private (unique local)",
        0xff00..=0xffff => "multicast",
        0x2001 if s[1] == 0x0db8 => "documentation",
        // Teredo and 6to4 carry IPv4 addresses of any class inside.
        0x2001 if s[1] == 0 => "tunnelled (Teredo)",
        0x2002 => "tunnelled (6to4)",
        0x0064 if s[1] == 0xff9b => "translated (NAT64)",
        0x2000..=0x3fff => return None,
        _ => "reserved",
    };
    Some(class)
}

/// `ADDR/LEN` or a single address, as a network.
pub(crate) fn parse_net(text: &str) -> Result<Cidr, BadEntry> {
    Cidr::entry(text).ok_or_else(|| BadEntry(text.to_owned()))
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
                        refused.get_or_insert(e.to_string());
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
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
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
mod tests;
