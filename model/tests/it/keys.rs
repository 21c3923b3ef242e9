//! Key encodings byte for byte as Deno KV writes them (the verified examples of the
//! reference), and properties of the encoding on random keys.

use stampkv_model::{key, Key, KeyPart, KvBigInt};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn big(value: i128) -> KvBigInt {
    KvBigInt::from(value)
}

/// 2^64 as a bigint.
fn two_pow_64(negative: bool) -> KvBigInt {
    KvBigInt::from_sign_magnitude(negative, &[1, 0, 0, 0, 0, 0, 0, 0, 0])
}

#[test]
fn every_verified_encoding_of_the_reference_matches() {
    let cases: Vec<(Key, &str)> = vec![
        (key!["hello"], "02 68 65 6c 6c 6f 00"),
        (key![""], "02 00"),
        (key!["a\u{0}b"], "02 61 00 ff 62 00"),
        (key!["é"], "02 c3 a9 00"),
        (key![vec![1u8, 2, 0, 7, 8]], "01 01 02 00 ff 07 08 00"),
        (key![Vec::<u8>::new()], "01 00"),
        (key![big(0)], "14"),
        (key![big(1)], "15 01"),
        (key![big(255)], "15 ff"),
        (key![big(256)], "16 01 00"),
        (key![big(-1)], "13 fe"),
        (key![big(-256)], "12 fe ff"),
        (key![big(-257)], "12 fe fe"),
        (key![big(i64::MAX as i128)], "1c 7f ff ff ff ff ff ff ff"),
        (key![two_pow_64(false)], "1d 09 01 00 00 00 00 00 00 00 00"),
        (key![two_pow_64(true)], "0b f6 fe ff ff ff ff ff ff ff ff"),
        (key![0.0], "21 80 00 00 00 00 00 00 00"),
        (key![-0.0], "21 7f ff ff ff ff ff ff ff"),
        (key![1.0], "21 bf f0 00 00 00 00 00 00"),
        (key![1.5], "21 bf f8 00 00 00 00 00 00"),
        (key![-1.0], "21 40 0f ff ff ff ff ff ff"),
        (key![f64::INFINITY], "21 ff f0 00 00 00 00 00 00"),
        (key![f64::NEG_INFINITY], "21 00 0f ff ff ff ff ff ff"),
        (key![f64::NAN], "21 ff f8 00 00 00 00 00 00"),
        (key![false], "26"),
        (key![true], "27"),
        (key!["a", big(1), true], "02 61 00 15 01 27"),
        (key!["a", 1], "02 61 00 21 bf f0 00 00 00 00 00 00"),
    ];
    for (key, expected) in cases {
        let encoded = key.encode().unwrap();
        assert_eq!(hex(&encoded), expected, "{key:?}");
        assert_eq!(Key::decode(&encoded).unwrap(), key, "{key:?} round trip");
    }
}

#[test]
fn every_nan_is_one_key_and_zero_signs_differ() {
    let negative_payload_nan = f64::from_bits(0xFFF8_0000_0000_0001);
    let signalling_nan = f64::from_bits(0x7FF0_0000_0000_0001);
    let canonical = key![f64::NAN].encode().unwrap();
    assert_eq!(key![negative_payload_nan].encode().unwrap(), canonical);
    assert_eq!(key![signalling_nan].encode().unwrap(), canonical);
    assert_eq!(key![f64::NAN], key![negative_payload_nan]);
    assert_ne!(key![0.0], key![-0.0]);
    assert!(key![-0.0] < key![0.0]);
    // Another writer's non-canonical NaN is refused rather than silently renamed.
    assert!(Key::decode(&[0x21, 0x00, 0x07, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
}

#[test]
fn the_cross_type_order_is_bytes_string_bigint_number_false_true() {
    let ordered = [
        key![vec![0xffu8]],
        key![""],
        key![big(-1_000)],
        key![big(5)],
        key![-1e300],
        key![false],
        key![true],
    ];
    for pair in ordered.windows(2) {
        assert!(pair[0] < pair[1], "{:?} < {:?}", pair[0], pair[1]);
        assert!(pair[0].encode().unwrap() < pair[1].encode().unwrap());
    }
    // Prefixes sort first, and an embedded NUL sorts before any longer string.
    assert!(key!["a"] < key!["a", 1]);
    assert!(key!["a", 1] < key!["a\u{0}"]);
    assert!(key!["a\u{0}"] < key!["ab"]);
}

/// SplitMix64.
use stampkv_testkit::SplitMix64 as Rng;

fn random_part(rng: &mut Rng) -> KeyPart {
    let small = [0u8, 1, 0xff, b'a', b'b'];
    let bytes = |rng: &mut Rng| (0..rng.below(5)).map(|_| small[rng.below(5) as usize]).collect::<Vec<u8>>();
    match rng.below(5) {
        0 => KeyPart::Bytes(bytes(rng)),
        1 => KeyPart::String(String::from_utf8_lossy(&bytes(rng)).replace('\u{fffd}', "é")),
        2 => {
            let magnitude: Vec<u8> = (0..rng.below(12)).map(|_| rng.next_u64() as u8).collect();
            KeyPart::BigInt(KvBigInt::from_sign_magnitude(rng.below(2) == 0, &magnitude))
        }
        3 => KeyPart::Number(match rng.below(6) {
            0 => f64::NAN,
            1 => -0.0,
            2 => f64::INFINITY,
            3 => f64::NEG_INFINITY,
            _ => (rng.next_u64() as i64 as f64) / (1u64 << rng.below(60)) as f64,
        }),
        _ => KeyPart::Bool(rng.below(2) == 0),
    }
}

#[test]
fn random_keys_order_like_their_encodings_and_round_trip() {
    let mut rng = Rng::new(7);
    let keys: Vec<Key> =
        (0..3_000).map(|_| Key((0..rng.below(4)).map(|_| random_part(&mut rng)).collect())).collect();
    let encoded: Vec<Vec<u8>> = keys.iter().map(|k| k.encode().unwrap()).collect();
    for (key, bytes) in keys.iter().zip(&encoded) {
        assert_eq!(&Key::decode(bytes).unwrap(), key);
    }
    for i in 0..keys.len() {
        let j = (i * 7919 + 13) % keys.len();
        assert_eq!(keys[i].cmp(&keys[j]), encoded[i].cmp(&encoded[j]), "{:?} vs {:?}", keys[i], keys[j]);
    }
    let mut by_key: Vec<usize> = (0..keys.len()).collect();
    by_key.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
    let mut by_bytes: Vec<usize> = (0..keys.len()).collect();
    by_bytes.sort_by(|&a, &b| encoded[a].cmp(&encoded[b]));
    let sorted_keys: Vec<&Vec<u8>> = by_key.iter().map(|&i| &encoded[i]).collect();
    let sorted_bytes: Vec<&Vec<u8>> = by_bytes.iter().map(|&i| &encoded[i]).collect();
    assert_eq!(sorted_keys, sorted_bytes);
}

#[test]
fn random_bytes_never_panic_the_decoder() {
    let mut rng = Rng::new(11);
    for _ in 0..20_000 {
        let len = rng.below(24) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| [0u8, 1, 2, 0x14, 0x15, 0x1d, 0x0b, 0x21, 0x26, 0xff][rng.below(10) as usize])
            .collect();
        if let Ok(key) = Key::decode(&bytes) {
            // Whatever decodes re-encodes to the same bytes.
            assert_eq!(key.encode().unwrap(), bytes);
        }
    }
}
