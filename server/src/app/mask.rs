//! Partial updates as OSAC's `Update` calls make them: the fields of the
//! request's object named by `update_mask` (comma-separated dotted paths),
//! or, without a mask, every field the object carries (what grpc-gateway
//! derives from a PATCH body), laid over the current object.

use serde_json::{Map, Value};

/// Lays the fields of `patch` chosen by `mask` over `current`: a masked
/// path the patch lacks is cleared; without a mask, each top-level field
/// the patch carries replaces the current one. `metadata` is the
/// server's and is left alone.
pub(crate) fn apply(current: &mut Value, patch: &Map<String, Value>, mask: Option<&str>) {
    let paths: Vec<Vec<&str>> = match mask.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => m.split(',').map(|p| p.trim().split('.').collect()).collect(),
        None => patch.keys().map(|k| vec![k.as_str()]).collect(),
    };
    for path in paths.iter().filter(|p| p.first() != Some(&"metadata")) {
        match lookup(patch, path) {
            Some(v) => set(current, path, v.clone()),
            None => clear(current, path),
        }
    }
}

fn lookup<'a>(patch: &'a Map<String, Value>, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter().try_fold(patch.get(*first)?, |v, k| v.get(*k))
}

fn set(target: &mut Value, path: &[&str], v: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = target;
    for k in parents {
        if !at.get(*k).is_some_and(Value::is_object) {
            at[*k] = Value::Object(Map::new());
        }
        at = &mut at[*k];
    }
    at[*last] = v;
}

fn clear(target: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else { return };
    let parent = parents.iter().try_fold(target, |v, k| v.get_mut(*k));
    if let Some(Value::Object(m)) = parent {
        m.remove(*last);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patch(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn fields_present_replace_the_current_ones() {
        let mut t = json!({"id": "t", "title": "old", "description": "d", "metadata": {"version": 3}});
        apply(&mut t, &patch(json!({"title": "new", "metadata": {"version": 9}})), None);
        assert_eq!(t, json!({"id": "t", "title": "new", "description": "d", "metadata": {"version": 3}}));
    }

    #[test]
    fn a_mask_takes_its_paths_only_and_clears_what_the_patch_lacks() {
        let mut t = json!({"title": "old", "description": "d", "spec_defaults": {"memory": "1Gi", "cpu_cores": 1}});
        let p = patch(json!({"title": "ignored", "spec_defaults": {"memory": "2Gi", "cpu_cores": 8}}));
        apply(&mut t, &p, Some("spec_defaults.memory, description"));
        assert_eq!(t, json!({"title": "old", "spec_defaults": {"memory": "2Gi", "cpu_cores": 1}}));
        apply(&mut t, &patch(json!({"x": {"y": 1}})), Some("x.y"));
        assert_eq!(t["x"], json!({"y": 1}));
    }
}
