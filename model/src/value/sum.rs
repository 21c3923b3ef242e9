//! The `sum` mutation, as Deno's SQLite backend (denokv) performs it, including sums of V8
//! numbers and bigints (`mutate({ type: "sum", value: 1 })` or `value: 1n`).

use super::{v8, KvValue, Value, ValueError};
use crate::KvBigInt;
use stampkv_coding::put_varint64;
use std::cmp::Ordering;
use std::fmt;

/// Why a `sum` mutation failed. `Display` gives Deno's exact message (Deno throws it as a
/// `TypeError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SumError {
    /// Stored value and operand are of different kinds: `Cannot sum {stored} with {operand}`,
    /// the kinds being `Number`, `BigInt` and `KvU64` (e.g. `Cannot sum Number with BigInt`,
    /// `Cannot sum KvU64 with Number`, or `Cannot sum KvU64 with BigInt` for a bigint operand
    /// outside `0..2^64`).
    Mismatch {
        /// Kind of the stored value.
        stored: &'static str,
        /// Kind of the operand.
        operand: &'static str,
    },
    /// The stored value is not a number, a bigint or a `KvU64` (a string, a `Uint8Array`, an
    /// object, `null`, ...): `unsupported value type`.
    UnsupportedValueType,
    /// The stored V8 bytes are not valid: `invalid v8 value`.
    InvalidStoredValue,
    /// The stored V8 bytes are empty: `operand cannot be empty`.
    EmptyStoredValue,
    /// The operand is not a V8 number or bigint: `Some of the parameters are not valid V8
    /// values`.
    InvalidOperand,
    /// A `KvU64` operand on a stored value that is not a `KvU64`: `Failed to perform 'sum'
    /// mutation on a non-U64 value in the database`.
    NonU64Value,
}

impl fmt::Display for SumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SumError::Mismatch { stored, operand } => write!(f, "Cannot sum {stored} with {operand}"),
            SumError::UnsupportedValueType => f.write_str("unsupported value type"),
            SumError::InvalidStoredValue => f.write_str("invalid v8 value"),
            SumError::EmptyStoredValue => f.write_str("operand cannot be empty"),
            SumError::InvalidOperand => f.write_str("Some of the parameters are not valid V8 values"),
            SumError::NonU64Value => {
                f.write_str("Failed to perform 'sum' mutation on a non-U64 value in the database")
            }
        }
    }
}

impl std::error::Error for SumError {}

/// A sum operand or stored value, as denokv's `SumOperand` sees it.
enum Operand {
    Number(f64),
    BigInt(KvBigInt),
    KvU64(u64),
}

impl Operand {
    fn kind(&self) -> &'static str {
        match self {
            Operand::Number(_) => "Number",
            Operand::BigInt(_) => "BigInt",
            Operand::KvU64(_) => "KvU64",
        }
    }
}

/// Applies a `sum` mutation with `operand` to the value stored under a key (`None` if the
/// key is absent) and returns the value to store, exactly as Deno 2.9.6 does:
///
/// - A [`KvValue::U64`] operand (what `atomic().sum(key, n)` sends): a missing key becomes
///   the operand, a stored `KvU64` is added to modulo 2^64 (`2^64-1 + 3 = 2`), anything else
///   fails with [`SumError::NonU64Value`].
/// - A V8 operand must be a number (`I`, `U` or `N`) or a bigint (`Z`), otherwise
///   [`SumError::InvalidOperand`]. A missing key becomes the operand, re-serialized; a
///   stored number plus a number operand is their `f64` sum (overflowing to `Infinity`,
///   `NaN` allowed), a stored bigint plus a bigint operand their exact sum. A stored
///   `KvU64` plus a bigint operand in `0..2^64` is a wrapping `KvU64` addition (backward
///   compatibility). Other combinations fail with [`SumError::Mismatch`]; a stored value that
///   is not a number, bigint or `KvU64` with [`SumError::UnsupportedValueType`].
///
/// Results of V8 sums are written with header `FF 0F` as V8 doubles (`N`, even for integral
/// results) or as bigints (`Z`) with the minimal number of little-endian bytes (one zero
/// byte for `0n`), which is what denokv writes.
pub fn sum_v8(stored: Option<&KvValue>, operand: &KvValue) -> Result<KvValue, SumError> {
    if let KvValue::U64(operand) = operand {
        return match stored {
            None => Ok(KvValue::U64(*operand)),
            Some(KvValue::U64(current)) => Ok(KvValue::U64(current.wrapping_add(*operand))),
            Some(_) => Err(SumError::NonU64Value),
        };
    }
    let operand = parse_operand(operand)?;
    let Some(stored) = stored else {
        return Ok(encode(operand));
    };
    let current = parse_stored(stored)?;
    let result = match (current, operand) {
        (Operand::Number(a), Operand::Number(b)) => Operand::Number(a + b),
        (Operand::BigInt(a), Operand::BigInt(b)) => Operand::BigInt(add(&a, &b)),
        (Operand::KvU64(a), Operand::BigInt(b)) if b.to_u64().is_some() => {
            Operand::KvU64(a.wrapping_add(b.to_u64().unwrap_or(0)))
        }
        (current, operand) => {
            return Err(SumError::Mismatch { stored: current.kind(), operand: operand.kind() })
        }
    };
    Ok(encode(result))
}

