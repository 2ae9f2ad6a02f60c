//! `osac.public.v1.DiskImages`, typed: the view of images
//! `vmaas_model::image::disk_image` describes, read from and written to
//! the messages field by field; each call one call into the application
//! layer ([`crate::app::disk_images`], [`crate::app::image_imports`]).

use tonic::{Request, Response};
use vmaas_model::image::disk_image::{Asked, FIXED_AT_IMPORT, import_spec, shown};
use vmaas_model::image::{Image, ImageDeprecation, ImageLifecycle, ImageLifecyclePatch};
use vmaas_model::{CreateObject, ValidationErrors};

use super::Reply;
use super::mask::Mask;
use super::meta::{changed_metadata, metadata_input, model_enum, wire_enum};
use super::{Ctx, count, non_empty, time};
use crate::app::image_imports::{self, PatchImage};
use crate::app::{disk_images, images};
use crate::error::ApiError;
use crate::grpc::pb::osac::public::v1 as pb;

/// The service.
pub struct DiskImages(pub Ctx);

#[tonic::async_trait]
impl pb::disk_images_server::DiskImages for DiskImages {
    async fn list(&self, req: Request<pb::DiskImagesListRequest>) -> Reply<pb::DiskImagesListResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let lr = self.0.list_request(q.offset, q.limit, q.filter, q.order)?;
        let (listed, page) = disk_images::list(&self.0.state, &caller, lr).await.map_err(|e| self.0.status(e))?;
        let items: Vec<_> = page.into_iter().map(to_pb).collect();
        Ok(Response::new(pb::DiskImagesListResponse { size: count(items.len() as u64), total: count(listed.total), items }))
    }

    async fn get(&self, req: Request<pb::DiskImagesGetRequest>) -> Reply<pb::DiskImagesGetResponse> {
        let caller = self.0.caller(&req).await?;
        let found = images::read(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::DiskImagesGetResponse { object: Some(to_pb(found)) }))
    }

    async fn create(&self, req: Request<pb::DiskImagesCreateRequest>) -> Reply<pb::DiskImagesCreateResponse> {
        let caller = self.0.caller(&req).await?;
        let asked = create_request(self.0.required(req.into_inner().object)?).map_err(|e| self.0.status(ApiError::invalid(e)))?;
        let made = disk_images::create(&self.0.state, &caller, asked).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::DiskImagesCreateResponse { object: Some(to_pb(made)) }))
    }

    async fn update(&self, req: Request<pb::DiskImagesUpdateRequest>) -> Reply<pb::DiskImagesUpdateResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let object = self.0.required(q.object)?;
        let id = object.id.clone();
        let mask = self.0.update_mask(&id, "osac.public.v1.DiskImage", q.update_mask)?;
        let now = images::read(&self.0.state, &caller, &id).await.map_err(|e| self.0.status(e))?;
        let change = patch_request(object, &now, &mask).map_err(|e| self.0.status(ApiError::invalid(e)))?;
        let changed = image_imports::change(&self.0.state, &caller, &id, change).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::DiskImagesUpdateResponse { object: Some(to_pb(changed.to_api())) }))
    }

    async fn delete(&self, req: Request<pb::DiskImagesDeleteRequest>) -> Reply<pb::DiskImagesDeleteResponse> {
        let caller = self.0.caller(&req).await?;
        image_imports::remove(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::DiskImagesDeleteResponse {}))
    }
}

/// A create's object as the image import it asks for.
fn create_request(di: pb::DiskImage) -> Result<CreateObject<vmaas_model::image::ImageSpec>, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let s = di.spec.unwrap_or_default();
    let name = |n: i32, of: fn(i32) -> Option<&'static str>| {
        if n == 0 { String::new() } else { of(n).map_or_else(|| n.to_string(), str::to_owned) }
    };
    let asked = Asked {
        source_type: name(s.source_type, |n| pb::SourceType::try_from(n).ok().map(|t| t.as_str_name())),
        source_ref: s.source_ref,
        guest_os_family: name(s.guest_os_family, |n| pb::GuestOsFamily::try_from(n).ok().map(|f| f.as_str_name())),
        architecture: s.architecture.iter().map(|a| name(*a, |n| pb::Architecture::try_from(n).ok().map(|a| a.as_str_name()))).collect(),
        lifecycle: name(s.lifecycle, |n| pb::DiskImageLifecycle::try_from(n).ok().map(|l| l.as_str_name())),
        description: None,
        deprecation: s.deprecation.is_some_and(|d| d.deprecation_timestamp.is_some() || d.obsolescence_timestamp.is_some()),
    };
    let spec = import_spec(asked, "object", &mut errs);
    let metadata = di.metadata.map(|m| metadata_input(m, &Mask::none()));
    errs.into_result(CreateObject { type_url: None, id: non_empty(di.id), metadata, spec, status: None })
}

