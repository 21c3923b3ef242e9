//! Arbitrary-size integers as they appear in keys (`bigint` parts) and values (V8 BigInt).
//!
//! Stored as a sign and a big-endian magnitude without leading zero bytes. Zero has an
//! empty magnitude and is never negative, so every integer has exactly one representation
//! and the derived equality is numeric equality.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// An arbitrary-size integer (a JavaScript `bigint`).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct KvBigInt {
    negative: bool,
    /// Big-endian, no leading zero bytes; empty for zero.
    magnitude: Vec<u8>,
}

impl KvBigInt {
    /// The largest magnitude [`str::parse`] accepts, in bytes: 65536, the most a stored
    /// value can hold.
    pub const MAX_PARSED_BYTES: usize = 65_536;

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

    /// The value as a `u128`, if it fits (0 ..= 2^128 - 1).
    pub fn to_u128(&self) -> Option<u128> {
        if self.negative || self.magnitude.len() > 16 {
            return None;
        }
        let mut bytes = [0u8; 16];
        bytes.get_mut(16 - self.magnitude.len()..)?.copy_from_slice(&self.magnitude);
        Some(u128::from_be_bytes(bytes))
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

impl From<u128> for KvBigInt {
    fn from(value: u128) -> Self {
        KvBigInt::from_sign_magnitude(false, &value.to_be_bytes())
    }
}

/// `From` every primitive integer, through the 128-bit type of the same signedness.
macro_rules! from_primitive {
    ($wide:ty: $($narrow:ty),*) => {$(
        impl From<$narrow> for KvBigInt {
            fn from(value: $narrow) -> Self {
                // Lossless: every primitive of this signedness fits the 128-bit type.
                KvBigInt::from(value as $wide)
            }
        }
    )*};
}

from_primitive!(i128: i8, i16, i32, i64, isize);
from_primitive!(u128: u8, u16, u32, u64, usize);

/// An integer that does not fit the primitive type it was converted to (see the
/// `TryFrom<KvBigInt>` impls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TryFromBigIntError(());

impl fmt::Display for TryFromBigIntError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bigint out of range for the integer type")
    }
}

impl std::error::Error for TryFromBigIntError {}

/// `TryFrom<KvBigInt>` and `TryFrom<&KvBigInt>` for every primitive integer, through the
/// 128-bit type of the same signedness.
macro_rules! try_into_primitive {
    ($to_wide:ident: $($narrow:ty),*) => {$(
        impl TryFrom<&KvBigInt> for $narrow {
            type Error = TryFromBigIntError;

            fn try_from(value: &KvBigInt) -> Result<Self, Self::Error> {
                let wide = value.$to_wide().ok_or(TryFromBigIntError(()))?;
                <$narrow>::try_from(wide).map_err(|_| TryFromBigIntError(()))
            }
        }

        impl TryFrom<KvBigInt> for $narrow {
            type Error = TryFromBigIntError;

            fn try_from(value: KvBigInt) -> Result<Self, Self::Error> {
                <$narrow>::try_from(&value)
            }
        }
    )*};
}

try_into_primitive!(to_i128: i8, i16, i32, i64, i128, isize);
try_into_primitive!(to_u128: u8, u16, u32, u64, u128, usize);

/// Why a string is not a [`KvBigInt`] (see its `FromStr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseBigIntError {
    /// The string is empty, or only a sign.
    Empty,
    /// A character that is not a decimal digit (after an optional leading sign), at this
    /// byte offset. Whitespace, `_`, and `0x`/`0o`/`0b` prefixes are refused too.
    InvalidDigit {
        /// Byte offset of the character in the string.
        offset: usize,
    },
    /// The magnitude would need more than [`KvBigInt::MAX_PARSED_BYTES`] bytes.
    TooLarge,
}

impl fmt::Display for ParseBigIntError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseBigIntError::Empty => f.write_str("cannot parse a bigint from an empty string"),
            ParseBigIntError::InvalidDigit { offset } => {
                write!(f, "invalid digit in bigint at byte {offset}")
            }
            ParseBigIntError::TooLarge => {
                write!(f, "bigint too large (max {} bytes of magnitude)", KvBigInt::MAX_PARSED_BYTES)
            }
        }
    }
}

impl std::error::Error for ParseBigIntError {}

impl FromStr for KvBigInt {
    type Err = ParseBigIntError;

