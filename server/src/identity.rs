//! The store's identity, recorded beside the host state: a server started
//! on an empty database, or on another installation's, refuses to start
//! instead of treating every guest on the host as garbage.

use std::path::{Path, PathBuf};

use tracing::{info, warn};
use vmaas_backend::Backend;
use vmaas_model::ObjectKind;

use crate::store::{Store, StoreError};

/// Name of the file in the data directory holding the store's identity.
pub const IDENTITY_FILE: &str = "store-identity";

/// Why the store cannot be used with this data directory.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The database is another installation's.
    #[error(
        "the database is store {store}, but {file} says this data directory belongs to store {host}: \
         is --database-url wrong? Point it at the right database, restore the database from a backup (docs/operations.md), \
         or start once with --adopt-store to accept this database (VMs it does not know are then quarantined, not deleted)"
    )]
    Mismatch {
        /// The database's identity.
        store: String,
        /// The identity the host state records.
        host: String,
        /// The identity file.
        file: PathBuf,
    },
    /// The database is new or empty while the host holds VMs.
    #[error(
        "the database is empty (new), but the data directory holds {vms} VM(s): a missing or truncated database? \
         Restore it from a backup (docs/operations.md), or start once with --adopt-store to accept the empty database \
         (the VMs are then quarantined, not deleted; `vmaas-server gc` removes them)"
    )]
    EmptyStore {
        /// VMs on the host.
        vms: usize,
    },
    /// The identity file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn read(path: &Path) -> Result<Option<String>, IdentityError> {
    match std::fs::read_to_string(path) {
        Ok(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_owned())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(IdentityError::Io { path: path.to_owned(), source }),
    }
}

fn write(path: &Path, id: &str) -> Result<(), IdentityError> {
    vmaas_qemu::atomic::write_atomic(path, format!("{id}\n").as_bytes())
        .map_err(|source| IdentityError::Io { path: path.to_owned(), source })
}

/// Checks that `store` is the one the host state in `data_dir` belongs to,
/// and records it there. `adopt` accepts a different or empty store.
pub async fn check(store: &Store, data_dir: &Path, backend: &dyn Backend, adopt: bool) -> Result<String, IdentityError> {
    let (store_id, made_now) = store.identity().await?;
    let path = data_dir.join(IDENTITY_FILE);
    let host = read(&path)?;
    let problem = match &host {
        Some(h) if *h != store_id => Some(IdentityError::Mismatch { store: store_id.clone(), host: h.clone(), file: path.clone() }),
        Some(_) => None,
        None => {
            // No record on the host: a first start, or a data directory of a
            // release before identities. Only a new store without a VM while
            // the host holds some is refused; a store that has its objects
            // (an upgrade) gets its identity recorded.
            let vms = backend.inventory().len();
            let empty = made_now && vms > 0 && store.all(ObjectKind::VirtualMachine).await?.is_empty();
            empty.then_some(IdentityError::EmptyStore { vms })
        }
    };
    match problem {
        Some(p) if !adopt => return Err(p),
        Some(p) => warn!(problem = %p, "--adopt-store: accepting this database; VMs it does not know will be quarantined"),
        None => {}
    }
    if host.as_deref() != Some(store_id.as_str()) {
        write(&path, &store_id)?;
        info!(store = %store_id, file = %path.display(), "store identity recorded");
    }
    Ok(store_id)
}
