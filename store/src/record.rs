//! The typed record of an object of a kind kept as a spec and a status
//! (the model's [`Object`]: every kind but templates; a VM's record holds
//! one, with what only a VM stores, `super::vm::VmRecord`), over the
//! generic rows of [`super::objects`]. A new kind needs no code here: its
//! `Record<K>` works once the model declares its `Object`.

use chrono::{DateTime, Utc};
use vmaas_model::image::Image;
use vmaas_model::{
    ExternalIp, ExternalIpAttachment, Labels, LoadBalancer, Metadata, Object, SecurityGroup, Subnet, VirtualNetwork, Volume,
    VolumeAttachment,
};

use super::row::{NewObject, Row};
use super::{Scope, Store, StoreError};

/// A stored virtual network.
pub type NetworkRecord = Record<VirtualNetwork>;
/// A stored subnet.
pub type SubnetRecord = Record<Subnet>;
/// A stored security group.
pub type SecurityGroupRecord = Record<SecurityGroup>;
/// A stored external IP.
pub type ExternalIpRecord = Record<ExternalIp>;
/// A stored external IP attachment.
pub type AttachmentRecord = Record<ExternalIpAttachment>;
/// A stored load balancer.
pub type LoadBalancerRecord = Record<LoadBalancer>;
/// A stored volume.
pub type VolumeRecord = Record<Volume>;
/// A stored volume attachment.
pub type VolumeAttachmentRecord = Record<VolumeAttachment>;
/// A stored imported image.
pub type ImageRecord = Record<Image>;
/// A stored snapshot of a VM's disks.
pub type SnapshotRecord = Record<vmaas_model::ComputeInstanceSnapshot>;

/// The role of a subnet's reference to its network.
pub const SUBNET_OF: &str = "virtual_network";
/// The role of an external IP attachment's reference to its external IP.
pub const ATTACHMENT_OF: &str = "external_ip";
/// The role of a load balancer's reference to its subnet.
pub const BALANCER_ON: &str = "subnet";
/// The role of a volume attachment's reference to its volume.
pub const VOLUME_OF: &str = "volume";

/// A stored object of kind `K`.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<K: Object> {
    /// Server-assigned UUID.
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Unique per tenant and kind.
    pub name: String,
    /// What the tenant asked for.
    pub spec: K::Spec,
    /// Last status written by the reconciler.
    pub status: K::Status,
    /// The version `status` was derived from.
    pub observed_version: i64,
    /// Who created it.
    pub creators: Vec<String>,
    /// Incremented on every change of the desired state.
    pub version: i64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Set once deletion was requested.
    pub deleted_at: Option<DateTime<Utc>>,
    /// Labels and annotations.
    pub labels: Labels,
}

impl<K: Object> Record<K> {
    /// A new object, version 1, with the default (pending) status.
    pub fn new(id: String, tenant: &str, name: &str, creator: &str, spec: K::Spec, now: DateTime<Utc>) -> Self {
        Self {
            id,
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            spec,
            status: K::Status::default(),
            observed_version: 0,
            creators: vec![creator.to_owned()],
            version: 1,
            created_at: now,
            deleted_at: None,
            labels: Labels::default(),
        }
    }

    /// The object as the API returns it.
    pub fn to_api(&self) -> K {
        let metadata =
            Metadata::new(&self.name, &self.tenant, (self.created_at, self.deleted_at), &self.creators, self.version, &self.labels);
        K::assemble(self.id.clone(), metadata, self.spec.clone(), self.status.clone())
    }

    /// Whether the reconciler has not yet written a status for the current version.
    pub fn unacknowledged(&self) -> bool {
        self.observed_version < self.version
    }

    /// The record a stored row holds.
    pub fn from_row(row: &Row) -> Result<Self, StoreError> {
        Ok(Self::from_parts(row, serde_json::from_str(&row.spec)?, serde_json::from_str(&row.status)?))
    }

    /// The record of the row `row` whose spec and status are `spec` and
    /// `status` (read already: a VM's row holds more than its spec).
    pub(super) fn from_parts(row: &Row, spec: K::Spec, status: K::Status) -> Self {
        Self {
            id: row.id.clone(),
            tenant: row.tenant.clone(),
            name: row.name.clone(),
            spec,
            status,
            observed_version: row.observed_version,
            creators: row.creators.clone(),
            version: row.version,
            created_at: row.created_at,
            deleted_at: row.deleted_at,
            labels: row.labels.clone(),
        }
    }