    /// Parses a decimal integer with an optional leading `+` or `-`, like
    /// `i128::from_str` but of any size up to [`KvBigInt::MAX_PARSED_BYTES`] bytes of
    /// magnitude. Leading zeros are allowed (`"-007"` is -7, `"-0"` is 0). Nothing else is
    /// accepted: no whitespace, no `_`, and no `0x`/`0o`/`0b` prefix (JavaScript's
    /// `BigInt("0x10")` is 16n, but a Rust parser that guessed the radix from the text
    /// would read `"010"` and `"0x10"` inconsistently; parse hex yourself and use
    /// [`KvBigInt::from_sign_magnitude`]).
    ///
    /// ```
    /// use stampkv_model::{KvBigInt, ParseBigIntError};
    ///
    /// let n: KvBigInt = "-340282366920938463463374607431768211456".parse()?;
    /// assert_eq!(n.to_string(), "-340282366920938463463374607431768211456");
    /// assert_eq!("+42".parse::<KvBigInt>()?, KvBigInt::from(42));
    /// assert_eq!("0x10".parse::<KvBigInt>(), Err(ParseBigIntError::InvalidDigit { offset: 1 }));
    /// assert_eq!("".parse::<KvBigInt>(), Err(ParseBigIntError::Empty));
    /// # Ok::<(), ParseBigIntError>(())
    /// ```
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (negative, digits, offset) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..], 1),
            Some(b'+') => (false, &text[1..], 1),
            _ => (false, text, 0),
        };
        if digits.is_empty() {
            return Err(ParseBigIntError::Empty);
        }
        if let Some(bad) = digits.bytes().position(|b| !b.is_ascii_digit()) {
            return Err(ParseBigIntError::InvalidDigit { offset: offset + bad });
        }
        let significant = digits.trim_start_matches('0');
        // Each decimal digit adds log2(10) < 3.33 bits: refuse early what cannot fit, so a
        // huge string costs no quadratic work.
        if significant.len() > KvBigInt::MAX_PARSED_BYTES * 8 * 100 / 332 + 1 {
            return Err(ParseBigIntError::TooLarge);
        }
        // Little-endian base-2^64 limbs; 19 decimal digits at a time fit a u64.
        let mut limbs: Vec<u64> = Vec::new();
        for chunk in significant.as_bytes().rchunks(19).rev() {
            let mut chunk_value = 0u64;
            for digit in chunk {
                chunk_value = chunk_value * 10 + u64::from(digit - b'0');
            }
            let mut carry = u128::from(chunk_value);
            let scale = 10u128.pow(chunk.len() as u32);
            for limb in &mut limbs {
                let product = u128::from(*limb) * scale + carry;
                *limb = product as u64;
                carry = product >> 64;
            }
            if carry > 0 {
                limbs.push(carry as u64);
            }
        }
        let magnitude: Vec<u8> = limbs.iter().rev().flat_map(|limb| limb.to_be_bytes()).collect();
        let parsed = KvBigInt::from_sign_magnitude(negative, &magnitude);
        if parsed.magnitude.len() > KvBigInt::MAX_PARSED_BYTES {
            return Err(ParseBigIntError::TooLarge);
        }
        Ok(parsed)
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
    fn every_primitive_integer_converts_in_and_back() {
        assert_eq!(KvBigInt::from(i8::MIN).to_string(), "-128");
        assert_eq!(KvBigInt::from(i16::MIN).to_string(), "-32768");
        assert_eq!(KvBigInt::from(isize::MIN).to_i128(), Some(isize::MIN as i128));
        assert_eq!(KvBigInt::from(u8::MAX).to_string(), "255");
        assert_eq!(KvBigInt::from(u16::MAX).to_string(), "65535");
        assert_eq!(KvBigInt::from(u32::MAX).to_string(), "4294967295");
        assert_eq!(KvBigInt::from(usize::MAX).to_u128(), Some(usize::MAX as u128));
        assert_eq!(KvBigInt::from(u128::MAX).to_string(), u128::MAX.to_string());
        assert_eq!(KvBigInt::from(u128::MAX).to_i128(), None);
        assert_eq!(i8::try_from(KvBigInt::from(-128)), Ok(-128i8));
        assert_eq!(i8::try_from(KvBigInt::from(-129)), Err(TryFromBigIntError(())));
        assert_eq!(u8::try_from(&KvBigInt::from(255)), Ok(255u8));
        assert!(u8::try_from(&KvBigInt::from(256)).is_err());
        assert!(u64::try_from(KvBigInt::from(-1)).is_err());
        assert_eq!(i64::try_from(KvBigInt::from(i64::MIN)), Ok(i64::MIN));
        assert!(i64::try_from(KvBigInt::from(i128::from(i64::MAX) + 1)).is_err());
        assert_eq!(i128::try_from(KvBigInt::from(i128::MIN)), Ok(i128::MIN));
        assert_eq!(u128::try_from(KvBigInt::from(u128::MAX)), Ok(u128::MAX));
        let two_128 = KvBigInt::from_sign_magnitude(false, &[1; 17]);
        assert!(u128::try_from(&two_128).is_err());
        assert!(i128::try_from(&two_128).is_err());
        assert_eq!(usize::try_from(KvBigInt::from(7)), Ok(7usize));
        assert!(isize::try_from(KvBigInt::from(u128::MAX)).is_err());
        assert!(!TryFromBigIntError(()).to_string().is_empty());
    }

    #[test]
    fn parsing_reads_signed_decimal_and_round_trips_display() {
        for text in [
            "0",
            "1",
            "-1",
            "255",
            "-256",
            "18446744073709551616",
            "-170141183460469231731687303715884105729",
        ] {
            assert_eq!(text.parse::<KvBigInt>().unwrap().to_string(), text);
        }
        for v in [i128::MIN, i128::MIN + 1, -1, 0, 1, i128::MAX] {
            assert_eq!(v.to_string().parse::<KvBigInt>(), Ok(KvBigInt::from(v)));
        }
        assert_eq!(u128::MAX.to_string().parse::<KvBigInt>(), Ok(KvBigInt::from(u128::MAX)));
        assert_eq!("+42".parse::<KvBigInt>(), Ok(KvBigInt::from(42)));
        assert_eq!("-0".parse::<KvBigInt>(), Ok(KvBigInt::from(0)));
        assert!(!"-0".parse::<KvBigInt>().unwrap().is_negative());
        assert_eq!("-000123".parse::<KvBigInt>(), Ok(KvBigInt::from(-123)));
        assert_eq!("0000000000000000000000000000000000000000".parse::<KvBigInt>(), Ok(KvBigInt::from(0)));
        // 10^19 and 10^38 sit on the 19-digit chunk boundaries.
        assert_eq!(
            "10000000000000000000".parse::<KvBigInt>(),
            Ok(KvBigInt::from(10_000_000_000_000_000_000u128))
        );
        let ten_38 = 10u128.pow(38);
        assert_eq!(ten_38.to_string().parse::<KvBigInt>(), Ok(KvBigInt::from(ten_38)));
        // 2^256 - 1: every bit set across several limbs.
        let max_256 = "115792089237316195423570985008687907853269984665640564039457584007913129639935";
        let parsed: KvBigInt = max_256.parse().unwrap();
        assert_eq!(parsed.magnitude_be(), &[0xff; 32]);
        assert_eq!(parsed.to_string(), max_256);
    }

    #[test]
    fn parsing_refuses_garbage_with_a_typed_error() {
        let invalid = |offset| Err(ParseBigIntError::InvalidDigit { offset });
        assert_eq!("".parse::<KvBigInt>(), Err(ParseBigIntError::Empty));
        assert_eq!("-".parse::<KvBigInt>(), Err(ParseBigIntError::Empty));
        assert_eq!("+".parse::<KvBigInt>(), Err(ParseBigIntError::Empty));
        assert_eq!("0x10".parse::<KvBigInt>(), invalid(1));
        assert_eq!("-0x10".parse::<KvBigInt>(), invalid(2));
        assert_eq!("0b1".parse::<KvBigInt>(), invalid(1));
        assert_eq!("0o7".parse::<KvBigInt>(), invalid(1));
        assert_eq!("12n".parse::<KvBigInt>(), invalid(2));
        assert_eq!(" 1".parse::<KvBigInt>(), invalid(0));
        assert_eq!("1 ".parse::<KvBigInt>(), invalid(1));
        assert_eq!("1_000".parse::<KvBigInt>(), invalid(1));
        assert_eq!("--1".parse::<KvBigInt>(), invalid(1));
        assert_eq!("+-1".parse::<KvBigInt>(), invalid(1));
        assert_eq!("1.5".parse::<KvBigInt>(), invalid(1));
        assert_eq!("1e3".parse::<KvBigInt>(), invalid(1));
        assert_eq!("\u{661}".parse::<KvBigInt>(), invalid(0), "non-ASCII digits are not digits");
        assert_eq!("1\u{661}".parse::<KvBigInt>(), invalid(1));
        for error in [
            ParseBigIntError::Empty,
            ParseBigIntError::InvalidDigit { offset: 3 },
            ParseBigIntError::TooLarge,
        ] {
            assert!(!error.to_string().is_empty());
        }
    }

    #[test]
    fn parsing_refuses_more_than_a_value_can_hold() {
        // 10^157826 - 1 (157826 nines) needs 65536 bytes; 10^157827 needs 65537.
        let nines: KvBigInt = format!("-{}", "9".repeat(157_826)).parse().unwrap();
        assert!(nines.is_negative());
        assert_eq!(nines.magnitude_be().len(), KvBigInt::MAX_PARSED_BYTES);
        let ten_157827 = format!("1{}", "0".repeat(157_827));
        assert!(matches!(ten_157827.parse::<KvBigInt>(), Err(ParseBigIntError::TooLarge)));
        // A huge string is refused without being multiplied out; leading zeros do not count.
        let huge = "9".repeat(10_000_000);
        assert!(matches!(huge.parse::<KvBigInt>(), Err(ParseBigIntError::TooLarge)));
        let padded = format!("{}1", "0".repeat(1_000_000));
        assert_eq!(padded.parse::<KvBigInt>(), Ok(KvBigInt::from(1)));
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
