//! `images`: the OS images VMs can boot from. Public images are the
//! backend's catalog (the administrator's images directory on the qemu
//! backend) and those administrators import with `spec.public`; tenants
//! import their own (`image_imports`). `status.references` counts the VMs
//! booting from each and the volumes made from it, the caller's own (an
//! administrator's: everyone's).

use vmaas_backend::CatalogImage;
use vmaas_model::image::{IMAGE_TYPE_URL, Image, ImageLifecycle, ImageMetadata, ImageSpec, ImageState, ImageStatus};
use vmaas_model::spec::DEFAULT_IMAGE;
use vmaas_model::{MachineSpec, ObjectKind, ValidationErrors};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{BootImage, Filter, ImageRecord, Scope, StoreError};

/// The backend's catalog, read off the async runtime (at most once per
/// [`crate::app::catalog::CATALOG_FRESH`]: every create looks at it); `None`
/// when the backend keeps none.
pub(crate) async fn catalog(s: &AppState) -> Result<Option<Vec<CatalogImage>>, ApiError> {
    s.catalog.read(&s.backend).await
}

/// Whether the backend's catalog holds an image called `name` (the
/// administrator's files, which are never imported images).
pub(crate) async fn in_catalog_named(s: &AppState, name: &str) -> Result<bool, ApiError> {
    Ok(catalog(s).await?.unwrap_or_default().iter().any(|i| i.name == name))
}

/// Whether `machine` boots `image`.
fn boots(machine: &MachineSpec, image: &CatalogImage) -> bool {
    machine.boot.image == image.name || (image.default && machine.boot.image == DEFAULT_IMAGE)
}

/// Who uses an image called by any of `names` (its name, and the URL it is
/// imported from) that tenant `owner` sees (`public`: every tenant sees it):
/// the VMs booting from it and the volumes made from it, as `(kind, name)`,
/// among those `caller` may see (`None`: everyone's).
pub(crate) async fn users_of(
    s: &AppState,
    names: &[&str],
    owner: &str,
    public: bool,
    caller: Option<&Caller>,
) -> Result<Vec<(&'static str, String)>, ApiError> {
    let shown = |tenant: &str| (public || tenant == owner) && caller.is_none_or(|c| c.is_admin() || c.tenant == tenant);
    Ok(s.store.users_of_image(names, shown).await?.into_iter().map(|u| (u.kind.human(), u.name)).collect())
}

fn catalog_api(i: &CatalogImage, references: u32) -> Image {
    let state = if i.problem.is_some() { ImageState::Failed } else { ImageState::Ready };
    Image {
        type_url: IMAGE_TYPE_URL.into(),
        id: i.name.clone(),
        metadata: ImageMetadata::catalog(&i.name),
        spec: ImageSpec { description: i.description.clone(), ..Default::default() },
        status: ImageStatus {
            state,
            format: i.format.clone(),
            virtual_size: i.virtual_size,
            references,
            message: i.problem.clone(),
            ..Default::default()
        },
    }
}

/// The catalog's images and the imported ones `caller` sees, each with its references.
async fn to_api(s: &AppState, caller: &Caller, catalog: Vec<CatalogImage>, imported: Vec<ImageRecord>) -> Result<Vec<Image>, ApiError> {
    let mut out = Vec::new();
    for i in &catalog {
        // VMs boot it by its name, or as the default; volumes are made from it by its name.
        let by_vms = if i.default { vec![i.name.as_str(), DEFAULT_IMAGE] } else { vec![i.name.as_str()] };
        let vms = users_of(s, &by_vms, "", true, Some(caller)).await?.iter().filter(|u| u.0 != "volume").count();
        let volumes = users_of(s, &[&i.name], "", true, Some(caller)).await?.iter().filter(|u| u.0 == "volume").count();
        out.push(catalog_api(i, (vms + volumes) as u32));
    }
    for r in imported {
        let mut api = r.to_api();
        api.status.references = users_of(s, &r.references(), &r.tenant, r.spec.public, Some(caller)).await?.len() as u32;
        out.push(api);
    }
    Ok(out)
}

