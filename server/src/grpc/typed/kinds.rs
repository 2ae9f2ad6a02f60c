//! OSAC's services of the kinds made by the shared operations
//! ([`crate::app::kind`]), typed: a kind's [`Served`] says how its message
//! and the model's object convert, and [`served!`] writes its tonic service
//! over the five shared calls here (list, get, create, update, delete),
//! each one call into the application layer.

use prost_reflect::DescriptorPool;
use prost_types::FieldMask;
use serde::Serialize;
use serde_json::{Map, Value};
use tonic::Status;
use vmaas_model::{CreateObject, ValidationErrors, reference};

use super::mask::Mask;
use super::meta::changed_metadata;
use super::{Ctx, count, non_empty};
use crate::app::kind::{self, Kind};
use crate::app::simple::{self, Relabel};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::grpc::pb::osac::public::v1 as pb;

/// A kind served typed: its message, and the conversions each way.
pub trait Served: Kind + serde::de::DeserializeOwned {
    /// The message of one object.
    type Pb: Send + 'static;
    /// Its full name (an update's mask is checked against it).
    const MESSAGE: &'static str;

    /// The object as the message (`pool`: the descriptors `Any` values
    /// are written with).
    fn to_pb(pool: &DescriptorPool, obj: Self) -> Self::Pb;

    /// The id a message names (an update's object).
    fn id(pb: &Self::Pb) -> &str;

    /// A create's object as the model's create request; fields are named
    /// under `object.`.
    fn create_request(pb: Self::Pb) -> Result<CreateObject<Self::Spec>, ValidationErrors>;

    /// An update's object as the model's patch: the fields `mask` wants.
    fn patch_request(pb: Self::Pb, mask: &Mask) -> Result<Self::Patch, ValidationErrors>;
}

/// The update of a kind whose spec is fixed at create: the metadata
/// `mask` wants, and the spec fields it wants that are set, which the
/// application checks against the object's.
pub fn relabel<S: Serialize>(id: String, metadata: Option<pb::Metadata>, spec: &S, mask: &Mask) -> Result<Relabel, ValidationErrors> {
    let fields = match serde_json::to_value(spec) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    };
    let sent = fields.into_iter().filter(|(field, v)| mask.touches(&format!("spec.{field}"), is_set(v))).collect();
    Ok(Relabel::new(non_empty(id), changed_metadata(metadata, mask), sent))
}

/// Whether a spec field holds something (proto3 cannot tell an empty
/// field from an unset one).
fn is_set(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(_) => reference::key(v).map_or(true, |k| k.is_some()),
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
    }
}

/// A page of a list: its objects, and how many matched in all.
pub struct Page<T> {
    /// The objects.
    pub items: Vec<T>,
    /// How many there are on the page.
    pub size: i32,
    /// How many matched in all.
    pub total: i32,
}

impl Ctx {
    /// A page of the caller's `K`s.
    pub(super) async fn list_kind<K: Served>(
        &self,
        caller: &Caller,
        offset: Option<i32>,
        limit: Option<i32>,
        filter: Option<String>,
        order: Option<String>,
    ) -> Result<Page<K::Pb>, Status> {
        let req = self.list_request(offset, limit, filter, order)?;
        let listed = simple::list::<K>(&self.state, caller, req, &[]).await.map_err(|e| self.status(e))?;
        let items = listed.items.iter().map(|j| self.stored::<K>(j)).collect::<Result<Vec<_>, _>>()?;
        Ok(Page { size: count(items.len() as u64), total: count(listed.total), items })
    }

    /// The caller's `K` `id`.
    pub(super) async fn get_kind<K: Served>(&self, caller: &Caller, id: &str) -> Result<K::Pb, Status> {
        let json = simple::read::<K>(&self.state, caller, id).await.map_err(|e| self.status(e))?;
        self.stored::<K>(&json)
    }

    /// Makes the `K` `object` asks for.
    pub(super) async fn create_kind<K: Served>(&self, caller: &Caller, object: Option<K::Pb>) -> Result<K::Pb, Status> {
        let asked = K::create_request(self.required(object)?).map_err(|e| self.status(ApiError::invalid(e)))?;
        let made = kind::create::<K>(&self.state, caller, asked).await.map_err(|e| self.status(e))?;
        Ok(K::to_pb(&self.pool, made.to_api()))
    }

