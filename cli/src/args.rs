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

/// Which objects a list shows: `--filter` and `-l`, on every list.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct ListArgs {
    /// Only objects this CEL expression holds for, as the API's `filter`
    /// takes it, e.g. "this.status.state == VIRTUAL_MACHINE_STATE_READY".
    #[arg(long)]
    pub filter: Option<String>,
    /// Only objects with this label: KEY=VALUE, or KEY for any value
    /// (repeatable: all must match).
    #[arg(short = 'l', long = "label", value_name = "KEY[=VALUE]")]
    pub labels: Vec<String>,
}

impl ListArgs {
    /// The API's `filter`: `--filter` and each `-l`, all to hold; none when neither is given.
    pub(crate) fn filter(&self) -> Result<Option<String>, crate::exit::Usage> {
        let mut terms: Vec<String> = self.filter.iter().map(|f| format!("({f})")).collect();
        for l in &self.labels {
            let (key, value) = match l.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (l.as_str(), None),
            };
            let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
            if !plain(key) || value.is_some_and(|v| !v.is_empty() && !plain(v)) {
                return Err(crate::exit::Usage(format!(
                    "-l {l:?}: a label is KEY=VALUE or KEY, of letters, digits, '-', '_', '.' and '/'"
                )));
            }
            terms.push(match value {
                Some(v) => format!("this.metadata.labels['{key}'] == '{v}'"),
                None => format!("'{key}' in this.metadata.labels"),
            });
        }
        Ok((!terms.is_empty()).then(|| terms.join(" && ")))
    }
}

/// A disk as `SIZE_GIB[:TIER]`, e.g. `40` or `40:fast`.
pub(crate) fn parse_disk(s: &str) -> Result<vmaas_model::VmDisk, String> {
    let (size, tier) = match s.split_once(':') {
        Some((size, tier)) => (size, Some(tier.to_owned())),
        None => (s, None),
    };
    let size_gib = size.trim().parse().map_err(|_| format!("expected SIZE_GIB[:TIER] with a whole number of GiB, got {s:?}"))?;
    Ok(vmaas_model::VmDisk { size_gib, storage_tier: tier })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_filters() {
        let args = |filter: Option<&str>, labels: &[&str]| ListArgs {
            filter: filter.map(str::to_owned),
            labels: labels.iter().map(|l| l.to_string()).collect(),
        };
        assert_eq!(args(None, &[]).filter().ok(), Some(None));
        assert_eq!(
            args(Some("this.metadata.name == 'a'"), &["env=prod", "team"]).filter().ok().flatten().as_deref(),
            Some("(this.metadata.name == 'a') && this.metadata.labels['env'] == 'prod' && 'team' in this.metadata.labels")
        );
        assert!(args(None, &["env='x"]).filter().is_err(), "a quote cannot end the string early");
    }

    #[test]
    fn disks_are_a_size_and_a_tier() {
        assert_eq!(parse_disk("40").unwrap(), vmaas_model::VmDisk { size_gib: 40, storage_tier: None });
        assert_eq!(parse_disk("40:fast").unwrap().storage_tier.as_deref(), Some("fast"));
        assert!(parse_disk("40G").unwrap_err().contains("whole number of GiB"));
    }
}
