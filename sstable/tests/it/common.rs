//! Test helpers: a deterministic PRNG and table construction shortcuts.

use std::cmp::Ordering;
use std::sync::Arc;

use stampkv_sstable::{BlockCache, ReadAt, Table, TableBuilder, TableOptions};

/// SplitMix64: tiny, fast and good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent` %.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

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