/// The imported images `caller` sees: its tenant's and the public ones (an administrator: all).
pub(crate) async fn imported_visible(s: &AppState, caller: &Caller) -> Result<Vec<ImageRecord>, ApiError> {
    let all = s.store.all_records::<Image>().await?;
    Ok(all.into_iter().filter(|i| caller.is_admin() || i.tenant == caller.tenant || i.spec.public).collect())
}

/// The images VMs can boot from that `caller` sees: the catalog's (by
/// name), then the imported ones; only those called `name`, if given.
pub(crate) async fn list(s: &AppState, caller: &Caller, name: Option<&str>) -> Result<Vec<Image>, ApiError> {
    let keep = |n: &str| name.is_none_or(|w| w == n);
    let catalog: Vec<CatalogImage> = catalog(s).await?.unwrap_or_default().into_iter().filter(|i| keep(&i.name)).collect();
    let imported: Vec<ImageRecord> = imported_visible(s, caller).await?.into_iter().filter(|i| keep(&i.name)).collect();
    to_api(s, caller, catalog, imported).await
}

/// One image: a catalog image by name, an imported one by id or name.
pub(crate) async fn read(s: &AppState, caller: &Caller, id: &str) -> Result<Image, ApiError> {
    let found: Vec<CatalogImage> = catalog(s).await?.unwrap_or_default().into_iter().filter(|i| i.name == id).collect();
    let imported = match (found.is_empty(), lookup(s, caller, id).await?) {
        (true, Named::One(i)) => vec![*i],
        // An administrator reading a name several tenants use: the first.
        (true, Named::Several(mut all)) => vec![all.swap_remove(0)],
        _ => Vec::new(),
    };
    to_api(s, caller, found, imported).await?.pop().ok_or_else(|| ApiError::not_found("image", id))
}

/// What an imported image reference names for a caller.
pub(crate) enum Named {
    /// Nothing the caller sees.
    None,
    /// One image.
    One(Box<ImageRecord>),
    /// Several other tenants' images of that name (administrators only).
    Several(Vec<ImageRecord>),
}

