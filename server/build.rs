//! Compiles the project's own `.proto` files (OSAC's wire contract, stated
//! by vmaas) with protox into one encoded `FileDescriptorSet`, which the gRPC
//! gateway reads its services, messages and HTTP rules from at run time, and
//! into prost messages and tonic service traits for the services served
//! typed (`grpc::pb`);
//! and brings the web page's front-end packages (xterm.js, and noVNC's ES
//! modules with the list of them in `OUT_DIR/novnc.rs`), installed from
//! npm as `web/package-lock.json` pins them, into `OUT_DIR/web`.

use std::path::Path;
use std::process::Command;

const FILES: &[&str] = &[
    "fulfillment/v1/virtual_machines.proto",
    "fulfillment/v1/virtual_machine_templates.proto",
    "events/v1/events.proto",
    "osac/public/v1/compute_instances.proto",
    "osac/public/v1/compute_instance_templates.proto",
    "osac/public/v1/compute_instance_catalog_items.proto",
    "osac/public/v1/networking.proto",
    "osac/public/v1/external_ips.proto",
    "osac/public/v1/nat_gateways.proto",
    "osac/public/v1/instance_types.proto",
    "osac/public/v1/disk_images.proto",
    "osac/public/v1/consoles.proto",
    "osac/public/v1/events.proto",
    "vmaas/v1/snapshots.proto",
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
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("vmaas_descriptor.bin"), compiler.encode_file_descriptor_set())?;
    tonic_prost_build::configure().build_client(false).compile_fds(compiler.file_descriptor_set())?;
    web_packages(&out_dir.join("web"))
}

/// The files of npm packages the page serves, and their names under `/assets`.
const VENDOR: &[(&str, &str)] = &[
    ("node_modules/@xterm/xterm/lib/xterm.js", "xterm.js"),
    ("node_modules/@xterm/xterm/css/xterm.css", "xterm.css"),
    ("node_modules/@xterm/addon-fit/lib/addon-fit.js", "addon-fit.js"),
    ("node_modules/@novnc/novnc/core/rfb.js", "novnc/core/rfb.js"),
];

/// noVNC's package: its modules (`core/`, `vendor/`) are served as they are.
const NOVNC: &str = "node_modules/@novnc/novnc";

/// Installs the pinned packages (`npm ci`) when they are missing or older
/// than the lock file, and copies the served files to `out`.
fn web_packages(out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../web/package.json");
    println!("cargo:rerun-if-changed=../web/package-lock.json");
    let web = Path::new("../web");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let installed = modified(&web.join("node_modules/.package-lock.json"));
    let stale = VENDOR.iter().any(|(p, _)| !web.join(p).exists()) || installed < modified(&web.join("package-lock.json"));
    if stale {
        let status = Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"]).current_dir(web).status();
        match status {
            Ok(s) if s.success() => {}
            other => {
                return Err(format!(
                    "the web page's npm packages are missing and `npm ci` in web/ failed ({other:?}): install Node.js and npm (scripts/setup.sh does)"
                )
                .into());
            }
        }
    }
    std::fs::create_dir_all(out)?;
    for (from, to) in VENDOR {
        std::fs::create_dir_all(out.join(to).parent().unwrap_or(out))?;
        std::fs::copy(web.join(from), out.join(to))?;
    }
    novnc_modules(&web.join(NOVNC), out)
}

/// Copies noVNC's modules to `out/novnc` and lists them, with their bytes,
/// in `OUT_DIR/novnc.rs` (`NOVNC_FILES: &[(&str, &[u8])]`, by path under
/// the package).
fn novnc_modules(package: &Path, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut files = Vec::new();
    for top in ["core", "vendor"] {
        collect_js(&package.join(top), top, &mut files)?;
    }
    files.sort();
    let mut list = String::from("/// noVNC's modules: path under the package, bytes.\npub const NOVNC_FILES: &[(&str, &[u8])] = &[\n");
    for rel in &files {
        let to = out.join("novnc").join(rel);
        std::fs::create_dir_all(to.parent().unwrap_or(out))?;
        std::fs::copy(package.join(rel), &to)?;
        list.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", to.canonicalize()?));
    }
    list.push_str("];\n");
    std::fs::write(out.parent().unwrap_or(out).join("novnc.rs"), list)?;
    Ok(())
}

/// The `.js` files under `dir` (named `prefix/…`), into `files`.
fn collect_js(dir: &Path, prefix: &str, files: &mut Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        if entry.file_type()?.is_dir() {
            collect_js(&entry.path(), &name, files)?;
        } else if name.ends_with(".js") {
            files.push(name);
        }
    }
    Ok(())
}
