//! Blocking calls into the store's own async runtime.
//!
//! The storage seam is synchronous and the etcd client is async. Every call is spawned on
//! the store's runtime and the calling thread waits for it on a channel, which works from
//! any thread, including a worker thread of another runtime (`Runtime::block_on` would
//! panic there).

use std::future::Future;
use std::sync::mpsc;

/// The store's runtime; shut down in the background when dropped, so dropping the store
/// inside another runtime's task does not panic.
#[derive(Debug)]
pub(crate) struct Bridge {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Bridge {
    /// A runtime of `threads` workers named `stampkv-etcd`.
    pub(crate) fn new(threads: usize) -> std::io::Result<Bridge> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("stampkv-etcd")
            .enable_all()
            .build()?;
        Ok(Bridge { runtime: Some(runtime) })
    }

    /// The runtime's handle (for background tasks).
    pub(crate) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.runtime.as_ref().map(|r| r.handle())
    }

    /// Runs `future` on the runtime and waits for its output; `None` if the runtime is gone
    /// (the task was dropped).
    pub(crate) fn run<F>(&self, future: F) -> Option<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = self.handle()?;
        let (tx, rx) = mpsc::sync_channel(1);
        handle.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().ok()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
