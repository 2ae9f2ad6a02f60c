//! OSAC's disk images (`osac.public.v1.DiskImages`), a view of the images
//! [`super::images`] and [`super::image_imports`] serve: what both
//! protocols call, so that REST and gRPC list, import and report errors
//! alike (the view's field names, `vmaas_model::image::disk_image`).

use std::collections::HashMap;
use std::sync::Arc;

use vmaas_model::CreateObject;
use vmaas_model::image::disk_image::to_disk_image;
use vmaas_model::image::{Image, ImageSpec};

use super::image_imports;
use super::images;
use super::listing::{ListRequest, Listed, id_of};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// A page of the disk images the caller sees (the catalog's and the
/// imported ones), as the list's filter sees them (their views' JSON), and
/// the same images.
pub(crate) async fn list(s: &AppState, caller: &Caller, req: ListRequest) -> Result<(Listed, Vec<Image>), ApiError> {
    let all = images::list(s, caller, None).await?;
    let every = &all;
    let listed = req
        .run_unnarrowed(|r| async move {
            let total = every.len() as u64;
            let skip = usize::try_from(r.offset).unwrap_or(usize::MAX);
            let window = every.iter().skip(skip).take(usize::try_from(r.limit).unwrap_or(usize::MAX));
            Ok((window.map(|i| Arc::from(to_disk_image(i).to_string())).collect(), total))
        })
        .await?;
    let mut by_id: HashMap<String, Image> = all.into_iter().map(|i| (i.id.clone(), i)).collect();
    let page = listed.items.iter().filter_map(|j| id_of(j)).filter_map(|id| by_id.remove(&id)).collect();
    Ok((listed, page))
}

/// Imports the image a disk image's create asks for (`obj`, read from the
/// view by `vmaas_model::image::disk_image::import_spec`).
pub(crate) async fn create(s: &AppState, caller: &Caller, obj: CreateObject<ImageSpec>) -> Result<Image, ApiError> {
    let made = image_imports::create(s, caller, obj).await.map_err(in_view)?;
    Ok(made.to_api())
}

/// An error of the images' functions in the view's field names.
pub(crate) fn in_view(mut e: ApiError) -> ApiError {
    for d in &mut e.details {
        if d.field == "object.spec.source" {
            d.field = "object.spec.source_ref".into();
        }
    }
    e
}
