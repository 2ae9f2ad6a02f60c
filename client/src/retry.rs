//! Requests tried again when trying again is safe: exponential backoff with
//! jitter (backon's), or the server's `Retry-After` when it sends one.
//!
//! - A connection that could not be made: any request (nothing was sent).
//! - 429 with `Retry-After` (the request rate; a quota's 429 has none, and
//!   trying again cannot help it) and 503 (the server or its database is
//!   not ready: it did nothing): any request.
//! - A dropped connection, a timeout, 502 or 504: only requests that mean
//!   the same sent twice (GET, HEAD, PUT, DELETE, OPTIONS); a create is
//!   not sent again once the server may have had it.
//!
//! So a server restarting under `vmaas vm create --wait`, or under the
//! provider's waits, costs a pause, not a failure.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Method, StatusCode};

/// How requests are tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first; 0: never again.
    pub retries: usize,
    /// The first pause (before jitter).
    pub min_delay: Duration,
    /// The longest pause of the backoff.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a server asking for more gets
    /// its error back at once.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// Eight more tries over about half a minute (0.25 s doubling up to 8 s,
    /// jittered): longer than a server takes to restart.
    fn default() -> Self {
        Self {
            retries: 8,
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Never try again.
    pub fn none() -> Self {
        Self { retries: 0, ..Self::default() }
    }

    /// The pauses between tries, in order.
    pub(crate) fn backoff(&self) -> impl Iterator<Item = Duration> + use<> {
        ExponentialBuilder::default()
            .with_jitter()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.retries)
            .build()
    }

    /// Whether an answer of `status` (with `headers`) to a `method` request
    /// may be tried again; the pause the server asked for, if it did.
    pub(crate) fn answer(&self, method: &Method, status: StatusCode, headers: &HeaderMap) -> Option<Option<Duration>> {
        let asked = retry_after(headers);
        if asked.is_some_and(|d| d > self.max_retry_after) {
            return None;
        }
        let again = match status {
            StatusCode::TOO_MANY_REQUESTS => asked.is_some(),
            StatusCode::SERVICE_UNAVAILABLE => true,
            StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => idempotent(method),
            _ => false,
        };
        again.then_some(asked)
    }

    /// Whether a request of `method` that failed with `e` may be tried again.
    pub(crate) fn transport(&self, method: &Method, e: &reqwest::Error) -> bool {
        e.is_connect() || (idempotent(method) && (e.is_timeout() || e.is_request() || e.is_body()))
    }
}

/// Whether sending a request of `method` twice means the same as once.
fn idempotent(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS)
}

/// The pause a `Retry-After` of whole seconds asks for (a date is not
/// honoured: the backoff is used instead).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(retry_after: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = retry_after {
            h.insert(RETRY_AFTER, v.parse().expect("a header value"));
        }
        h
    }

    #[test]
    fn what_is_tried_again() {
        let p = RetryPolicy::default();
        let (get, post) = (Method::GET, Method::POST);
        assert_eq!(p.answer(&post, StatusCode::TOO_MANY_REQUESTS, &headers(Some("2"))), Some(Some(Duration::from_secs(2))));
        assert_eq!(p.answer(&get, StatusCode::TOO_MANY_REQUESTS, &headers(None)), None, "a quota's 429 cannot be waited out");
        assert_eq!(p.answer(&post, StatusCode::SERVICE_UNAVAILABLE, &headers(None)), Some(None));
        assert_eq!(p.answer(&get, StatusCode::BAD_GATEWAY, &headers(None)), Some(None));
        assert_eq!(p.answer(&post, StatusCode::BAD_GATEWAY, &headers(None)), None, "a create may have been done");
        assert_eq!(p.answer(&get, StatusCode::SERVICE_UNAVAILABLE, &headers(Some("3600"))), None, "longer than the client waits");
        assert_eq!(p.answer(&get, StatusCode::CONFLICT, &headers(None)), None);
        assert_eq!(p.answer(&get, StatusCode::SERVICE_UNAVAILABLE, &headers(Some("Wed, 21 Oct 2026 07:28:00 GMT"))), Some(None));
    }

    #[test]
    fn the_backoff_grows_and_ends() {
        let p =
            RetryPolicy { retries: 5, min_delay: Duration::from_millis(100), max_delay: Duration::from_millis(1000), ..Default::default() };
        let pauses: Vec<Duration> = p.backoff().collect();
        assert_eq!(pauses.len(), 5);
        assert!(pauses.iter().all(|d| *d >= Duration::from_millis(100) && *d <= Duration::from_millis(2000)), "{pauses:?}");
        assert!(pauses[4] > pauses[0], "{pauses:?}");
        assert_eq!(RetryPolicy::none().backoff().count(), 0);
    }
}
