//! fjall behind the benchmark trait, with its default settings (32 MiB block cache, LZ4,
//! journal written to OS buffers per insert; durable inserts persist with SyncData).

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use stampkv_benches::BenchEngine;
use std::path::Path;

pub struct FjallEngine {
    db: Database,
    items: Keyspace,
}

impl FjallEngine {
    pub fn open(dir: &Path) -> Self {
        Self::open_with_cache(dir, None)
    }

    /// Opens with a block cache of `cache_bytes` instead of fjall's default (32 MiB).
    pub fn open_with_cache(dir: &Path, cache_bytes: Option<u64>) -> Self {
        let mut builder = Database::builder(dir);
        if let Some(bytes) = cache_bytes {
            builder = builder.cache_size(bytes);
        }
        let db = builder.open().expect("open fjall");
        let items = db.keyspace("items", KeyspaceCreateOptions::default).expect("keyspace");
        FjallEngine { db, items }
    }
}

impl BenchEngine for FjallEngine {
    fn put(&self, key: &[u8], value: &[u8]) {
        self.items.insert(key, value).expect("insert");
    }
    fn put_durable(&self, key: &[u8], value: &[u8]) {
        self.items.insert(key, value).expect("insert");
        self.db.persist(PersistMode::SyncData).expect("persist");
    }
    fn get(&self, key: &[u8]) -> bool {
        self.items.get(key).expect("get").is_some()
    }
    fn scan_all(&self) -> usize {
        let mut count = 0;
        for guard in self.items.iter() {
            guard.into_inner().expect("scan");
            count += 1;
        }
        count
    }
    fn seek(&self, key: &[u8], count: usize) -> usize {
        self.items.range(key..).take(count).fold(0, |read, guard| {
            guard.into_inner().expect("seek");
            read + 1
        })
    }
    fn sync(&self) {
        self.db.persist(PersistMode::SyncAll).expect("persist");
    }
    fn flush(&self) {
        // fjall's public (if undocumented) way to write out the active memtable and wait.
        self.items.rotate_memtable_and_wait().expect("flush");
    }
}
