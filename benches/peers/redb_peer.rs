//! redb behind the benchmark trait, measured the way its peers are: one write transaction
//! per insert with `Durability::None` (redb has no log; such commits become durable at the
//! next `Immediate` commit, which `sync` makes), one read transaction per point read or
//! seek, and a cache of the size given (redb's default is 1 GiB).

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use stampkv_benches::BenchEngine;
use std::path::Path;

const ITEMS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("items");

pub struct RedbEngine {
    db: Database,
}

impl RedbEngine {
    /// Creates `dir/items.redb` with a cache of `cache_bytes` (0: redb's default, 1 GiB).
    pub fn open(dir: &Path, cache_bytes: usize) -> Self {
        std::fs::create_dir_all(dir).expect("create redb dir");
        let mut builder = Database::builder();
        if cache_bytes > 0 {
            builder.set_cache_size(cache_bytes);
        }
        let db = builder.create(dir.join("items.redb")).expect("open redb");
        let txn = db.begin_write().expect("begin");
        txn.open_table(ITEMS).expect("create table");
        txn.commit().expect("commit");
        RedbEngine { db }
    }

    fn insert(&self, key: &[u8], value: &[u8], durability: Durability) {
        let mut txn = self.db.begin_write().expect("begin");
        txn.set_durability(durability).expect("durability");
        txn.open_table(ITEMS).expect("table").insert(key, value).expect("insert");
        txn.commit().expect("commit");
    }
}

impl BenchEngine for RedbEngine {
    fn put(&self, key: &[u8], value: &[u8]) {
        self.insert(key, value, Durability::None);
    }
    fn put_durable(&self, key: &[u8], value: &[u8]) {
        self.insert(key, value, Durability::Immediate);
    }
    fn get(&self, key: &[u8]) -> bool {
        let txn = self.db.begin_read().expect("begin read");
        let table = txn.open_table(ITEMS).expect("table");
        table.get(key).expect("get").is_some()
    }
    fn scan_all(&self) -> usize {
        let txn = self.db.begin_read().expect("begin read");
        let table = txn.open_table(ITEMS).expect("table");
        let mut count = 0;
        for entry in table.iter().expect("iter") {
            let (key, value) = entry.expect("scan");
            std::hint::black_box((key.value(), value.value()));
            count += 1;
        }
        count
    }
    fn seek(&self, key: &[u8], count: usize) -> usize {
        let txn = self.db.begin_read().expect("begin read");
        let table = txn.open_table(ITEMS).expect("table");
        let mut read = 0;
        for entry in table.range(key..).expect("range").take(count) {
            let (key, value) = entry.expect("seek");
            std::hint::black_box((key.value(), value.value()));
            read += 1;
        }
        read
    }
    fn sync(&self) {
        // An empty commit with Immediate durability makes every earlier commit durable.
        let mut txn = self.db.begin_write().expect("begin");
        txn.set_durability(Durability::Immediate).expect("durability");
        txn.commit().expect("commit");
    }
}
