//! The disk exports under way, per tenant: from the start of a
//! conversion until its body is sent or dropped, each holds a place among
//! the tenant's [`ExportSlots`] (`--exports-per-tenant`) and the bytes its
//! file holds count against the tenant's disk quota, beside what its VMs,
//! volumes and images hold. Past either, a new export is 429
//! RESOURCE_EXHAUSTED naming the limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::ApiError;

/// Exports under way: by tenant, how many and the bytes they hold.
#[derive(Debug)]
pub struct ExportSlots {
    per_tenant: usize,
    stall: Duration,
    held: Mutex<HashMap<String, Held>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Held {
    exports: usize,
    bytes: u64,
}

/// One export's place; dropping it gives the place and its bytes back.
#[derive(Debug)]
pub struct ExportSlot {
    slots: Arc<ExportSlots>,
    tenant: String,
    bytes: u64,
}

impl ExportSlots {
    /// At most `per_tenant` exports under way per tenant, each waiting
    /// at most `stall` for its client to take more of it.
    pub fn new(per_tenant: usize, stall: Duration) -> Arc<Self> {
        Arc::new(Self { per_tenant: per_tenant.max(1), stall, held: Mutex::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bytes `tenant`'s exports under way hold.
    pub fn bytes_of(&self, tenant: &str) -> u64 {
        self.lock().get(tenant).map_or(0, |h| h.bytes)
    }

    /// A place for an export of `tenant` expected to hold `bytes`, when
    /// the tenant has fewer than the limit under way and (with a disk
    /// quota) `room` bytes left beside its other exports' files.
    pub fn take(self: &Arc<Self>, tenant: &str, bytes: u64, room: Option<u64>) -> Result<ExportSlot, ApiError> {
        let mut held = self.lock();
        let h = held.entry(tenant.to_owned()).or_default();
        if h.exports >= self.per_tenant {
            return Err(ApiError::exhausted(
                "export",
                format!(
                    "tenant {tenant:?} has {} exports under way, the most it may (--exports-per-tenant {}): wait for one to finish",
                    h.exports, self.per_tenant
                ),
            ));
        }
        if let Some(room) = room.filter(|room| h.bytes.saturating_add(bytes) > *room) {
            return Err(ApiError::exhausted(
                "quota.disk",
                format!(
                    "tenant {tenant:?} has {room} bytes of its disk quota left and its exports under way hold {}: this export needs {bytes} more (delete something, or wait for an export to finish)",
                    h.bytes
                ),
            ));
        }
        h.exports += 1;
        h.bytes = h.bytes.saturating_add(bytes);
        Ok(ExportSlot { slots: self.clone(), tenant: tenant.to_owned(), bytes })
    }
}

impl ExportSlot {
    /// The longest its export waits for its client to take more of it.
    pub fn stall(&self) -> Duration {
        self.slots.stall
    }

    /// The export's file turned out to hold `bytes`: counted from now on.
    pub fn resize(&mut self, bytes: u64) {
        let mut held = self.slots.lock();
        if let Some(h) = held.get_mut(&self.tenant) {
            h.bytes = h.bytes.saturating_sub(self.bytes).saturating_add(bytes);
        }
        self.bytes = bytes;
    }
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        let mut held = self.slots.lock();
        if let Some(h) = held.get_mut(&self.tenant) {
            h.exports = h.exports.saturating_sub(1);
            h.bytes = h.bytes.saturating_sub(self.bytes);
            if h.exports == 0 {
                held.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_has_its_share_of_exports_and_of_its_disk_quota() {
        let slots = ExportSlots::new(2, Duration::from_secs(300));
        let mut a = slots.take("acme", 100, Some(250)).unwrap();
        let e = slots.take("acme", 200, Some(250)).unwrap_err();
        assert_eq!(e.details[0].field, "quota.disk");
        let b = slots.take("acme", 100, Some(250)).unwrap();
        let e = slots.take("acme", 1, None).unwrap_err();
        assert!(e.message.contains("--exports-per-tenant 2"), "{}", e.message);
        assert!(slots.take("globex", 1, None).is_ok(), "another tenant's share is its own");
        a.resize(30);
        assert_eq!(slots.bytes_of("acme"), 130);
        drop((a, b));
        assert_eq!(slots.bytes_of("acme"), 0);
        assert!(slots.take("acme", 250, Some(250)).is_ok());
    }
}
