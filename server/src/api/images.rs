//! `images`: the OS images VMs can boot from. Public images are the
//! backend's catalog (the administrator's images directory on the qemu
//! backend); `status.references` counts the VMs booting from each, the
//! caller's own (an administrator's: everyone's).

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use vmaas_backend::CatalogImage;
use vmaas_model::image::{IMAGE_TYPE_URL, Image, ImageMetadata, ImageSpec, ImageState, ImageStatus};
use vmaas_model::spec::DEFAULT_IMAGE;
use vmaas_model::{Envelope, MachineSpec, Page, ValidationErrors};

use super::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/images", get(list)).route("/images/{id}", get(read))
}

/// The backend's catalog, read off the async runtime; `None` when the
/// backend keeps none.
pub(super) async fn catalog(s: &AppState) -> Result<Option<Vec<CatalogImage>>, ApiError> {
    let backend = s.backend.clone();
    tokio::task::spawn_blocking(move || backend.images()).await.map_err(|e| ApiError::internal(format!("reading the image catalog: {e}")))
}

/// Whether `machine` boots `image`.
fn boots(machine: &MachineSpec, image: &CatalogImage) -> bool {
    machine.boot.image == image.name || (image.default && machine.boot.image == DEFAULT_IMAGE)
}

async fn to_api(s: &AppState, caller: &Caller, images: Vec<CatalogImage>) -> Result<Vec<Image>, ApiError> {
    let vms = s.store.all_vms().await?;
    let mine: Vec<_> = vms.iter().filter(|v| caller.is_admin() || v.tenant == caller.tenant).collect();
    let volumes = s.store.all_records::<crate::store::VolumeKind>().await?;
    let volumes: Vec<_> = volumes.iter().filter(|v| caller.is_admin() || v.tenant == caller.tenant).collect();
    Ok(images
        .into_iter()
        .map(|i| {
            let by_volumes = volumes.iter().filter(|v| v.spec.source_image.as_deref() == Some(i.name.as_str())).count();
            let references = (mine.iter().filter(|v| boots(&v.machine, &i)).count() + by_volumes) as u32;
            let state = if i.problem.is_some() { ImageState::Failed } else { ImageState::Ready };
            Image {
                type_url: IMAGE_TYPE_URL.into(),
                id: i.name.clone(),
                metadata: ImageMetadata { name: i.name.clone(), public: true },
                spec: ImageSpec { description: i.description.clone() },
                status: ImageStatus {
                    state,
                    format: i.format.clone(),
                    virtual_size: i.virtual_size,
                    references,
                    message: i.problem.clone(),
                },
            }
        })
        .collect())
}

/// List the images VMs can boot from, by name.
#[utoipa::path(get, path = "/api/fulfillment/v1/images", tag = "images",
    responses((status = 200, body = Page<Image>), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller) -> Result<Json<Page<Image>>, ApiError> {
    let items = to_api(&s, &caller, catalog(&s).await?.unwrap_or_default()).await?;
    let n = items.len() as u64;
    Ok(Json(Page { items, size: n, total: n }))
}

/// Get one image, by name.
#[utoipa::path(get, path = "/api/fulfillment/v1/images/{id}", tag = "images",
    params(("id" = String, Path, description = "Image name")),
    responses((status = 200, body = Envelope<Image>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<Envelope<Image>>, ApiError> {
    let found: Vec<CatalogImage> = catalog(&s).await?.unwrap_or_default().into_iter().filter(|i| i.name == id).collect();
    let object = to_api(&s, &caller, found).await?.pop().ok_or_else(|| ApiError::not_found("image", &id))?;
    Ok(Json(Envelope { object }))
}

/// Refuses a machine whose image the backend's catalog lacks, or cannot
/// boot from, naming `field` (the parameter that chose it, or the template).
pub(super) async fn check_image(s: &AppState, machine: &MachineSpec, field: &str, errs: &mut ValidationErrors) -> Result<(), ApiError> {
    let Some(images) = catalog(s).await? else { return Ok(()) };
    let wanted = &machine.boot.image;
    let names = || images.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ");
    match images.iter().find(|i| boots(machine, i)) {
        Some(CatalogImage { problem: Some(p), name, .. }) => errs.push(field, format!("image {name:?} cannot be booted: {p}")),
        Some(_) => {}
        None if wanted == DEFAULT_IMAGE => {}
        None if machine.boot.is_url() => {
            errs.push(field, format!("this backend does not import images from URLs yet; images are {}", names()));
        }
        None => errs.push(field, format!("there is no image {wanted:?}; images are {} (GET /api/fulfillment/v1/images)", names())),
    }
    Ok(())
}
