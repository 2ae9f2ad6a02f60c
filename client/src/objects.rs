//! The simple kinds (virtual networks, subnets, security groups), by their
//! collection path (`/subnets`): list, find by id or name, create, patch,
//! delete.

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use vmaas_model::{Envelope, Page};

use crate::{Client, Error, VmQuery};

impl Client {
    /// Every object of the collection `path` the caller may see (first 1000).
    pub async fn list_objects<T: DeserializeOwned>(&self, path: &str) -> Result<Page<T>, Error> {
        self.list_objects_where(path, None).await
    }

    /// The objects of the collection `path` that `filter` (CEL) holds for (first 1000).
    pub async fn list_objects_where<T: DeserializeOwned>(&self, path: &str, filter: Option<&str>) -> Result<Page<T>, Error> {
        let q = VmQuery { limit: Some(1000), filter: filter.map(str::to_owned), ..Default::default() };
        self.call::<(), _>(Method::GET, path, Some(&q), None).await?.ok_or_else(|| Error::Decode("empty list".into()))
    }

    /// The object `id` of collection `path` (for kinds named by their id, such as images).
    pub async fn get_object<T: DeserializeOwned>(&self, path: &str, id: &str) -> Result<T, Error> {
        self.object::<(), _>(Method::GET, &format!("{path}/{id}"), None).await
    }

    /// The object of collection `path` with this id, or else this name.
    pub async fn find_object<T: DeserializeOwned>(&self, path: &str, name_or_id: &str) -> Result<T, Error> {
        if uuid::Uuid::parse_str(name_or_id).is_ok() {
            return self.object::<(), _>(Method::GET, &format!("{path}/{name_or_id}"), None).await;
        }
        let page: Page<T> = self
            .call::<(), _>(Method::GET, path, Some(&VmQuery { name: Some(name_or_id.to_owned()), ..Default::default() }), None)
            .await?
            .ok_or_else(|| Error::Decode("empty list".into()))?;
        page.items.into_iter().next().ok_or_else(|| Error::Api {
            status: 404,
            code: 5,
            message: format!("{} {name_or_id:?} not found", path.trim_start_matches('/').trim_end_matches('s').replace('_', " ")),
            details: vec![],
        })
    }

    /// Creates an object in collection `path`.
    pub async fn create_object<B: Serialize, T: DeserializeOwned>(&self, path: &str, object: &B) -> Result<T, Error> {
        self.object(Method::POST, path, Some(&Envelope { object })).await
    }

    /// Changes object `id` of collection `path`.
    pub async fn patch_object<B: Serialize, T: DeserializeOwned>(&self, path: &str, id: &str, object: &B) -> Result<T, Error> {
        self.object(Method::PATCH, &format!("{path}/{id}"), Some(&Envelope { object })).await
    }

    /// Starts deleting object `id` of collection `path`.
    pub async fn delete_object<T: DeserializeOwned>(&self, path: &str, id: &str) -> Result<T, Error> {
        self.object::<(), _>(Method::DELETE, &format!("{path}/{id}"), None).await
    }
}

impl Client {
    /// The quota of `tenant` with its usage (`{tenant, metadata, spec, status}`).
    pub async fn quota(&self, tenant: &str) -> Result<serde_json::Value, Error> {
        self.object::<(), _>(Method::GET, &format!("/tenants/{tenant}/quota"), None).await
    }

    /// Sets the quota of `tenant` to the limits `spec` (administrators).
    pub async fn set_quota(&self, tenant: &str, spec: &serde_json::Value) -> Result<serde_json::Value, Error> {
        self.object(Method::PUT, &format!("/tenants/{tenant}/quota"), Some(&serde_json::json!({"object": {"spec": spec}}))).await
    }

    /// Removes the quota of `tenant`: unlimited again (administrators).
    pub async fn delete_quota(&self, tenant: &str) -> Result<serde_json::Value, Error> {
        self.object::<(), _>(Method::DELETE, &format!("/tenants/{tenant}/quota"), None).await
    }
}
