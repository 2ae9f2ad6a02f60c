//! What every kind of object shares on the wire: server-managed metadata,
//! the `{"object": …}` envelope and list pages.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::labels::{Labels, StringMap};

/// Server-managed metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Metadata {
    /// Unique per tenant; a DNS label.
    pub name: String,
    /// The owning tenant.
    pub tenant: String,
    /// When it was created.
    pub creation_timestamp: DateTime<Utc>,
    /// When deletion was requested, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<DateTime<Utc>>,
    /// Who created it.
    pub creators: Vec<String>,
    /// Incremented on every spec change; send it back on PATCH to detect lost updates.
    pub version: i64,
    /// Key/value labels; `filter` selects on them (`this.metadata.labels['env'] == 'prod'`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: StringMap,
    /// Key/value annotations, kept as given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: StringMap,
    /// A name for people (OSAC's), kept as given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What it is for (OSAC's), kept as given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `[tenant]`: the owner as `fulfillment.v1` names it (output only).
    #[serde(default)]
    pub tenants: Vec<String>,
    /// The first of `creators`, as `osac.public.v1` names it (output only).
    #[serde(default)]
    pub creator: String,
}

impl Metadata {
    /// The metadata of an object, with the names OSAC's two APIs derive from it.
    pub fn new(
        name: &str,
        tenant: &str,
        created: (DateTime<Utc>, Option<DateTime<Utc>>),
        creators: &[String],
        version: i64,
        labels: &Labels,
    ) -> Self {
        Self {
            name: name.to_owned(),
            tenant: tenant.to_owned(),
            creation_timestamp: created.0,
            deletion_timestamp: created.1,
            creators: creators.to_vec(),
            version,
            labels: labels.labels.clone(),
            annotations: labels.annotations.clone(),
            display_name: labels.display_name.clone(),
            description: labels.description.clone(),
            tenants: if tenant.is_empty() { Vec::new() } else { vec![tenant.to_owned()] },
            creator: creators.first().cloned().unwrap_or_default(),
        }
    }
}

/// Metadata a tenant may give on create. The fields the server owns (as an
/// object read back shows them) are accepted when they say what the object
/// has ([`MetadataInput::check_owned`]); any other field is refused, so a
/// misspelt one is not dropped silently.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MetadataInput {
    /// The VM's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// On PATCH: the version the change is based on; a stale one is refused with 409.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Labels (on PATCH: replaced whole when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<StringMap>,
    /// Annotations (on PATCH: replaced whole when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<StringMap>,
    /// A name for people, at most 63 characters (on PATCH: replaced when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What it is for, at most 256 characters (on PATCH: replaced when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Accepted and ignored: the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<String>>))]
    pub tenants: Option<serde_json::Value>,
    /// Accepted and ignored: the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub creator: Option<serde_json::Value>,
    /// Accepted and ignored: vmaas has no projects.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub project: Option<serde_json::Value>,
    /// Accepted and ignored: the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub tenant: Option<serde_json::Value>,
    /// Accepted and ignored: the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub creation_timestamp: Option<serde_json::Value>,
    /// Accepted and ignored: the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub deletion_timestamp: Option<serde_json::Value>,
    /// Accepted and ignored: the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<String>>))]
    pub creators: Option<serde_json::Value>,
}

