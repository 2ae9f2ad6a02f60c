//! What every cluster has: virtual networks (a name for a set of subnets),
//! and imported images, so that a VM can boot one wherever it is placed.
//! Each is made on every cluster and reported as the least advanced of them.

use async_trait::async_trait;
use std::sync::Arc;
use vmaas_backend::{
    BackendError, Cleanup, Driver, ImageDriver, ImageImport, ImageObservation, NetworkDriver, NetworkObservation, NetworkSpec, Requeue,
};

/// The soonest of `nexts` (a cluster under way is looked at when it asks).
pub(crate) fn worst_requeue(nexts: impl Iterator<Item = Requeue>) -> Requeue {
    nexts
        .filter_map(|n| match n {
            Requeue::After(d) => Some(d),
            Requeue::AwaitChange => None,
        })
        .min()
        .map_or(Requeue::AwaitChange, Requeue::After)
}

/// The least advanced of what each cluster (by name) reports: failed, then
/// pending, then ready (also when no cluster has it).
pub(crate) fn merge_network(seen: &[(&str, NetworkObservation, Requeue)]) -> NetworkObservation {
    let failed = seen.iter().find_map(|(n, o, _)| match o {
        NetworkObservation::Failed(m) => Some(NetworkObservation::Failed(format!("on cluster {n}: {m}"))),
        _ => None,
    });
    let pending = || {
        seen.iter().find_map(|(n, o, _)| match o {
            NetworkObservation::Pending(m) => Some(NetworkObservation::Pending(format!("on cluster {n}: {m}"))),
            _ => None,
        })
    };
    failed.or_else(pending).unwrap_or(NetworkObservation::Ready)
}

/// One kind's drivers, one per cluster (by name), run on every cluster
/// and reported as `merge` makes of what each saw.
pub struct Everywhere<S, O> {
    names: Vec<String>,
    drivers: Vec<Arc<dyn Driver<S, O>>>,
    merge: fn(&[(&str, O, Requeue)]) -> O,
}

/// Virtual networks, on every cluster.
pub type Networks = Everywhere<NetworkSpec, NetworkObservation>;

/// Imported images, on every cluster (each imports from the image's source).
pub type Images = Everywhere<ImageImport, ImageObservation>;

impl Networks {
    pub(crate) fn networks(names: Vec<String>, drivers: Vec<Arc<NetworkDriver>>) -> Self {
        Self { names, drivers, merge: merge_network }
    }
}

impl Images {
    pub(crate) fn images(names: Vec<String>, drivers: Vec<Arc<ImageDriver>>) -> Self {
        Self { names, drivers, merge: merge_image }
    }
}

#[async_trait]
impl<S: Sync + 'static, O: Send + Sync + 'static> Driver<S, O> for Everywhere<S, O> {
    async fn ensure(&self, t: &vmaas_backend::Target<S>) -> Result<(O, Requeue), BackendError> {
        let mut seen = Vec::new();
        for (name, d) in self.names.iter().zip(&self.drivers) {
            let (o, next) = d.ensure(t).await?;
            seen.push((name.as_str(), o, next));
        }
        Ok(((self.merge)(&seen), worst_requeue(seen.iter().map(|s| s.2))))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        delete_on(&self.drivers, 0..self.drivers.len(), id).await
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        retain_all(&self.drivers, known).await
    }
}

/// Deletes object `id` on the clusters `on` (indices into `drivers`): done
/// once every one of them is done.
pub(crate) async fn delete_on<S: Sync, O: Send>(
    drivers: &[Arc<dyn Driver<S, O>>],
    on: impl IntoIterator<Item = usize>,
    id: &str,
) -> Result<Cleanup, BackendError> {
    let mut done = Cleanup::Done;
    for m in on {
        if drivers[m].delete(id).await? == Cleanup::InProgress {
            done = Cleanup::InProgress;
        }
    }
    Ok(done)
}

/// Tells every cluster's driver which objects exist.
pub(crate) async fn retain_all<S: Sync, O: Send>(drivers: &[Arc<dyn Driver<S, O>>], known: &[String]) -> Result<(), BackendError> {
    for d in drivers {
        d.retain(known).await?;
    }
    Ok(())
}

/// Failed on any cluster, else waiting on any, else importing (the least
/// advanced cluster's progress), else ready (the first cluster's file).
fn merge_image(seen: &[(&str, ImageObservation, Requeue)]) -> ImageObservation {
    let named = |n: &str, m: &str| if seen.len() > 1 { format!("on cluster {n}: {m}") } else { m.to_owned() };
    if let Some((n, ImageObservation::Failed(m), _)) = seen.iter().find(|s| matches!(s.1, ImageObservation::Failed(_))) {
        return ImageObservation::Failed(named(n, m));
    }
    if let Some((n, ImageObservation::Pending(m), _)) = seen.iter().find(|s| matches!(s.1, ImageObservation::Pending(_))) {
        return ImageObservation::Pending(named(n, m));
    }
    let importing = seen
        .iter()
        .filter_map(|s| match &s.1 {
            ImageObservation::Importing { bytes, total } => Some((*bytes, *total)),
            _ => None,
        })
        .min_by_key(|(b, _)| *b);
    if let Some((bytes, total)) = importing {
        return ImageObservation::Importing { bytes, total };
    }
    seen.iter()
        .find_map(|s| match &s.1 {
            ImageObservation::Ready(f) => Some(ImageObservation::Ready(f.clone())),
            _ => None,
        })
        .unwrap_or_else(|| ImageObservation::Pending("no cluster to import it on".into()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use vmaas_backend::ImageFile;

    use super::*;

    #[test]
    fn the_least_advanced_cluster_is_what_is_reported() {
        let ready = ImageObservation::Ready(ImageFile { format: "raw".into(), virtual_size: 1, size_bytes: 1, sha256: "x".into() });
        let importing = ImageObservation::Importing { bytes: 5, total: Some(10) };
        let a = Requeue::after(Duration::from_secs(3));
        let seen = [("east", ready.clone(), Requeue::AwaitChange), ("west", importing.clone(), a)];
        assert_eq!(merge_image(&seen), importing);
        assert_eq!(worst_requeue(seen.iter().map(|s| s.2)), a);
        let failed =
            [("east", ready.clone(), Requeue::AwaitChange), ("west", ImageObservation::Failed("bad".into()), Requeue::AwaitChange)];
        assert_eq!(merge_image(&failed), ImageObservation::Failed("on cluster west: bad".into()));
        assert_eq!(merge_image(&[("east", ready.clone(), a)]), ready);
        let net = [("east", NetworkObservation::Ready, a), ("west", NetworkObservation::Pending("udn".into()), a)];
        assert_eq!(merge_network(&net), NetworkObservation::Pending("on cluster west: udn".into()));
        assert_eq!(merge_network(&[]), NetworkObservation::Ready);
    }
}
