//! Removes obsolete table files on a thread of their own.
//!
//! A table a compaction replaced is removed when the last version or iterator holding it
//! lets go, and that can be any thread: a commit that swaps the read state at a memtable
//! switch (under the commit lock), a reader dropping its iterator. Unlinking a file is not
//! always quick: on a file system mounted with online discard (ext4 `-o discard`), the
//! unlink trims the file's blocks before it returns, which took 200–700 ms for a 16 MiB
//! table while compaction kept the disk busy, stalling the commit that happened to drop
//! it. With the database's background threads running, removals go to a queue that the
//! `stampkv-remove` thread works through; otherwise (inline background mode, or after
//! close) the caller removes the file itself, as before.
//!
//! A crash before the removal leaves an orphan that the next open removes.
//!
//! A table's removal can also take its blocks out of the block cache
//! ([`Table::evict_from_block_cache`]), on the same thread and for the same reason: it
//! walks the table's index, a few thousand cache removals for a 16 MiB table.

use crate::fs::Fs;
use parking_lot::Mutex;
use stampkv_sstable::Table;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A file to remove, with the file system it lives in, and the open table whose blocks
/// leave the block cache with it, if it was open.
type Removal = (Arc<dyn Fs>, PathBuf, Option<Arc<Table>>);

/// Removes one file (after taking its table's blocks out of the cache).
fn carry_out((fs, path, table): Removal) {
    if let Some(table) = table {
        table.evict_from_block_cache();
    }
    // A failure leaves an orphan that the next open removes.
    let _ = fs.remove(&path);
}

/// The removal queue and the thread that serves it.
#[derive(Default)]
pub(crate) struct FileRemover {
    /// Where removals go while the thread runs.
    queue: Mutex<Option<Sender<Removal>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Whether a removed table's blocks leave the block cache (see
    /// [`FileRemover::set_evict_blocks`]).
    evict_blocks: AtomicBool,
}

impl FileRemover {
    /// A remover without a thread: removals happen in the caller until [`FileRemover::start`].
    pub(crate) fn new() -> Self {
        FileRemover::default()
    }

    /// Starts the removal thread (does nothing if it runs).
    pub(crate) fn start(&self) -> std::io::Result<()> {
        let mut queue = self.queue.lock();
        if queue.is_some() {
            return Ok(());
        }
        let (sender, receiver) = channel::<Removal>();
        let handle = std::thread::Builder::new().name("stampkv-remove".into()).spawn(move || {
            for removal in receiver {
                carry_out(removal);
            }
        })?;
        *queue = Some(sender);
        *self.thread.lock() = Some(handle);
        Ok(())
    }

    /// Removes `path`: queued for the thread if it runs, else now.
    pub(crate) fn remove(&self, fs: &Arc<dyn Fs>, path: &Path) {
        self.remove_table(fs, path, None);
    }

    /// Whether [`FileRemover::remove_table`] takes the table's blocks out of the block
    /// cache (default false: they age out). Worth it when new tables fill the cache's
    /// free room (`Options::prepopulate_block_cache`), which the removed blocks free; else
    /// it only adds work (freeing blocks another thread allocated) where the cache's clock
    /// would evict them anyway.
    pub(crate) fn set_evict_blocks(&self, on: bool) {
        self.evict_blocks.store(on, Ordering::Relaxed);
    }

    /// Removes table file `path` and, if set to ([`FileRemover::set_evict_blocks`]),
    /// takes `table`'s blocks (if given: the table as it was open) out of the block cache:
    /// queued for the thread if it runs, else now.
    pub(crate) fn remove_table(&self, fs: &Arc<dyn Fs>, path: &Path, table: Option<Arc<Table>>) {
        let table = table.filter(|_| self.evict_blocks.load(Ordering::Relaxed));
        let removal = (fs.clone(), path.to_path_buf(), table);
        let unsent = match &*self.queue.lock() {
            Some(sender) => sender.send(removal).err().map(|e| e.0),
            None => Some(removal),
        };
        if let Some(removal) = unsent {
            carry_out(removal);
        }
    }

    /// Removes everything queued, stops the thread and waits for it; later removals happen
    /// in the caller.
    pub(crate) fn stop(&self) {
        // Dropping the sender ends the thread's loop once the queue is empty.
        drop(self.queue.lock().take());
        if let Some(handle) = self.thread.lock().take() {
            let _ = handle.join();
        }
    }
}

impl Drop for FileRemover {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::StdFs;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stampkv-remover-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Queued removals are all done when `stop` returns; without the thread (before
    /// `start`, after `stop`) a removal is done before `remove` returns.
    #[test]
    fn removals_happen_by_stop_or_at_once() {
        let dir = scratch("queue");
        let fs: Arc<dyn Fs> = Arc::new(StdFs);
        let files: Vec<PathBuf> = (0..50).map(|i| dir.join(format!("{i:06}.sst"))).collect();
        for file in &files {
            std::fs::write(file, b"table").unwrap();
        }
        let remover = FileRemover::new();
        remover.remove(&fs, &files[0]);
        assert!(!files[0].exists(), "removed at once without the thread");
        remover.start().unwrap();
        remover.start().unwrap();
        for file in &files[1..49] {
            remover.remove(&fs, file);
        }
        remover.stop();
        assert!(files[1..49].iter().all(|f| !f.exists()), "a queued removal was not done by stop");
        assert!(files[49].exists());
        remover.remove(&fs, &files[49]);
        assert!(!files[49].exists(), "removed at once after stop");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
