//! A VM's NICs on subnets, at create: each subnet the caller's (by id or
//! name; stored as the id) and not being deleted, each address checked if
//! asked for or assigned by the server's IPAM, and kept in the spec for
//! the VM's life. Runs under the admission lock, so two VMs never get one
//! address.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use vmaas_model::network::Cidr;
use vmaas_model::{NetworkAttachment, SecurityGroup, Subnet, ValidationErrors};

use vmaas_store::{Scope, Store, StoreError, SubnetRecord};

/// Field of attachment `i`'s `what`.
fn field(i: usize, what: &str) -> String {
    format!("object.spec.network_attachments[{i}].{what}")
}

/// The usable host addresses of `cidr`: after the network address and the
/// gateway (the first), before the broadcast address.
fn hosts(cidr: &Cidr) -> Option<(u32, u32)> {
    let std::net::IpAddr::V4(net) = cidr.addr() else { return None };
    let base = u32::from(net);
    let size = 1u64 << (32 - u32::from(cidr.prefix_len()));
    (size >= 4).then(|| (base + 2, (u64::from(base) + size - 2) as u32))
}

/// The addresses VMs already hold on subnet `id` (or will: VMs staged to
/// be stored count).
async fn taken(store: &Store, id: &str) -> Result<HashSet<Ipv4Addr>, StoreError> {
    Ok(store
        .vms_referring(id)
        .await?
        .iter()
        .flat_map(|vm| vm.spec.network_attachments.iter())
        .filter(|a| a.subnet == id)
        .filter_map(|a| a.ip_address.as_deref()?.parse().ok())
        .collect())
}

/// The address for attachment `i` on `subnet`: the one asked for, checked,
/// else the first free one.
fn address(i: usize, asked: Option<&str>, subnet: &SubnetRecord, used: &HashSet<Ipv4Addr>) -> Result<Ipv4Addr, (String, String)> {
    let range = subnet.spec.ipv4_cidr.as_deref().and_then(|c| Cidr::parse(c, 4).ok()).and_then(|c| hosts(&c));
    let Some((first, last)) = range else {
        return Err((field(i, "subnet"), format!("subnet {:?} has no addresses for VMs", subnet.name)));
    };
    let cidr = subnet.spec.ipv4_cidr.as_deref().unwrap_or_default();
    match asked {
        Some(text) => {
            let ip: Ipv4Addr = text.parse().map_err(|_| (field(i, "ip_address"), format!("{text:?} is not an IPv4 address")))?;
            if !(first..=last).contains(&u32::from(ip)) {
                let why = format!(
                    "{ip} is not a VM address of subnet {:?} ({cidr}: {} to {})",
                    subnet.name,
                    Ipv4Addr::from(first),
                    Ipv4Addr::from(last)
                );
                return Err((field(i, "ip_address"), why));
            }
            if used.contains(&ip) {
                return Err((field(i, "ip_address"), format!("{ip} is taken on subnet {:?}", subnet.name)));
            }
            Ok(ip)
        }
        None => (first..=last)
            .map(Ipv4Addr::from)
            .find(|ip| !used.contains(ip))
            .ok_or_else(|| (field(i, "subnet"), format!("subnet {:?} ({cidr}) has no free address", subnet.name))),
    }
}

/// The security groups of attachment `i` as ids: the caller's, by id or
/// name, of the subnet's network, not being deleted.
async fn security_groups(
    store: &Store,
    scope: &Scope,
    i: usize,
    wanted: &[String],
    subnet: &SubnetRecord,
    errs: &mut ValidationErrors,
) -> Result<Vec<String>, StoreError> {
    let mut ids: Vec<String> = Vec::new();
    for (j, g) in wanted.iter().enumerate() {
        let f = field(i, &format!("security_groups[{j}]"));
        match store.find_record::<SecurityGroup>(g.trim(), scope).await? {
            None => errs.push(f, format!("you have no security group {g:?}; list them with GET /api/fulfillment/v1/security_groups")),
            Some(sg) if sg.deleted_at.is_some() => errs.push(f, format!("security group {:?} is being deleted", sg.name)),
            Some(sg) if sg.spec.virtual_network != subnet.spec.virtual_network => {
                errs.push(f, format!("security group {:?} is for another virtual network than subnet {:?}", sg.name, subnet.name));
            }
            Some(sg) if !ids.contains(&sg.id) => ids.push(sg.id),
            Some(_) => {}
        }
    }
    Ok(ids)
}

/// Resolves the NICs a VM asks for; problems go into `errs`.
pub async fn resolve(
    store: &Store,
    scope: &Scope,
    wanted: &[NetworkAttachment],
    errs: &mut ValidationErrors,
) -> Result<Vec<NetworkAttachment>, StoreError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (i, a) in wanted.iter().enumerate() {
        let Some(subnet) = store.find_record::<Subnet>(a.subnet.trim(), scope).await? else {
            errs.push(field(i, "subnet"), format!("you have no subnet {:?}; list them with GET /api/fulfillment/v1/subnets", a.subnet));
            continue;
        };
        if subnet.deleted_at.is_some() {
            errs.push(field(i, "subnet"), format!("subnet {:?} is being deleted", subnet.name));
            continue;
        }
        if !seen.insert(subnet.id.clone()) {
            errs.push(field(i, "subnet"), format!("the VM already has a NIC on subnet {:?}", subnet.name));
            continue;
        }
        let groups = security_groups(store, scope, i, &a.security_groups, &subnet, errs).await?;
        // One NIC per subnet: only other VMs' addresses can be taken.
        let used = taken(store, &subnet.id).await?;
        match address(i, a.ip_address.as_deref(), &subnet, &used) {
            Ok(ip) => {
                out.push(NetworkAttachment { subnet: subnet.id.clone(), security_groups: groups, ip_address: Some(ip.to_string()) });
            }
            Err((f, why)) => errs.push(f, why),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subnet_s_vm_addresses_skip_the_network_gateway_and_broadcast() {
        let c = Cidr::parse("10.0.1.0/24", 4).unwrap();
        assert_eq!(hosts(&c), Some((u32::from(Ipv4Addr::new(10, 0, 1, 2)), u32::from(Ipv4Addr::new(10, 0, 1, 254)))));
        assert_eq!(
            hosts(&Cidr::parse("10.0.1.0/30", 4).unwrap()),
            Some((u32::from(Ipv4Addr::new(10, 0, 1, 2)), u32::from(Ipv4Addr::new(10, 0, 1, 2))))
        );
    }
}
