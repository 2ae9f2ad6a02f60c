//! The server's event stream (`GET /api/events/v1/events?watch=true`,
//! Server-Sent Events): what waits listen to, so that they wake when the
//! object changes instead of on the next poll.

use std::time::Duration;

use serde_json::Value;

use crate::{Client, Error};

/// An open event stream.
pub struct Watch {
    rsp: reqwest::Response,
    buf: Vec<u8>,
}

impl Client {
    /// Opens the event stream of the events passing `filter` (CEL over
    /// `event`), open for at most `open_for`.
    pub async fn watch_events(&self, filter: &str, open_for: Duration) -> Result<Watch, Error> {
        let url = format!("{}/api/events/v1/events", self.endpoint);
        let mut req = self.http.get(url).query(&[("watch", "true"), ("filter", filter)]).timeout(open_for);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let transport = |e| Error::transport(&self.endpoint, &e);
        let rsp = req.send().await.map_err(transport)?;
        if !rsp.status().is_success() {
            let status = rsp.status().as_u16();
            return Err(Error::Api {
                status,
                code: 12,
                message: format!("the server has no event stream (HTTP {status})"),
                details: vec![],
            });
        }
        Ok(Watch { rsp, buf: Vec::new() })
    }
}

impl Watch {
    /// The next event's JSON; `None` once the stream ended or broke.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&block);
                let data: String = text.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
                if !data.is_empty() {
                    return serde_json::from_str(&data).ok();
                }
                continue;
            }
            match self.rsp.chunk().await {
                Ok(Some(c)) => self.buf.extend_from_slice(&c),
                _ => return None,
            }
        }
    }
}