/// An update's object as the change of the image `now`: its metadata, its
/// lifecycle and deprecation; another spec field `mask` wants must be as
/// the image shows it.
fn patch_request(di: pb::DiskImage, now: &Image, mask: &Mask) -> Result<PatchImage, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let s = di.spec.unwrap_or_default();
    let was = shown(now);
    let was_type = was.source_type.map_or(0, |t| wire_enum(t, pb::SourceType::from_str_name));
    let was_family = wire_enum(was.guest_os_family, pb::GuestOsFamily::from_str_name);
    let was_arch = vec![wire_enum(was.architecture, pb::Architecture::from_str_name)];
    let fixed = [
        ("source_type", s.source_type != 0, s.source_type == was_type),
        ("source_ref", !s.source_ref.is_empty(), s.source_ref == was.source_ref),
        ("guest_os_family", s.guest_os_family != 0, s.guest_os_family == was_family),
        ("architecture", !s.architecture.is_empty(), s.architecture == was_arch),
    ];
    for (field, set, same) in fixed {
        if mask.wants(&format!("spec.{field}"), set) && !same {
            errs.push(format!("object.spec.{field}"), FIXED_AT_IMPORT);
        }
    }
    let lifecycle = if mask.wants("spec.lifecycle", s.lifecycle != 0) {
        let name = pb::DiskImageLifecycle::try_from(s.lifecycle).unwrap_or_default().as_str_name();
        let found = model_enum(name, ImageLifecycle::ALL, ImageLifecycle::NAMES);
        if found.is_none() {
            errs.push("object.spec.lifecycle", format!("must be one of {}, got {}", ImageLifecycle::NAMES.join(", "), s.lifecycle));
        }
        found
    } else {
        None
    };
    let deprecation = s.deprecation.filter(|_| mask.touches("spec.deprecation", true)).map(|d| {
        let mut at = |ts: Option<prost_types::Timestamp>, field: &str| {
            let ts = ts.filter(|_| mask.touches(&format!("spec.deprecation.{field}"), true))?;
            let t = time::from_pb(&ts);
            if t.is_none() {
                errs.push(format!("object.spec.deprecation.{field}"), "is not a time that can be held");
            }
            t
        };
        let deprecation_timestamp = at(d.deprecation_timestamp, "deprecation_timestamp");
        ImageDeprecation { deprecation_timestamp, obsolescence_timestamp: at(d.obsolescence_timestamp, "obsolescence_timestamp") }
    });
    let spec = (lifecycle.is_some() || deprecation.is_some()).then_some(ImageLifecyclePatch { lifecycle, deprecation });
    errs.into_result(PatchImage::new(non_empty(di.id), changed_metadata(di.metadata, mask), spec))
}

/// Image `i` as a disk image.
fn to_pb(i: Image) -> pb::DiskImage {
    let view = shown(&i);
    let m = i.metadata;
    pb::DiskImage {
        metadata: Some(pb::Metadata {
            creation_timestamp: m.creation_timestamp.map(time::to_pb),
            deletion_timestamp: m.deletion_timestamp.map(time::to_pb),
            name: m.name,
            tenant: m.tenant.unwrap_or_default(),
            labels: m.labels.into_iter().collect(),
            annotations: m.annotations.into_iter().collect(),
            version: m.version.map_or(0, |v| i32::try_from(v).unwrap_or(i32::MAX)),
            ..Default::default()
        }),
        spec: Some(pb::DiskImageSpec {
            source_type: view.source_type.map_or(0, |t| wire_enum(t, pb::SourceType::from_str_name)),
            source_ref: view.source_ref,
            guest_os_family: wire_enum(view.guest_os_family, pb::GuestOsFamily::from_str_name),
            architecture: vec![wire_enum(view.architecture, pb::Architecture::from_str_name)],
            lifecycle: wire_enum(i.spec.lifecycle.as_str(), pb::DiskImageLifecycle::from_str_name),
            deprecation: i.spec.deprecation.map(|d| pb::DiskImageDeprecation {
                deprecation_timestamp: d.deprecation_timestamp.map(time::to_pb),
                obsolescence_timestamp: d.obsolescence_timestamp.map(time::to_pb),
            }),
        }),
        status: Some(pb::DiskImageStatus {
            state: i.status.state.as_str().to_owned(),
            message: i.status.message.unwrap_or_default(),
            virtual_size: i.status.virtual_size,
            progress_bytes: i.status.progress_bytes,
            size_bytes: i.status.size_bytes,
        }),
        id: i.id,
    }
}
