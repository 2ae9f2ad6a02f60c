//! Waits that stop when asked: a client given a stop signal
//! ([`Client::with_stop`], e.g. the Terraform provider's `StopProvider`
//! on Ctrl-C) ends each wait in progress with [`Error::Interrupted`] at
//! once, instead of at its timeout; what the wait was about is left as it is.

use std::time::Duration;

use tokio::sync::watch;

use crate::{Client, Error};

impl Client {
    /// This client, whose waits end once `stop` turns true.
    pub fn with_stop(mut self, stop: watch::Receiver<bool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Resolves once the stop signal turned true (never, without one).
    pub(crate) async fn stopped(&self) {
        match self.stop.clone() {
            Some(mut rx) => {
                if rx.wait_for(|stop| *stop).await.is_err() {
                    // The signal's sender is gone: no stop will come.
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }

    /// Sleeps `d`, or fails with [`Error::Interrupted`] if asked to stop meanwhile.
    pub async fn pause(&self, d: Duration) -> Result<(), Error> {
        tokio::select! {
            () = tokio::time::sleep(d) => Ok(()),
            () = self.stopped() => Err(Error::Interrupted),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[tokio::test]
    async fn a_pause_ends_when_asked_to_stop() {
        let (tx, rx) = watch::channel(false);
        let c = Client::new("http://127.0.0.1:9", None).unwrap().with_stop(rx);
        assert!(c.pause(Duration::from_millis(1)).await.is_ok());
        let started = Instant::now();
        let stop = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx.send(true);
        });
        assert!(matches!(c.pause(Duration::from_secs(60)).await, Err(Error::Interrupted)));
        assert!(started.elapsed() < Duration::from_secs(5));
        stop.await.unwrap();
        assert!(Client::new("http://127.0.0.1:9", None).unwrap().pause(Duration::from_millis(1)).await.is_ok(), "no signal: a plain sleep");
    }
}
