//! The in-memory copy of an exclusively owned database: every object with
//! its API representation serialised once per change, and per-kind indexes
//! in list order, so reads never touch SQLite.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use vmaas_model::query::Columns;
use vmaas_model::{ObjectKind, VirtualMachine};

use super::postings::{Postings, Term};
use super::row::{Filter, Row};
use super::usage::{Amounts, HostUsage, holds};
use super::{Scope, StoreError, ts};

/// The API's JSON of a row: VMs and templates have their own; every
/// other kind's comes from its descriptor, so a new kind needs no line here.
pub(super) fn api_json(row: &Row) -> Result<String, StoreError> {
    match (row.kind, row.kind.api_json()) {
        (ObjectKind::VirtualMachine, _) => super::vm::api_json(row),
        (ObjectKind::Template, _) => super::template::api_json(row),
        (_, Some(json)) => Ok(json(row.id.clone(), row.metadata(), &row.spec, &row.status)?),
        (kind, None) => Err(StoreError::Corrupt(serde::de::Error::custom(format!("the descriptor of {kind} makes no API object")))),
    }
}

/// The API's object of a row: its JSON, and the VM itself when it is one
/// (what the typed gRPC services write from, without reading the JSON).
fn rendered(row: &Row) -> (Arc<str>, Option<Arc<VirtualMachine>>) {
    if row.kind == ObjectKind::VirtualMachine
        && let Ok(vm) = super::vm::api_object(row)
    {
        return (serde_json::to_string(&vm).unwrap_or_default().into(), Some(Arc::new(vm)));
    }
    (api_json(row).unwrap_or_default().into(), None)
}

/// An object in memory, with its API representation.
pub(super) struct Cached {
    pub(super) row: Row,
    pub(super) json: Arc<str>,
    /// The VM as the API shows it, when the object is one.
    pub(super) vm: Option<Arc<VirtualMachine>>,
    /// Its place in its kind's list order.
    pub(super) key: String,
}

/// One kind's indexes.
#[derive(Default)]
struct KindIndex {
    /// (sort key, id): every object in list order.
    order: BTreeSet<(String, String)>,
    /// (tenant, sort key, id): each tenant's objects in list order.
    by_tenant: BTreeSet<(String, String, String)>,
    /// Objects per tenant.
    counts: HashMap<String, u64>,
    /// name → (sort key, id): the objects of each name, of every tenant, in list order.
    by_name: HashMap<String, BTreeSet<(String, String)>>,
    /// The objects of each state and label value, per tenant, in list order.
    postings: Postings,
}

#[derive(Default)]
pub(super) struct MemState {
    objects: HashMap<String, Cached>,
    kinds: HashMap<ObjectKind, KindIndex>,
    /// What each tenant's rows hold ([`super::usage`]).
    usage: HashMap<String, Amounts>,
    /// Rows per kind and `status.state`.
    states: HashMap<(ObjectKind, String), u64>,
    /// What the rows hold of the host.
    host: HostUsage,
    /// (kind, target) → (sort key, id) of the rows linked to it ([`super::links`]).
    links: HashMap<(ObjectKind, String), BTreeSet<(String, String)>>,
}

fn sort_key(row: &Row) -> String {
    if row.kind.is_tenant_scoped() { ts(row.created_at) } else { row.name.clone() }
}

impl MemState {
    pub(super) fn put(&mut self, row: Row) {
        self.remove(&row.id);
        let idx = self.kinds.entry(row.kind).or_default();
        let key = sort_key(&row);
        idx.order.insert((key.clone(), row.id.clone()));
        idx.by_tenant.insert((row.tenant.clone(), key.clone(), row.id.clone()));
        idx.by_name.entry(row.name.clone()).or_default().insert((key.clone(), row.id.clone()));
        *idx.counts.entry(row.tenant.clone()).or_default() += 1;
        idx.postings.add(&row, &key);
        for vm in super::links::targets_of(&row) {
            self.links.entry((row.kind, vm)).or_default().insert((key.clone(), row.id.clone()));
        }
        self.account(&row, true);
        let (json, vm) = rendered(&row);
        self.objects.insert(row.id.clone(), Cached { row, json, vm, key });
    }

    /// Counts `row` in (`add`) or out of its tenant's usage, the host's
    /// and its state's count.
    fn account(&mut self, row: &Row, add: bool) {
        self.count_state(row.kind, &row.state, add);
        let h = holds(row);
        self.host = if add { self.host.plus(h.host) } else { self.host.minus(h.host) };
        if h.quota.is_zero() {
            return;
        }
        let was = self.usage.get(&row.tenant).copied().unwrap_or_default();
        let now = if add { was.plus(h.quota) } else { was.beyond(h.quota) };
        if now.is_zero() {
            self.usage.remove(&row.tenant);
        } else {
            self.usage.insert(row.tenant.clone(), now);
        }
    }

