//! Block cache behaviour through the table API.

use std::sync::Arc;
use std::thread;

use stampkv_sstable::{BlockCache, TableOptions};

use crate::common::{build, fixed_entries, open, Entry};

fn table_bytes(n: usize) -> (Vec<u8>, Vec<Entry>) {
    let entries = fixed_entries(n, 100);
    let options = TableOptions { block_size: 1024, ..TableOptions::default() };
    (build(&entries, options), entries)
}

#[test]
fn hits_after_first_read() {
    let (bytes, entries) = table_bytes(2000);
    let cache = Arc::new(BlockCache::new(8 << 20));
    let table = open(bytes, 1, Some(cache.clone()));
    let (user, trailer, value) = &entries[1234];
    assert_eq!(cache.hit_stats(), (0, 0));
    assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    assert_eq!(cache.hit_stats(), (0, 1));
    assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    assert_eq!(cache.hit_stats(), (1, 1));
    // A full scan misses once per block, then hits everywhere.
    let blocks = table.properties().data_block_count;
    for pass in 0..2 {
        let mut it = table.iter();
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().unwrap();
        }
        assert_eq!(n, entries.len());
        let (hits, misses) = cache.hit_stats();
        assert_eq!(misses, blocks, "pass {pass}");
        assert_eq!(hits + misses, 2 + (pass + 1) * blocks);
    }
    assert_eq!(cache.entry_count() as u64, blocks);
    // A second table with another id does not see the first one's blocks.
    let (bytes2, _) = table_bytes(10);
    let other = open(bytes2, 2, Some(cache.clone()));
    assert_eq!(other.get(&entries[0].0, u64::MAX).unwrap().map(|e| e.0), Some(entries[0].1));
    assert_eq!(cache.hit_stats().1, blocks + 1);
}

#[test]
fn capacity_is_respected_and_eviction_works() {
    let (bytes, entries) = table_bytes(3000);
    let capacity = 64 * 1024;
    let cache = Arc::new(BlockCache::new(capacity));
    let table = open(bytes, 1, Some(cache.clone()));
    let blocks = table.properties().data_block_count;
    let one_block = 2048 + 128; // block heap size plus bookkeeping, generously
    for (i, (user, trailer, _)) in entries.iter().enumerate() {
        assert!(table.get(user, *trailer).unwrap().is_some());
        if i % 100 == 0 {
            assert!(cache.usage_bytes() <= capacity + one_block);
        }
    }
    assert!(cache.usage_bytes() <= capacity + one_block);
    assert!((cache.entry_count() as u64) < blocks, "nothing was evicted");
    assert!(cache.entry_count() > 10, "cache holds too little");
    // The first block was evicted long ago: reading it again is a miss.
    let (_, misses) = cache.hit_stats();
    table.get(&entries[0].0, entries[0].1).unwrap();
    assert_eq!(cache.hit_stats().1, misses + 1);
}

#[test]
fn concurrent_readers() {
    let (bytes, entries) = table_bytes(4000);
    let cache = Arc::new(BlockCache::new(96 * 1024)); // small: constant eviction
    let table = open(bytes, 1, Some(cache.clone()));
    let entries = Arc::new(entries);
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (table, entries) = (table.clone(), entries.clone());
            thread::spawn(move || {
                for (i, (user, trailer, value)) in entries.iter().enumerate().skip(w) {
                    if i % 4 == w {
                        let got = table.get(user, *trailer).unwrap();
                        assert_eq!(got, Some((*trailer, value.clone())));
                    }
                }
                let mut it = table.iter();
                it.seek_to_last().unwrap();
                let mut n = 0;
                while it.valid() {
                    assert_eq!(it.user_key(), entries[entries.len() - 1 - n].0.as_slice());
                    n += 1;
                    it.prev().unwrap();
                }
                assert_eq!(n, entries.len());
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let (hits, misses) = cache.hit_stats();
    assert!(hits > 0 && misses > 0);
    assert!(cache.usage_bytes() <= 96 * 1024 + 4096);
}