/// The imported image `reference` names for `caller`: by id (the
/// caller's, a public one, or for an administrator anyone's), else by name
/// the caller's own first, then a public one, then, for an administrator,
/// another tenant's (looked up by the name, not by reading every image).
pub(crate) async fn lookup(s: &AppState, caller: &Caller, reference: &str) -> Result<Named, ApiError> {
    match s.store.get_record::<Image>(reference, &Scope::All).await {
        Ok(i) if caller.is_admin() || i.tenant == caller.tenant || i.spec.public => return Ok(Named::One(Box::new(i))),
        Ok(_) | Err(StoreError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let by_name = Filter { name: Some(reference.to_owned()), ..Filter::all() };
    let (mine, _) = s.store.list(ObjectKind::Image, &Scope::Tenant(caller.tenant.clone()), &by_name).await?;
    if let Some(r) = mine.first() {
        return Ok(Named::One(Box::new(ImageRecord::from_row(r)?)));
    }
    let (rows, _) = s.store.list(ObjectKind::Image, &Scope::All, &by_name).await?;
    let mut all: Vec<ImageRecord> = rows.iter().map(ImageRecord::from_row).collect::<Result<_, _>>()?;
    if let Some(i) = all.iter().position(|i| i.spec.public) {
        return Ok(Named::One(Box::new(all.swap_remove(i))));
    }
    Ok(match all.len() {
        _ if !caller.is_admin() => Named::None,
        0 => Named::None,
        1 => Named::One(Box::new(all.swap_remove(0))),
        _ => Named::Several(all),
    })
}

/// The id of the imported image called `name` that `caller` sees, if any
/// (what a VM or volume naming it refers to).
pub(crate) async fn imported_id(s: &AppState, caller: &Caller, name: &str) -> Result<Option<String>, ApiError> {
    Ok(s.store.visible_image(&caller.tenant, name).await?.map(|i| i.id))
}

/// The imported image `machine` boots, `None` for one of the catalog
/// (`vmaas_admission::images`: a URL may make one on demand, which the
/// caller stores with the VM). Call it in the admission (`admitted`) the VM
/// is stored in, so that two requests naming one URL make one image.
pub(crate) async fn boot_image(
    admitted: &crate::state::Admitted,
    caller: &Caller,
    machine: &MachineSpec,
) -> Result<Option<BootImage>, ApiError> {
    let s = admitted.state();
    let imports = s.backend.image_imports().is_some().then_some(s.image_imports_per_tenant);
    let image = vmaas_admission::images::boot_image(&s.store, &caller.tenant, &caller.subject, machine, imports).await?;
    // Checked before the lock: an imported image of that name may have
    // been deleted (pruned) since, and the VM must not be stored without it.
    if image.is_none() && !machine.boot.is_url() && !in_catalog(s, machine).await? {
        let url = &machine.boot.image;
        return Err(ApiError::precondition(format!("image {url:?} was deleted while the VM was being made: create it again")));
    }
    Ok(image)
}

/// Whether the backend's catalog boots `machine`'s image (any image, when
/// the backend has no catalog).
async fn in_catalog(s: &AppState, machine: &MachineSpec) -> Result<bool, ApiError> {
    let Some(images) = catalog(s).await? else { return Ok(true) };
    Ok(machine.boot.image == DEFAULT_IMAGE || images.iter().any(|i| boots(machine, i)))
}

/// After the VM that made `image` on demand is stored: starts its import.
pub(crate) fn made(s: &AppState, image: Option<&BootImage>) {
    if let Some(rec) = image.and_then(|i| i.new.as_ref()) {
        s.queue.enqueue(vmaas_model::ObjectKind::Image, &rec.id);
        tracing::info!(image = %rec.id, name = %rec.name, url = ?rec.spec.source, "image made on demand for a VM");
    }
}

/// Refuses a machine whose image the backend's catalog lacks, or cannot
/// boot from, or that is obsolete (unless it is `kept`, the image the VM
/// boots already), naming `field` (the parameter that chose it, or the template).
pub(crate) async fn check_image(
    s: &AppState,
    caller: &Caller,
    machine: &MachineSpec,
    field: &str,
    kept: Option<&str>,
    errs: &mut ValidationErrors,
) -> Result<(), ApiError> {
    let Some(images) = catalog(s).await? else { return Ok(()) };
    let wanted = &machine.boot.image;
    if let Some(i) = s.store.visible_image(&caller.tenant, wanted).await? {
        if i.status.state == ImageState::Failed {
            errs.push(field, format!("image {wanted:?} could not be imported: {}", i.status.message.clone().unwrap_or_default()));
        }
        if i.spec.lifecycle == ImageLifecycle::Obsolete && kept != Some(wanted.as_str()) {
            errs.push(field, format!("image {wanted:?} is obsolete (DISK_IMAGE_LIFECYCLE_OBSOLETE): no new VM boots it"));
        }
        return Ok(());
    }
    let names = || images.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ");
    match images.iter().find(|i| boots(machine, i)) {
        Some(CatalogImage { problem: Some(p), name, .. }) => errs.push(field, format!("image {name:?} cannot be booted: {p}")),
        Some(_) => {}
        None if wanted == DEFAULT_IMAGE => {}
        // An image made on demand from the URL (seed 004), if the backend imports.
        None if machine.boot.is_url() && s.backend.image_imports().is_some() => {}
        None if machine.boot.is_url() => {
            errs.push(field, format!("the {} backend does not import images from URLs; images are {}", s.backend.name(), names()));
        }
        None => errs.push(field, format!("there is no image {wanted:?}; images are {} (GET /api/fulfillment/v1/images)", names())),
    }
    Ok(())
}
