//! Numbers as text, exactly: the shortest decimal that reads back as the same double
//! (Rust's `{:?}` without a trailing `.0`: `1`, `0.1`, `1.5`, `1e300`, `-0`), or
//! JavaScript's `NaN`, `Infinity`, `-Infinity`.

/// The text of `n`.
pub fn number_text(n: f64) -> String {
    if n.is_nan() {
        "NaN".into()
    } else if n == f64::INFINITY {
        "Infinity".into()
    } else if n == f64::NEG_INFINITY {
        "-Infinity".into()
    } else {
        let text = format!("{n:?}");
        match text.strip_suffix(".0") {
            Some(integral) => integral.to_owned(),
            None => text,
        }
    }
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
