//! The typed record of a tenant's object of a simple kind (a spec, a
//! status with a state, no observed host state): what networks and subnets
//! share, over the generic rows of [`super::objects`].

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use vmaas_model::{Labels, Metadata, ObjectKind};

use super::row::{NewObject, Row};
use super::{Scope, Store, StoreError};

/// A kind stored as a [`Record`].
pub trait Kind {
    /// The kind.
    const KIND: ObjectKind;
    /// What the tenant asks for.
    type Spec: Serialize + DeserializeOwned + Clone + PartialEq;
    /// What the object is now.
    type Status: Serialize + DeserializeOwned + Clone + Default + PartialEq;
    /// The API's object.
    type Api: Serialize;

    /// The wire name of the status's state (stored for filtering).
    fn state(status: &Self::Status) -> &'static str;

    /// The API's object from its parts.
    fn api(id: String, metadata: Metadata, spec: Self::Spec, status: Self::Status) -> Self::Api;
}

/// Declares a [`Kind`] of the store: its marker type, the object kind,
/// the model's spec, status and API types, and the `@type` of the API's
/// object (whose status has a `state` with `as_str`).
#[macro_export]
macro_rules! record_kind {
    ($(#[$m:meta])* $name:ident: $kind:expr, $spec:ty, $status:ty, $api:ident, $type_url:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name;

        impl $crate::record::Kind for $name {
            const KIND: vmaas_model::ObjectKind = $kind;
            type Spec = $spec;
            type Status = $status;
            type Api = $api;

            fn state(status: &$status) -> &'static str {
                status.state.as_str()
            }

            fn api(id: String, metadata: vmaas_model::Metadata, spec: $spec, status: $status) -> $api {
                $api { type_url: $type_url.into(), id, metadata, spec, status }
            }
        }
    };
}

/// A stored object of kind `K`.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<K: Kind> {
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

impl<K: Kind> Record<K> {
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
    pub fn to_api(&self) -> K::Api {
        let metadata =
            Metadata::new(&self.name, &self.tenant, (self.created_at, self.deleted_at), &self.creators, self.version, &self.labels);
        K::api(self.id.clone(), metadata, self.spec.clone(), self.status.clone())
    }

    /// Whether the reconciler has not yet written a status for the current version.
    pub fn unacknowledged(&self) -> bool {
        self.observed_version < self.version
    }

    /// The record a stored row holds.
    pub fn from_row(row: &Row) -> Result<Self, StoreError> {
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
            labels: row.labels.clone(),
        })
    }

    pub(super) fn to_row(&self) -> Result<Row, StoreError> {
        Ok(Row {
            id: self.id.clone(),
            kind: K::KIND,
            tenant: self.tenant.clone(),
            name: self.name.clone(),
            spec: serde_json::to_string(&self.spec)?.into(),
            status: serde_json::to_string(&self.status)?.into(),
            state: K::state(&self.status).to_owned(),
            observed: "{}".into(),
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

/// The API's JSON of a row of kind `K`.
pub(super) fn api_json<K: Kind>(row: &Row) -> Result<String, StoreError> {
    Ok(serde_json::to_string(&Record::<K>::from_row(row)?.to_api())?)
}

impl Store {
    /// Stores a new object that refers to `refs` (`(id, role)`); its name
    /// must be free in its tenant, and what it refers to must exist.
    pub async fn insert_record<K: Kind>(&self, r: &Record<K>, refs: Vec<(String, String)>) -> Result<(), StoreError> {
        self.insert(&NewObject { row: r.to_row()?, refs }).await
    }

    /// The object `id` of kind `K`, if `scope` may see it.
    pub async fn get_record<K: Kind>(&self, id: &str, scope: &Scope) -> Result<Record<K>, StoreError> {
        Record::from_row(&self.get(K::KIND, id, scope).await?)
    }

    /// The object of kind `K` that `reference` names (its id, else its
    /// name) if `scope` may see it.
    pub async fn find_record<K: Kind>(&self, reference: &str, scope: &Scope) -> Result<Option<Record<K>>, StoreError> {
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
    pub async fn all_records<K: Kind>(&self) -> Result<Vec<Record<K>>, StoreError> {
        self.all(K::KIND).await?.iter().map(Record::from_row).collect()
    }

    /// Replaces the spec of `current` if it is still at version `expected`
    /// (else a stale-version refusal); returns the new record.
    pub async fn update_record_spec<K: Kind>(
        &self,
        current: &Record<K>,
        expected: i64,
        spec: K::Spec,
        now: DateTime<Utc>,
    ) -> Result<Record<K>, StoreError> {
        let row = self.update_spec(&current.to_row()?, expected, serde_json::to_string(&spec)?, now).await?;
        Record::from_row(&row)
    }

    /// Marks an object for deletion (idempotent).
    pub async fn mark_record_deleted<K: Kind>(&self, id: &str, scope: &Scope, now: DateTime<Utc>) -> Result<Record<K>, StoreError> {
        Record::from_row(&self.mark_deleted(K::KIND, id, scope, now).await?)
    }

    /// Writes an object's status as the reconciler derived it from `seen`.
    pub async fn write_record_status<K: Kind>(&self, seen: &Record<K>, status: &K::Status) -> Result<bool, StoreError> {
        self.write_status(&seen.to_row()?, serde_json::to_string(status)?, K::state(status), "{}".into()).await
    }
}
