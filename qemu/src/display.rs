//! The graphical console: every VM has a standard VGA whose screen QEMU
//! serves over VNC on `vnc.sock` in the VM's directory (never a TCP port,
//! no password: only the server reaches the socket, and it lets in whom its
//! tickets admit). Each viewer gets a connection of its own; QEMU shares
//! the screen between them.

use std::path::Path;

use vmaas_backend::BackendError;

/// The VNC socket's name in a VM's directory.
pub const SOCKET: &str = "vnc.sock";

/// A new connection to the display served at `path`.
pub async fn connect(path: &Path) -> Result<vmaas_backend::Display, BackendError> {
    match tokio::net::UnixStream::connect(path).await {
        Ok(s) => Ok(Box::new(s)),
        Err(e) => Err(BackendError::transient(format!("connecting to the display at {}", path.display()), e)),
    }
}
