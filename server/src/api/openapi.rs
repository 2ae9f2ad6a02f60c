//! The OpenAPI 3 document, generated from the handlers and the model types.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::catalog_items;
use super::compute_instance_templates;
use super::compute_instances;
use super::console;
use super::console_sessions;
use super::disk_images;
use super::display;
use super::events;
use super::exports;
use super::image_imports;
use super::images;
use super::migrate;
use super::quotas;
use super::resources::external_ips;
use super::restore;
use super::templates;
use super::vms;

#[derive(OpenApi)]
#[openapi(
    info(title = "vmaas fulfillment API", description = "Virtual machines and templates, per tenant. Errors are `{code, message, details[{field, reason}]}` with gRPC code numbers."),
    paths(
        super::health::healthz,
        super::health::livez,
        super::health::readyz,
        templates::list, templates::read, templates::create, templates::update, templates::patch, templates::remove,
        vms::list, vms::read, vms::create, vms::patch, vms::remove, vms::restart, migrate::migrate, restore::restore, exports::vm, exports::volume, exports::snapshot,
        compute_instance_templates::list, compute_instance_templates::read, compute_instance_templates::create,
        compute_instance_templates::patch, compute_instance_templates::remove,
        catalog_items::list, catalog_items::read, catalog_items::create, catalog_items::patch, catalog_items::remove,
        compute_instances::list, compute_instances::read, compute_instances::create, compute_instances::patch, compute_instances::remove,
        disk_images::list, disk_images::read, disk_images::create, disk_images::update, disk_images::remove,
        external_ips::list_pools, external_ips::read_pool,
        images::list, images::read, image_imports::create, image_imports::upload, image_imports::remove, image_imports::prune, image_imports::change, events::events,
        console::create_session, console::console, console::console_log, display::vnc, console_sessions::create,
        quotas::read, quotas::set, quotas::clear, quotas::list,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "templates", description = "Virtual machine templates: published by administrators, used by tenants"),
        (name = "virtual machines", description = "A tenant's virtual machines"),
        (name = "catalog items", description = "Curated offerings over a template (OSAC's ComputeInstanceCatalogItem): administrators publish them; a VM made from one gets its template and defaults and keeps the fields it fixes"),
        (name = "compute instances", description = "The same virtual machines in OSAC's public names (osac.public.v1 ComputeInstance): run_strategy for the power state, COMPUTE_INSTANCE_STATE_*"),
        (name = "disk images", description = "The same images in OSAC's public names (osac.public.v1 DiskImage): imported from an http(s) source_ref"),
        (name = "virtual networks", description = "A tenant's virtual networks (OSAC's VirtualNetwork)"),
        (name = "subnets", description = "Ranges of a tenant's virtual networks, each an Ethernet segment (OSAC's Subnet)"),
        (name = "security groups", description = "Stateful rules for the NICs of a virtual network (OSAC's SecurityGroup)"),
        (name = "external IP attachments", description = "An external IP on a VM (OSAC's ExternalIPAttachment): the VM's exposed ports answer on the address"),
        (name = "volume attachments", description = "A volume on a VM, hotplugged while it runs"),
        (name = "external IPs", description = "Pools of addresses the host serves, a tenant's addresses from them, and their attachments to VMs (OSAC's ExternalIPPool, ExternalIP, ExternalIPAttachment)"),
        (name = "images", description = "OS images VMs boot from: the administrators' public images, and images tenants import from a URL or upload"),
        (name = "volumes", description = "Block storage that outlives VMs, and its attachments to VMs (hotplugged while they run)"),
        (name = "quotas", description = "Limits per tenant on VMs, cores, memory, disk and external IPs, set by administrators, and what each tenant holds"),
        (name = "snapshots", description = "The disks of a VM at one instant, taken online or offline; a VM is restored from them in place"),
        (name = "load balancers", description = "Addresses whose ports spread connections over a tenant's VMs on one subnet (seed 001's LoadBalancer)"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build()),
        );
    }
}

/// The OpenAPI document: the handlers' operations, and those generated
/// for every kind the shared handlers serve.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    super::resources::document(&mut doc);
    super::resource_doc::unique_operation_ids(&mut doc);
    doc
}
