//! A request body's whole read time: the body must be in within a deadline
//! set when its headers came, however it is dripped (a timeout that
//! restarts with every frame never cuts a body sent a byte at a time).
//! Uploads of image files (`…/content`), which may be large, are cut when
//! no bytes come for the same time instead.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error of a body that was not in within its time.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not sent within {0:?}")]
pub struct TooSlow(pub Duration);

/// A body cut off at a deadline: all of it within `limit` (`idle`: each
/// next bytes within it).
pub struct Deadline {
    inner: Body,
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
    idle: bool,
}

impl Deadline {
    /// Gives `req`'s body `limit` in all, or, for an image upload, `limit` between bytes.
    pub fn apply(req: Request<Body>, limit: Duration) -> Request<Body> {
        let idle = req.uri().path().ends_with("/content");
        req.map(|inner| Body::new(Self { inner, sleep: Box::pin(tokio::time::sleep(limit)), limit, idle }))
    }
}

impl hyper::body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Ready(Some(Ok(_))) if self.idle => {
                let next = Instant::now() + self.limit;
                self.sleep.as_mut().reset(next);
                polled
            }
            Poll::Ready(_) => polled,
            Poll::Pending => match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(TooSlow(self.limit))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
