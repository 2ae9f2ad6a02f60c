//! `osac.public.v1.ComputeInstanceCatalogItems`, typed: an item read from
//! and written to its message field by field (a field's default between
//! `google.protobuf.Value` and JSON), a [`Served`] kind whose list and read
//! are the catalog's own (a tenant sees published items only).

use prost_reflect::DescriptorPool;
use prost_types::value::Kind as ValueKind;
use serde_json::{Number, Value as Json};
use tonic::{Request, Response};
use vmaas_model::catalog_item::PatchCatalogItem;
use vmaas_model::{CatalogItemSpec, ComputeInstanceCatalogItem, CreateObject, FieldDefinition, ValidationErrors};

use super::Reply;
use super::kinds::Served;
use super::mask::Mask;
use super::meta::{changed_metadata, key, metadata, reference};
use super::networking::create;
use super::{Ctx, count};
use crate::app::resources::catalog_items;
use crate::grpc::pb::osac::public::v1 as pb;

impl Served for ComputeInstanceCatalogItem {
    type Pb = pb::ComputeInstanceCatalogItem;
    const MESSAGE: &'static str = "osac.public.v1.ComputeInstanceCatalogItem";

    fn to_pb(_: &DescriptorPool, item: Self) -> pb::ComputeInstanceCatalogItem {
        let s = item.spec;
        let (id, name) = reference(&s.template);
        pb::ComputeInstanceCatalogItem {
            id: item.id,
            metadata: Some(metadata(item.metadata)),
            title: s.title,
            description: s.description,
            template: (!s.template.is_empty()).then(|| pb::ComputeInstanceTemplateReference { id, name, ..Default::default() }),
            published: s.published,
            field_definitions: s.field_definitions.into_iter().map(field_pb).collect(),
        }
    }

    fn id(item: &pb::ComputeInstanceCatalogItem) -> &str {
        &item.id
    }

    fn create_request(item: pb::ComputeInstanceCatalogItem) -> Result<CreateObject<CatalogItemSpec>, ValidationErrors> {
        let spec = CatalogItemSpec {
            title: item.title,
            description: item.description,
            template: item.template.as_ref().and_then(|r| key(&r.id, &r.name)).unwrap_or_default(),
            published: item.published,
            field_definitions: item.field_definitions.into_iter().map(field).collect(),
        };
        Ok(create(item.id, item.metadata, spec))
    }

    fn patch_request(item: pb::ComputeInstanceCatalogItem, mask: &Mask) -> Result<PatchCatalogItem, ValidationErrors> {
        let template = item.template.as_ref().and_then(|r| key(&r.id, &r.name));
        let defs = &item.field_definitions;
        Ok(PatchCatalogItem {
            metadata: changed_metadata(item.metadata, mask),
            title: mask.wants("title", !item.title.is_empty()).then_some(item.title),
            description: mask.wants("description", !item.description.is_empty()).then_some(item.description),
            template: template.filter(|_| mask.touches("template", true)),
            published: mask.wants("published", item.published).then_some(item.published),
            field_definitions: mask
                .touches("field_definitions", !defs.is_empty())
                .then(|| item.field_definitions.into_iter().map(field).collect()),
        })
    }
}

fn field(f: pb::FieldDefinition) -> FieldDefinition {
    FieldDefinition {
        path: f.path,
        display_name: f.display_name,
        editable: f.editable,
        default: f.default.map(json_of),
        validation_schema: f.validation_schema,
    }
}

fn field_pb(f: FieldDefinition) -> pb::FieldDefinition {
    pb::FieldDefinition {
        path: f.path,
        display_name: f.display_name,
        editable: f.editable,
        default: f.default.map(value_of),
        validation_schema: f.validation_schema,
    }
}

