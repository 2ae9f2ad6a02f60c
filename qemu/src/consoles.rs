//! The consoles of the VMs on this host ([`Consoles`]): the serial console
//! (live, or its log file once QEMU has gone) and the VGA screen's VNC socket.

use async_trait::async_trait;
use vmaas_backend::{BackendError, Console, Consoles};

use crate::console::{self, SerialConsole};
use crate::{Vms, display};

#[async_trait]
impl Consoles for Vms {
    async fn open(&self, id: &str) -> Result<Console, BackendError> {
        let h = self.handle(id).ok_or_else(|| BackendError::invalid("opening the console", "the VM has never run"))?;
        let vm = h.lock().await;
        vm.console.as_ref().map(SerialConsole::open).ok_or_else(|| BackendError::invalid("opening the console", "the VM is not running"))
    }

    async fn log(&self, id: &str) -> Result<Vec<u8>, BackendError> {
        let Some(h) = self.handle(id) else { return Ok(Vec::new()) };
        let vm = h.lock().await;
        if let Some(c) = &vm.console {
            return Ok(c.history());
        }
        let data = tokio::fs::read(vm.path("console.log")).await.unwrap_or_default();
        Ok(data[data.len().saturating_sub(console::RING)..].to_vec())
    }

    async fn display(&self, id: &str) -> Result<vmaas_backend::Display, BackendError> {
        let h = self.handle(id).ok_or_else(|| BackendError::invalid("opening the display", "the VM has never run"))?;
        let path = {
            let vm = h.lock().await;
            if vm.console.is_none() {
                return Err(BackendError::invalid("opening the display", "the VM is not running"));
            }
            vm.path(display::SOCKET)
        };
        display::connect(&path).await
    }
}
