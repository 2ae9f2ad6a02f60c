//! What every cluster has: virtual networks (a name for a set of subnets),
//! and imported images, so that a VM can boot one wherever it is placed.
//! Each is made on every cluster and reported as the least advanced of them.

use async_trait::async_trait;
use std::sync::Arc;
use vmaas_backend::{
    BackendError, Cleanup, Driver, ImageDriver, ImageImport, ImageObservation, ImageTarget, NetworkDriver, NetworkObservation, NetworkSpec,
    NetworkTarget, Requeue,
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

/// Virtual networks, on every cluster (by name).
pub struct Networks(pub(crate) Vec<String>, pub(crate) Vec<Arc<NetworkDriver>>);

#[async_trait]
impl Driver<NetworkSpec, NetworkObservation> for Networks {
    async fn ensure(&self, t: &NetworkTarget) -> Result<(NetworkObservation, Requeue), BackendError> {
        let mut seen = Vec::new();
        for (name, d) in self.0.iter().zip(&self.1) {
            let (o, next) = d.ensure(t).await?;
            seen.push((name.as_str(), o, next));
        }
        Ok((merge_network(&seen), worst_requeue(seen.iter().map(|s| s.2))))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        all_deleted(self.1.iter().map(|d| d.delete(id))).await
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        for d in &self.1 {
            d.retain(known).await?;
        }
        Ok(())
    }
}

/// Done once every cluster is done.
async fn all_deleted<F: std::future::Future<Output = Result<Cleanup, BackendError>>>(
    each: impl Iterator<Item = F>,
) -> Result<Cleanup, BackendError> {
    let mut done = Cleanup::Done;
    for f in each {
        if f.await? == Cleanup::InProgress {
            done = Cleanup::InProgress;
        }
    }
    Ok(done)
}

/// Imported images, on every cluster (each imports from the image's
/// source), by cluster name.
pub struct Images(pub(crate) Vec<String>, pub(crate) Vec<Arc<ImageDriver>>);

#[async_trait]
impl Driver<ImageImport, ImageObservation> for Images {
    async fn ensure(&self, t: &ImageTarget) -> Result<(ImageObservation, Requeue), BackendError> {
        let mut seen = Vec::new();
        for (name, d) in self.0.iter().zip(&self.1) {
            let (o, next) = d.ensure(t).await?;
            seen.push((name.as_str(), o, next));
        }
        Ok((merge_image(&seen), worst_requeue(seen.iter().map(|s| s.2))))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        all_deleted(self.1.iter().map(|d| d.delete(id))).await
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        for d in &self.1 {
            d.retain(known).await?;
        }
        Ok(())
    }
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