impl MetadataInput {
    /// Refuses the fields the server owns when they say something else than
    /// the object has (on a create: will have, the caller's `tenant` and
    /// `creators`), naming each under `object.metadata`: an object read
    /// back and sent again passes, but a tenant, a creator or a version of
    /// the caller's choosing is never dropped silently. On a create there
    /// is no version yet (0 or none); on a change it is the version the
    /// change is based on, checked by the store.
    pub fn check_owned(&self, tenant: &str, creators: &[String], create: bool, errs: &mut crate::ValidationErrors) {
        use serde_json::Value;
        let at = |f: &str| format!("object.metadata.{f}");
        let given = |v: &Option<Value>| v.as_ref().filter(|v| !v.is_null()).cloned();
        let list = |v: Value| match v {
            Value::Array(items) => items,
            other => vec![other],
        };
        if let Some(t) = given(&self.tenant).filter(|t| t.as_str() != Some(tenant)) {
            errs.push(at("tenant"), format!("is the server's: the object is the caller's tenant's ({tenant:?}), not {t}"));
        }
        if let Some(t) = given(&self.tenants).filter(|t| !list(t.clone()).iter().all(|x| x.as_str() == Some(tenant))) {
            errs.push(at("tenants"), format!("is the server's: the object is the caller's tenant's ({tenant:?}), not {t}"));
        }
        let known = |x: &Value| x.as_str().is_some_and(|x| creators.iter().any(|c| c == x));
        if let Some(c) = given(&self.creator).filter(|c| !known(c)) {
            errs.push(at("creator"), format!("is the server's: the object's creator is {:?}, not {c}", creators.join(", ")));
        }
        if let Some(c) = given(&self.creators).filter(|c| !list(c.clone()).iter().all(known)) {
            errs.push(at("creators"), format!("is the server's: the object's creators are {creators:?}, not {c}"));
        }
        if create && self.version.is_some_and(|v| v != 0) {
            errs.push(at("version"), "is for a change (the version it is based on): a new object has none");
        }
        if given(&self.deletion_timestamp).is_some() && create {
            errs.push(at("deletion_timestamp"), "is the server's: delete the object to delete it");
        }
    }
}

/// The request and response envelope: `{"object": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Envelope<T> {
    /// The object.
    pub object: T,
}

/// A page of a list: `{"items": [...], "size": n, "total": n}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    /// The items on this page.
    pub items: Vec<T>,
    /// How many items are on this page.
    pub size: u64,
    /// How many items match, over all pages.
    pub total: u64,
}

/// The object of a create request of a kind whose create carries a spec
/// alone: `id` may carry the name, server-owned fields are accepted and
/// ignored, anything else is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateObject<S> {
    /// Accepted and ignored.
    #[serde(rename = "@type", default, skip_serializing)]
    pub type_url: Option<String>,
    /// The name asked for, when `metadata.name` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `name` here wins over `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataInput>,
    /// What the tenant wants.
    pub spec: S,
    /// Accepted and ignored: status is the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub status: Option<serde_json::Value>,
}

impl<S> CreateObject<S> {
    /// The name asked for (`metadata.name`, else `id`), and the field it came from.
    pub fn requested_name(&self) -> Option<(&str, &'static str)> {
        requested_name(self.metadata.as_ref(), self.id.as_deref())
    }
}

/// Defines a state enum with its OSAC wire names (`PREFIX_PENDING`, …),
/// `ALL`, `as_str` and `Display`; the first variant is the default.
#[macro_export]
macro_rules! wire_states {
    ($(#[$m:meta])* $name:ident { $(#[$vm:meta])* $first:ident = $fw:literal, $($(#[$vms:meta])* $v:ident = $w:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum $name {
            $(#[$vm])*
            #[default]
            #[serde(rename = $fw)]
            $first,
            $($(#[$vms])* #[serde(rename = $w)] $v,)*
        }

        impl $name {
            /// Every state.
            pub const ALL: &'static [Self] = &[Self::$first, $(Self::$v,)*];

            /// Every state's wire name, in the order of [`Self::ALL`].
            pub const NAMES: &'static [&'static str] = &[$fw, $($w,)*];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::$first => $fw,
                    $(Self::$v => $w,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Defines the object of a PATCH of a kind: `metadata` (its `version`,
/// when given, must be the current one; labels and annotations replace
/// the object's whole), and `spec` with the fields that change; `@type`
/// and `id` are accepted and ignored (the path names the object).
#[macro_export]
macro_rules! patch_object {
    ($(#[$m:meta])* $name:ident { spec: $spec:ty }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Accepted and ignored.
            #[serde(rename = "@type", default, skip_serializing)]
            pub type_url: Option<String>,
            /// Accepted and ignored (the path names the object).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub id: Option<String>,
            /// `version`, when given, must be the current one.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub metadata: Option<$crate::MetadataInput>,
            /// What changes.
            #[serde(default)]
            pub spec: $spec,
        }
    };
}

/// The name a create request asks for: `metadata.name`, else `id` (the seed
/// design's `"id": "myvm"`); and the field it came from, for errors.
pub fn requested_name<'a>(metadata: Option<&'a MetadataInput>, id: Option<&'a str>) -> Option<(&'a str, &'static str)> {
    match metadata.and_then(|m| m.name.as_deref()) {
        Some(n) => Some((n, "object.metadata.name")),
        None => id.map(|n| (n, "object.id")),
    }
}
