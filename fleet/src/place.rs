//! Choosing the cluster a VM runs on: among the clusters its placement
//! admits (by name and labels), the reachable ones with room for what it
//! asks (CPU, memory, GPUs by resource name); of those, the one with the
//! most memory left after it (then CPU; then the first named). No cluster
//! admitting it is the tenant's to change; none with room now is waited for.

use vmaas_backend::{Demand, Room};
use vmaas_model::{Placement, Reason};

/// One cluster as placement sees it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its labels.
    pub labels: &'a std::collections::BTreeMap<String, String>,
    /// Whether it answers.
    pub reachable: bool,
    /// What it has, counting what was just placed on it; none: not known
    /// (it fits anything, and ranks after every cluster whose room is known).
    pub room: Option<Room>,
}

/// Where a VM goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// On the candidate of this index.
    On(usize),
    /// Nowhere yet: no admitted cluster answers or has room now.
    Wait(Reason),
    /// Nowhere until the VM changes: no cluster is admitted, or none has
    /// the devices it asks at all.
    Refuse(Reason),
}

/// Chooses among `clusters` for a VM placed by `p` that asks `d`.
pub fn choose(clusters: &[Candidate<'_>], p: &Placement, d: &Demand) -> Choice {
    if let Some(why) = p.unmatched(clusters.iter().map(|c| (c.name, c.labels))) {
        return Choice::Refuse(Reason::new("NoMatchingCluster", why));
    }
    let admitted: Vec<usize> = (0..clusters.len()).filter(|&i| p.admits(clusters[i].name, clusters[i].labels)).collect();
    if let Some(missing) = missing_devices(clusters, &admitted, d) {
        return Choice::Refuse(Reason::new("NoGPUAvailable", format!("no cluster that matches {} has {missing}", p.describe())));
    }
    let mut why = Vec::new();
    let mut best: Option<(usize, (bool, u64, u64))> = None;
    for &i in &admitted {
        let c = &clusters[i];
        if !c.reachable {
            why.push(format!("{}: not answering", c.name));
            continue;
        }
        if let Some(lack) = c.room.as_ref().and_then(|r| r.lacks(d)) {
            why.push(format!("{}: {lack}", c.name));
            continue;
        }
        let key = c.room.as_ref().map_or((false, 0, 0), |r| {
            (true, r.memory_bytes.free().saturating_sub(d.memory_bytes), r.cpu_millis.free().saturating_sub(d.cpu_millis))
        });
        if best.as_ref().is_none_or(|(_, b)| key > *b) {
            best = Some((i, key));
        }
    }
    match best {
        Some((i, _)) => Choice::On(i),
        None => Choice::Wait(Reason::new("InsufficientCapacity", format!("no cluster can take it now: {}", why.join("; ")))),
    }
}

/// A device the VM asks that no admitted cluster has at all, if any.
fn missing_devices(clusters: &[Candidate<'_>], admitted: &[usize], d: &Demand) -> Option<String> {
    d.devices.iter().find_map(|(name, n)| {
        let anywhere =
            admitted.iter().any(|&i| clusters[i].room.as_ref().is_none_or(|r| r.devices.get(name).is_some_and(|u| u.total >= *n)));
        (!anywhere).then(|| format!("{n} {name}"))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use vmaas_backend::Usage;

    use super::*;

    fn room(cpus: u64, gib: u64, gpus: u64) -> Room {
        let mut r = Room {
            cpu_millis: Usage { total: cpus * 1000, used: 0 },
            memory_bytes: Usage { total: gib << 30, used: 0 },
            devices: BTreeMap::new(),
        };
        if gpus > 0 {
            r.devices.insert("nvidia.com/A10".into(), Usage { total: gpus, used: 0 });
        }
        r
    }

    fn demand(cores: u64, gib: u64, gpus: u64) -> Demand {
        let devices = if gpus > 0 { BTreeMap::from([("nvidia.com/A10".to_owned(), gpus)]) } else { BTreeMap::new() };
        Demand { cpu_millis: cores * 1000, memory_bytes: gib << 30, devices }
    }

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_cluster_with_most_memory_left_wins_and_a_full_one_is_skipped() {
        let (a, b) = (labels(&[("zone", "a")]), labels(&[("zone", "b")]));
        let mut cs = vec![
            Candidate { name: "east", labels: &a, reachable: true, room: Some(room(8, 4, 0)) },
            Candidate { name: "west", labels: &b, reachable: true, room: Some(room(8, 16, 0)) },
        ];
        assert_eq!(choose(&cs, &Placement::default(), &demand(1, 1, 0)), Choice::On(1));
        cs[1].room.as_mut().unwrap().memory_bytes.used = 16 << 30;
        assert_eq!(choose(&cs, &Placement::default(), &demand(1, 1, 0)), Choice::On(0));
        let by_label = Placement { cluster: None, labels: labels(&[("zone", "b")]) };
        match choose(&cs, &by_label, &demand(1, 1, 0)) {
            Choice::Wait(r) => assert!(r.message.contains("west: 0 MiB of memory free"), "{r:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn labels_names_gpus_and_reachability_decide() {
        let (a, b) = (labels(&[("zone", "a")]), labels(&[("zone", "b")]));
        let cs = vec![
            Candidate { name: "east", labels: &a, reachable: true, room: Some(room(8, 64, 0)) },
            Candidate { name: "west", labels: &b, reachable: true, room: Some(room(8, 4, 1)) },
        ];
        assert_eq!(choose(&cs, &Placement::default(), &demand(1, 1, 1)), Choice::On(1));
        let named = Placement { cluster: Some("west".into()), labels: BTreeMap::new() };
        assert_eq!(choose(&cs, &named, &demand(1, 1, 0)), Choice::On(1));
        match choose(&cs, &Placement { cluster: None, labels: labels(&[("zone", "c")]) }, &demand(1, 1, 0)) {
            Choice::Refuse(r) => assert_eq!(r.reason, "NoMatchingCluster"),
            other => panic!("{other:?}"),
        }
        match choose(&cs, &Placement::default(), &demand(1, 1, 2)) {
            Choice::Refuse(r) => assert_eq!(r.reason, "NoGPUAvailable", "{r:?}"),
            other => panic!("{other:?}"),
        }
        let down = vec![Candidate { name: "east", labels: &a, reachable: false, room: None }];
        assert!(matches!(choose(&down, &Placement::default(), &demand(1, 1, 0)), Choice::Wait(r) if r.message.contains("not answering")));
    }

    #[test]
    fn a_cluster_of_unknown_room_takes_what_the_known_ones_cannot() {
        let none = BTreeMap::new();
        let cs = vec![
            Candidate { name: "known", labels: &none, reachable: true, room: Some(room(1, 1, 0)) },
            Candidate { name: "unknown", labels: &none, reachable: true, room: None },
        ];
        assert_eq!(choose(&cs, &Placement::default(), &demand(1, 1, 0)), Choice::On(0));
        assert_eq!(choose(&cs, &Placement::default(), &demand(2, 1, 0)), Choice::On(1));
    }
}
