//! Virtual networks: create, read, list, delete, and wait for a state.

use std::time::{Duration, Instant};

use reqwest::Method;
use vmaas_model::{CreateVirtualNetwork, Envelope, Page, VirtualNetwork, VirtualNetworkState};

use crate::{Client, Error};

impl Client {
    /// Every virtual network the caller may see (first 1000).
    pub async fn list_networks(&self) -> Result<Page<VirtualNetwork>, Error> {
        self.call::<(), _>(Method::GET, "/virtual_networks?limit=1000", None, None).await?.ok_or_else(|| Error::Decode("empty list".into()))
    }

    /// One network by id.
    pub async fn get_network(&self, id: &str) -> Result<VirtualNetwork, Error> {
        self.object::<(), _>(Method::GET, &format!("/virtual_networks/{id}"), None).await
    }

    /// Creates a network.
    pub async fn create_network(&self, n: &CreateVirtualNetwork) -> Result<VirtualNetwork, Error> {
        self.object(Method::POST, "/virtual_networks", Some(&Envelope { object: n })).await
    }

    /// Starts deleting a network.
    pub async fn delete_network(&self, id: &str) -> Result<VirtualNetwork, Error> {
        self.object::<(), _>(Method::DELETE, &format!("/virtual_networks/{id}"), None).await
    }

    /// Polls network `id` every `every` until it is READY (`Ok(Some)`), gone
    /// when `gone` is asked (`Ok(None)`), FAILED, or `timeout` has passed.
    pub async fn wait_network(&self, id: &str, gone: bool, timeout: Duration, every: Duration) -> Result<Option<VirtualNetwork>, Error> {
        let started = Instant::now();
        let what = format!("virtual network {id} to be {}", if gone { "deleted" } else { "READY" });
        loop {
            match self.get_network(id).await {
                Ok(n) => {
                    let last = format!("{}{}", n.status.state, n.status.message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default());
                    match n.status.state {
                        VirtualNetworkState::Ready if !gone => return Ok(Some(n)),
                        VirtualNetworkState::Failed if !gone => {
                            return Err(Error::Failed { what, reason: n.status.message.unwrap_or_default() });
                        }
                        _ => {}
                    }
                    if started.elapsed() >= timeout {
                        return Err(Error::Timeout { what, waited: timeout, last });
                    }
                }
                Err(e) if e.is_not_found() && gone => return Ok(None),
                Err(e) => return Err(e),
            }
            self.pause(every.min(timeout.saturating_sub(started.elapsed())).max(Duration::from_millis(10))).await?;
        }
    }
}
