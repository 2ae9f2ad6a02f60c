//! The prost messages and tonic service traits `build.rs` generates from
//! the project's `.proto` files, in modules named as their packages (the
//! generated code refers across packages that way). `google.protobuf`'s
//! types are `prost_types`'.

#![allow(missing_docs, clippy::all, clippy::pedantic, unreachable_pub)]

/// `shared.v1`: the metadata and condition status `fulfillment.v1` shares.
pub mod shared {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/shared.v1.rs"));
    }
}

/// `fulfillment.v1`: OSAC's first API (seed 000's VMs and templates).
pub mod fulfillment {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/fulfillment.v1.rs"));
    }
}

/// `osac.public.v1`: OSAC's current API.
pub mod osac {
    pub mod public {
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/osac.public.v1.rs"));
        }
    }
}

/// `vmaas.v1`: what vmaas serves beyond OSAC (snapshots).
pub mod vmaas {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/vmaas.v1.rs"));
    }
}