fn parse_operand(operand: &KvValue) -> Result<Operand, SumError> {
    match operand {
        KvValue::V8(bytes) => match v8::deserialize(bytes) {
            Ok(Value::Number(n)) => Ok(Operand::Number(n)),
            Ok(Value::BigInt(n)) => Ok(Operand::BigInt(n)),
            _ => Err(SumError::InvalidOperand),
        },
        KvValue::U64(n) => Ok(Operand::KvU64(*n)),
        KvValue::Bytes(_) => Err(SumError::InvalidOperand),
    }
}

fn parse_stored(stored: &KvValue) -> Result<Operand, SumError> {
    match stored {
        KvValue::V8(bytes) if bytes.is_empty() => Err(SumError::EmptyStoredValue),
        KvValue::V8(bytes) => match v8::deserialize(bytes) {
            Ok(Value::Number(n)) => Ok(Operand::Number(n)),
            Ok(Value::BigInt(n)) => Ok(Operand::BigInt(n)),
            Err(ValueError::Malformed { .. }) => Err(SumError::InvalidStoredValue),
            _ => Err(SumError::UnsupportedValueType),
        },
        KvValue::U64(n) => Ok(Operand::KvU64(*n)),
        KvValue::Bytes(_) => Err(SumError::UnsupportedValueType),
    }
}

/// The stored form of a sum result, as denokv writes it.
fn encode(result: Operand) -> KvValue {
    let mut out = vec![0xff, 0x0f];
    match result {
        Operand::Number(n) => {
            out.push(b'N');
            out.extend_from_slice(&n.to_le_bytes());
        }
        Operand::BigInt(n) => {
            let magnitude = n.magnitude_be();
            let len = magnitude.len().max(1);
            out.push(b'Z');
            put_varint64(&mut out, ((len as u64) << 1) | u64::from(n.is_negative()));
            if magnitude.is_empty() {
                out.push(0);
            }
            out.extend(magnitude.iter().rev());
        }
        Operand::KvU64(n) => return KvValue::U64(n),
    }
    KvValue::V8(out)
}

/// Exact sum of two bigints.
fn add(a: &KvBigInt, b: &KvBigInt) -> KvBigInt {
    let (x, y) = (le(a.magnitude_be()), le(b.magnitude_be()));
    if a.is_negative() == b.is_negative() {
        return from_le(a.is_negative(), add_magnitudes(&x, &y));
    }
    match compare_magnitudes(a.magnitude_be(), b.magnitude_be()) {
        Ordering::Equal => KvBigInt::default(),
        Ordering::Greater => from_le(a.is_negative(), sub_magnitudes(&x, &y)),
        Ordering::Less => from_le(b.is_negative(), sub_magnitudes(&y, &x)),
    }
}

fn le(magnitude_be: &[u8]) -> Vec<u8> {
    magnitude_be.iter().rev().copied().collect()
}

fn from_le(negative: bool, magnitude_le: Vec<u8>) -> KvBigInt {
    let be: Vec<u8> = magnitude_le.into_iter().rev().collect();
    KvBigInt::from_sign_magnitude(negative, &be)
}

/// Compares big-endian magnitudes without leading zeros.
fn compare_magnitudes(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn add_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0u16;
    for i in 0..a.len().max(b.len()) {
        let sum = u16::from(*a.get(i).unwrap_or(&0)) + u16::from(*b.get(i).unwrap_or(&0)) + carry;
        out.push(sum as u8);
        carry = sum >> 8;
    }
    if carry > 0 {
        out.push(carry as u8);
    }
    out
}

/// `a - b` for little-endian magnitudes with `a >= b`.
fn sub_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i16;
    for (i, &digit) in a.iter().enumerate() {
        let mut diff = i16::from(digit) - i16::from(*b.get(i).unwrap_or(&0)) - borrow;
        borrow = 0;
        if diff < 0 {
            diff += 256;
            borrow = 1;
        }
        out.push(diff as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigint_addition_is_exact() {
        let values: Vec<i128> =
            vec![0, 1, -1, 255, -255, 256, -256, 65535, -65536, i64::MAX as i128, i64::MIN as i128];
        for a in &values {
            for b in &values {
                let sum = add(&KvBigInt::from(*a), &KvBigInt::from(*b));
                assert_eq!(sum, KvBigInt::from(a + b), "{a} + {b}");
            }
        }
    }
}