    pub(super) fn to_row(&self) -> Result<Row, StoreError> {
        self.row_with(serde_json::to_string(&self.spec)?, "{}".into())
    }

    /// The row of the record, its spec document and what was observed
    /// written already (a VM's hold more than the record).
    pub(super) fn row_with(&self, spec: String, observed: String) -> Result<Row, StoreError> {
        Ok(Row {
            id: self.id.clone(),
            kind: K::KIND,
            tenant: self.tenant.clone(),
            name: self.name.clone(),
            spec: spec.into(),
            status: serde_json::to_string(&self.status)?.into(),
            state: K::state(&self.spec, &self.status).to_owned(),
            observed: observed.into(),
            observed_version: self.observed_version,
            creators: self.creators.clone(),
            version: self.version,
            created_at: self.created_at,
            updated_at: self.created_at,
            deleted_at: self.deleted_at,
            labels: self.labels.clone(),
        })
    }
}

impl Store {
    /// Stores a new object that refers to `refs` (`(id, role)`); its name
    /// must be free in its tenant, and what it refers to must exist.
    pub async fn insert_record<K: Object>(&self, r: &Record<K>, refs: Vec<(String, String)>) -> Result<(), StoreError> {
        self.insert(&NewObject { row: r.to_row()?, refs }).await
    }

    /// The attachment that holds volume `volume` (a volume has one at a
    /// time), if any.
    pub async fn volume_holder(&self, volume: &str) -> Result<Option<VolumeAttachmentRecord>, StoreError> {
        let row = self.referrers(volume).await?.into_iter().find(|r| r.kind == vmaas_model::ObjectKind::VolumeAttachment);
        row.as_ref().map(Record::from_row).transpose()
    }

    /// The object `id` of kind `K`, if `scope` may see it.
    pub async fn get_record<K: Object>(&self, id: &str, scope: &Scope) -> Result<Record<K>, StoreError> {
        Record::from_row(&self.get(K::KIND, id, scope).await?)
    }

    /// The object of kind `K` that `reference` names (its id, else its
    /// name) if `scope` may see it.
    pub async fn find_record<K: Object>(&self, reference: &str, scope: &Scope) -> Result<Option<Record<K>>, StoreError> {
        match self.get_record::<K>(reference, scope).await {
            Ok(n) => return Ok(Some(n)),
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let f = crate::Filter { name: Some(reference.to_owned()), ..crate::Filter::all() };
        let (rows, _) = self.list(K::KIND, scope, &f).await?;
        match rows.first() {
            Some(r) => Ok(Some(self.get_record::<K>(&r.id, scope).await?)),
            None => Ok(None),
        }
    }

    /// Every object of kind `K` (for cross-object checks and the reconciler).
    pub async fn all_records<K: Object>(&self) -> Result<Vec<Record<K>>, StoreError> {
        self.all(K::KIND).await?.iter().map(Record::from_row).collect()
    }

    /// Replaces the spec of `current` if it is still at version `expected`
    /// (else a stale-version refusal); returns the new record.
    pub async fn update_record_spec<K: Object>(
        &self,
        current: &Record<K>,
        expected: i64,
        spec: K::Spec,
        now: DateTime<Utc>,
    ) -> Result<Record<K>, StoreError> {
        let state = K::state(&spec, &current.status);
        let (before, text) = (current.to_row()?, serde_json::to_string(&spec)?);
        let row = match state == before.state {
            true => self.update_spec(&before, expected, text, now).await?,
            false => self.update_spec_and_state(&before, expected, text, state, now).await?,
        };
        Record::from_row(&row)
    }

    /// Marks an object for deletion (idempotent).
    pub async fn mark_record_deleted<K: Object>(&self, id: &str, scope: &Scope, now: DateTime<Utc>) -> Result<Record<K>, StoreError> {
        Record::from_row(&self.mark_deleted(K::KIND, id, scope, now).await?)
    }

    /// Writes an object's status as the reconciler derived it from `seen`.
    pub async fn write_record_status<K: Object>(&self, seen: &Record<K>, status: &K::Status) -> Result<bool, StoreError> {
        self.write_status(&seen.to_row()?, serde_json::to_string(status)?, K::state(&seen.spec, status), "{}".into()).await
    }
}
