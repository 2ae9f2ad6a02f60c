//! The images a backend can boot VMs from, as it finds them.

/// One image of the backend's catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogImage {
    /// Its name, as `vm_image` gives it.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// The disk format: `qcow2` or `raw` (empty when unreadable).
    pub format: String,
    /// The size the guest sees, in bytes.
    pub virtual_size: u64,
    /// Why VMs cannot boot from it, if they cannot.
    pub problem: Option<String>,
    /// Whether it is the one VMs naming `default` boot.
    pub default: bool,
}
