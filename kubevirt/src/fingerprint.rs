//! A fingerprint of a rendered object: what is kept of the last object
//! applied, to tell whether the next one differs, without keeping it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::Value;

/// `v`'s fingerprint.
pub(crate) fn of(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    feed(v, &mut h);
    h.finish()
}

/// Feeds `v` to `h` as it is, walked rather than serialised (no text is
/// made): each value's type, then its contents, lengths first, so that no
/// two different values feed the same sequence.
fn feed(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.as_i64(), n.as_u64(), n.as_f64().map(f64::to_bits)).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            items.iter().for_each(|i| feed(i, h));
        }
        Value::Object(fields) => {
            (5u8, fields.len()).hash(h);
            for (k, v) in fields {
                k.hash(h);
                feed(v, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::of;

    #[test]
    fn the_same_object_has_the_same_fingerprint_and_any_change_another() {
        let vm = json!({"spec": {"running": true, "template": {"disks": ["a", "b"], "cores": 2, "memory": "1Gi"}}});
        assert_eq!(of(&vm), of(&vm.clone()));
        let changed = [
            json!({"spec": {"running": false, "template": {"disks": ["a", "b"], "cores": 2, "memory": "1Gi"}}}),
            json!({"spec": {"running": true, "template": {"disks": ["ab"], "cores": 2, "memory": "1Gi"}}}),
            json!({"spec": {"running": true, "template": {"disks": ["a", "b"], "cores": 2.0, "memory": "1Gi"}}}),
            json!({"spec": {"running": true, "template": {"disks": ["a", "b"], "cores": "2", "memory": "1Gi"}}}),
            json!({"spec": {"running": true, "template": {"disks": [["a"], "b"], "cores": 2, "memory": "1Gi"}}}),
            json!({"spec": {"running": true, "template": {"disks": ["a", "b"], "cores": 2, "memory": null}}}),
            json!({"spec": {"running": true, "template": {"disks": ["a", "b"], "cores": 2}}}),
        ];
        for c in &changed {
            assert_ne!(of(&vm), of(c), "{c}");
        }
    }
}
