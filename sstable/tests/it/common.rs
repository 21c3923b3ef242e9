//! Test helpers: the shared seeded generator and table construction shortcuts.

use std::cmp::Ordering;
use std::sync::Arc;

use stampkv_sstable::{BlockCache, ReadAt, Table, TableBuilder, TableOptions};

/// The shared seeded generator of stampkv's tests.
pub use stampkv_testkit::SplitMix64 as Rng;

/// (user key, trailer, value).
pub type Entry = (Vec<u8>, u64, Vec<u8>);

/// Table order.
pub fn cmp_key(a_user: &[u8], a_trailer: u64, b_user: &[u8], b_trailer: u64) -> Ordering {
    a_user.cmp(b_user).then(b_trailer.cmp(&a_trailer))
}

/// Builds a table image from entries already in table order.
pub fn build(entries: &[Entry], options: TableOptions) -> Vec<u8> {
    let mut b = TableBuilder::new(Vec::new(), options);
    for (user, trailer, value) in entries {
        b.add(user, *trailer, value).unwrap();
    }
    b.finish(&[]).unwrap().1
}

pub fn open(bytes: Vec<u8>, id: u64, cache: Option<Arc<BlockCache>>) -> Arc<Table> {
    let file: Arc<dyn ReadAt> = Arc::new(bytes);
    Table::open(file, id, format!("table-{id}.sst"), cache).unwrap()
}

/// `n` entries with 16-byte user keys (one version each) and `value_len`-byte values.
pub fn fixed_entries(n: usize, value_len: usize) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            let key = format!("key-{:012}", i * 7).into_bytes();
            let value = format!("{i:08}").into_bytes().repeat(value_len / 8 + 1);
            (key, 100 + i as u64, value[..value_len].to_vec())
        })
        .collect()
}
