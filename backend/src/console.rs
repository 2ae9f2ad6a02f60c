//! Serial consoles, for backends whose VMs have one, and graphical ones
//! (the VM's display, RFB as VNC speaks it).

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{broadcast, mpsc};

use crate::error::BackendError;

/// A live serial console: what was printed so far, what is printed from
/// now on, and a way to type.
pub struct Console {
    /// The buffered output, oldest first.
    pub history: Vec<u8>,
    /// Output from now on.
    pub output: broadcast::Receiver<Bytes>,
    /// Input to the guest.
    pub input: mpsc::Sender<Bytes>,
}

/// The serial consoles of a backend's VMs.
#[async_trait]
pub trait Consoles: Send + Sync {
    /// The live console of VM `id`.
    async fn open(&self, id: &str) -> Result<Console, BackendError>;

    /// The buffered console output of VM `id`.
    async fn log(&self, id: &str) -> Result<Vec<u8>, BackendError> {
        Ok(self.open(id).await?.history)
    }

    /// A new connection to the display of VM `id`: the RFB protocol (VNC)
    /// both ways, from its version greeting on, for one viewer.
    async fn display(&self, id: &str) -> Result<Display, BackendError> {
        let _ = id;
        Err(BackendError::unsupported("opening the display", "this backend's VMs have no graphical console"))
    }
}

/// Bytes both ways, as a socket carries them.
pub trait DisplayStream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> DisplayStream for T {}

/// A connection to a VM's display: RFB from the VM's side.
pub type Display = Box<dyn DisplayStream>;
