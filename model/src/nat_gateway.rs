//! NAT gateways, in the shape of OSAC's `NATGateway`: a virtual network's
//! outbound traffic leaves through one external IP of its tenant. One per
//! network; the external IP is then the gateway's alone (no attachment may
//! hold it). Both fields are fixed at create.

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// What the tenant asks for: a network's egress from an external IP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NatGatewaySpec {
    /// The virtual network, by id or name (OSAC's typed `{"id"}` or
    /// `{"name"}` too; stored as the id); fixed.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(default, with = "crate::reference::key")]
    pub virtual_network: String,
    /// The external IP flows leave from, by id or name (stored as the id); fixed.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(default, with = "crate::reference::key")]
    pub external_ip: String,
}

impl NatGatewaySpec {
    /// Checks what the spec says by itself, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.virtual_network.trim().is_empty() {
            errs.push(format!("{prefix}.virtual_network"), "is required: the id or name of one of your virtual networks");
        }
        if self.external_ip.trim().is_empty() {
            errs.push(format!("{prefix}.external_ip"), "is required: the id or name of one of your external IPs");
        }
        errs.into_result(())
    }
}

crate::wire_states! {
    /// The state of a NAT gateway.
    NatGatewayState {
        /// Being set up.
        Pending = "NAT_GATEWAY_STATE_PENDING",
        /// The network's outbound traffic leaves through it.
        Ready = "NAT_GATEWAY_STATE_READY",
        /// Could not be set up; see the message.
        Failed = "NAT_GATEWAY_STATE_FAILED",
        /// Being removed.
        Deleting = "NAT_GATEWAY_STATE_DELETING",
    }
}

/// What the NAT gateway is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NatGatewayStatus {
    /// Overall state.
    pub state: NatGatewayState,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The address flows leave from (vmaas's: OSAC's status has none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
}

crate::api_object! {
    /// A NAT gateway as the API returns it.
    NatGateway { kind: NatGateway, spec: NatGatewaySpec, status: NatGatewayStatus, type_url: "type.googleapis.com/osac.public.v1.NATGateway" }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_gateway_names_a_network_and_an_external_ip_plain_or_typed() {
        let typed: NatGatewaySpec =
            serde_json::from_value(json!({"virtual_network": {"name": "lab"}, "external_ip": {"id": "ip-1"}})).unwrap();
        assert_eq!((typed.virtual_network.as_str(), typed.external_ip.as_str()), ("lab", "ip-1"));
        assert!(typed.check("spec").is_ok());
        let e = NatGatewaySpec::default().check("object.spec").unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["object.spec.virtual_network", "object.spec.external_ip"]);
        assert!(serde_json::from_value::<NatGatewaySpec>(json!({"virtual_network": "lab", "subnet": "x"})).is_err());
        assert_eq!(NatGatewayState::default().as_str(), "NAT_GATEWAY_STATE_PENDING");
    }
}
