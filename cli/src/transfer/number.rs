//! Numbers as text, exactly: the shortest decimal that reads back as the same double
//! (Rust's `{:?}` without a trailing `.0`: `1`, `0.1`, `1.5`, `1e300`, `-0`), or
//! JavaScript's `NaN`, `Infinity`, `-Infinity`.

use std::fmt::{self, Write};

/// A buffer on the stack for one formatted double (Rust's `{:?}` of an `f64` is at most
/// 24 characters: `-2.2250738585072014e-308`).
struct Digits {
    buf: [u8; 32],
    len: usize,
}

impl fmt::Write for Digits {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let end = self.len + text.len();
        self.buf.get_mut(self.len..end).ok_or(fmt::Error)?.copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Writes the text of `n` to `out` without allocating.
pub fn write_number(out: &mut impl fmt::Write, n: f64) -> fmt::Result {
    if n.is_nan() {
        return out.write_str("NaN");
    }
    if n.is_infinite() {
        return out.write_str(if n > 0.0 { "Infinity" } else { "-Infinity" });
    }
    let mut digits = Digits { buf: [0; 32], len: 0 };
    write!(digits, "{n:?}")?;
    let text = digits.buf.get(..digits.len).ok_or(fmt::Error)?;
    let text = text.strip_suffix(b".0").unwrap_or(text);
    out.write_str(std::str::from_utf8(text).map_err(|_| fmt::Error)?)
}

/// The text of `n`.
#[cfg(test)]
pub fn number_text(n: f64) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail, nor can a double's text overflow its buffer.
    let _ = write_number(&mut out, n);
    out
}

/// Reads what [`number_text`] writes (and any other decimal that parses to a finite
/// double, correctly rounded); `None` for anything else.
pub fn parse_number(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => {
            let starts_well = text.bytes().next().is_some_and(|c| c == b'-' || c.is_ascii_digit());
            let n: f64 = text.parse().ok()?;
            (starts_well && n.is_finite()).then_some(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_double_reads_back_bit_for_bit() {
        let samples = [
            0.0,
            -0.0,
            1.0,
            -1.5,
            0.1,
            1e300,
            -1e-300,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            f64::MIN,
            123456789012345680.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for n in samples {
            let text = number_text(n);
            assert_eq!(parse_number(&text).map(f64::to_bits), Some(n.to_bits()), "{text}");
        }
        assert!(parse_number("NaN").unwrap().is_nan());
        assert_eq!(number_text(-0.0), "-0");
        assert_eq!(number_text(1.0), "1");
        assert_eq!(number_text(-1.5), "-1.5");
        assert_eq!(number_text(1e21), "1e21");
        assert_eq!(number_text(12.0e15), "1.2e16");
        for bad in ["", "inf", "nan", "infinity", "+1", "1x", " 1", "1e999", ".5", "0x10"] {
            assert_eq!(parse_number(bad), None, "{bad}");
        }
    }
}
