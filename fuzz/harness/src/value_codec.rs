//! `value_codec`: the V8 serialization format and the stored form of values.
//!
//! - Raw V8: `v8::deserialize(data)` never panics. A value it accepts serializes again
//!   (nothing it reads is refused by the writer), reads back as the same value, and is a
//!   fixpoint: serializing the value read back gives the same bytes.
//! - Raw stored form: `KvValue::decode_stored(data)` never panics and, when it accepts the
//!   bytes, `encode_stored` gives back exactly `data`; the value it holds converts to a
//!   `Value` and back to the same stored value.
//! - `sum_v8` on two stored values cut from the input never panics; its results decode, and
//!   number, bigint and KvU64 sums are arithmetically right.
//! - Structured: a `Value` built from the input (every kind, odd numbers and strings,
//!   array-index-like object keys, RegExps, deep nesting) serializes unless documented
//!   otherwise (nested deeper than `MAX_DEPTH`), and reads back as the same value, modulo
//!   the documented normalisations (Date TimeClip, RegExp source escaping, flag order).

use crate::util::hex;
use arbitrary::{Result as ArbResult, Unstructured};
use stampkv::value::{sum_v8, v8};
use stampkv::{KvBigInt, KvValue, Value, ValueError};

/// Runs the `value_codec` target on one input.
pub fn value_codec(data: &[u8]) {
    raw_v8(data);
    raw_stored(data);
    sums(data);
    let mut u = Unstructured::new(data);
    if let Ok(value) = gen_value(&mut u, 0) {
        structured(&value);
    }
}

// ---------------------------------------------------------------------------------------
// Raw bytes
// ---------------------------------------------------------------------------------------

fn raw_v8(data: &[u8]) {
    let Ok(value) = v8::deserialize(data) else { return };
    let bytes = match v8::serialize(&value) {
        Ok(bytes) => bytes,
        Err(e) => panic!("deserialize accepted {} as {value:?}, but serialize refuses it: {e}", hex(data)),
    };
    let again = match v8::deserialize(&bytes) {
        Ok(again) => again,
        Err(e) => {
            panic!("serialize({value:?}) = {} does not deserialize: {e} (input {})", hex(&bytes), hex(data))
        }
    };
    assert!(
        equivalent(&value, &again),
        "{} read as {value:?}, written and read back as {again:?}",
        hex(data)
    );
    let bytes_again = v8::serialize(&again).unwrap_or_else(|e| panic!("{again:?} does not serialize: {e}"));
    assert_eq!(bytes, bytes_again, "serialize is not a fixpoint for {value:?} (input {})", hex(data));
}

fn raw_stored(data: &[u8]) {
    let Ok(stored) = KvValue::decode_stored(data) else { return };
    assert_eq!(stored.encode_stored(), data, "encode_stored(decode_stored(x)) != x for {}", hex(data));
    let Ok(value) = stored.to_value() else { return };
    match KvValue::from_value(&value) {
        Ok(back) => match (&stored, &back) {
            (KvValue::V8(a), KvValue::V8(b)) => {
                // The V8 bytes may differ (any accepted encoding), the value may not.
                let reread =
                    v8::deserialize(b).unwrap_or_else(|e| panic!("re-encoded value unreadable: {e}"));
                assert!(equivalent(&value, &reread), "stored {} changed to {}", hex(a), hex(b));
            }
            // A V8 value holding a plain Uint8Array is stored as BYTES by Deno's rule.
            (KvValue::V8(_), KvValue::Bytes(b)) => assert_eq!(Some(b.as_slice()), value.as_bytes()),
            _ => assert_eq!(stored, back, "stored value changed through Value"),
        },
        Err(e) => panic!("stored {} reads as {value:?}, which cannot be stored again: {e}", hex(data)),
    }
}

