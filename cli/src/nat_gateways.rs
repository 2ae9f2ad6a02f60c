//! `vmaas nat-gateway`: a virtual network's way out, from one external IP.

use clap::Subcommand;
use vmaas_client::Client;
use vmaas_model::{CreateObject, NatGateway, NatGatewaySpec};

use crate::net::{named, one, page};
use crate::output::Format;

const GATEWAYS: &str = "/nat_gateways";

/// `vmaas nat-gateway …`.
#[derive(Subcommand, Debug)]
pub enum NatGatewayCmd {
    /// Route a network's outbound traffic out from one of your external IPs.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// The virtual network, by name or id.
        #[arg(long)]
        network: String,
        /// The external IP it leaves from, by name or id (held by the gateway alone).
        #[arg(long)]
        external_ip: String,
    },
    /// List your NAT gateways.
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one, by name or id.
    Get {
        /// Name or id.
        nat_gateway: String,
    },
    /// Delete one: the network's guests reach nothing outside it any more.
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        nat_gateway: String,
    },
}

const HEADER: [&str; 5] = ["NAME", "STATE", "ADDRESS", "NETWORK", "ID"];

fn row(g: &NatGateway) -> Vec<String> {
    let state = g.status.state.as_str().trim_start_matches("NAT_GATEWAY_STATE_").to_owned();
    vec![g.metadata.name.clone(), state, g.status.address.clone(), g.spec.virtual_network.clone(), g.id.clone()]
}

/// Runs a `vmaas nat-gateway` command.
pub async fn nat_gateway(client: &Client, cmd: NatGatewayCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        NatGatewayCmd::Create { name, network, external_ip } => {
            let spec = NatGatewaySpec { virtual_network: network, external_ip };
            let req = CreateObject { type_url: None, id: None, metadata: named(name), spec, status: None };
            let g: NatGateway = client.create_object(GATEWAYS, &req).await?;
            one(format, &g, row(&g), &HEADER)
        }
        NatGatewayCmd::List(l) => {
            page(format, &client.list_objects_where::<NatGateway>(GATEWAYS, l.filter()?.as_deref()).await?, row, &HEADER)
        }
        NatGatewayCmd::Get { nat_gateway } => {
            let g: NatGateway = client.find_object(GATEWAYS, &nat_gateway).await?;
            one(format, &g, row(&g), &HEADER)
        }
        NatGatewayCmd::Delete { nat_gateway } => {
            let g: NatGateway = client.find_object(GATEWAYS, &nat_gateway).await?;
            let g: NatGateway = client.delete_object(GATEWAYS, &g.id).await?;
            one(format, &g, row(&g), &HEADER)
        }
    }
}
