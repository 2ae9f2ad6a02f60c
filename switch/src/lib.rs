//! # vmaas-switch
//!
//! The Ethernet segments of guest networks, in user space: each subnet is
//! a [`Segment`], a learning switch whose ports are QEMU NICs connected over
//! stream sockets (`-netdev stream`, TCP on loopback or unix). No root, no bridges, no host
//! routes, and no packet ever leaves the process for the host's networks.
//!
//! - [`frame`]: Ethernet, ARP, IPv4 and UDP, read and written in place.
//! - [`config`]: the subnet a segment carries and its ports' identities.
//! - [`fabric`]: the forwarding core, pure and synchronous: ports with
//!   their assigned MAC and address, MAC learning, flooding, anti-spoofing,
//!   and the gateway's own answers.
//! - [`firewall`]: security groups on NICs, stateful.
//! - [`dhcp`]: the segment's DHCP server: each port gets the address the
//!   API assigned it.
//! - [`port`]: QEMU's stream framing (a 4-byte big-endian length before
//!   each frame).
//! - [`listen`]: a port's socket, TCP on loopback (from this user only)
//!   or unix.
//! - [`segment`]: a fabric served on those sockets by tokio tasks.
//! - [`router`]: routing between the segments of one virtual network.
//! - [`gateway`]: the gateway's TCP endpoint, through which host traffic
//!   (external IPs, load balancers) enters a guest on its subnet NIC.
//! - [`nat`]: a network's NAT gateway: guests' flows to the outside,
//!   opened again from an external address.
//! - [`uplink`]: a network's segments joined to a host TAP device.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod dhcp;
pub mod fabric;
pub mod firewall;
pub mod frame;
pub mod gateway;
mod hub;
pub mod listen;
pub mod nat;
pub mod port;
pub mod router;
mod runtime;
pub mod segment;
mod stack;
pub mod uplink;

pub use fabric::{Fabric, PortConfig, PortId, SubnetConfig};
pub use frame::Mac;
pub use gateway::GatewayForward;
pub use listen::PortAddr;
pub use nat::{Dialer, Dialing};
pub use router::Router;
pub use segment::{Segment, SegmentError};
pub use uplink::Uplink;
