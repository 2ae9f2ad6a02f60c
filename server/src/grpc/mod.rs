//! gRPC on the same port as REST: OSAC's services (`fulfillment.v1`,
//! `events.v1`, `osac.public.v1`) as the project's own `.proto` files state
//! them. Every unary method is served typed (`typed`: prost messages to
//! the application layer and back, no JSON and no REST route between);
//! the streams by their descriptors (`streams`: the event streams by
//! `watch`, `ConsoleProxy.Connect` by `proxy`); plus server reflection and
//! the gRPC health service.

mod codec;
mod json;
mod observe;
pub mod pb;
mod proxy;
mod status;
mod streams;
mod typed;
mod watch;
mod wire;

use prost_reflect::DescriptorPool;
use tonic_health::ServingStatus;

pub use streams::Streams;

use crate::state::AppState;

/// The project's `.proto` files, compiled by `build.rs`.
pub static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vmaas_descriptor.bin"));

/// The full name of the service `S` serves.
fn name_of<S: tonic::server::NamedService>(_: &S) -> &'static str {
    S::NAME
}

/// The standard services served beside OSAC's.
const STANDARD: [&str; 3] = ["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];

/// Why the gRPC routes could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The compiled descriptors do not decode (a build problem).
    #[error("the compiled .proto descriptors are invalid: {0}")]
    Descriptors(#[from] prost_reflect::DescriptorError),
    /// The reflection service could not read them.
    #[error("the reflection service cannot be built: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// The gRPC routes: every service of the project's `.proto` files (the
/// unary methods typed, the streams by their descriptors), reflection (v1
/// and v1alpha) and health. Messages are at most `max_message` bytes.
pub fn routes(state: AppState, max_message: usize) -> Result<axum::Router, GrpcError> {
    let pool = DescriptorPool::decode(DESCRIPTORS)?;
    let ctx = typed::Ctx::new(state.clone(), pool.clone());
    let streams = Streams::new(pool, state.clone(), max_message);
    let services = streams.services();
    let (reporter, health) = tonic_health::server::health_reporter();
    let names = services.clone();
    tokio::spawn(async move {
        for name in names {
            reporter.set_service_status(name, ServingStatus::Serving).await;
        }
    });
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(DESCRIPTORS)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let (v1, v1alpha) = (reflection().build_v1()?, reflection().build_v1alpha()?);
    let standard = tonic::service::Routes::new(health).add_service(v1).add_service(v1alpha);
    let mut router = axum::Router::new();
    for service in STANDARD {
        router = router.route_service(&format!("/{service}/{{method}}"), standard.clone());
    }
    let mut typed = Vec::new();
    macro_rules! serve_typed {
        ($($server:expr),* $(,)?) => {$(
            let server = $server.max_decoding_message_size(max_message).max_encoding_message_size(usize::MAX);
            let name = name_of(&server);
            typed.push(name);
            router = router.route_service(&format!("/{name}/{{method}}"), observe::Observed::new(state.clone(), server));
        )*};
    }
    use pb::osac::public::v1 as osac;
    serve_typed!(
        pb::fulfillment::v1::virtual_machines_server::VirtualMachinesServer::new(typed::VirtualMachines(ctx.clone())),
        pb::fulfillment::v1::virtual_machine_templates_server::VirtualMachineTemplatesServer::new(typed::VirtualMachineTemplates(
            ctx.clone()
        )),
        osac::compute_instances_server::ComputeInstancesServer::new(typed::ComputeInstances(ctx.clone())),
        osac::compute_instance_templates_server::ComputeInstanceTemplatesServer::new(typed::ComputeInstanceTemplates(ctx.clone())),
        osac::compute_instance_catalog_items_server::ComputeInstanceCatalogItemsServer::new(typed::ComputeInstanceCatalogItems(
            ctx.clone()
        )),
        osac::virtual_networks_server::VirtualNetworksServer::new(typed::VirtualNetworks(ctx.clone())),
        osac::subnets_server::SubnetsServer::new(typed::Subnets(ctx.clone())),
        osac::security_groups_server::SecurityGroupsServer::new(typed::SecurityGroups(ctx.clone())),
        osac::external_i_ps_server::ExternalIPsServer::new(typed::ExternalIps(ctx.clone())),
        osac::external_ip_attachments_server::ExternalIpAttachmentsServer::new(typed::ExternalIpAttachments(ctx.clone())),
        osac::nat_gateways_server::NatGatewaysServer::new(typed::NatGateways(ctx.clone())),
        osac::instance_types_server::InstanceTypesServer::new(typed::InstanceTypes(ctx.clone())),
        osac::external_ip_pools_server::ExternalIpPoolsServer::new(typed::ExternalIpPools(ctx.clone())),
        osac::disk_images_server::DiskImagesServer::new(typed::DiskImages(ctx.clone())),
        osac::console_sessions_server::ConsoleSessionsServer::new(typed::ConsoleSessions(ctx.clone())),
        pb::vmaas::v1::compute_instance_snapshots_server::ComputeInstanceSnapshotsServer::new(typed::ComputeInstanceSnapshots(ctx)),
    );
    for service in services.iter().filter(|s| !typed.contains(&s.as_str())) {
        router = router.route_service(&format!("/{service}/{{method}}"), streams.clone());
    }
    Ok(router)
}
