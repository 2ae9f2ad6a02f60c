//! A method's HTTP rule (`google.api.http`), read from its options, and the
//! REST request it makes of a gRPC request: the path with its `{field}`
//! variables filled in, and the other fields as query parameters.

use axum::http::Method;
use prost_reflect::{DynamicMessage, ExtensionDescriptor, MethodDescriptor, Value};
use tonic::Status;

/// How one method is served as REST.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The HTTP method.
    pub method: Method,
    /// The path template, as `/api/fulfillment/v1/virtual_machines/{id}`.
    pub template: String,
    /// The request field sent as the body (`object`), if any.
    pub body: Option<String>,
    /// The response field the REST body fills (`object`); absent: the whole response.
    pub response_body: Option<String>,
}

impl Rule {
    /// The rule of `method`, if its options carry one.
    pub fn of(method: &MethodDescriptor, http: &ExtensionDescriptor) -> Option<Self> {
        let options = method.options();
        if !options.has_extension(http) {
            return None;
        }
        let value = options.get_extension(http);
        let rule = value.as_message()?;
        let text = |name: &str| rule.get_field_by_name(name).and_then(|v| v.as_str().map(str::to_owned)).filter(|s| !s.is_empty());
        let verbs =
            [("get", Method::GET), ("put", Method::PUT), ("post", Method::POST), ("delete", Method::DELETE), ("patch", Method::PATCH)];
        let (method, template) = verbs.into_iter().find_map(|(name, m)| text(name).map(|t| (m, t)))?;
        Some(Self { method, template, body: text("body"), response_body: text("response_body") })
    }

    /// The path and query `req` asks for. Path variables must be set; the
    /// top-level scalar fields not in the path or the body become the query.
    pub fn uri(&self, req: &DynamicMessage) -> Result<String, Status> {
        let mut path = String::with_capacity(self.template.len() + 40);
        let mut used = Vec::new();
        let mut rest = self.template.as_str();
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map(|c| open + c).ok_or_else(|| Status::internal("bad path template"))?;
            path.push_str(&rest[..open]);
            let var = &rest[open + 1..close];
            let value = field_text(req, var).filter(|v| !v.is_empty());
            let value = value.ok_or_else(|| Status::invalid_argument(format!("{var}: is required")))?;
            path.push_str(&escape_segment(&value));
            used.push(var.split('.').next().unwrap_or(var).to_owned());
            rest = &rest[close + 1..];
        }
        path.push_str(rest);
        let query = self.query(req, &used);
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query);
        }
        Ok(path)
    }

    /// The top-level request fields the path template binds (`{id}`,
    /// `{object.id}`: `id`, `object`); with a body of `*` they are not in
    /// the body (google.api.http).
    pub fn path_fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = self.template.as_str();
        while let (Some(open), Some(close)) = (rest.find('{'), rest.find('}')) {
            if close < open {
                break;
            }
            let var = &rest[open + 1..close];
            out.push(var.split('.').next().unwrap_or(var).to_owned());
            rest = &rest[close + 1..];
        }
        out
    }

    /// The set scalar fields of `req` outside the path and the body, as a query string.
    fn query(&self, req: &DynamicMessage, used: &[String]) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (field, value) in req.fields() {
            let name = field.name();
            if used.iter().any(|u| u == name) || self.body.as_deref().is_some_and(|b| b == name || b == "*") {
                continue;
            }
            if let Some(text) = scalar_text(value) {
                q.append_pair(name, &text);
            }
        }
        q.finish()
    }
}

/// The text of the scalar field at dotted `path` in `msg`.
fn field_text(msg: &DynamicMessage, path: &str) -> Option<String> {
    let (head, tail) = match path.split_once('.') {
        Some((h, t)) => (h, Some(t)),
        None => (path, None),
    };
    let value = msg.get_field_by_name(head)?;
    match tail {
        Some(t) => field_text(value.as_message()?, t),
        None => scalar_text(&value),
    }
}

/// A scalar as text (enums by number); `None` for messages, lists and maps.
fn scalar_text(v: &Value) -> Option<String> {
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::I32(n) | Value::EnumNumber(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F32(n) => n.to_string(),
        Value::F64(n) => n.to_string(),
        _ => return None,
    })
}

/// `s` percent-encoded as one path segment.
fn escape_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_escaped() {
        assert_eq!(escape_segment("web-1"), "web-1");
        assert_eq!(escape_segment("a/b c"), "a%2Fb%20c");
    }
}

#[cfg(test)]
mod rule_tests {
    use prost_reflect::DescriptorPool;

    use super::*;

    #[test]
    fn rules_are_read_from_the_descriptors() {
        let pool = DescriptorPool::decode(crate::grpc::DESCRIPTORS).unwrap();
        let http = pool.get_extension_by_name("google.api.http").expect("the http option is declared");
        let create =
            pool.get_service_by_name("fulfillment.v1.VirtualMachineTemplates").unwrap().methods().find(|m| m.name() == "Create").unwrap();
        let rule = Rule::of(&create, &http).expect("Create has a rule");
        assert_eq!(rule.method, Method::POST);
        assert_eq!(rule.template, "/api/fulfillment/v1/virtual_machine_templates");
        assert_eq!((rule.body.as_deref(), rule.response_body.as_deref()), (Some("object"), Some("object")));
        assert!(rule.path_fields().is_empty());
        let restore =
            pool.get_service_by_name("vmaas.v1.ComputeInstanceSnapshots").unwrap().methods().find(|m| m.name() == "Restore").unwrap();
        let rule = Rule::of(&restore, &http).expect("Restore has a rule");
        assert_eq!(
            (rule.body.as_deref(), rule.path_fields()),
            (Some("*"), vec!["compute_instance".to_owned()]),
            "bound by the path, not in the body"
        );
    }
}
