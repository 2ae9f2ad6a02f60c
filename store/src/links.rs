//! What an object names without pinning it (what it names can go while it
//! does): a volume attachment's, an external IP attachment's and a snapshot's VM, a load
//! balancer's targets, the image a VM boots or a volume is made from, by
//! the name it was given ([`image_link`]), and an image its source URL
//! ([`source_link`]). A VM's reconcile, or an
//! image's, reads the objects linked to it instead of every object of
//! their kinds.
//!
//! - On SQLite memory keeps the index, changed with the rows it holds.
//! - On PostgreSQL the table `links` (migration 0010) keeps it, written in
//!   the transaction of each insert and spec change. A database made before
//!   the table is indexed once, at the first start that finds `links_made`
//!   empty.

use vmaas_model::{Object, ObjectKind};

use super::record::Record;
use super::row::Row;
use super::{
    AttachmentRecord, Dialect, ImageRecord, LoadBalancerRecord, SnapshotRecord, Store, StoreError, VolumeAttachmentRecord, VolumeRecord,
};

/// The link target that stands for the image called `name` (a name, or a URL).
pub fn image_link(name: &str) -> String {
    format!("image:{name}")
}

/// The link target that stands for the source URL `url` of an image.
pub fn source_link(url: &str) -> String {
    format!("source:{url}")
}

