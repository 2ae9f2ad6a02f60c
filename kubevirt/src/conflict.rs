//! Server-side apply conflicts: the fields another field manager holds that
//! vmaas asked to set. vmaas never takes them by force: it applies again
//! without them and reports them (the VM's status says which field and
//! which manager), so a change made on the cluster by someone else is
//! neither lost nor silently overwritten.

use serde_json::Value;

/// A field another manager holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The field, as the API server names it (`.spec.runStrategy`,
    /// `.spec.template.spec.networks[name="default"]`).
    pub field: String,
    /// The API server's words, naming the manager.
    pub message: String,
}

impl Conflict {
    /// The conflicts the API server's 409 answer names (none for another 409).
    pub fn of(e: &kube::Error) -> Vec<Self> {
        let kube::Error::Api(s) = e else { return Vec::new() };
        let causes = s.details.as_ref().map(|d| d.causes.as_slice()).unwrap_or_default();
        causes
            .iter()
            .filter(|c| c.reason == "FieldManagerConflict" && !c.field.is_empty())
            .map(|c| Self { field: c.field.clone(), message: c.message.clone() })
            .collect()
    }

    /// One line for a status: the field and who holds it.
    pub fn describe(conflicts: &[Self]) -> String {
        let each: Vec<String> = conflicts.iter().map(|c| format!("{} ({})", c.field, c.message)).collect();
        format!("another field manager holds fields vmaas sets, left as they are: {}", each.join("; "))
    }
}

/// One step of a field path.
#[derive(Debug, PartialEq)]
enum Step {
    /// `.name`
    Key(String),
    /// `[k="v",…]`: the list element with these values; `[="v"]`: the set element `v`.
    Select(Vec<(String, Value)>),
}

fn steps(path: &str) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(Step::Key(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let mut pairs = Vec::new();
            for pair in r[..end].split(',') {
                let (k, v) = pair.split_once('=')?;
                pairs.push((k.to_owned(), serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()))));
            }
            out.push(Step::Select(pairs));
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(out)
}

fn matches(item: &Value, pairs: &[(String, Value)]) -> bool {
    pairs.iter().all(|(k, v)| if k.is_empty() { item == v } else { item.get(k) == Some(v) })
}

/// Removes the field at `path` from `obj`; whether it was there.
pub fn remove(obj: &mut Value, path: &str) -> bool {
    let Some(mut steps) = steps(path) else { return false };
    let Some(last) = steps.pop() else { return false };
    let mut at = obj;
    for step in steps {
        let next = match step {
            Step::Key(k) => at.get_mut(&k),
            Step::Select(pairs) => at.as_array_mut().and_then(|a| a.iter_mut().find(|i| matches(i, &pairs))),
        };
        match next {
            Some(n) => at = n,
            None => return false,
        }
    }
    match last {
        Step::Key(k) => at.as_object_mut().and_then(|o| o.remove(&k)).is_some(),
        Step::Select(pairs) => match at.as_array_mut() {
            Some(a) => {
                let before = a.len();
                a.retain(|i| !matches(i, &pairs));
                a.len() < before
            }
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn removes_keys_list_elements_and_set_elements() {
        let mut vm = json!({"spec": {"runStrategy": "Always", "template": {"spec": {
            "networks": [{"name": "default", "pod": {}}, {"name": "lab", "multus": {"networkName": "x"}}],
            "ports": [{"port": 80, "protocol": "TCP"}]}}}, "metadata": {"finalizers": ["a", "b"]}});
        assert!(remove(&mut vm, ".spec.runStrategy"));
        assert!(remove(&mut vm, ".spec.template.spec.networks[name=\"lab\"].multus"));
        assert!(remove(&mut vm, ".spec.template.spec.ports[port=80,protocol=\"TCP\"]"));
        assert!(remove(&mut vm, ".metadata.finalizers[=\"a\"]"));
        assert!(!remove(&mut vm, ".spec.nothing.here"));
        assert_eq!(
            vm,
            json!({"spec": {"template": {"spec": {"networks": [{"name": "default", "pod": {}}, {"name": "lab"}], "ports": []}}},
                "metadata": {"finalizers": ["b"]}})
        );
    }
}
