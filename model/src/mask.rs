//! Field masks (`update_mask`) over an object's JSON: the fields a mask
//! names, with what says which object and which version is changed.

use serde_json::{Map, Value};

/// The fields of `object` that `paths` (dotted, as `spec.run_strategy`)
/// name, with `id` and a set `metadata.version`; paths the object lacks
/// are left out.
pub fn masked(object: &Value, paths: &[&str]) -> Value {
    let mut out = Value::Object(Map::new());
    for path in paths {
        let steps: Vec<&str> = path.split('.').collect();
        if let Some(v) = lookup(object, &steps) {
            insert(&mut out, &steps, v.clone());
        }
    }
    for keep in [&["id"][..], &["metadata", "version"][..]] {
        if let Some(v) = lookup(object, keep).filter(|v| !(v.is_null() || *v == &Value::from("") || *v == &Value::from(0))) {
            insert(&mut out, keep, v.clone());
        }
    }
    out
}

/// As [`masked`], but a path the object lacks is kept as `null` (outside
/// the maps `metadata.labels` and `metadata.annotations`), so that decoding
/// into a type that refuses unknown fields names a path that is no field
/// (`null` is "no change" for a field that is one).
pub fn masked_checked(object: &Value, paths: &[&str]) -> Value {
    let mut out = masked(object, paths);
    for path in paths {
        let steps: Vec<&str> = path.split('.').collect();
        let in_map = matches!(steps.as_slice(), ["metadata", "labels" | "annotations", _, ..]);
        if !in_map && lookup(object, &steps).is_none() {
            insert(&mut out, &steps, Value::Null);
        }
    }
    out
}

/// The paths of a mask as a query parameter sends it (`a.b,c`), with
/// lowerCamelCase steps (ProtoJSON's) as the snake_case field names.
pub fn paths(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|p| !p.is_empty()).map(snake_path).collect()
}

fn snake_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 4);
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn lookup<'a>(v: &'a Value, steps: &[&str]) -> Option<&'a Value> {
    steps.iter().try_fold(v, |v, s| v.get(s))
}

fn insert(out: &mut Value, steps: &[&str], v: Value) {
    let Some((last, parents)) = steps.split_last() else { return };
    let mut at = out;
    for s in parents {
        let Value::Object(m) = at else { return };
        at = m.entry(s.to_string()).or_insert_with(|| Value::Object(Map::new()));
    }
    if let Value::Object(m) = at {
        m.insert(last.to_string(), v);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_masked_fields_are_kept_with_the_id_and_version() {
        let o = json!({"id": "vm-1", "metadata": {"name": "web", "version": 4, "labels": {"a": "b"}},
            "spec": {"template": "t", "state": "stopped", "user_data": ""}});
        assert_eq!(
            masked(&o, &["spec.state", "spec.user_data", "spec.absent"]),
            json!({"id": "vm-1", "metadata": {"version": 4}, "spec": {"state": "stopped", "user_data": ""}})
        );
        assert_eq!(masked(&json!({"id": "", "metadata": {"version": 0}}), &["metadata.labels"]), json!({}));
    }

    #[test]
    fn checked_masks_keep_what_the_object_lacks_as_null() {
        let o = json!({"id": "vm-1", "spec": {"state": "stopped"}});
        assert_eq!(
            masked_checked(&o, &["spec.state", "spec.colour", "metadata.labels.env"]),
            json!({"id": "vm-1", "spec": {"state": "stopped", "colour": null}})
        );
    }

    #[test]
    fn query_paths_are_split_and_snake_cased() {
        assert_eq!(paths(" spec.runStrategy, metadata.labels ,,"), ["spec.run_strategy", "metadata.labels"]);
    }
}
