//! Each kind's own part of the shared operations ([`super::kind::Kind`]),
//! one file each, and how every such kind is reconciled. A new kind is a
//! new file here, its REST declaration in `api/resources`, and its line in
//! `each_kind!` (`docs/architecture.md`, "Adding a kind").

use vmaas_model::ObjectKind;

use super::kind::Kind;
use crate::reconciler::ReconcileFn;

pub(crate) mod catalog_items;
pub(crate) mod external_ips;
mod instance_types;
pub(crate) mod ip_attachments;
mod load_balancers;
mod nat_gateways;
mod networks;
mod security_groups;
pub(crate) mod snapshots;
mod subnets;
mod volume_attachments;
pub(crate) mod volumes;

/// Calls `$each::<K>` for every kind made by the shared operations.
#[macro_export]
#[doc(hidden)]
macro_rules! each_kind {
    ($each:ident($($arg:expr),*)) => {
        $each::<vmaas_model::VirtualNetwork>($($arg),*);
        $each::<vmaas_model::Subnet>($($arg),*);
        $each::<vmaas_model::SecurityGroup>($($arg),*);
        $each::<vmaas_model::ExternalIp>($($arg),*);
        $each::<vmaas_model::ExternalIpAttachment>($($arg),*);
        $each::<vmaas_model::LoadBalancer>($($arg),*);
        $each::<vmaas_model::NatGateway>($($arg),*);
        $each::<vmaas_model::Volume>($($arg),*);
        $each::<vmaas_model::VolumeAttachment>($($arg),*);
        $each::<vmaas_model::InstanceType>($($arg),*);
        $each::<vmaas_model::ComputeInstanceSnapshot>($($arg),*);
    };
}

/// How every such kind is reconciled, for the reconciler.
pub(crate) fn reconcilers() -> Vec<(ObjectKind, ReconcileFn)> {
    let mut all = Vec::new();
    fn add<K: Kind>(all: &mut Vec<(ObjectKind, ReconcileFn)>) {
        all.push((K::KIND, K::reconcile));
    }
    each_kind!(add(&mut all));
    // Served by its own routes (its object is flat): reconciled the same way.
    add::<vmaas_model::ComputeInstanceCatalogItem>(&mut all);
    all
}
