//! Arbitrary-size integers as they appear in keys (`bigint` parts) and values (V8 BigInt).
//!
//! Stored as a sign and a big-endian magnitude without leading zero bytes. Zero has an
//! empty magnitude and is never negative, so every integer has exactly one representation
//! and the derived equality is numeric equality.

use std::cmp::Ordering;
use std::fmt;

/// An arbitrary-size integer (a JavaScript `bigint`).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct KvBigInt {
    negative: bool,
    /// Big-endian, no leading zero bytes; empty for zero.
    magnitude: Vec<u8>,
}

impl KvBigInt {
    /// Builds an integer from a sign and a big-endian magnitude (leading zeros allowed).
    #[allow(clippy::indexing_slicing, reason = "`first` is at most the length")]
    pub fn from_sign_magnitude(negative: bool, magnitude_be: &[u8]) -> Self {
        let first = magnitude_be.iter().position(|b| *b != 0).unwrap_or(magnitude_be.len());
        let magnitude = magnitude_be[first..].to_vec();
        KvBigInt { negative: negative && !magnitude.is_empty(), magnitude }
    }

    /// Whether the integer is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Whether the integer is zero.
    pub fn is_zero(&self) -> bool {
        self.magnitude.is_empty()
    }

    /// The absolute value as big-endian bytes without leading zeros (empty for zero).
    pub fn magnitude_be(&self) -> &[u8] {
        &self.magnitude
    }

    /// The value as an `i128`, if it fits.
    #[allow(clippy::indexing_slicing, reason = "the magnitude is checked to be at most 16 bytes")]
    pub fn to_i128(&self) -> Option<i128> {
        if self.magnitude.len() > 16 {
            return None;
        }
        let mut bytes = [0u8; 16];
        bytes[16 - self.magnitude.len()..].copy_from_slice(&self.magnitude);
        let magnitude = u128::from_be_bytes(bytes);
        if self.negative {
            if magnitude <= i128::MAX as u128 + 1 {
                Some((magnitude as i128).wrapping_neg())
            } else {
                None
            }
        } else {
            i128::try_from(magnitude).ok()
        }
    }

    /// The value as a `u64`, if it fits (0 ..= 2^64 - 1).
    #[allow(clippy::indexing_slicing, reason = "the magnitude is checked to be at most 8 bytes")]
    pub fn to_u64(&self) -> Option<u64> {
        if self.negative || self.magnitude.len() > 8 {
            return None;
        }
        let mut bytes = [0u8; 8];
        bytes[8 - self.magnitude.len()..].copy_from_slice(&self.magnitude);
        Some(u64::from_be_bytes(bytes))
    }
}

impl From<i128> for KvBigInt {
    fn from(value: i128) -> Self {
        KvBigInt::from_sign_magnitude(value < 0, &value.unsigned_abs().to_be_bytes())
    }
}

impl From<i64> for KvBigInt {
    fn from(value: i64) -> Self {
        KvBigInt::from(i128::from(value))
    }
}

impl From<u64> for KvBigInt {
    fn from(value: u64) -> Self {
        KvBigInt::from_sign_magnitude(false, &value.to_be_bytes())
    }
}

impl From<i32> for KvBigInt {
    fn from(value: i32) -> Self {
        KvBigInt::from(i128::from(value))
    }
}

impl Ord for KvBigInt {
    fn cmp(&self, other: &Self) -> Ordering {
        let by_magnitude = self
            .magnitude
            .len()
            .cmp(&other.magnitude.len())
            .then_with(|| self.magnitude.cmp(&other.magnitude));
        match (self.negative, other.negative) {
            (false, false) => by_magnitude,
            (true, true) => by_magnitude.reverse(),
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        }
    }
}

impl PartialOrd for KvBigInt {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for KvBigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}n")
    }
}

impl fmt::Display for KvBigInt {
    /// Decimal digits, with a leading `-` for negative values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.magnitude.is_empty() {
            return f.write_str("0");
        }
        // Repeated division by 10^19 of the big-endian magnitude.
        let mut digits = Vec::new();
        let mut rest = self.magnitude.clone();
        while !rest.is_empty() {
            let mut remainder: u128 = 0;
            let mut quotient = Vec::with_capacity(rest.len());
            for byte in &rest {
                let current = (remainder << 8) | u128::from(*byte);
                let q = current / 10_000_000_000_000_000_000;
                remainder = current % 10_000_000_000_000_000_000;
                if !(quotient.is_empty() && q == 0) {
                    quotient.push(q as u8);
                }
            }
            digits.push(remainder as u64);
            rest = quotient;
        }
        if self.negative {
            f.write_str("-")?;
        }
        let mut chunks = digits.iter().rev();
        if let Some(first) = chunks.next() {
            write!(f, "{first}")?;
        }
        for chunk in chunks {
            write!(f, "{chunk:019}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representation_is_canonical() {
        assert_eq!(KvBigInt::from_sign_magnitude(true, &[0, 0]), KvBigInt::from(0));
        assert_eq!(KvBigInt::from_sign_magnitude(false, &[0, 1, 0]), KvBigInt::from(256));
        assert!(KvBigInt::from(0).magnitude_be().is_empty());
        assert_eq!(KvBigInt::from(-257).magnitude_be(), &[1, 1]);
    }

    #[test]
    fn order_is_numeric() {
        let values: Vec<i128> = vec![i128::MIN, -70_000, -256, -255, -1, 0, 1, 255, 256, 70_000, i128::MAX];
        for a in &values {
            for b in &values {
                assert_eq!(KvBigInt::from(*a).cmp(&KvBigInt::from(*b)), a.cmp(b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn conversions_round_trip_and_refuse_overflow() {
        for v in [i128::MIN, -1, 0, 1, u64::MAX as i128, i128::MAX] {
            assert_eq!(KvBigInt::from(v).to_i128(), Some(v));
        }
        assert_eq!(KvBigInt::from(u64::MAX).to_u64(), Some(u64::MAX));
        assert_eq!(KvBigInt::from(-1).to_u64(), None);
        let huge = KvBigInt::from_sign_magnitude(false, &[1; 20]);
        assert_eq!(huge.to_i128(), None);
        assert_eq!(huge.to_u64(), None);
    }

    #[test]
    fn display_prints_decimal() {
        assert_eq!(KvBigInt::from(0).to_string(), "0");
        assert_eq!(KvBigInt::from(-42).to_string(), "-42");
        assert_eq!(KvBigInt::from(i128::MAX).to_string(), i128::MAX.to_string());
        assert_eq!(KvBigInt::from(i128::MIN).to_string(), i128::MIN.to_string());
        // 2^128
        let two_128 =
            KvBigInt::from_sign_magnitude(false, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(two_128.to_string(), "340282366920938463463374607431768211456");
    }
}
