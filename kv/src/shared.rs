//! [`Core`]: what every handle on one open database shares — the store, the limits, the
//! watch hub and the queue hub. The facade ([`Kv`](super::Kv)), watches, queue listeners and
//! atomic operations each hold it (or borrow it); none of them needs another.

use crate::queue::hub::QueueHub;
use crate::store::Store;
use crate::watch::hub::WatchHub;
use crate::{KvError, Limits};
use std::sync::{Arc, Weak};

/// The state of one open database.
pub(crate) struct Core<S: Store> {
    /// The store under the database.
    pub store: S,
    /// The limits in force.
    pub limits: Limits,
    /// The registry of watches.
    pub watch: WatchHub,
    /// The queue's in-memory state.
    pub queue: QueueHub,
}

impl<S: Store> Core<S> {
    /// The state of a database just opened over `store`, subscribed to the commits other
    /// servers make to the store (see [`Store::subscribe_foreign_commits`]).
    pub fn open(store: S, limits: Limits) -> Arc<Core<S>> {
        let core = Arc::new(Core { store, limits, watch: WatchHub::default(), queue: QueueHub::default() });
        // Weak: the store owns the sink, and the core owns the store.
        let weak: Weak<Core<S>> = Arc::downgrade(&core);
        core.store.subscribe_foreign_commits(Arc::new(move |keys: &[Vec<u8>]| {
            if let Some(core) = weak.upgrade() {
                core.foreign_commit(keys);
            }
        }));
        core
    }

    /// Another server committed `keys`: their watches re-read them, as after a local
    /// commit, and queue listeners learn of messages written under the queue's prefix.
    fn foreign_commit(&self, keys: &[Vec<u8>]) {
        self.watch.notify(keys);
        self.queue.foreign_commit(keys);
    }

    /// Stops the queue workers (after their current handlers), ends the watches and closes
    /// the store.
    pub fn close(&self) -> Result<(), KvError> {
        self.queue.close();
        self.watch.close();
        self.store.close()
    }
}
