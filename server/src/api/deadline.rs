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
/// next bytes within it). The timer is made only once the body has to be
/// waited for, so a request whose body is already in costs none.
pub struct Deadline {
    inner: Body,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    limit: Duration,
    idle: bool,
}

impl Deadline {
    /// Gives `req`'s body `limit` in all, or, for an image upload, `limit`
    /// between bytes; a request without a body is left as it is.
    pub fn apply(req: Request<Body>, limit: Duration) -> Request<Body> {
        if hyper::body::Body::is_end_stream(req.body()) {
            return req;
        }
        let idle = req.uri().path().ends_with("/content");
        let deadline = Instant::now() + limit;
        req.map(|inner| Body::new(Self { inner, deadline, sleep: None, limit, idle }))
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
                self.deadline = next;
                if let Some(sleep) = self.sleep.as_mut() {
                    sleep.as_mut().reset(next);
                }
                polled
            }
            Poll::Ready(_) => polled,
            Poll::Pending => {
                let deadline = self.deadline;
                let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(TooSlow(self.limit))))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
