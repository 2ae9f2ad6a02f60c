//! Load balancers (seed 001's `LoadBalancer`: `hostRefs`, `portMapping`):
//! an address from the default external IP pool whose ports
//! (`spec.port_mappings[].external_port`) spread connections over the VMs
//! in `spec.targets` (all on `spec.subnet`) that pass their readiness probe,
//! on `internal_port`. Targets and mappings can be changed by a PATCH.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The `@type` of a load balancer in API responses.
pub const LOAD_BALANCER_TYPE_URL: &str = "type.googleapis.com/vmaas.v1.LoadBalancer";

/// Most mappings one load balancer has.
pub const MAX_PORT_MAPPINGS: usize = 32;
/// Most targets one load balancer has.
pub const MAX_TARGETS: usize = 64;

/// The protocol of a mapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum LbProtocol {
    /// TCP (seed 001 writes `TCP`).
    #[default]
    #[serde(rename = "PROTOCOL_TCP", alias = "TCP")]
    Tcp,
    /// UDP (seed 001 writes `UDP`).
    #[serde(rename = "PROTOCOL_UDP", alias = "UDP")]
    Udp,
}

/// One port of the load balancer and the targets' port behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PortMapping {
    /// The protocol (default TCP).
    #[serde(default)]
    pub protocol: LbProtocol,
    /// The port on the load balancer's address.
    pub external_port: i32,
    /// The port on each target.
    pub internal_port: i32,
}

/// What the tenant asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LoadBalancerSpec {
    /// The subnet every target is on, by id or name (stored as the id).
    pub subnet: String,
    /// The VMs behind it, by id or name (stored as ids).
    #[serde(default)]
    pub targets: Vec<String>,
    /// Its ports.
    pub port_mappings: Vec<PortMapping>,
}

fn check_port(errs: &mut ValidationErrors, field: String, port: i32) {
    if !(1..=65535).contains(&port) {
        errs.push(field, format!("{port} is not a port: it must be between 1 and 65535"));
    }
}

/// Checks a list of mappings, naming fields under `prefix`.
pub fn check_mappings(mappings: &[PortMapping], prefix: &str, errs: &mut ValidationErrors) {
    if mappings.is_empty() {
        errs.push(
            prefix,
            "needs at least one mapping, e.g. {\"protocol\": \"PROTOCOL_TCP\", \"external_port\": 80, \"internal_port\": 80}",
        );
    }
    if mappings.len() > MAX_PORT_MAPPINGS {
        errs.push(prefix, format!("has {} mappings; at most {MAX_PORT_MAPPINGS} are allowed", mappings.len()));
    }
    check_mapping_ports(mappings, prefix, ("external_port", "internal_port"), errs);
}

/// Checks each mapping's ports (real ports, each external port of a
/// protocol mapped once), naming fields under `prefix` with `names` for the
/// external and internal port (the API's `external_port`, a Crossplane
/// claim's `externalPort`).
pub fn check_mapping_ports(mappings: &[PortMapping], prefix: &str, names: (&str, &str), errs: &mut ValidationErrors) {
    let (external, internal) = names;
    let mut seen = BTreeSet::new();
    for (i, m) in mappings.iter().enumerate() {
        check_port(errs, format!("{prefix}[{i}].{external}"), m.external_port);
        check_port(errs, format!("{prefix}[{i}].{internal}"), m.internal_port);
        if !seen.insert((m.protocol, m.external_port)) {
            errs.push(format!("{prefix}[{i}].{external}"), format!("{} is mapped twice", m.external_port));
        }
    }
}

/// Checks a list of targets, naming fields under `prefix`.
pub fn check_targets(targets: &[String], prefix: &str, errs: &mut ValidationErrors) {
    if targets.len() > MAX_TARGETS {
        errs.push(prefix, format!("has {} targets; at most {MAX_TARGETS} are allowed", targets.len()));
    }
    for (i, t) in targets.iter().enumerate() {
        if t.trim().is_empty() {
            errs.push(format!("{prefix}[{i}]"), "is empty: give the id or name of one of your virtual machines");
        }
    }
}

impl LoadBalancerSpec {
    /// Checks what the spec says by itself, naming fields under `prefix`;
    /// the server checks the subnet and the targets.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.subnet.trim().is_empty() {
            errs.push(format!("{prefix}.subnet"), "is required: the id or name of the subnet its targets are on");
        }
        check_targets(&self.targets, &format!("{prefix}.targets"), &mut errs);
        check_mappings(&self.port_mappings, &format!("{prefix}.port_mappings"), &mut errs);
        errs.into_result(())
    }
}

crate::wire_states! {
    /// The state of a load balancer.
    LoadBalancerState {
        /// Being set up.
        Pending = "LOAD_BALANCER_STATE_PENDING",
        /// It listens on its address.
        Ready = "LOAD_BALANCER_STATE_READY",
        /// Could not be set up; see the message.
        Failed = "LOAD_BALANCER_STATE_FAILED",
        /// Being removed.
        Deleting = "LOAD_BALANCER_STATE_DELETING",
    }
}

/// What the load balancer is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoadBalancerStatus {
    /// Overall state.
    pub state: LoadBalancerState,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The address it answers on.
    #[serde(default)]
    pub address: String,
    /// The targets that pass their probe now (ids), which get connections.
    #[serde(default)]
    pub healthy_targets: Vec<String>,
}

crate::api_object! {
    /// A load balancer as the API returns it.
    LoadBalancer { kind: LoadBalancer, spec: LoadBalancerSpec, status: LoadBalancerStatus, type_url: "type.googleapis.com/vmaas.v1.LoadBalancer" }
}

/// The spec of a PATCH: what is given replaces what was.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LoadBalancerPatchSpec {
    /// The new targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    /// The new mappings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_mappings: Option<Vec<PortMapping>>,
}

crate::patch_object! {
    /// The object of a PATCH of a load balancer.
    PatchLoadBalancer { spec: LoadBalancerPatchSpec }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let spec: LoadBalancerSpec = serde_json::from_value(spec).unwrap();
        match spec.check("spec") {
            Ok(()) => vec![],
            Err(e) => e.0.iter().map(|f| format!("{}: {}", f.field, f.reason)).collect(),
        }
    }

    #[test]
    fn mappings_are_ports_mapped_once() {
        let ok = serde_json::json!({"subnet": "s", "targets": ["a"], "port_mappings": [{"protocol": "TCP", "external_port": 80, "internal_port": 8080}]});
        assert!(errors(ok).is_empty());
        let e = errors(serde_json::json!({"subnet": "s", "targets": [""], "port_mappings": [
            {"external_port": 0, "internal_port": 70000}, {"protocol": "PROTOCOL_TCP", "external_port": 0, "internal_port": 1}]}));
        assert_eq!(
            e,
            [
                "spec.targets[0]: is empty: give the id or name of one of your virtual machines",
                "spec.port_mappings[0].external_port: 0 is not a port: it must be between 1 and 65535",
                "spec.port_mappings[0].internal_port: 70000 is not a port: it must be between 1 and 65535",
                "spec.port_mappings[1].external_port: 0 is not a port: it must be between 1 and 65535",
                "spec.port_mappings[1].external_port: 0 is mapped twice",
            ]
        );
        assert!(errors(serde_json::json!({"subnet": "", "port_mappings": []})).len() == 2);
    }
}
