//! The kinds the provider manages from a description, for
//! [`crate::object_resource`]: subnets, security groups, external IPs and
//! their attachments, NAT gateways, load balancers, volumes and their attachments,
//! snapshots, images, instance types and catalog items.

use vmaas_model::ObjectKind;

use crate::object_resource::{Change, Field, Kind, Ty};
use crate::timeouts::{Defaults, TEN_MINUTES};

/// An image's create waits for its import, which the server lets run for
/// an hour.
const IMPORT: Defaults = Defaults { create: std::time::Duration::from_secs(3600), ..TEN_MINUTES };

const RULE: Ty = Ty::Blocks(&[
    ("protocol", Ty::Str, "`PROTOCOL_TCP`, `PROTOCOL_UDP`, `PROTOCOL_ICMP` or `PROTOCOL_ALL`."),
    ("port_from", Ty::Int, "First port (TCP and UDP); absent: every port."),
    ("port_to", Ty::Int, "Last port, inclusive; absent: `port_from` alone."),
    ("ipv4_cidr", Ty::Str, "The other side's addresses; absent: anywhere."),
]);

const MAPPING: Ty = Ty::Blocks(&[
    ("protocol", Ty::Str, "`PROTOCOL_TCP` (or `PROTOCOL_UDP` where the backend offers it)."),
    ("external_port", Ty::Int, "The port on the load balancer's address."),
    ("internal_port", Ty::Int, "The port on each target."),
]);

const fn field(name: &'static str, ty: Ty, change: Change, json: &'static str, doc: &'static str) -> Field {
    Field { name, ty, change, json, doc }
}

const STATE: Field = field("state", Ty::Str, Change::Output, "/status/state", "The state the server reports, e.g. `VOLUME_STATE_READY`.");

