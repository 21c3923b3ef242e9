//! RocksDB (the `rocksdb` crate 0.25: RocksDB 11.8, built from source) behind the benchmark trait,
//! set up as its users run it: the WAL on, default write options for bulk puts (handed to
//! the OS, no sync) and `sync = true` for durable ones, LZ4 on every level as the other
//! engines compress, a bloom filter of 10 bits a key (RocksDB has none by default; LevelDB's
//! and ours use 10), and an LRU block cache of the benchmark's budget. Everything else keeps
//! RocksDB's defaults (64 MiB memtables, leveled compaction, 2 background jobs). With
//! `--defaults` it opens with RocksDB's defaults alone (32 MiB block cache; Snappy is not
//! built, so no compression).

use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteOptions, DB};
use stampkv_benches::BenchEngine;
use std::path::Path;

pub struct RocksEngine {
    db: DB,
    durable: WriteOptions,
}

impl RocksEngine {
    /// RocksDB's defaults, only `create_if_missing` set.
    pub fn open_defaults(dir: &Path) -> Self {
        let mut options = Options::default();
        options.create_if_missing(true);
        Self::with(dir, options)
    }

    /// As its users run it, with a block cache of `cache_bytes`.
    pub fn open(dir: &Path, cache_bytes: usize) -> Self {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(cache_bytes));
        table.set_bloom_filter(10.0, false);
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_compression_type(DBCompressionType::Lz4);
        options.set_block_based_table_factory(&table);
        Self::with(dir, options)
    }

    fn with(dir: &Path, options: Options) -> Self {
        let db = DB::open(&options, dir).expect("open rocksdb");
        let mut durable = WriteOptions::default();
        durable.set_sync(true);
        RocksEngine { db, durable }
    }
}

impl BenchEngine for RocksEngine {
    fn put(&self, key: &[u8], value: &[u8]) {
        self.db.put(key, value).expect("put");
    }
    fn put_durable(&self, key: &[u8], value: &[u8]) {
        self.db.put_opt(key, value, &self.durable).expect("durable put");
    }
    fn get(&self, key: &[u8]) -> bool {
        self.db.get_pinned(key).expect("get").is_some()
    }
    fn scan_all(&self) -> usize {
        let mut iter = self.db.raw_iterator();
        iter.seek_to_first();
        let mut count = 0;
        while iter.valid() {
            std::hint::black_box((iter.key(), iter.value()));
            count += 1;
            iter.next();
        }
        iter.status().expect("scan");
        count
    }
    fn seek(&self, key: &[u8], count: usize) -> usize {
        let mut iter = self.db.raw_iterator();
        iter.seek(key);
        let mut read = 0;
        while read < count && iter.valid() {
            std::hint::black_box((iter.key(), iter.value()));
            read += 1;
            iter.next();
        }
        iter.status().expect("seek");
        read
    }
    fn sync(&self) {
        self.db.flush_wal(true).expect("sync the WAL");
    }
    fn flush(&self) {
        self.db.flush().expect("flush");
    }
    fn report(&self) -> String {
        let level0 = self.db.property_int_value("rocksdb.num-files-at-level0").ok().flatten().unwrap_or(0);
        let stalls =
            self.db.property_int_value("rocksdb.actual-delayed-write-rate").ok().flatten().unwrap_or(0);
        format!("rocksdb: {level0} level-0 files, delayed write rate {stalls}")
    }
}