/// A `google.protobuf.Value` as JSON.
fn json_of(v: prost_types::Value) -> Json {
    match v.kind {
        None | Some(ValueKind::NullValue(_)) => Json::Null,
        Some(ValueKind::NumberValue(n)) => Number::from_f64(n).map_or(Json::Null, |n| {
            // A whole number stays one, as JSON wrote it.
            n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map_or(Json::Number(n), |f| Json::from(f as i64))
        }),
        Some(ValueKind::StringValue(s)) => Json::String(s),
        Some(ValueKind::BoolValue(b)) => Json::Bool(b),
        Some(ValueKind::StructValue(s)) => Json::Object(s.fields.into_iter().map(|(k, v)| (k, json_of(v))).collect()),
        Some(ValueKind::ListValue(l)) => Json::Array(l.values.into_iter().map(json_of).collect()),
    }
}

/// JSON as a `google.protobuf.Value`.
fn value_of(v: Json) -> prost_types::Value {
    let kind = match v {
        Json::Null => ValueKind::NullValue(0),
        Json::Bool(b) => ValueKind::BoolValue(b),
        Json::Number(n) => ValueKind::NumberValue(n.as_f64().unwrap_or_default()),
        Json::String(s) => ValueKind::StringValue(s),
        Json::Array(a) => ValueKind::ListValue(prost_types::ListValue { values: a.into_iter().map(value_of).collect() }),
        Json::Object(m) => ValueKind::StructValue(prost_types::Struct { fields: m.into_iter().map(|(k, v)| (k, value_of(v))).collect() }),
    };
    prost_types::Value { kind: Some(kind) }
}

/// The service.
pub struct ComputeInstanceCatalogItems(pub Ctx);

#[tonic::async_trait]
impl pb::compute_instance_catalog_items_server::ComputeInstanceCatalogItems for ComputeInstanceCatalogItems {
    async fn list(&self, req: Request<pb::ComputeInstanceCatalogItemsListRequest>) -> Reply<pb::ComputeInstanceCatalogItemsListResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let lr = self.0.list_request(q.offset, q.limit, q.filter, q.order)?;
        let listed = catalog_items::list(&self.0.state, &caller, lr).await.map_err(|e| self.0.status(e))?;
        let items = listed.items.iter().map(|j| self.0.stored::<ComputeInstanceCatalogItem>(j)).collect::<Result<Vec<_>, _>>()?;
        Ok(Response::new(pb::ComputeInstanceCatalogItemsListResponse {
            size: count(items.len() as u64),
            total: count(listed.total),
            items,
        }))
    }

    async fn get(&self, req: Request<pb::ComputeInstanceCatalogItemsGetRequest>) -> Reply<pb::ComputeInstanceCatalogItemsGetResponse> {
        let caller = self.0.caller(&req).await?;
        let json = catalog_items::read(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ComputeInstanceCatalogItemsGetResponse { object: Some(self.0.stored::<ComputeInstanceCatalogItem>(&json)?) }))
    }

    async fn create(
        &self,
        req: Request<pb::ComputeInstanceCatalogItemsCreateRequest>,
    ) -> Reply<pb::ComputeInstanceCatalogItemsCreateResponse> {
        let caller = self.0.caller(&req).await?;
        let object = self.0.create_kind::<ComputeInstanceCatalogItem>(&caller, req.into_inner().object).await?;
        Ok(Response::new(pb::ComputeInstanceCatalogItemsCreateResponse { object: Some(object), warnings: vec![] }))
    }

    async fn update(
        &self,
        req: Request<pb::ComputeInstanceCatalogItemsUpdateRequest>,
    ) -> Reply<pb::ComputeInstanceCatalogItemsUpdateResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let object = self.0.update_kind::<ComputeInstanceCatalogItem>(&caller, q.object, q.update_mask).await?;
        Ok(Response::new(pb::ComputeInstanceCatalogItemsUpdateResponse { object: Some(object), warnings: vec![] }))
    }

    async fn delete(
        &self,
        req: Request<pb::ComputeInstanceCatalogItemsDeleteRequest>,
    ) -> Reply<pb::ComputeInstanceCatalogItemsDeleteResponse> {
        let caller = self.0.caller(&req).await?;
        self.0.delete_kind::<ComputeInstanceCatalogItem>(&caller, &req.get_ref().id).await?;
        Ok(Response::new(pb::ComputeInstanceCatalogItemsDeleteResponse {}))
    }
}