    fn count_state(&mut self, kind: ObjectKind, state: &str, add: bool) {
        let key = (kind, state.to_owned());
        let n = self.states.entry(key.clone()).or_default();
        *n = if add { *n + 1 } else { n.saturating_sub(1) };
        if *n == 0 {
            self.states.remove(&key);
        }
    }

    /// Rows of `kind` per `status.state`.
    pub(super) fn states(&self, kind: ObjectKind) -> impl Iterator<Item = (&str, u64)> {
        self.states.iter().filter(move |((k, _), _)| *k == kind).map(|((_, s), n)| (s.as_str(), *n))
    }

    /// What `tenant`'s rows hold.
    pub(super) fn usage(&self, tenant: &str) -> Amounts {
        self.usage.get(tenant).copied().unwrap_or_default()
    }

    /// What the rows hold of the host.
    pub(super) fn host_usage(&self) -> HostUsage {
        self.host
    }

    /// What every tenant's rows hold.
    pub(super) fn all_usage(&self) -> &HashMap<String, Amounts> {
        &self.usage
    }

    pub(super) fn remove(&mut self, id: &str) {
        let Some(c) = self.objects.remove(id) else { return };
        self.account(&c.row, false);
        let key = sort_key(&c.row);
        for vm in super::links::targets_of(&c.row) {
            let entry = (c.row.kind, vm);
            if let Some(set) = self.links.get_mut(&entry) {
                set.remove(&(key.clone(), c.row.id.clone()));
                if set.is_empty() {
                    self.links.remove(&entry);
                }
            }
        }
        if let Some(idx) = self.kinds.get_mut(&c.row.kind) {
            idx.order.remove(&(key.clone(), c.row.id.clone()));
            if let Some(named) = idx.by_name.get_mut(&c.row.name) {
                named.remove(&(key.clone(), c.row.id.clone()));
                if named.is_empty() {
                    idx.by_name.remove(&c.row.name);
                }
            }
            idx.postings.remove(&c.row, &key);
            idx.by_tenant.remove(&(c.row.tenant.clone(), key, c.row.id));
            if let Some(n) = idx.counts.get_mut(&c.row.tenant) {
                *n = n.saturating_sub(1);
            }
        }
    }

    pub(super) fn set_status(&mut self, id: &str, status: Arc<str>, state: &str, observed: Arc<str>, observed_version: i64) {
        let Some(c) = self.objects.get_mut(id) else { return };
        // An image's or a snapshot's status says how much of the disk it holds: counted again whole.
        let image = super::usage::held_by_status(c.row.kind);
        let before = image.then(|| c.row.clone());
        let (kind, was) = (c.row.kind, std::mem::replace(&mut c.row.state, state.to_owned()));
        c.row.status = status;
        c.row.observed = observed;
        c.row.observed_version = observed_version;
        (c.json, c.vm) = rendered(&c.row);
        if let Some(idx) = self.kinds.get_mut(&kind) {
            idx.postings.restate(&c.row, &c.key, &was);
        }
        let after = image.then(|| c.row.clone());
        match (before, after) {
            (Some(before), Some(after)) => {
                self.account(&before, false);
                self.account(&after, true);
            }
            _ => {
                self.count_state(kind, &was, false);
                self.count_state(kind, state, true);
            }
        }
    }

    /// The rows of `kind` linked to `target`, in list order.
    pub(super) fn linked(&self, kind: ObjectKind, target: &str) -> Vec<super::row::Row> {
        let Some(set) = self.links.get(&(kind, target.to_owned())) else { return Vec::new() };
        set.iter().filter_map(|(_, id)| self.objects.get(id)).map(|c| c.row.clone()).collect()
    }

    pub(super) fn visible(&self, kind: ObjectKind, id: &str, scope: &Scope) -> Option<&Cached> {
        self.objects
            .get(id)
            .filter(|c| c.row.kind == kind && (!kind.is_tenant_scoped() || scope.tenant().is_none_or(|t| t == c.row.tenant)))
    }

