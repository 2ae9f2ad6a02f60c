//! `function-vmaas`: serve the composition function (flags per the function spec:
//! `--insecure`, `--tls-certs-dir`/`TLS_SERVER_CERTS_DIR`, `--address`, `--debug`).

use clap::{CommandFactory, FromArgMatches};
use function_sdk_rust::{Args, logging, serve};
use vmaas_function::function::VmaasFunction;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The SDK's flags, under this program's own name and version.
    let command = Args::command().name("function-vmaas").bin_name("function-vmaas").version(env!("CARGO_PKG_VERSION"));
    let args = Args::from_arg_matches(&command.get_matches())?;
    logging::configure(args.debug);
    serve(VmaasFunction, &args).await?;
    Ok(())
}