/// `vmaas_subnet`.
pub static SUBNET: Kind = Kind {
    kind: ObjectKind::Subnet,
    doc: "A subnet of a virtual network (OSAC's `Subnet`): an Ethernet segment its VMs' NICs are on. Create waits until it is READY; any change replaces it.",
    fields: &[
        field("virtual_network", Ty::Str, Change::Replace, "/spec/virtual_network", "The virtual network, by id or name."),
        field("ipv4_cidr", Ty::Str, Change::Replace, "/spec/ipv4_cidr", "Its range, inside the network's, e.g. `10.10.1.0/24`."),
        STATE,
    ],
    ready: &["SUBNET_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the subnet",
    flat: false,
};

/// `vmaas_security_group`.
pub static SECURITY_GROUP: Kind = Kind {
    kind: ObjectKind::SecurityGroup,
    doc: "Stateful rules for NICs of a virtual network (OSAC's `SecurityGroup`). Rule changes apply in place, at once, on every NIC that has the group.",
    fields: &[
        field("virtual_network", Ty::Str, Change::Replace, "/spec/virtual_network", "The virtual network, by id or name."),
        field("ingress", RULE, Change::Patch, "/spec/ingress", "What may come in; one block per rule."),
        field("egress", RULE, Change::Patch, "/spec/egress", "What may go out; one block per rule."),
        STATE,
    ],
    ready: &["SECURITY_GROUP_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the security group",
    flat: false,
};

/// `vmaas_external_ip`.
pub static EXTERNAL_IP: Kind = Kind {
    kind: ObjectKind::ExternalIp,
    doc: "An address from an external IP pool (OSAC's `ExternalIP`), kept until destroyed.",
    fields: &[
        field(
            "pool",
            Ty::Str,
            Change::ReplaceDefaulted,
            "/spec/pool",
            "The pool, by name; absent: the default pool (the server's choice, kept in state).",
        ),
        field("address", Ty::Str, Change::Output, "/status/address", "The address allocated."),
        field("attached", Ty::Bool, Change::Output, "/status/attached", "Whether an attachment holds it."),
        STATE,
    ],
    ready: &["EXTERNAL_IP_STATE_ALLOCATED"],
    timeouts: TEN_MINUTES,
    noun: "the external IP",
    flat: false,
};

/// `vmaas_external_ip_attachment`.
pub static EXTERNAL_IP_ATTACHMENT: Kind = Kind {
    kind: ObjectKind::ExternalIpAttachment,
    doc: "An external IP on a VM (OSAC's `ExternalIPAttachment`): the VM's exposed ports answer on the address. Changing `compute_instance` moves it in place.",
    fields: &[
        field("external_ip", Ty::Str, Change::Replace, "/spec/external_ip", "The external IP, by id or name."),
        field("compute_instance", Ty::Str, Change::Patch, "/spec/compute_instance", "The VM, by id or name."),
        field("external_ip_address", Ty::Str, Change::Output, "/status/external_ip_address", "The address attached."),
        STATE,
    ],
    ready: &["EXTERNAL_IP_ATTACHMENT_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the attachment",
    flat: false,
};

/// `vmaas_nat_gateway`.
pub static NAT_GATEWAY: Kind = Kind {
    kind: ObjectKind::NatGateway,
    doc: "A virtual network's way out (OSAC's `NATGateway`): its guests' outbound flows leave from the external IP named, which the gateway holds alone. Create waits until it is READY; any change replaces it.",
    fields: &[
        field("virtual_network", Ty::Str, Change::Replace, "/spec/virtual_network", "The virtual network, by id or name."),
        field("external_ip", Ty::Str, Change::Replace, "/spec/external_ip", "The external IP flows leave from, by id or name."),
        field("address", Ty::Str, Change::Output, "/status/address", "The address flows leave from."),
        STATE,
    ],
    ready: &["NAT_GATEWAY_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the NAT gateway",
    flat: false,
};

/// `vmaas_load_balancer`.
pub static LOAD_BALANCER: Kind = Kind {
    kind: ObjectKind::LoadBalancer,
    doc: "A load balancer (seed 001's `LoadBalancer`): an address whose ports spread connections over the targets that pass their probe. Targets and ports change in place.",
    fields: &[
        field("subnet", Ty::Str, Change::Replace, "/spec/subnet", "The subnet its targets are on, by id or name."),
        field("targets", Ty::StrList, Change::Patch, "/spec/targets", "The VMs behind it, by id or name."),
        field("port_mapping", MAPPING, Change::Patch, "/spec/port_mappings", "One block per port."),
        field("address", Ty::Str, Change::Output, "/status/address", "The address it answers on."),
        field("healthy_targets", Ty::StrList, Change::Output, "/status/healthy_targets", "The ids of the targets that pass their probe."),
        STATE,
    ],
    ready: &["LOAD_BALANCER_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the load balancer",
    flat: false,
};

/// `vmaas_volume`.
pub static VOLUME: Kind = Kind {
    kind: ObjectKind::Volume,
    doc: "A volume: block storage that outlives VMs, blank or starting as an image. Growing `size` applies in place (a running VM sees it at once); it never shrinks. Destroying it deletes its data, and is refused while it is attached.",
    fields: &[
        field("size", Ty::Str, Change::Patch, "/spec/size", "Its size, e.g. `10Gi`; only grows."),
        field("source_image", Ty::Str, Change::ReplaceOptional, "/spec/source_image", "The image it starts as, by name; absent: blank."),
        field("attached_to", Ty::Str, Change::Output, "/status/attached_to", "The id of the VM it is attached to."),
        STATE,
    ],
    ready: &["VOLUME_STATE_READY", "VOLUME_STATE_ATTACHED"],
    timeouts: TEN_MINUTES,
    noun: "the volume",
    flat: false,
};

/// `vmaas_volume_attachment`.
pub static VOLUME_ATTACHMENT: Kind = Kind {
    kind: ObjectKind::VolumeAttachment,
    doc: "A volume on a VM: hotplugged if the VM runs. Create waits until the VM has it; destroy waits until the guest released it. Replacing the VM leaves the volume and its data alone.",
    fields: &[
        field("volume", Ty::Str, Change::Replace, "/spec/volume", "The volume, by id or name."),
        field("compute_instance", Ty::Str, Change::Replace, "/spec/compute_instance", "The VM, by id or name."),
        field("auto_delete", Ty::Bool, Change::ReplaceOptional, "/spec/auto_delete", "Delete the volume with the VM (default false)."),
        field("serial", Ty::Str, Change::Output, "/status/serial", "The disk's serial in the guest (`/sys/block/vdX/serial`)."),
        STATE,
    ],
    ready: &["VOLUME_ATTACHMENT_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the attachment",
    flat: false,
};

/// `vmaas_snapshot`.
pub static SNAPSHOT: Kind = Kind {
    kind: ObjectKind::ComputeInstanceSnapshot,
    doc: "A snapshot of a VM's disks (its own and the volumes on it) at one instant, taken while it runs (online, crash-consistent) or while it is stopped. Create waits until it is taken (READY); any change replaces it. A VM is restored from it with `vmaas snapshot restore` or `POST /virtual_machines/{id}/restore`.",
    fields: &[
        field("compute_instance", Ty::Str, Change::Replace, "/spec/compute_instance", "The VM, by id or name."),
        field("online", Ty::Bool, Change::Output, "/status/online", "Whether the guest was running when it was taken."),
        field(
            "consistency",
            Ty::Str,
            Change::Output,
            "/status/consistency",
            "How consistent it is, e.g. `SNAPSHOT_CONSISTENCY_CRASH_CONSISTENT`.",
        ),
        field("size_bytes", Ty::Int, Change::Output, "/status/size_bytes", "The bytes it holds (counted against the disk quota)."),
        field("taken_at", Ty::Str, Change::Output, "/status/taken_at", "When it was taken (RFC 3339)."),
        STATE,
    ],
    ready: &["COMPUTE_INSTANCE_SNAPSHOT_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the snapshot",
    flat: false,
};

/// `vmaas_image`.
pub static IMAGE: Kind = Kind {
    kind: ObjectKind::Image,
    doc: "An OS image imported from an http(s) URL or a `docker://` registry reference (a containerDisk: the disk under `/disk/`), checked against `sha256` when given. Create waits until it is imported (READY); a failed import (bad checksum, not a qcow2 or raw disk, a qcow2 naming a backing file, a registry refusing the credentials) is an error with the server's reason. Destroy is refused while VMs or volumes use it. VMs name it by `name` (`vm_image`).",
    fields: &[
        field(
            "source",
            Ty::Str,
            Change::Replace,
            "/spec/source",
            "The http(s) URL or `docker://HOST/REPOSITORY:TAG` (or `@sha256:…`) the server imports it from.",
        ),
        field(
            "registry_username",
            Ty::Str,
            Change::ReplaceOptional,
            "/spec/registry_credentials/username",
            "The user name a registry that refuses anonymous pulls is asked with (`docker://` sources only).",
        ),
        field(
            "registry_password",
            Ty::Secret,
            Change::ReplaceOptional,
            "/spec/registry_credentials/password",
            "Its password or token, kept sensitive in the state; the server seals it and never answers it.",
        ),
        field(
            "registry_password_wo",
            Ty::WriteOnly,
            Change::ReplaceOptional,
            "/spec/registry_credentials/password",
            "The same, write-only: never in a plan or the state (OpenTofu or Terraform 1.11 and later).",
        ),
        field("sha256", Ty::Str, Change::ReplaceOptional, "/spec/sha256", "The file's SHA-256, in hex."),
        field("description", Ty::Str, Change::ReplaceOptional, "/spec/description", "What it holds."),
        field("public", Ty::Bool, Change::ReplaceOptional, "/spec/public", "Publish it for every tenant (administrators)."),
        field("firmware", Ty::Str, Change::ReplaceOptional, "/spec/firmware", "The firmware it boots by: `bios` or `efi`."),
        field("secure_boot", Ty::Bool, Change::ReplaceOptional, "/spec/secure_boot", "Its boot chain is signed for Secure Boot."),
        field("tpm", Ty::Bool, Change::ReplaceOptional, "/spec/tpm", "Its guest wants a TPM."),
        field("guest_os_family", Ty::Str, Change::ReplaceOptional, "/spec/guest_os_family", "`linux` or `windows`."),
        field("format", Ty::Str, Change::Output, "/status/format", "`qcow2` or `raw`."),
        field("virtual_size", Ty::Int, Change::Output, "/status/virtual_size", "The size the guest sees, in bytes."),
        STATE,
    ],
    ready: &["IMAGE_STATE_READY"],
    timeouts: IMPORT,
    noun: "the image",
    flat: false,
};

/// `vmaas_instance_type`.
pub static INSTANCE_TYPE: Kind = Kind {
    kind: ObjectKind::InstanceType,
    doc: "A named machine shape (OSAC's `InstanceType`), published by administrators for every tenant. Its shape (cores, memory, GPUs) is fixed: changing it replaces the type. `state` and `replacement` change in place (deprecate with a replacement, then obsolete).",
    fields: &[
        field("cores", Ty::Int, Change::Replace, "/spec/cores", "CPU cores."),
        field("memory_gib", Ty::Int, Change::Replace, "/spec/memory_gib", "Memory in GiB."),
        field(
            "gpu_pci_device_selector",
            Ty::Str,
            Change::ReplaceOptional,
            "/spec/gpu/pci_device_selector",
            "The GPUs' PCI vendor:device, e.g. `10DE:20B0`.",
        ),
        field(
            "gpu_resource_name",
            Ty::Str,
            Change::ReplaceOptional,
            "/spec/gpu/resource_name",
            "The GPUs' device plugin resource, e.g. `nvidia.com/A100`.",
        ),
        field("gpu_count", Ty::Int, Change::ReplaceOptional, "/spec/gpu/count", "How many GPUs, 1 to 16."),
        field("description", Ty::Str, Change::Patch, "/spec/description", "What it is for, in Markdown."),
        field(
            "state",
            Ty::Str,
            Change::PatchDefaulted,
            "/spec/state",
            "`INSTANCE_TYPE_STATE_ACTIVE` (the default at create), `INSTANCE_TYPE_STATE_DEPRECATED` or `INSTANCE_TYPE_STATE_OBSOLETE`.",
        ),
        field(
            "replacement",
            Ty::Str,
            Change::Patch,
            "/spec/deprecation/replacement/name",
            "The instance type that replaces a deprecated one, by name.",
        ),
        field("deprecation_timestamp", Ty::Str, Change::Output, "/spec/deprecation/deprecation_timestamp", "When it was deprecated."),
        field("obsolescence_timestamp", Ty::Str, Change::Output, "/spec/deprecation/obsolescence_timestamp", "When it was made obsolete."),
    ],
    ready: &[],
    timeouts: TEN_MINUTES,
    noun: "the instance type",
    flat: false,
};

const DEFINITION: Ty = Ty::Blocks(&[
    (
        "path",
        Ty::Str,
        "The VM field, in OSAC's compute instance names: `template_parameters.NAME`, `run_strategy`, `ssh_public_key`, `user_data`, `boot_disk.size_gib`, `boot_disk.storage_tier`, `instance_type` or `disk_image`.",
    ),
    ("display_name", Ty::Str, "Its label in a UI."),
    ("editable", Ty::Bool, "Whether a tenant may set it; if not, the item's value (or the template's) is the VM's for its life."),
    ("default", Ty::Json, "The value when the tenant gives none: a string as it is, anything else as JSON (`3`, `true`)."),
    (
        "validation_schema",
        Ty::Str,
        "A JSON Schema (draft 2020-12) a tenant's value must meet, e.g. `jsonencode({type = \"integer\", maximum = 4})`.",
    ),
]);

/// `vmaas_catalog_item`.
pub static CATALOG_ITEM: Kind = Kind {
    kind: ObjectKind::ComputeInstanceCatalogItem,
    doc: "A curated offering over a template (OSAC's `ComputeInstanceCatalogItem`), made by administrators: tenants see it once published, and a VM made from it (`catalog_item`) gets its template and its defaults, and keeps the fields it fixes. Every attribute changes in place; VMs made already keep their template.",
    fields: &[
        field("template", Ty::Str, Change::Patch, "/template", "The template its VMs are made of, by name."),
        field("title", Ty::Str, Change::Patch, "/title", "A one-line description."),
        field("description", Ty::Str, Change::Patch, "/description", "A long description, in Markdown."),
        field("published", Ty::Bool, Change::Patch, "/published", "Whether tenants see it (default false)."),
        field("field_definition", DEFINITION, Change::Patch, "/field_definitions", "What it says of one field of its VMs; one block each."),
    ],
    ready: &[],
    timeouts: TEN_MINUTES,
    noun: "the catalog item",
    flat: true,
};

/// Every kind described here, each a resource and a data source.
pub static ALL: &[&Kind] = &[
    &SUBNET,
    &SECURITY_GROUP,
    &EXTERNAL_IP,
    &EXTERNAL_IP_ATTACHMENT,
    &NAT_GATEWAY,
    &LOAD_BALANCER,
    &VOLUME,
    &VOLUME_ATTACHMENT,
    &SNAPSHOT,
    &IMAGE,
    &INSTANCE_TYPE,
    &CATALOG_ITEM,
];

/// The `vmaas_virtual_network` data source (its resource has its own module).
pub static NETWORK_DATA: Kind = Kind {
    kind: ObjectKind::VirtualNetwork,
    doc: "One of your virtual networks, by name.",
    fields: &[
        field("ipv4_cidr", Ty::Str, Change::Replace, "/spec/ipv4_cidr", "The IPv4 address space."),
        field("ipv6_cidr", Ty::Str, Change::ReplaceOptional, "/spec/ipv6_cidr", "The IPv6 address space."),
        STATE,
    ],
    ready: &["VIRTUAL_NETWORK_STATE_READY"],
    timeouts: TEN_MINUTES,
    noun: "the network",
    flat: false,
};