    pub(super) fn list<T>(&self, kind: ObjectKind, scope: &Scope, f: &Filter, pick: impl Fn(&Cached) -> T) -> (Vec<T>, u64) {
        let Some(idx) = self.kinds.get(&kind) else { return (Vec::new(), 0) };
        let tenant = if kind.is_tenant_scoped() { scope.tenant() } else { None };
        let in_scope = |c: &&Cached| c.row.kind == kind && tenant.is_none_or(|t| t == c.row.tenant);
        let skip = usize::try_from(f.offset).unwrap_or(usize::MAX);
        let take = usize::try_from(f.limit).unwrap_or(usize::MAX);
        if f.name.is_none() && f.state.is_none() && f.narrow.is_empty() {
            // No filter: the total is known without a scan.
            let total = match tenant {
                Some(t) => idx.counts.get(t).copied().unwrap_or(0),
                None => idx.order.len() as u64,
            };
            let objects = self.scope_ids(idx, tenant).filter_map(|id| self.objects.get(id)).filter(in_scope);
            return (objects.skip(skip).take(take).map(pick).collect(), total);
        }
        let n = &f.narrow;
        let matches = |c: &&Cached| {
            let r = &c.row;
            let columns = Columns { id: &r.id, name: &r.name, created: r.created_at, labels: &r.labels.labels, state: &r.state };
            f.name.as_deref().is_none_or(|name| name == r.name) && f.state.as_deref().is_none_or(|s| s == r.state) && n.admits(columns)
        };
        let mut total = 0u64;
        let mut items = Vec::new();
        for c in self.candidates(idx, tenant, f).iter().filter_map(|id| self.objects.get(*id)).filter(in_scope).filter(matches) {
            if total >= f.offset && items.len() < take {
                items.push(pick(c));
            }
            total += 1;
        }
        (items, total)
    }

    /// The ids of the objects in scope, in list order.
    fn scope_ids<'a>(&'a self, idx: &'a KindIndex, tenant: Option<&'a str>) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        match tenant {
            Some(t) => {
                Box::new(idx.by_tenant.range((t.to_owned(), String::new(), String::new())..).take_while(move |k| k.0 == t).map(|k| &k.2))
            }
            None => Box::new(idx.order.iter().map(|k| &k.1)),
        }
    }

    /// The ids a list must look at, in list order: those of the names or
    /// ids the filter names (through the indexes), else every one in scope.
    fn candidates<'a>(&'a self, idx: &'a KindIndex, tenant: Option<&'a str>, f: &'a Filter) -> Vec<&'a String> {
        let names: Option<Vec<&String>> = match (&f.name, &f.narrow.names) {
            (Some(name), _) => Some(vec![name]),
            (None, Some(names)) => Some(names.iter().collect()),
            (None, None) => None,
        };
        let keyed: Option<BTreeSet<(&String, &String)>> = match (names, &f.narrow.ids) {
            (Some(names), _) => Some(names.into_iter().filter_map(|n| idx.by_name.get(n)).flatten().map(|(k, id)| (k, id)).collect()),
            (None, Some(ids)) => Some(ids.iter().filter_map(|id| self.objects.get_key_value(id)).map(|(id, c)| (&c.key, id)).collect()),
            (None, None) => None,
        };
        if let Some(set) = keyed {
            return set.into_iter().map(|(_, id)| id).collect();
        }
        // The fewest of the state's or a label value's objects, when fewer
        // than all in scope.
        let in_scope = match tenant {
            Some(t) => idx.counts.get(t).copied().unwrap_or(0),
            None => idx.order.len() as u64,
        };
        let fewest = terms(f)
            .into_iter()
            .map(|ts| (ts.iter().map(|t| idx.postings.count(t, tenant) as u64).sum::<u64>(), ts))
            .min_by_key(|(n, _)| *n);
        match fewest {
            Some((n, ts)) if n < in_scope => idx.postings.ids(&ts, tenant),
            _ => self.scope_ids(idx, tenant).collect(),
        }
    }
}

/// The sets of terms a list's objects must have one of: the states it
/// admits (the `state` asked for and the filter's), and each label value
/// it names.
fn terms(f: &Filter) -> Vec<Vec<Term>> {
    let states: Option<Vec<&String>> = match (&f.state, &f.narrow.states) {
        (Some(s), Some(set)) => Some(set.contains(s).then_some(s).into_iter().collect()),
        (Some(s), None) => Some(vec![s]),
        (None, Some(set)) => Some(set.iter().collect()),
        (None, None) => None,
    };
    let labels = f.narrow.labels.iter().filter_map(|(k, v)| Some(vec![Term::Label(k.clone(), v.clone()?)]));
    states.map(|s| s.into_iter().map(|s| Term::State(s.clone())).collect()).into_iter().chain(labels).collect()
}
