//! Which objects of a kind are in a state or carry a label's value, per
//! tenant, in list order: what a filtered list reads instead of every
//! object in scope (a filter matching 20 of 100 000 VMs looks at 20).

use std::collections::{BTreeSet, HashMap};

use super::row::Row;

/// What an object is found by: its `status.state`, or one label's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Term {
    /// `status.state` is this.
    State(String),
    /// Label `.0` is `.1`.
    Label(String, String),
}

/// (sort key, id) of objects, in list order.
type Ordered = BTreeSet<(String, String)>;

/// The objects of one kind that have each [`Term`], by tenant.
#[derive(Default)]
pub(super) struct Postings {
    terms: HashMap<Term, HashMap<String, Ordered>>,
}

/// The terms of `row`: its state, and each of its labels' values.
fn terms_of(row: &Row) -> impl Iterator<Item = Term> + '_ {
    let labels = row.labels.labels.iter().map(|(k, v)| Term::Label(k.clone(), v.clone()));
    std::iter::once(Term::State(row.state.clone())).chain(labels)
}

impl Postings {
    /// Files `row` (at `key` in its kind's list order) under its terms.
    pub(super) fn add(&mut self, row: &Row, key: &str) {
        for term in terms_of(row) {
            self.insert(term, &row.tenant, key, &row.id);
        }
    }

    /// Takes `row` (at `key`) out of its terms.
    pub(super) fn remove(&mut self, row: &Row, key: &str) {
        for term in terms_of(row) {
            self.take_out(&term, &row.tenant, key, &row.id);
        }
    }

    /// Moves `row` (at `key`, its state already changed) from state `was`
    /// to its state.
    pub(super) fn restate(&mut self, row: &Row, key: &str, was: &str) {
        if was != row.state {
            self.take_out(&Term::State(was.to_owned()), &row.tenant, key, &row.id);
            self.insert(Term::State(row.state.clone()), &row.tenant, key, &row.id);
        }
    }

    fn insert(&mut self, term: Term, tenant: &str, key: &str, id: &str) {
        let of_tenant = self.terms.entry(term).or_default().entry(tenant.to_owned()).or_default();
        of_tenant.insert((key.to_owned(), id.to_owned()));
    }

    fn take_out(&mut self, term: &Term, tenant: &str, key: &str, id: &str) {
        let Some(tenants) = self.terms.get_mut(term) else { return };
        if let Some(set) = tenants.get_mut(tenant) {
            set.remove(&(key.to_owned(), id.to_owned()));
            if set.is_empty() {
                tenants.remove(tenant);
            }
        }
        if tenants.is_empty() {
            self.terms.remove(term);
        }
    }

    /// How many objects of `tenant` (of every tenant when `None`) have `term`.
    pub(super) fn count(&self, term: &Term, tenant: Option<&str>) -> usize {
        let Some(tenants) = self.terms.get(term) else { return 0 };
        match tenant {
            Some(t) => tenants.get(t).map_or(0, BTreeSet::len),
            None => tenants.values().map(BTreeSet::len).sum(),
        }
    }

    /// The objects of `tenant` (of every tenant when `None`) having any of
    /// `terms`, in list order, once each.
    pub(super) fn ids<'a>(&'a self, terms: &[Term], tenant: Option<&str>) -> Vec<&'a String> {
        let sets = terms.iter().filter_map(|t| self.terms.get(t)).flat_map(|tenants| match tenant {
            Some(t) => tenants.get(t).into_iter().collect::<Vec<_>>(),
            None => tenants.values().collect(),
        });
        let sets: Vec<&Ordered> = sets.collect();
        if let [one] = sets.as_slice() {
            return one.iter().map(|(_, id)| id).collect();
        }
        let merged: BTreeSet<&(String, String)> = sets.into_iter().flatten().collect();
        merged.into_iter().map(|(_, id)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, tenant: &str, state: &str, labels: &[(&str, &str)]) -> Row {
        let meta =
            vmaas_model::Labels { labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), ..Default::default() };
        let now = chrono::Utc::now();
        Row {
            id: id.into(),
            kind: vmaas_model::ObjectKind::VirtualMachine,
            tenant: tenant.into(),
            name: id.into(),
            spec: "{}".into(),
            status: "{}".into(),
            state: state.into(),
            observed: "{}".into(),
            observed_version: 0,
            creators: Vec::new(),
            version: 1,
            created_at: now,
            updated_at: now,
            deleted_at: None,
            labels: meta,
        }
    }

    #[test]
    fn each_term_holds_its_objects_in_list_order_per_tenant() {
        let mut p = Postings::default();
        let rows = [
            (row("a", "acme", "READY", &[("team", "x")]), "3"),
            (row("b", "acme", "STOPPED", &[("team", "x")]), "1"),
            (row("c", "other", "READY", &[("team", "x")]), "2"),
        ];
        for (r, key) in &rows {
            p.add(r, key);
        }
        let team = Term::Label("team".into(), "x".into());
        assert_eq!(p.ids(std::slice::from_ref(&team), Some("acme")), ["b", "a"]);
        assert_eq!(p.ids(std::slice::from_ref(&team), None), ["b", "c", "a"]);
        assert_eq!(p.count(&Term::State("READY".into()), None), 2);
        let both = [Term::State("READY".into()), Term::State("STOPPED".into())];
        assert_eq!(p.ids(&both, Some("acme")), ["b", "a"]);

        // A state changes; an object goes.
        let (mut a, key) = rows[0].clone();
        a.state = "STOPPED".into();
        p.restate(&a, key, "READY");
        assert_eq!(p.ids(&[Term::State("READY".into())], None), ["c"]);
        assert_eq!(p.ids(&[Term::State("STOPPED".into())], Some("acme")), ["b", "a"]);
        p.remove(&rows[2].0, rows[2].1);
        assert_eq!(p.count(&team, None), 2);
        assert_eq!(p.count(&Term::State("READY".into()), None), 0);
        assert!(p.terms.keys().all(|t| *t != Term::State("READY".into())), "an empty term goes");
    }
}
