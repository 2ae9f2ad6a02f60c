//! `function-vmaas`: serve the composition function (flags per the function spec:
//! `--insecure`, `--tls-certs-dir`/`TLS_SERVER_CERTS_DIR`, `--address`, `--debug`).

use clap::Parser;
use function_sdk_rust::{Args, logging, serve};
use vmaas_function::function::VmaasFunction;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    logging::configure(args.debug);
    serve(VmaasFunction, &args).await?;
    Ok(())
}
