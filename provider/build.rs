//! Compiles the plugin protocol with protox (no protoc needed) and generates
//! the tonic server.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["../proto/tfplugin6.proto", "../proto/plugin.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["../proto"])?;
    tonic_prost_build::configure().build_client(false).compile_fds(fds)?;
    Ok(())
}
