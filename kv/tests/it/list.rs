//! `list`: every selector form, every validation error, Deno's cursor strings, paging
//! through cursors, limits and batch sizes.

use crate::common::for_each_store;
use stampkv::{key, Key, KvError, KvOptions, KvValue, ListOptions, Selector};

fn sample() -> Vec<Key> {
    vec![
        key!["a"],
        key!["a", 1],
        key!["a", 2],
        key!["a", 3],
        key!["a", "x"],
        key!["a\u{0}"],
        key!["b"],
        key!["b", true],
        key!["c"],
        key![vec![1u8]],
    ]
}

fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char
            } else {
                '='
            });
        }
    }
    out
}

for_each_store! {
    fn kv_with(keys: &[Key]) -> TestKv {
        let kv = open_kv(KvOptions::default());
        let mut op = kv.atomic();
        for (i, key) in keys.iter().enumerate() {
            op = op.set(key, &KvValue::U64(i as u64));
        }
        assert!(op.commit().unwrap().ok());
        kv
    }

    fn keys_of(kv: &TestKv, selector: &Selector, options: &ListOptions) -> Vec<Key> {
        kv.list::<KvValue>(selector, options).unwrap().map(|e| e.unwrap().key).collect()
    }

    fn error_of(kv: &TestKv, selector: &Selector, options: &ListOptions) -> String {
        match kv.list::<KvValue>(selector, options) {
            Ok(_) => panic!("{selector:?} {options:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_selector_form_scans_deno_s_ranges() {
        let kv = kv_with(&sample());
        let all = ListOptions::default();
        // A prefix never includes the key equal to the prefix.
        // Strings sort before numbers.
        assert_eq!(
            keys_of(&kv, &Selector::prefix(key!["a"]), &all),
            vec![key!["a", "x"], key!["a", 1], key!["a", 2], key!["a", 3]]
        );
        // The empty prefix lists everything, in key order (bytes before strings).
        let mut expected = sample();
        expected.sort();
        assert_eq!(keys_of(&kv, &Selector::prefix(key![]), &all), expected);
        assert_eq!(
            keys_of(&kv, &Selector::prefix(key!["a"]).with_start(key!["a", 2]), &all),
            vec![key!["a", 2], key!["a", 3]]
        );
        assert_eq!(
            keys_of(&kv, &Selector::prefix(key!["a"]).with_end(key!["a", 3]), &all),
            vec![key!["a", "x"], key!["a", 1], key!["a", 2]]
        );
        assert_eq!(
            keys_of(&kv, &Selector::range(key!["a", 2], key!["b", true]), &all),
            vec![key!["a", 2], key!["a", 3], key!["a\u{0}"], key!["b"]]
        );
        assert!(keys_of(&kv, &Selector::range(key!["b"], key!["b"]), &all).is_empty(), "start == end is empty");
        let reverse = ListOptions { reverse: true, ..ListOptions::default() };
        assert_eq!(
            keys_of(&kv, &Selector::prefix(key!["a"]), &reverse),
            vec![key!["a", 3], key!["a", 2], key!["a", 1], key!["a", "x"]]
        );
    }

    #[test]
    fn every_invalid_selector_gets_deno_s_message() {
        let kv = kv_with(&sample());
        let all = ListOptions::default();
        let cases = [
            (
                Selector { prefix: Some(key!["a"]), start: Some(key!["a", 1]), end: Some(key!["a", 2]) },
                "Selector can not specify both 'start' and 'end' key when specifying 'prefix'",
            ),
            (Selector::default(), "Selector must specify either 'prefix' or both 'start' and 'end' key"),
            (
                Selector { start: Some(key!["a"]), ..Selector::default() },
                "Selector must specify either 'prefix' or both 'start' and 'end' key",
            ),
            (
                Selector { end: Some(key!["a"]), ..Selector::default() },
                "Selector must specify either 'prefix' or both 'start' and 'end' key",
            ),
            (
                Selector::prefix(key!["a"]).with_start(key!["a"]),
                "Start key is not in the keyspace defined by prefix",
            ),
            (
                Selector::prefix(key!["a"]).with_start(key!["b", 1]),
                "Start key is not in the keyspace defined by prefix",
            ),
            (Selector::prefix(key!["a"]).with_end(key!["b"]), "End key is not in the keyspace defined by prefix"),
            (Selector::range(key!["b"], key!["a"]), "Start key is greater than end key"),
        ];
        for (selector, message) in cases {
            assert_eq!(error_of(&kv, &selector, &all), message);
        }
        let zero_limit = ListOptions { limit: Some(0), ..ListOptions::default() };
        assert_eq!(
            error_of(&kv, &Selector::prefix(key![]), &zero_limit),
            "Limit must be a positive integer: received 0"
        );
        let zero_batch = ListOptions { batch_size: Some(0), ..ListOptions::default() };
        assert_eq!(
            error_of(&kv, &Selector::prefix(key![]), &zero_batch),
            "batchSize must be a positive integer: received 0"
        );
        let big_batch = ListOptions { batch_size: Some(1001), ..ListOptions::default() };
        assert_eq!(error_of(&kv, &Selector::prefix(key![]), &big_batch), "Too many entries (max 1000)");
        let err = kv.list::<KvValue>(&Selector::prefix(key![]), &zero_limit).err().unwrap();
        assert_eq!(err.js_class(), "Error");
        let err = kv.list::<KvValue>(&Selector::default(), &ListOptions::default()).err().unwrap();
        assert_eq!(err.js_class(), "TypeError");
    }

    #[test]
    fn cursors_equal_deno_s_strings() {
        let kv = kv_with(&[key!["a", 1], key!["a", 2], key!["c"], key!["a", KvBigInt_one()]]);
        let mut iter = kv.list::<KvValue>(&Selector::prefix(key!["a"]), &ListOptions::default()).unwrap();
        assert!(matches!(iter.cursor(), Err(KvError::CursorBeforeFirstIteration)));
        assert_eq!(iter.cursor().unwrap_err().to_string(), "Cannot get cursor before first iteration");
        let first = iter.next().unwrap().unwrap();
        assert_eq!(first.key, key!["a", KvBigInt_one()]);
        assert_eq!(iter.cursor().unwrap(), "FQE=");
        iter.next().unwrap().unwrap();
        assert_eq!(iter.cursor().unwrap(), "Ib_wAAAAAAAA", "prefix [\"a\"], key [\"a\", 1]");
        let mut range =
            kv.list::<KvValue>(&Selector::range(key!["a", 2], key!["c"]), &ListOptions::default()).unwrap();
        assert_eq!(range.next().unwrap().unwrap().key, key!["a", 2]);
        assert_eq!(range.cursor().unwrap(), "YQAhwAAAAAAAAAA=", "common prefix 02");
        let mut everything = kv.list::<KvValue>(&Selector::prefix(key![]), &ListOptions::default()).unwrap();
        assert_eq!(everything.next().unwrap().unwrap().key, key!["a", KvBigInt_one()]);
        assert_eq!(everything.cursor().unwrap(), "AmEAFQE=", "the whole key [\"a\", 1n]");
        // Exhausted naturally: "".
        for entry in everything.by_ref() {
            entry.unwrap();
        }
        assert_eq!(everything.cursor().unwrap(), "");
        // The reference's example for the empty prefix: key ["a", 1n, true].
        let kv = kv_with(&[key!["a", KvBigInt_one(), true]]);
        let mut iter = kv.list::<KvValue>(&Selector::prefix(key![]), &ListOptions::default()).unwrap();
        iter.next().unwrap().unwrap();
        assert_eq!(iter.cursor().unwrap(), "AmEAFQEn");
    }

    #[allow(non_snake_case)]
    fn KvBigInt_one() -> stampkv::KvBigInt {
        stampkv::KvBigInt::from(1i64)
    }

    #[test]
    fn a_limit_stops_with_the_cursor_of_the_last_entry_and_paging_resumes_after_it() {
        let keys: Vec<Key> = (0..57).map(|i| key!["item", i]).collect();
        let kv = kv_with(&keys);
        for reverse in [false, true] {
            let mut expected = keys.clone();
            if reverse {
                expected.reverse();
            }
            for page_size in [1usize, 5, 10, 56, 57, 100] {
                let mut cursor: Option<String> = None;
                let mut seen = Vec::new();
                loop {
                    let options = ListOptions {
                        limit: Some(page_size),
                        reverse,
                        cursor: cursor.clone(),
                        ..ListOptions::default()
                    };
                    let mut iter = kv.list::<KvValue>(&Selector::prefix(key!["item"]), &options).unwrap();
                    let page: Vec<Key> = iter.by_ref().map(|e| e.unwrap().key).collect();
                    seen.extend(page.iter().cloned());
                    if page.len() < page_size {
                        assert_eq!(iter.cursor().unwrap(), "", "exhausted");
                        break;
                    }
                    let next = iter.cursor().unwrap();
                    assert!(!next.is_empty());
                    cursor = Some(next);
                }
                assert_eq!(seen, expected, "page size {page_size}, reverse {reverse}");
            }
        }
    }

    #[test]
    fn cursors_are_validated() {
        let kv = kv_with(&[key!["a", 1], key!["b"]]);
        let with_cursor = |cursor: &str| ListOptions { cursor: Some(cursor.into()), ..ListOptions::default() };
        assert_eq!(error_of(&kv, &Selector::prefix(key!["a"]), &with_cursor("FQE")), "invalid cursor");
        assert_eq!(error_of(&kv, &Selector::prefix(key!["a"]), &with_cursor("!!!!")), "invalid cursor");
        // A forward cursor moves the start; one before an explicit start is out of bounds.
        let range = Selector::range(key!["a", 5], key!["b"]);
        let before_start = stampkv_cursor(&key!["a", 1], &[0x02]);
        assert_eq!(error_of(&kv, &range, &with_cursor(&before_start)), "cursor out of bounds");
        // In reverse a cursor moves the end; one after an explicit end is out of bounds.
        let reverse = ListOptions {
            reverse: true,
            cursor: Some(stampkv_cursor(&key!["c"], &[0x02])),
            ..ListOptions::default()
        };
        assert_eq!(error_of(&kv, &Selector::range(key!["a"], key!["b"]), &reverse), "cursor out of bounds");
        // The empty cursor means none; a cursor need not name an existing key.
        assert_eq!(keys_of(&kv, &Selector::prefix(key!["a"]), &with_cursor("")), vec![key!["a", 1]]);
        let after_zero = stampkv_cursor(&key!["a", 0], &key!["a"].encode().unwrap());
        assert_eq!(keys_of(&kv, &Selector::prefix(key!["a"]), &with_cursor(&after_zero)), vec![key!["a", 1]]);
    }

    /// The cursor Deno gives for `key` under a selector whose common prefix is `prefix`.
    fn stampkv_cursor(key: &Key, prefix: &[u8]) -> String {
        let encoded = key.encode().unwrap();
        base64_url(&encoded[prefix.len()..])
    }

    #[test]
    fn one_listing_reads_one_snapshot_across_batches() {
        let keys: Vec<Key> = (0..50).map(|i| key!["n", i]).collect();
        let kv = kv_with(&keys);
        let options = ListOptions { batch_size: Some(7), ..ListOptions::default() };
        let mut iter = kv.list::<KvValue>(&Selector::prefix(key!["n"]), &options).unwrap();
        let first = iter.next().unwrap().unwrap();
        assert_eq!(first.key, key!["n", 0]);
        // Changes after the listing started are not seen, in any later batch.
        kv.delete(&key!["n", 30]).unwrap();
        kv.set(&key!["n", 10.5], &KvValue::U64(99)).unwrap();
        let rest: Vec<Key> = iter.map(|e| e.unwrap().key).collect();
        assert_eq!(rest.len(), 49);
        assert!(rest.contains(&key!["n", 30]) && !rest.contains(&key!["n", 10.5]));
        // Versionstamps come with the entries; all from the one commit.
        let entries: Vec<_> = kv
            .list::<KvValue>(&Selector::prefix(key!["n"]), &ListOptions::default())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(entries.len(), 50);
        assert!(entries.iter().any(|e| e.value == KvValue::U64(99)));
    }

    #[test]
    fn range_ends_are_checked_against_the_read_limit() {
        let kv = kv_with(&[key!["a"]]);
        let long = key![vec![7u8; 2047]]; // encodes to 2049 bytes: fine as a start
        assert!(kv.list::<KvValue>(&Selector::range(long.clone(), key![true]), &ListOptions::default()).is_ok());
        let too_long = key![vec![7u8; 2048]]; // 2050 bytes
        assert_eq!(
            error_of(&kv, &Selector::range(too_long, key![true]), &ListOptions::default()),
            "Key too large for read (max 2049 bytes)"
        );
        // prefix + FF of a 2048-byte prefix is 2049 bytes: fine.
        assert!(kv.list::<KvValue>(&Selector::prefix(key![vec![7u8; 2046]]), &ListOptions::default()).is_ok());
    }
}
