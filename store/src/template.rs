//! Templates in the store: global objects named by their template id.

use chrono::{DateTime, Utc};
use vmaas_model::template::{TEMPLATE_TYPE_URL, TemplateMetadata};
use vmaas_model::{ObjectKind, VirtualMachineTemplate};

use super::row::{Filter, NewObject, Row};
use super::{Scope, Store, StoreError};

const KIND: ObjectKind = ObjectKind::Template;

/// The object id of template `id`: kinds share one id space.
pub fn object_id(id: &str) -> String {
    format!("template:{id}")
}

/// A stored template.
#[derive(Debug, Clone)]
pub struct TemplateRecord {
    /// The template as published (without server metadata).
    pub template: VirtualMachineTemplate,
    /// Incremented on every change.
    pub version: i64,
    /// First published.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl TemplateRecord {
    /// The template as the API returns it.
    pub fn to_api(&self) -> VirtualMachineTemplate {
        let mut t = self.template.clone();
        t.type_url = Some(TEMPLATE_TYPE_URL.into());
        t.metadata = Some(TemplateMetadata {
            creation_timestamp: Some(self.created_at),
            update_timestamp: Some(self.updated_at),
            version: Some(self.version),
            name: None,
        });
        t
    }

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            template: serde_json::from_str(&row.spec)?,
            version: row.version,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

/// The API's JSON of a template row.
pub(super) fn api_json(row: &Row) -> Result<String, StoreError> {
    Ok(serde_json::to_string(&TemplateRecord::from_row(row)?.to_api())?)
}

impl Store {
    /// Publishes a new template.
    pub async fn insert_template(&self, t: &VirtualMachineTemplate, now: DateTime<Utc>) -> Result<TemplateRecord, StoreError> {
        let row = Row {
            id: object_id(&t.id),
            kind: KIND,
            tenant: String::new(),
            name: t.id.clone(),
            spec: serde_json::to_string(t)?.into(),
            status: "{}".into(),
            state: String::new(),
            observed: "{}".into(),
            observed_version: 1,
            creators: Vec::new(),
            version: 1,
            created_at: now,
            updated_at: now,
            deleted_at: None,
            labels: Default::default(),
        };
        self.insert(&NewObject { row, refs: Vec::new() }).await.map_err(|e| match e {
            StoreError::AlreadyExists(_) => StoreError::AlreadyExists(format!("template {:?} already exists", t.id)),
            other => other,
        })?;
        Ok(TemplateRecord { template: t.clone(), version: 1, created_at: now, updated_at: now })
    }

    /// The template `id`.
    pub async fn get_template(&self, id: &str) -> Result<TemplateRecord, StoreError> {
        match self.get(KIND, &object_id(id), &Scope::All).await {
            Ok(row) => TemplateRecord::from_row(&row),
            Err(StoreError::NotFound { kind, .. }) => Err(StoreError::NotFound { kind, id: id.to_owned() }),
            Err(e) => Err(e),
        }
    }

    /// A page of templates in id order, and the total.
    pub async fn list_templates(&self, offset: u64, limit: u64) -> Result<(Vec<TemplateRecord>, u64), StoreError> {
        let (rows, total) = self.list(KIND, &Scope::All, &Filter { offset, limit, ..Default::default() }).await?;
        Ok((rows.iter().map(TemplateRecord::from_row).collect::<Result<_, _>>()?, total))
    }

    /// Replaces a template, if `expected_version` (when given) is current.
    pub async fn update_template(
        &self,
        t: &VirtualMachineTemplate,
        expected_version: Option<i64>,
        now: DateTime<Utc>,
    ) -> Result<TemplateRecord, StoreError> {
        let row = self
            .get(KIND, &object_id(&t.id), &Scope::All)
            .await
            .map_err(|_| StoreError::NotFound { kind: "template", id: t.id.clone() })?;
        let current = TemplateRecord::from_row(&row)?;
        let base = expected_version.unwrap_or(current.version);
        if current.template == *t && base == current.version {
            return Ok(current);
        }
        let saved = self.update_spec(&row, base, serde_json::to_string(t)?, now).await.map_err(|e| match e {
            StoreError::Conflict(_) => StoreError::Conflict(format!(
                "template {:?} was changed concurrently: version {base} is not current; read it again and retry",
                t.id
            )),
            other => other,
        })?;
        TemplateRecord::from_row(&saved)
    }

    /// Removes a template no VM uses.
    pub async fn delete_template(&self, id: &str) -> Result<(), StoreError> {
        match self.delete_now(KIND, &object_id(id)).await {
            Err(StoreError::NotFound { kind, .. }) => Err(StoreError::NotFound { kind, id: id.to_owned() }),
            other => other,
        }
    }
}
