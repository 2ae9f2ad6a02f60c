//! The OpenAPI operations of a [`Resource`], generated from its
//! descriptor and [`super::resource::Docs`]: list, get, create, patch and
//! delete under `/api/fulfillment/v1/{plural}`, each with a unique
//! operation id (`create_volume`), and the schemas they name.

use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use vmaas_model::{CreateObject, Page};

use super::query::ListQuery;
use super::resource::Resource;

/// The schemas one resource adds, by name.
type Schemas = Vec<(String, RefOr<Schema>)>;

/// `T` under its own name, with every schema it refers to.
fn named<T: ToSchema>(schemas: &mut Schemas) -> Ref {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
    Ref::from_schema_name(T::name())
}

/// `{"object": …}` around `object`, as `Envelope_{name}`.
fn envelope(name: &str, object: impl Into<RefOr<Schema>>, schemas: &mut Schemas) -> Ref {
    let full = format!("Envelope_{name}");
    let schema = ObjectBuilder::new()
        .description(Some("The request and response envelope: `{\"object\": ...}`."))
        .property("object", object)
        .required("object")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    schemas.push((full.clone(), Schema::Object(schema.build()).into()));
    Ref::from_schema_name(full)
}

/// A page of `T`s, as `Page_{name of T}`.
fn page<T: ToSchema>(schemas: &mut Schemas) -> Ref {
    let full = format!("Page_{}", T::name());
    schemas.push((full.clone(), <Page<T> as PartialSchema>::schema()));
    Ref::from_schema_name(full)
}

fn json(status: &str, description: &str, schema: Ref) -> (String, utoipa::openapi::Response) {
    let content = ContentBuilder::new().schema(Some(schema)).build();
    (status.to_owned(), ResponseBuilder::new().description(description).content("application/json", content).build())
}

/// `(status, description)` answers, each with the error body.
fn errors(answers: &[(u16, &str)]) -> Vec<(String, utoipa::openapi::Response)> {
    answers.iter().map(|(code, why)| json(&code.to_string(), why, Ref::from_schema_name("ApiError"))).collect()
}

/// An operation of `tag` whose doc is `text` (its first line the summary).
fn operation(tag: &str, id: String, text: &str, answers: Vec<(String, utoipa::openapi::Response)>) -> OperationBuilder {
    let (summary, description) = text.split_once('\n').map_or((text, None), |(s, d)| (s, Some(d.trim())));
    let mut op = OperationBuilder::new()
        .tag(tag)
        .operation_id(Some(id))
        .summary(Some(summary))
        .description(description)
        .security(SecurityRequirement::new("bearer", Vec::<String>::new()));
    for (status, r) in answers {
        op = op.response(status, r);
    }
    op
}

fn body(schema: Ref) -> utoipa::openapi::request_body::RequestBody {
    RequestBodyBuilder::new()
        .required(Some(Required::True))
        .content("application/json", ContentBuilder::new().schema(Some(schema)).build())
        .build()
}

fn id_param(human: &str) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name("id")
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(format!("The {human}'s id (UUID)")))
        .schema(Some(String::schema()))
        .build()
}

/// Gives every operation whose id another one shares (utoipa names them
/// after their handler functions: `list`, `create`, …) an id that also
/// names its collection, e.g. `list_virtual_machines`.
pub(super) fn unique_operation_ids(doc: &mut OpenApi) {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for item in doc.paths.paths.values() {
        for op in [&item.get, &item.post, &item.put, &item.patch, &item.delete].into_iter().flatten() {
            *seen.entry(op.operation_id.clone().unwrap_or_default()).or_default() += 1;
        }
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        let collection = path
            .trim_start_matches(super::shared::PREFIX)
            .trim_start_matches('/')
            .replace("/{id}", "")
            .replace('/', "_")
            .replace(['{', '}'], "");
        for op in [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete].into_iter().flatten() {
            let id = op.operation_id.clone().unwrap_or_default();
            if seen.get(&id).copied().unwrap_or(0) > 1 {
                op.operation_id = Some(format!("{id}_{}", collection.trim_matches('_')));
            }
        }
    }
}

/// Adds `K`'s five operations and their schemas to `doc`.
pub(super) fn add<K: Resource>(doc: &mut OpenApi) {
    let d = K::KIND.descriptor();
    let (name, tag, docs) = (d.name, d.human_plural, &K::DOCS);
    let (collection, one) = (format!("{}/{}", super::shared::PREFIX, d.plural), format!("{}/{}/{{id}}", super::shared::PREFIX, d.plural));
    let mut schemas = Schemas::new();
    let object = envelope(&K::name(), named::<K>(&mut schemas), &mut schemas);
    let page = page::<K>(&mut schemas);
    named::<K::Spec>(&mut schemas);
    let create_name = format!("CreateObject_{}", K::Spec::name());
    let create = envelope(&create_name, <CreateObject<K::Spec> as PartialSchema>::schema(), &mut schemas);
    <CreateObject<K::Spec> as ToSchema>::schemas(&mut schemas);
    let patch = envelope(&K::Patch::name(), named::<K::Patch>(&mut schemas), &mut schemas);
    let bad = || errors(&[(400, "Invalid: the fields named and why")]);
    let missing = || errors(&[(404, "There is no such object, or it is another tenant's")]);

    let mut answers = vec![json("200", "A page", page)];
    answers.extend(bad());
    answers.extend(errors(&[(401, "No valid token")]));
    let list = operation(tag, format!("list_{name}s"), &format!("List {}, oldest first.", d.human_plural), answers)
        .parameters(Some(ListQuery::into_params(|| Some(ParameterIn::Query))));
    doc.paths.add_path_operation(&collection, vec![HttpMethod::Get], list.build());

    let mut answers = vec![json("201", "Created", object.clone())];
    answers.extend(bad());
    answers.extend(errors(docs.create_errors));
    doc.paths.add_path_operation(
        &collection,
        vec![HttpMethod::Post],
        operation(tag, format!("create_{name}"), docs.create, answers).request_body(Some(body(create))).build(),
    );

    let read = operation(
        tag,
        format!("get_{name}"),
        &format!("Get one {}.", d.human),
        [vec![json("200", "The object", object.clone())], missing()].concat(),
    );
    doc.paths.add_path_operation(&one, vec![HttpMethod::Get], read.parameters(Some([id_param(d.human)])).build());

    let answers = [vec![json("200", "Changed", object.clone())], bad(), missing(), errors(docs.patch_errors)].concat();
    let change = operation(tag, format!("patch_{name}"), docs.patch, answers).request_body(Some(body(patch)));
    doc.paths.add_path_operation(&one, vec![HttpMethod::Patch], change.parameters(Some([id_param(d.human)])).build());

    let answers = [vec![json("202", "Deletion started", object)], missing(), errors(docs.remove_errors)].concat();
    let remove = operation(tag, format!("delete_{name}"), docs.remove, answers);
    doc.paths.add_path_operation(&one, vec![HttpMethod::Delete], remove.parameters(Some([id_param(d.human)])).build());

    let components = doc.components.get_or_insert_with(Default::default);
    for (n, s) in schemas {
        components.schemas.entry(n).or_insert(s);
    }
}
