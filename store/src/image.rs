//! Images tenants (and administrators, publicly) import, in the store. A
//! VM or volume naming one does not pin it in the database (they name it
//! by name, resolved when used); the API counts its references and
//! refuses to delete one in use.

use vmaas_model::ObjectKind;
use vmaas_model::image::Image;

use super::record::ImageRecord;

/// The imported image a VM boots: its id, and its record when the VM's
/// own request made it on demand (stored with the VM, all or nothing).
#[derive(Debug, Clone)]
pub struct BootImage {
    /// The image's id.
    pub id: String,
    /// The image made for this request, not stored yet.
    pub new: Option<ImageRecord>,
}

impl BootImage {
    /// The new image's row, to store beside the VM.
    pub(super) fn new_object(&self) -> Result<Option<super::NewObject>, super::StoreError> {
        self.new.as_ref().map(|r| Ok(super::NewObject { row: r.to_row()?, refs: Vec::new() })).transpose()
    }
}

/// The image `reference` among `images` as tenant `tenant` sees it: its
/// own, else a public one. An `http(s)` URL names the image imported from
/// it (seed 004's images made on demand).
pub fn visible<'a>(images: &'a [ImageRecord], tenant: &str, reference: &str) -> Option<&'a ImageRecord> {
    let named = || images.iter().filter(move |i| i.names(reference) && i.deleted_at.is_none());
    named().find(|i| i.tenant == tenant).or_else(|| named().find(|i| i.spec.public))
}

impl ImageRecord {
    /// What VMs and volumes may call it by: its name, and the URL it is
    /// imported from.
    pub fn references(&self) -> Vec<&str> {
        std::iter::once(self.name.as_str()).chain(self.spec.source.as_deref()).collect()
    }

    /// Whether a VM's or volume's image `reference` names this image: by
    /// its name, or by the URL it is imported from.
    pub fn names(&self, reference: &str) -> bool {
        self.name == reference || (reference.contains("://") && self.spec.source.as_deref() == Some(reference))
    }
}

/// A VM or volume that uses an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUser {
    /// `VirtualMachine` or `Volume`.
    pub kind: ObjectKind,
    /// Its id.
    pub id: String,
    /// Its tenant.
    pub tenant: String,
    /// Its name.
    pub name: String,
}

impl super::Store {
    /// The VMs booting from an image called by any of `names` (its name,
    /// and the URL it is imported from) and the volumes made from it, among
    /// those of the tenants `sees` accepts.
    pub async fn users_of_image(&self, names: &[&str], sees: impl Fn(&str) -> bool) -> Result<Vec<ImageUser>, super::StoreError> {
        let mut out: Vec<ImageUser> = Vec::new();
        for kind in [ObjectKind::VirtualMachine, ObjectKind::Volume] {
            for name in names {
                for row in self.linked_to(kind, &super::links::image_link(name)).await? {
                    if sees(&row.tenant) && !out.iter().any(|u| u.id == row.id) {
                        out.push(ImageUser { kind, id: row.id, tenant: row.tenant, name: row.name });
                    }
                }
            }
        }
        Ok(out)
    }

    /// The imported image `reference` (a name, or the URL it is imported
    /// from) as tenant `tenant` sees it: its own, else a public one. Found
    /// by the name and the source, not by reading every image.
    pub async fn visible_image(&self, tenant: &str, reference: &str) -> Result<Option<ImageRecord>, super::StoreError> {
        let by_name = super::Filter { name: Some(reference.to_owned()), ..super::Filter::all() };
        let mut rows = self.list(ObjectKind::Image, &super::Scope::All, &by_name).await?.0;
        if reference.contains("://") {
            rows.extend(self.linked_to(ObjectKind::Image, &super::links::source_link(reference)).await?);
        }
        let candidates: Vec<ImageRecord> = rows.iter().map(ImageRecord::from_row).collect::<Result<_, _>>()?;
        Ok(visible(&candidates, tenant, reference).cloned())
    }

    /// The imported image that object `source` (a VM, a volume) refers to,
    /// as it was resolved when the object was made or changed; none: it
    /// uses the backend's catalog.
    pub async fn image_of(&self, source: &str) -> Result<Option<ImageRecord>, super::StoreError> {
        let target: Option<String> = sqlx::query_scalar("SELECT target FROM refs WHERE source = $1 AND role = 'image'")
            .bind(source)
            .fetch_optional(&mut *self.conn().await?)
            .await?;
        match target {
            Some(id) => Ok(Some(self.get_record::<Image>(&id, &super::Scope::All).await?)),
            None => Ok(None),
        }
    }

    /// Who uses the imported image `img`: of its tenant, or of every tenant
    /// for a public image.
    pub async fn image_users(&self, img: &ImageRecord) -> Result<Vec<ImageUser>, super::StoreError> {
        self.users_of_image(&img.references(), |tenant| img.spec.public || tenant == img.tenant).await
    }
}