/// What `row` links to: VM ids, [`image_link`]s, or an image's
/// [`source_link`]. A row that does not decode links nothing: it is
/// reported where it is read.
pub(super) fn targets_of(row: &Row) -> Vec<String> {
    match row.kind {
        ObjectKind::VolumeAttachment => VolumeAttachmentRecord::from_row(row).map(|a| vec![a.spec.compute_instance]).unwrap_or_default(),
        ObjectKind::ExternalIpAttachment => {
            AttachmentRecord::from_row(row).ok().and_then(|a| a.spec.compute_instance).into_iter().collect()
        }
        ObjectKind::ComputeInstanceSnapshot => SnapshotRecord::from_row(row).map(|s| vec![s.spec.compute_instance]).unwrap_or_default(),
        ObjectKind::LoadBalancer => LoadBalancerRecord::from_row(row).map(|lb| lb.spec.targets).unwrap_or_default(),
        ObjectKind::VirtualMachine => vm_targets(&row.spec),
        ObjectKind::Volume => {
            VolumeRecord::from_row(row).ok().and_then(|v| v.spec.source_image).map(|i| image_link(&i)).into_iter().collect()
        }
        ObjectKind::Image => ImageRecord::from_row(row).ok().and_then(|i| i.spec.source).map(|u| source_link(&u)).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// What a stored VM document links to: the [`image_link`] of the image it
/// boots, the id of its instance type, of its catalog item and of the
/// snapshot it is a clone of (so that a type's or an item's VMs, and a
/// snapshot's clones, are found without reading every VM). The document is read once, for both.
fn vm_targets(doc: &str) -> Vec<String> {
    let Some(d) = VmDoc::parse(doc) else { return Vec::new() };
    let image = d.boot_image().map(|i| image_link(&i));
    image.into_iter().chain(d.instance_type()).chain(d.catalog_item()).chain(d.clone_of()).collect()
}

/// What links need of a stored VM document, read without decoding the
/// rest of it (every VM write reads it).
#[derive(serde::Deserialize)]
struct VmDoc {
    #[serde(default)]
    spec: Option<VmSpec>,
    #[serde(default)]
    machine: Option<Machine>,
}

#[derive(serde::Deserialize)]
struct VmSpec {
    instance_type: Option<Reference>,
    #[serde(default)]
    catalog_item: Option<Reference>,
    #[serde(default)]
    clone_of: Option<CloneOf>,
}

#[derive(serde::Deserialize)]
struct CloneOf {
    #[serde(default)]
    snapshot: Option<String>,
}

#[derive(serde::Deserialize)]
struct Reference {
    #[serde(default)]
    id: String,
}

#[derive(serde::Deserialize)]
struct Machine {
    boot: Option<Boot>,
    image: Option<String>,
}

#[derive(serde::Deserialize)]
struct Boot {
    image: String,
}

impl VmDoc {
    fn parse(doc: &str) -> Option<Self> {
        serde_json::from_str(doc).ok()
    }

    /// The image it boots: `machine.boot.image`, or `machine.image` in the
    /// first release's documents.
    fn boot_image(&self) -> Option<String> {
        let m = self.machine.as_ref()?;
        m.boot.as_ref().map(|b| b.image.clone()).or_else(|| m.image.clone())
    }

    /// The snapshot (its id) it is a clone of (`spec.clone_of.snapshot`).
    fn clone_of(&self) -> Option<String> {
        self.spec.as_ref()?.clone_of.as_ref()?.snapshot.clone()
    }

    /// The id of its catalog item (`spec.catalog_item.id`).
    fn catalog_item(&self) -> Option<String> {
        self.spec.as_ref()?.catalog_item.as_ref().map(|t| t.id.clone()).filter(|id| !id.is_empty())
    }

    /// The id of its instance type (`spec.instance_type.id`).
    fn instance_type(&self) -> Option<String> {
        self.spec.as_ref()?.instance_type.as_ref().map(|t| t.id.clone()).filter(|id| !id.is_empty())
    }
}

/// The kinds that link.
const LINKING: [ObjectKind; 7] = [
    ObjectKind::ComputeInstanceSnapshot,
    ObjectKind::VolumeAttachment,
    ObjectKind::ExternalIpAttachment,
    ObjectKind::LoadBalancer,
    ObjectKind::VirtualMachine,
    ObjectKind::Volume,
    ObjectKind::Image,
];

/// Writes the links of `new`, which replaces `old`, in `tx`, on PostgreSQL
/// (a new object's are written with it: `create_pg`).
pub(super) async fn record(tx: &mut sqlx::Transaction<'_, sqlx::Any>, dialect: Dialect, old: &Row, new: &Row) -> Result<(), StoreError> {
    let targets = targets_of(new);
    if dialect != Dialect::Postgres || targets_of(old) == targets {
        return Ok(());
    }
    sqlx::query("DELETE FROM links WHERE source = $1").bind(&new.id).execute(&mut **tx).await?;
    insert(tx, &new.id, &targets).await
}

async fn insert(tx: &mut sqlx::Transaction<'_, sqlx::Any>, source: &str, targets: &[String]) -> Result<(), StoreError> {
    for target in targets {
        sqlx::query("INSERT INTO links (source, target) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(source)
            .bind(target)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

impl Store {
    /// The records of kind `K` linked to `target`, in list order.
    pub async fn linked_records<K: Object>(&self, target: &str) -> Result<Vec<Record<K>>, StoreError> {
        self.linked_to(K::KIND, target).await?.iter().map(Record::from_row).collect()
    }

    /// The objects of `kind` linked to `target` (a VM id, an [`image_link`]), in list order.
    pub async fn linked_to(&self, kind: ObjectKind, target: &str) -> Result<Vec<Row>, StoreError> {
        if let Some(rows) = self.read_mem(|m| m.linked(kind, target)) {
            return Ok(rows);
        }
        let sql = format!(
            "SELECT {} FROM objects o WHERE o.kind = $1 AND o.id IN (SELECT source FROM links WHERE target = $2) ORDER BY o.created_at, o.id",
            super::row::COLUMNS.split(", ").map(|c| format!("o.{c}")).collect::<Vec<_>>().join(", ")
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(kind.as_str()).bind(target).fetch_all(&mut *self.conn().await?).await?;
        rows.iter().map(super::row::from_row).collect()
    }

    /// Indexes the links of every object once, if this database was made
    /// before the index (PostgreSQL), holding writers of it off.
    pub(super) async fn index_links_once(&self) -> Result<(), StoreError> {
        let Some(mut tx) = self.once("links", "links_made").await? else { return Ok(()) };
        for kind in LINKING {
            for row in self.all(kind).await? {
                insert(&mut tx, &row.id, &targets_of(&row)).await?;
            }
        }
        Self::done_once(tx, "links_made").await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_boot_image_of_a_vm_document_today_and_in_the_first_release() {
        let today = r#"{"spec":{"template":"t"},"machine":{"boot":{"image":"debian"},"cpu":{"cores":1}},"requests":{}}"#;
        let boot_image = |doc: &str| super::VmDoc::parse(doc).and_then(|d| d.boot_image());
        assert_eq!(boot_image(today).as_deref(), Some("debian"));
        let first = r#"{"spec":{},"machine":{"cpu_cores":4,"image":"default","disk_size":"30Gi"},"requests":{"restart":0}}"#;
        assert_eq!(boot_image(first).as_deref(), Some("default"));
        assert_eq!(boot_image("not json"), None);
    }

    #[test]
    fn a_vm_links_to_its_image_and_its_instance_type() {
        let doc = r#"{"spec":{"template":"t","instance_type":{"id":"it-1","name":"general.small"}},"machine":{"boot":{"image":"debian"}}}"#;
        assert_eq!(super::vm_targets(doc), ["image:debian", "it-1"]);
        let none = r#"{"spec":{"template":"t"},"machine":{"boot":{"image":"debian"}}}"#;
        assert_eq!(super::vm_targets(none), ["image:debian"]);
    }
}