    /// Changes the fields of the caller's `K` that `mask` names.
    pub(super) async fn update_kind<K: Served>(
        &self,
        caller: &Caller,
        object: Option<K::Pb>,
        mask: Option<FieldMask>,
    ) -> Result<K::Pb, Status> {
        let object = self.required(object)?;
        let id = K::id(&object).to_owned();
        let mask = self.update_mask(&id, K::MESSAGE, mask)?;
        let asked = K::patch_request(object, &mask).map_err(|e| self.status(ApiError::invalid(e)))?;
        let changed = kind::patch::<K>(&self.state, caller, &id, asked).await.map_err(|e| self.status(e))?;
        Ok(K::to_pb(&self.pool, changed.to_api()))
    }

    /// Starts deleting the caller's `K` `id`.
    pub(super) async fn delete_kind<K: Served>(&self, caller: &Caller, id: &str) -> Result<(), Status> {
        kind::remove::<K>(&self.state, caller, id).await.map_err(|e| self.status(e))?;
        Ok(())
    }

    /// A `K` as the store holds it (its JSON), as the message.
    pub(super) fn stored<K: Served>(&self, json: &str) -> Result<K::Pb, Status> {
        Ok(K::to_pb(&self.pool, self.parsed(json)?))
    }

    /// An object the store or a list holds as JSON, read back into its
    /// model type (INTERNAL if it does not read: the server wrote it).
    pub(super) fn parsed<T: serde::de::DeserializeOwned>(&self, json: &str) -> Result<T, Status> {
        serde_json::from_str(json).map_err(|e| self.status(ApiError::internal(e)))
    }
}

/// The tonic service `$service` of the kind `$kind` (a [`Served`]), its
/// messages in `$pb` named `{$prefix}ListRequest` and so on.
macro_rules! served {
    ($(#[$doc:meta])* $service:ident: $kind:ty, $server:path, $pb:ident {
        $list:ident, $list_out:ident, $get:ident, $get_out:ident, $create:ident, $create_out:ident,
        $update:ident, $update_out:ident, $delete:ident, $delete_out:ident $(,)?
    }) => {
        $(#[$doc])*
        pub struct $service(pub $crate::grpc::typed::Ctx);

        #[tonic::async_trait]
        impl $server for $service {
            async fn list(&self, req: tonic::Request<$pb::$list>) -> Result<tonic::Response<$pb::$list_out>, tonic::Status> {
                let caller = self.0.caller(&req).await?;
                let q = req.into_inner();
                let page = self.0.list_kind::<$kind>(&caller, q.offset, q.limit, q.filter, q.order).await?;
                Ok(tonic::Response::new($pb::$list_out { size: page.size, total: page.total, items: page.items }))
            }

            async fn get(&self, req: tonic::Request<$pb::$get>) -> Result<tonic::Response<$pb::$get_out>, tonic::Status> {
                let caller = self.0.caller(&req).await?;
                let object = self.0.get_kind::<$kind>(&caller, &req.get_ref().id).await?;
                Ok(tonic::Response::new($pb::$get_out { object: Some(object) }))
            }

            async fn create(&self, req: tonic::Request<$pb::$create>) -> Result<tonic::Response<$pb::$create_out>, tonic::Status> {
                let caller = self.0.caller(&req).await?;
                let object = self.0.create_kind::<$kind>(&caller, req.into_inner().object).await?;
                Ok(tonic::Response::new($pb::$create_out { object: Some(object) }))
            }

            async fn update(&self, req: tonic::Request<$pb::$update>) -> Result<tonic::Response<$pb::$update_out>, tonic::Status> {
                let caller = self.0.caller(&req).await?;
                let q = req.into_inner();
                let object = self.0.update_kind::<$kind>(&caller, q.object, q.update_mask).await?;
                Ok(tonic::Response::new($pb::$update_out { object: Some(object) }))
            }

            async fn delete(&self, req: tonic::Request<$pb::$delete>) -> Result<tonic::Response<$pb::$delete_out>, tonic::Status> {
                let caller = self.0.caller(&req).await?;
                self.0.delete_kind::<$kind>(&caller, &req.get_ref().id).await?;
                Ok(tonic::Response::new($pb::$delete_out {}))
            }
        }
    };
}

pub(super) use served;
