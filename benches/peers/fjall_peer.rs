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
        let db = Database::builder(dir).open().expect("open fjall");
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
    fn sync(&self) {
        self.db.persist(PersistMode::SyncAll).expect("persist");
    }
}
