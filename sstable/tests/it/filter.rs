//! Bloom filter behaviour through the table API.

use stampkv_sstable::{xxh64, TableOptions};

use crate::common::{build, fixed_entries, open};

/// Filter block size (with trailer) for `keys` distinct keys at 10 bits per key.
fn filter_bytes(keys: u64) -> u64 {
    (keys * 10).div_ceil(512) * 64 + 1 + 5
}

#[test]
fn false_positive_rate_below_two_percent() {
    let entries = fixed_entries(10_000, 8);
    let table = open(build(&entries, TableOptions::default()), 1, None);
    assert!(table.has_filter());
    for (user, trailer, value) in &entries {
        assert!(table.may_contain(user).unwrap(), "false negative");
        if user.ends_with(b"0") {
            assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
        }
    }
    let false_positives =
        (0..10_000).filter(|i| table.may_contain(format!("absent-{i:010}").as_bytes()).unwrap()).count();
    assert!(false_positives < 200, "{false_positives} / 10000 false positives");
    // Filter size: 10 bits per distinct key, in whole 64-byte lines, + k + trailer.
    assert_eq!(table.properties().filter_bytes, filter_bytes(10_000));
}

#[test]
fn filter_counts_distinct_user_keys_and_can_be_disabled() {
    let mut entries = Vec::new();
    for i in 0..1000u64 {
        for t in (0..5).rev() {
            entries.push((format!("k{i:05}").into_bytes(), t, vec![]));
        }
    }
    let with = open(build(&entries, TableOptions::default()), 1, None);
    assert_eq!(with.properties().filter_bytes, filter_bytes(1000));
    let without =
        open(build(&entries, TableOptions { bloom_bits_per_key: 0, ..TableOptions::default() }), 2, None);
    assert!(!without.has_filter());
    assert_eq!(without.properties().filter_bytes, 0);
    assert!(without.may_contain(b"anything").unwrap());
    assert_eq!(without.get(b"k00010", 3).unwrap(), Some((3, vec![])));
    assert_eq!(without.get(b"nope", 3).unwrap(), None);
}

#[test]
fn xxh64_published_vectors() {
    assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
    assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
    assert_eq!(xxh64(b"xxhash", 0), 0x32DD_3895_2C4B_C720);
}
