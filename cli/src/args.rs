//! What the `vmaas vm create` flags parse into: NICs on subnets, SSH keys
//! and user data, placement labels.

use anyhow::Context;
use vmaas_model::NetworkAttachment;

/// `NAME[,ip=ADDR][,sg=GROUP]…` into a NIC on a subnet.
pub(crate) fn parse_attachment(s: &str) -> Result<NetworkAttachment, String> {
    let mut parts = s.split(',');
    let subnet = parts.next().filter(|n| !n.is_empty()).ok_or("give the subnet's name first, e.g. front,ip=10.0.1.5")?;
    let mut a = NetworkAttachment { subnet: subnet.to_owned(), ..Default::default() };
    for p in parts {
        match p.split_once('=') {
            Some(("ip", ip)) => a.ip_address = Some(ip.to_owned()),
            Some(("sg", g)) => a.security_groups.push(g.to_owned()),
            _ => return Err(format!("{p:?}: expected ip=ADDR or sg=GROUP")),
        }
    }
    Ok(a)
}

/// `--ssh-key` values (each a key, or a file of keys) as one key per line,
/// and the `--user-data` file's content.
pub(crate) fn guest_config(keys: &[String], user_data: Option<&std::path::Path>) -> anyhow::Result<(Option<String>, Option<String>)> {
    let mut lines = Vec::new();
    for k in keys {
        let path = std::path::Path::new(k);
        if path.is_file() {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading --ssh-key {}", path.display()))?;
            lines.extend(text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned));
        } else {
            lines.push(k.trim().to_owned());
        }
    }
    let user_data = match user_data {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("reading --user-data {}", p.display()))?),
        None => None,
    };
    Ok(((!lines.is_empty()).then(|| lines.join("\n")), user_data))
}

/// `KEY=VALUE` of `--placement-label` (the server checks both).
pub(crate) fn parse_label(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())).ok_or_else(|| format!("{s:?}: expected KEY=VALUE"))
}
