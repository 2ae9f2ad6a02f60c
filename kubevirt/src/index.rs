//! What a watch keeps beside its reflector's store, from the same events
//! in the same order: each vmaas object's cluster objects (by the
//! [`ID_LABEL`] they carry) and, for VMs, what they ask together
//! ([`Held`]). A reconcile then finds its objects, and a placement a
//! cluster's room, without reading every object the watch holds.
//!
//! As the store does, a new list (after a watch was away) is gathered
//! aside and takes the place of what was known once it is whole.

use std::collections::{HashMap, HashSet};

use kube::core::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

use crate::names::ID_LABEL;
use crate::room::Held;

/// What one object counts for.
type Tally = fn(&DynamicObject) -> Held;

/// One object known: its owner's id label and what it asks.
struct Entry {
    owner: Option<String>,
    held: Held,
}

/// The objects known at one time.
#[derive(Default)]
struct Known {
    entries: HashMap<ObjectRef<DynamicObject>, Entry>,
    by_owner: HashMap<String, HashSet<ObjectRef<DynamicObject>>>,
    total: Held,
}

impl Known {
    fn insert(&mut self, key: ObjectRef<DynamicObject>, entry: Entry) {
        self.remove(&key);
        if let Some(owner) = &entry.owner {
            self.by_owner.entry(owner.clone()).or_default().insert(key.clone());
        }
        self.total.add(&entry.held);
        self.entries.insert(key, entry);
    }

    fn remove(&mut self, key: &ObjectRef<DynamicObject>) {
        let Some(old) = self.entries.remove(key) else { return };
        if let Some(owner) = &old.owner
            && let Some(set) = self.by_owner.get_mut(owner)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_owner.remove(owner);
            }
        }
        self.total.remove(&old.held);
    }
}

/// The index of one watched kind.
pub(crate) struct Index {
    ar: ApiResource,
    tally: Option<Tally>,
    known: Known,
    /// A new list being gathered.
    next: Option<Known>,
}

impl Index {
    /// An empty index of `ar` objects, each counted by `tally` if given.
    pub(crate) fn new(ar: ApiResource, tally: Option<Tally>) -> Self {
        Self { ar, tally, known: Known::default(), next: None }
    }

    /// Follows one watch event (after the store did).
    pub(crate) fn apply(&mut self, event: &Event<DynamicObject>) {
        match event {
            Event::Apply(o) => self.known.insert(self.key(o), self.entry(o)),
            Event::Delete(o) => self.known.remove(&self.key(o)),
            Event::Init => self.next = Some(Known::default()),
            Event::InitApply(o) => {
                let (key, entry) = (self.key(o), self.entry(o));
                self.next.get_or_insert_with(Known::default).insert(key, entry);
            }
            Event::InitDone => {
                if let Some(next) = self.next.take() {
                    self.known = next;
                }
            }
        }
    }

    /// The objects whose id label is `owner` (as the label writes it).
    pub(crate) fn owned_by(&self, owner: &str) -> Vec<ObjectRef<DynamicObject>> {
        self.known.by_owner.get(owner).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    /// What the objects known ask together.
    pub(crate) fn total(&self) -> &Held {
        &self.known.total
    }

    fn key(&self, o: &DynamicObject) -> ObjectRef<DynamicObject> {
        ObjectRef::from_obj_with(o, self.ar.clone())
    }

    fn entry(&self, o: &DynamicObject) -> Entry {
        let owner = o.metadata.labels.as_ref().and_then(|l| l.get(ID_LABEL)).cloned();
        Entry { owner, held: self.tally.map(|t| t(o)).unwrap_or_default() }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ar() -> ApiResource {
        ApiResource::from_gvk_with_plural(&kube::core::GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"), "virtualmachines")
    }

    fn vm(name: &str, owner: &str, gib: u64) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": name, "namespace": "t", "labels": {ID_LABEL: owner}},
            "spec": {"template": {"spec": {"domain": {"memory": {"guest": format!("{gib}Gi")}}}}}}))
        .unwrap()
    }

    fn names(i: &Index, owner: &str) -> Vec<String> {
        let mut n: Vec<String> = i.owned_by(owner).into_iter().map(|r| r.name).collect();
        n.sort();
        n
    }

    #[test]
    fn owners_and_totals_follow_applies_deletes_and_relists() {
        let mut i = Index::new(ar(), Some(crate::room::held_by));
        i.apply(&Event::Apply(vm("a", "x", 1)));
        i.apply(&Event::Apply(vm("b", "x", 2)));
        i.apply(&Event::Apply(vm("c", "y", 4)));
        assert_eq!(names(&i, "x"), ["a", "b"]);
        assert_eq!(i.total().memory_bytes, 7 << 30);
        // Changed: counted once, as it is now; moved to another owner.
        i.apply(&Event::Apply(vm("b", "y", 8)));
        assert_eq!((names(&i, "x"), names(&i, "y")), (vec!["a".to_owned()], vec!["b".to_owned(), "c".to_owned()]));
        assert_eq!(i.total().memory_bytes, 13 << 30);
        i.apply(&Event::Delete(vm("a", "x", 1)));
        assert!(names(&i, "x").is_empty());
        assert_eq!(i.total().memory_bytes, 12 << 30);
        // A new list replaces everything once whole, not before.
        i.apply(&Event::Init);
        i.apply(&Event::InitApply(vm("d", "z", 16)));
        assert_eq!(i.total().memory_bytes, 12 << 30, "the old state until the list is whole");
        i.apply(&Event::InitDone);
        assert_eq!((names(&i, "y"), names(&i, "z")), (vec![], vec!["d".to_owned()]));
        assert_eq!(i.total().memory_bytes, 16 << 30);
    }
}
