//! Virtual networks in the store: the tenant's spec, the status the
//! reconciler wrote.

use chrono::{DateTime, Utc};
use vmaas_model::network::VIRTUAL_NETWORK_TYPE_URL;
use vmaas_model::{Metadata, ObjectKind, VirtualNetwork, VirtualNetworkSpec, VirtualNetworkStatus};

use super::objects::{Filter, NewObject, Row};
use super::{Scope, Store, StoreError};

const KIND: ObjectKind = ObjectKind::VirtualNetwork;

/// A stored virtual network.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkRecord {
    /// Server-assigned UUID.
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Unique per tenant.
    pub name: String,
    /// What the tenant asked for.
    pub spec: VirtualNetworkSpec,
    /// Last status written by the reconciler.
    pub status: VirtualNetworkStatus,
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
}

impl NetworkRecord {
    /// A new network, version 1, PENDING.
    pub fn new(id: String, tenant: &str, name: &str, creator: &str, spec: VirtualNetworkSpec, now: DateTime<Utc>) -> Self {
        Self {
            id,
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            spec,
            status: VirtualNetworkStatus::default(),
            observed_version: 0,
            creators: vec![creator.to_owned()],
            version: 1,
            created_at: now,
            deleted_at: None,
        }
    }

    /// The network as the API returns it.
    pub fn to_api(&self) -> VirtualNetwork {
        VirtualNetwork {
            type_url: VIRTUAL_NETWORK_TYPE_URL.into(),
            id: self.id.clone(),
            metadata: Metadata {
                name: self.name.clone(),
                tenant: self.tenant.clone(),
                creation_timestamp: self.created_at,
                deletion_timestamp: self.deleted_at,
                creators: self.creators.clone(),
                version: self.version,
            },
            spec: self.spec.clone(),
            status: self.status.clone(),
        }
    }

    /// Whether the reconciler has not yet written a status for the current version.
    pub fn unacknowledged(&self) -> bool {
        self.observed_version < self.version
    }

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            id: row.id.clone(),
            tenant: row.tenant.clone(),
            name: row.name.clone(),
            spec: serde_json::from_str(&row.spec)?,
            status: serde_json::from_str(&row.status)?,
            observed_version: row.observed_version,
            creators: row.creators.clone(),
            version: row.version,
            created_at: row.created_at,
            deleted_at: row.deleted_at,
        })
    }

    fn to_row(&self) -> Result<Row, StoreError> {
        Ok(Row {
            id: self.id.clone(),
            kind: KIND,
            tenant: self.tenant.clone(),
            name: self.name.clone(),
            spec: serde_json::to_string(&self.spec)?.into(),
            status: serde_json::to_string(&self.status)?.into(),
            state: self.status.state.as_str().to_owned(),
            observed: "{}".into(),
            observed_version: self.observed_version,
            creators: self.creators.clone(),
            version: self.version,
            created_at: self.created_at,
            updated_at: self.created_at,
            deleted_at: self.deleted_at,
        })
    }
}

/// The API's JSON of a network row.
pub(super) fn api_json(row: &Row) -> Result<String, StoreError> {
    Ok(serde_json::to_string(&NetworkRecord::from_row(row)?.to_api())?)
}

impl Store {
    /// Stores a new network; its name must be free in its tenant.
    pub async fn insert_network(&self, n: &NetworkRecord) -> Result<(), StoreError> {
        self.insert(&NewObject { row: n.to_row()?, refs: Vec::new() }).await
    }

    /// The network `id`, if `scope` may see it.
    pub async fn get_network(&self, id: &str, scope: &Scope) -> Result<NetworkRecord, StoreError> {
        NetworkRecord::from_row(&self.get(KIND, id, scope).await?)
    }

    /// A page of networks as the API's JSON, and the total matching.
    pub async fn list_networks_json(&self, scope: &Scope, f: &Filter) -> Result<(Vec<std::sync::Arc<str>>, u64), StoreError> {
        self.list_json(KIND, scope, f).await
    }

    /// Marks a network for deletion (idempotent).
    pub async fn mark_network_deleted(&self, id: &str, scope: &Scope, now: DateTime<Utc>) -> Result<NetworkRecord, StoreError> {
        NetworkRecord::from_row(&self.mark_deleted(KIND, id, scope, now).await?)
    }

    /// Writes a network's status as the reconciler derived it from `seen`.
    pub async fn write_network_status(&self, seen: &NetworkRecord, status: &VirtualNetworkStatus) -> Result<bool, StoreError> {
        self.write_status(&seen.to_row()?, serde_json::to_string(status)?, status.state.as_str(), "{}".into()).await
    }
}
