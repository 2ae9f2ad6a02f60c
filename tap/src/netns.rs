//! Work done inside another network namespace: a thread of our own joins
//! the namespace (`setns`) once and runs what it is sent there, so that
//! sockets made by that work belong to the namespace (a socket keeps the
//! namespace it was made in), while the rest of the process stays where
//! it is. The server makes a NAT gateway's outside sockets here when the
//! administrator names the namespace egress leaves from.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// One piece of work for the namespace's thread.
type Job = Box<dyn FnOnce() + Send>;

/// A network namespace, joined by a thread that runs [`Namespace::run`]'s work.
#[derive(Debug)]
pub struct Namespace {
    path: PathBuf,
    jobs: mpsc::Sender<Job>,
}

impl Namespace {
    /// Joins the namespace at `path` (e.g. `/run/netns/egress`, or
    /// `/proc/PID/ns/net`) on a new thread; fails if it cannot be opened
    /// or joined (joining needs `CAP_SYS_ADMIN`).
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let (jobs, rx) = mpsc::channel::<Job>();
        let (joined_tx, joined) = mpsc::channel::<io::Result<()>>();
        std::thread::Builder::new().name("vmaas-netns".into()).spawn(move || {
            // SAFETY: `file` is an open namespace file that outlives the
            // call; `setns` only changes this thread's network namespace.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            let joined_ok = if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) };
            let ok = joined_ok.is_ok();
            let _ = joined_tx.send(joined_ok);
            if ok {
                for job in rx {
                    job();
                }
            }
        })?;
        joined.recv().map_err(|_| io::Error::other("the namespace's thread ended"))??;
        Ok(Self { path: path.to_owned(), jobs })
    }

    /// The namespace's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `work` inside the namespace; its result comes back on the
    /// returned channel (quick work only: one thread serves every caller).
    pub fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> tokio::sync::oneshot::Receiver<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = self.jobs.send(Box::new(move || {
            let _ = tx.send(work());
        }));
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_in_the_namespace_it_names() {
        // The process's own namespace: joining it needs no privilege beyond
        // what the test runs with, and the thread sees the same inode.
        let Ok(ns) = Namespace::open(Path::new("/proc/self/ns/net")) else { return };
        let inode = |p: &str| std::fs::read_link(p).ok();
        let seen = ns.run(move || inode("/proc/thread-self/ns/net")).await.unwrap();
        assert_eq!(seen, inode("/proc/self/ns/net"));
        assert!(Namespace::open(Path::new("/nonexistent/ns")).is_err());
    }
}
