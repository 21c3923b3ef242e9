//! User properties and the statistics in the properties block.

use stampkv_sstable::{TableBuilder, TableError, TableOptions, FORMAT_VERSION};

use crate::common::{fixed_entries, open};

#[test]
fn user_properties_round_trip() {
    let mut b = TableBuilder::new(Vec::new(), TableOptions::default());
    let entries = fixed_entries(500, 30);
    for (user, trailer, value) in &entries {
        b.add(user, *trailer, value).unwrap();
    }
    let binary: Vec<u8> = (0..=255).collect();
    let props: [(&str, &[u8]); 4] =
        [("zeta", b"last"), ("engine.level", b"3"), ("empty", b""), ("binary", &binary)];
    let (summary, bytes) = b.finish(&props).unwrap();
    let table = open(bytes, 1, None);
    for (name, value) in props {
        assert_eq!(table.user_property(name), Some(value), "{name}");
    }
    assert_eq!(table.user_property("missing"), None);
    assert_eq!(table.properties(), &summary.properties);

    let p = table.properties();
    assert_eq!(p.format_version, FORMAT_VERSION);
    assert_eq!(p.entry_count, 500);
    assert_eq!(p.raw_key_bytes, 500 * (16 + 8));
    assert_eq!(p.raw_value_bytes, 500 * 30);
    let first = &entries[0];
    let last = &entries[499];
    assert_eq!(p.smallest, Some((first.0.clone(), first.1)));
    assert_eq!(p.largest, Some((last.0.clone(), last.1)));
    assert!(p.data_block_count > 1);
    assert!(p.index_bytes > 0 && p.filter_bytes > 0);
    assert!(p.data_bytes + p.index_bytes + p.filter_bytes < summary.file_size);
    assert!(table.pinned_memory_bytes() as u64 >= p.index_bytes - 5);
}

#[test]
fn duplicate_user_property_is_rejected() {
    let b = TableBuilder::new(Vec::new(), TableOptions::default());
    match b.finish(&[("a", b"1"), ("a", b"2")]) {
        Err(TableError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput),
        other => panic!("unexpected {:?}", other.map(|(s, _)| s)),
    }
}
