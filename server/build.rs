//! Compiles the project's own `.proto` files (OSAC's wire contract, stated
//! by vmaas) with protox into one encoded `FileDescriptorSet`, which the gRPC
//! gateway reads its services, messages and HTTP rules from at run time.

const FILES: &[&str] = &[
    "fulfillment/v1/virtual_machines.proto",
    "fulfillment/v1/virtual_machine_templates.proto",
    "events/v1/events.proto",
    "osac/public/v1/compute_instances.proto",
    "osac/public/v1/compute_instance_templates.proto",
    "osac/public/v1/networking.proto",
    "osac/public/v1/external_ips.proto",
    "osac/public/v1/events.proto",
    "google/rpc/status.proto",
    // The types `google.protobuf.Any` values may hold.
    "google/protobuf/wrappers.proto",
    "google/protobuf/struct.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../proto");
    let mut compiler = protox::Compiler::new(["../proto"])?;
    compiler.include_imports(true).open_files(FILES)?;
    // Encoded from the compiler's own pool: options keep their extensions
    // (`google.api.http`), which prost's descriptor types would drop.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("vmaas_descriptor.bin");
    std::fs::write(out, compiler.encode_file_descriptor_set())?;
    Ok(())
}
