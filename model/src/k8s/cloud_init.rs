//! A machine's cloud-init data as KubeVirt's `cloudInitNoCloud` volume
//! takes it: its user data with its SSH keys added, and the network
//! configuration of NICs whose addresses vmaas gives.

/// Boundary of the MIME multipart user data (cloud-init's own format for
/// several parts).
const BOUNDARY: &str = "vmaas-user-data-part";

/// A `#cloud-config` document holding only `keys`.
fn keys_config(keys: &[String]) -> String {
    let mut s = String::from("#cloud-config\n");
    if !keys.is_empty() {
        s.push_str("ssh_authorized_keys:\n");
        for k in keys {
            s.push_str(&format!("  - {k}\n"));
        }
    }
    s
}

/// cloud-init's MIME type of a user-data document, from its first line.
fn user_data_type(u: &str) -> &'static str {
    const TYPES: [(&str, &str); 5] = [
        ("#!", "text/x-shellscript"),
        ("#cloud-boothook", "text/cloud-boothook"),
        ("#include", "text/x-include-url"),
        ("#part-handler", "text/part-handler"),
        ("## template: jinja", "text/jinja2"),
    ];
    TYPES.iter().find(|(prefix, _)| u.starts_with(prefix)).map(|(_, t)| *t).unwrap_or("text/plain")
}

/// The cloud-init user data of a machine: its user data as written, with
/// its SSH keys added: into a `#cloud-config`, or, beside any other kind of
/// user data (a script), as a second part of a MIME multipart document, so
/// that neither is lost.
pub fn cloud_init_user_data(c: &crate::machine::CloudInit) -> String {
    match &c.user_data {
        Some(u) if c.ssh_keys.is_empty() => u.clone(),
        Some(u) if u.starts_with("#cloud-config") => {
            let list: Vec<String> = c.ssh_keys.iter().map(|k| format!("  - {k}")).collect();
            format!("{}\nssh_authorized_keys:\n{}\n", u.trim_end(), list.join("\n"))
        }
        Some(u) => format!(
            "Content-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\nMIME-Version: 1.0\n\n\
             --{BOUNDARY}\nContent-Type: text/cloud-config; charset=\"utf-8\"\n\n{keys}\n\
             --{BOUNDARY}\nContent-Type: {kind}; charset=\"utf-8\"\n\n{u}\n--{BOUNDARY}--\n",
            keys = keys_config(&c.ssh_keys),
            kind = user_data_type(u),
        ),
        None => keys_config(&c.ssh_keys),
    }
}

/// The network configuration (version 2) of a VM whose attachments carry
/// fixed addresses: each NIC named by its MAC, the pod network's by DHCP
/// (its default route), each attachment with its address; none when no
/// attachment has one (cloud-init's own fallback, DHCP on the first NIC).
pub fn network_data(o: &super::options::VmOptions) -> Option<String> {
    let fixed: Vec<(&str, &str)> = o.attachments.iter().filter_map(|a| Some((a.mac.as_deref()?, a.address.as_deref()?))).collect();
    let pod = o.pod_mac.as_deref().filter(|_| !fixed.is_empty())?;
    let mut s = format!("version: 2\nethernets:\n  pod:\n    match:\n      macaddress: \"{pod}\"\n    dhcp4: true\n");
    for (i, (mac, address)) in fixed.iter().enumerate() {
        s.push_str(&format!("  nic{i}:\n    match:\n      macaddress: \"{mac}\"\n    addresses: [\"{address}\"]\n"));
    }
    Some(s)
}