/// `sum_v8` with a stored value and an operand cut from the input at `data[0]`.
fn sums(data: &[u8]) {
    let Some((&cut, rest)) = data.split_first() else { return };
    let cut = usize::from(cut).min(rest.len());
    let (a, b) = rest.split_at(cut);
    let stored = if a.is_empty() { None } else { KvValue::decode_stored(a).ok() };
    let Ok(operand) = KvValue::decode_stored(b) else { return };
    let Ok(result) = sum_v8(stored.as_ref(), &operand) else { return };
    let value = result.to_value().unwrap_or_else(|e| panic!("sum result {result:?} does not decode: {e}"));
    let number = |v: &KvValue| match v.to_value() {
        Ok(Value::Number(n)) => Some(n),
        _ => None,
    };
    let bigint = |v: &KvValue| match v.to_value() {
        Ok(Value::BigInt(n)) => n.to_i128(),
        _ => None,
    };
    match (stored.as_ref(), &operand) {
        (None, KvValue::U64(n)) => assert_eq!(result, KvValue::U64(*n)),
        (Some(KvValue::U64(s)), KvValue::U64(n)) => assert_eq!(result, KvValue::U64(s.wrapping_add(*n))),
        (Some(s), o) => {
            if let (Some(x), Some(y), Value::Number(r)) = (number(s), number(o), &value) {
                let expected = x + y;
                assert!(
                    r.to_bits() == expected.to_bits() || (r.is_nan() && expected.is_nan()),
                    "{x} + {y} = {r}"
                );
            }
            if let (Some(x), Some(y)) = (bigint(s), bigint(o)) {
                if let Some(expected) = x.checked_add(y) {
                    assert_eq!(value, Value::BigInt(KvBigInt::from(expected)), "{x}n + {y}n");
                }
            }
        }
        (None, o) => {
            if let Some(y) = number(o) {
                assert!(
                    matches!(value, Value::Number(r) if r.to_bits() == y.to_bits()),
                    "missing + {y} = {value:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Equivalence: what "the same value" means after a write and a read
// ---------------------------------------------------------------------------------------

/// ECMAScript TimeClip, which every Date goes through (documented in FORMAT.md).
fn time_clip(ms: f64) -> f64 {
    if !ms.is_finite() || ms.abs() > 8.64e15 {
        return f64::NAN;
    }
    ms.trunc() + 0.0
}

fn same_bits(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// RegExp flags in JavaScript's order (`dgimsuvy`), as they are read back.
fn canonical_flags(flags: &str) -> String {
    "dgimsuvy".chars().filter(|c| flags.contains(*c)).collect()
}

/// Whether two RegExp sources are the same pattern as stored (V8 escapes `/` and line
/// terminators and writes `(?:)` for the empty pattern; escaping is idempotent).
fn same_source(a: &str, b: &str) -> bool {
    let stored =
        |source: &str| v8::serialize(&Value::RegExp { source: source.to_owned(), flags: String::new() });
    a == b || matches!((stored(a), stored(b)), (Ok(x), Ok(y)) if x == y)
}

/// `read` is what `original` must read back as after a write.
fn equivalent(original: &Value, read: &Value) -> bool {
    match (original, read) {
        (Value::Number(a), Value::Number(b)) => same_bits(*a, *b),
        (Value::Date(a), Value::Date(b)) => same_bits(time_clip(*a), *b),
        (Value::RegExp { source: s1, flags: f1 }, Value::RegExp { source: s2, flags: f2 }) => {
            canonical_flags(f1) == *f2 && same_source(s1, s2)
        }
        (Value::Array(a), Value::Array(b)) | (Value::Set(a), Value::Set(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equivalent(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|((ka, va), (kb, vb))| ka == kb && equivalent(va, vb))
        }
        (Value::Map(a), Value::Map(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|((ka, va), (kb, vb))| equivalent(ka, kb) && equivalent(va, vb))
        }
        (a, b) => a == b,
    }
}

// ---------------------------------------------------------------------------------------
// Structured values
// ---------------------------------------------------------------------------------------

/// Container nesting (arrays, objects, Maps, Sets): what `MAX_DEPTH` limits.
pub(crate) fn container_depth(value: &Value) -> usize {
    let inner = |items: &mut dyn Iterator<Item = &Value>| items.map(container_depth).max().unwrap_or(0);
    match value {
        Value::Array(items) | Value::Set(items) => 1 + inner(&mut items.iter()),
        Value::Object(props) => 1 + inner(&mut props.iter().map(|(_, v)| v)),
        Value::Map(entries) => 1 + inner(&mut entries.iter().flat_map(|(k, v)| [k, v])),
        _ => 0,
    }
}

fn structured(value: &Value) {
    let bytes = match v8::serialize(value) {
        Ok(bytes) => bytes,
        Err(ValueError::NotAllowed(why)) if container_depth(value) > v8::MAX_DEPTH => {
            assert!(why.contains("deeper"), "refused for {why:?}");
            return;
        }
        Err(e) => panic!("serialize refused {value:?}: {e}"),
    };
    let read = match v8::deserialize(&bytes) {
        Ok(read) => read,
        Err(e) => panic!("serialize({value:?}) = {} does not deserialize: {e}", hex(&bytes)),
    };
    assert!(equivalent(value, &read), "{value:?} was written as {} and read back as {read:?}", hex(&bytes));
    let again = v8::serialize(&read).unwrap_or_else(|e| panic!("{read:?} does not serialize: {e}"));
    assert_eq!(bytes, again, "serialize is not a fixpoint for {value:?}");
    // The stored form (encoding byte + data) round trips too, for this value and as KvU64.
    let stored = KvValue::from_value(value).unwrap_or_else(|e| panic!("{value:?} cannot be stored: {e}"));
    let decoded = KvValue::decode_stored(&stored.encode_stored()).expect("stored form decodes");
    assert_eq!(decoded, stored);
    let back = decoded.to_value().expect("stored value converts back");
    assert!(equivalent(value, &back), "{value:?} stored and read back as {back:?}");
    if let Value::Number(n) = value {
        let u = KvValue::from_value(&Value::U64(n.to_bits())).expect("KvU64");
        assert_eq!(KvValue::decode_stored(&u.encode_stored()), Ok(KvValue::U64(n.to_bits())));
    }
}

const STRINGS: [&str; 16] = [
    "",
    "a",
    "0",
    "42",
    "01",
    "-1",
    "1.5",
    "2147483647",
    "2147483648",
    "4294967294",
    "4294967295",
    "é",
    "ÿ",
    "€uro",
    "😀",
    "a/b\n[/]\\",
];

fn gen_string(u: &mut Unstructured) -> ArbResult<String> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => u.arbitrary::<String>()?.chars().take(40).collect(),
        1 => u.choose(&STRINGS)?.to_string(),
        2 => {
            // Latin-1 range (one-byte strings) mixed with a few wide characters.
            let len = u.int_in_range(0u8..=12)?;
            (0..len).map(|_| Ok(char::from(u.arbitrary::<u8>()?))).collect::<ArbResult<String>>()?
        }
        _ => u.arbitrary::<u32>()?.to_string(),
    })
}

fn gen_number(u: &mut Unstructured) -> ArbResult<f64> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => f64::from(u.arbitrary::<i32>()?),
        1 => f64::from(u.arbitrary::<i8>()?),
        2 => *u.choose(&[
            -0.0,
            0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            2147483648.0,
            -2147483649.0,
            0.5,
            -1.5,
            8.64e15,
            8.64e15 + 1.0,
            -8.64e15,
            f64::MIN_POSITIVE,
            f64::MAX,
            1e21,
        ])?,
        3 => f64::from_bits(u.arbitrary()?),
        4 => u.arbitrary::<i64>()? as f64,
        _ => f64::from(u.arbitrary::<i16>()?) / 4.0,
    })
}

fn gen_flags(u: &mut Unstructured) -> ArbResult<String> {
    let mut flags = String::new();
    for c in ['g', 'i', 'm', 'y', 'u', 's', 'd', 'v'] {
        if u.arbitrary::<bool>()? && !(c == 'v' && flags.contains('u')) {
            flags.push(c);
        }
    }
    // Any order is accepted; it reads back in JavaScript's order.
    if u.arbitrary::<bool>()? {
        flags = flags.chars().rev().collect();
    }
    Ok(flags)
}

fn gen_items(u: &mut Unstructured, depth: usize) -> ArbResult<Vec<Value>> {
    let len = u.int_in_range(0u8..=5)?;
    (0..len).map(|_| gen_value(u, depth + 1)).collect()
}

fn gen_value(u: &mut Unstructured, depth: usize) -> ArbResult<Value> {
    // Containers only above depth 5; the deep-nesting case only at the top.
    let max = match depth {
        0 => 15,
        1..=4 => 14,
        _ => 10,
    };
    Ok(match u.int_in_range(0u8..=max)? {
        0 => Value::Undefined,
        1 => Value::Null,
        2 => Value::Bool(u.arbitrary()?),
        3 | 4 => Value::Number(gen_number(u)?),
        5 => {
            let magnitude: Vec<u8> = u.arbitrary::<Vec<u8>>()?.into_iter().take(40).collect();
            Value::BigInt(KvBigInt::from_sign_magnitude(u.arbitrary()?, &magnitude))
        }
        6 => Value::String(gen_string(u)?),
        7 => Value::Bytes(u.arbitrary::<Vec<u8>>()?.into_iter().take(64).collect()),
        8 => Value::Date(gen_number(u)?),
        9 => Value::RegExp { source: gen_string(u)?, flags: gen_flags(u)? },
        10 => Value::BigInt(KvBigInt::from(u.arbitrary::<i64>()?)),
        11 => Value::Array(gen_items(u, depth)?),
        12 => Value::Set(gen_items(u, depth)?),
        13 => {
            let len = u.int_in_range(0u8..=5)?;
            let mut props: Vec<(String, Value)> = Vec::new();
            for _ in 0..len {
                let key = gen_string(u)?;
                let value = gen_value(u, depth + 1)?;
                if !props.iter().any(|(k, _)| *k == key) {
                    props.push((key, value));
                }
            }
            Value::Object(props)
        }
        14 => {
            let len = u.int_in_range(0u8..=4)?;
            let entries = (0..len)
                .map(|_| Ok((gen_value(u, depth + 1)?, gen_value(u, depth + 1)?)))
                .collect::<ArbResult<Vec<_>>>()?;
            Value::Map(entries)
        }
        _ => {
            // Deep nesting around a leaf: 250..=260 levels, across the MAX_DEPTH boundary.
            let levels = u.int_in_range(250u16..=260)?;
            let mut value = gen_value(u, 5)?;
            for level in 0..levels {
                value = match level % 3 {
                    0 => Value::Array(vec![value]),
                    1 => Value::Object(vec![("k".into(), value)]),
                    _ => Value::Set(vec![value]),
                };
            }
            value
        }
    })
}
