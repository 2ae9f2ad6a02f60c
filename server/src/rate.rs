//! The request rate each tenant may use. Every authenticated request (REST,
//! gRPC through the gateway, the opening of an event stream) takes one cell
//! of its tenant's bucket, governor's GCRA keyed by tenant: `per_second`
//! cells come back each second, up to `burst`. A request past it is
//! answered 429 `RESOURCE_EXHAUSTED` with `Retry-After` (when the next cell
//! is due), before its handler runs, so one tenant's flood costs the others
//! a token check per request and never a slot of the database or the
//! backend. Tenants idle for a while are forgotten by a pruning task.

use std::num::NonZeroU32;
use std::sync::{Arc, Weak};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Requests per second one tenant may make, by default.
pub const DEFAULT_PER_SECOND: u32 = 100;

/// A tenant's request rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    /// Requests a second.
    pub per_second: NonZeroU32,
    /// Requests at once after a quiet while.
    pub burst: NonZeroU32,
}

impl RateConfig {
    /// `per_second` requests a second in bursts of `burst` (twice the rate
    /// when 0); none (unlimited) when `per_second` is 0.
    pub fn new(per_second: u32, burst: u32) -> Option<Self> {
        let per_second = NonZeroU32::new(per_second)?;
        let burst = NonZeroU32::new(burst).unwrap_or(per_second.saturating_mul(NonZeroU32::MIN.saturating_add(1)));
        Some(Self { per_second, burst })
    }
}

/// How often tenants whose bucket is full again are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The rate limit of every tenant's requests.
pub struct TenantRate {
    limiter: DefaultKeyedRateLimiter<String>,
    per_second: NonZeroU32,
    burst: NonZeroU32,
}

impl std::fmt::Debug for TenantRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantRate").field("per_second", &self.per_second).field("burst", &self.burst).finish()
    }
}

/// A request past its tenant's rate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tenant {tenant:?} is past its request rate ({per_second} per second, bursts of {burst}): retry after {wait:?}")]
pub struct Limited {
    /// The tenant.
    pub tenant: String,
    /// Its rate.
    pub per_second: u32,
    /// Its burst.
    pub burst: u32,
    /// When its next request is allowed.
    pub wait: Duration,
}

impl From<Limited> for crate::error::ApiError {
    fn from(l: Limited) -> Self {
        Self::rate_limited(l.to_string(), l.wait)
    }
}

impl TenantRate {
    /// The rate `config` gives each tenant.
    pub fn new(config: RateConfig) -> Arc<Self> {
        let quota = Quota::per_second(config.per_second).allow_burst(config.burst);
        Arc::new(Self { limiter: RateLimiter::keyed(quota), per_second: config.per_second, burst: config.burst })
    }

    /// Takes one request of `tenant`'s rate, or says how long to wait.
    pub fn check(&self, tenant: &str) -> Result<(), Limited> {
        let key = tenant.to_owned();
        self.limiter.check_key(&key).map_err(|not_until| Limited {
            tenant: key,
            per_second: self.per_second.get(),
            burst: self.burst.get(),
            wait: not_until.wait_time_from(self.limiter.clock().now()),
        })
    }

    /// Forgets, every minute until the limit goes, the tenants whose bucket
    /// is full again (they would be allowed a whole burst anyway).
    pub fn spawn_pruning(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(PRUNE_EVERY);
            every.tick().await;
            loop {
                every.tick().await;
                let Some(rate) = weak.upgrade() else { return };
                rate.limiter.retain_recent();
                rate.limiter.shrink_to_fit();
            }
        });
    }

    /// Tenants remembered now (for tests and diagnostics).
    pub fn tenants(&self) -> usize {
        self.limiter.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_past_its_burst_waits_and_others_do_not() {
        assert_eq!(RateConfig::new(0, 5), None, "0: unlimited");
        assert_eq!(RateConfig::new(7, 0).map(|c| c.burst.get()), Some(14), "the burst is twice the rate unless given");
        let rate = TenantRate::new(RateConfig::new(1, 3).expect("a rate"));
        for _ in 0..3 {
            assert_eq!(rate.check("acme"), Ok(()));
        }
        let limited = rate.check("acme").expect_err("the fourth request within a second is past the burst");
        assert!(limited.wait > Duration::ZERO && limited.wait <= Duration::from_secs(1), "{limited}");
        assert!(limited.to_string().contains("\"acme\"") && limited.to_string().contains("1 per second"), "{limited}");
        assert_eq!(rate.check("globex"), Ok(()), "another tenant has a bucket of its own");
        assert_eq!(rate.tenants(), 2);
    }
}
