//! A short, readable rendering of a V8 value in JavaScript's syntax, written next to the
//! value's bytes in a dump so that people (and `grep`) can see what it holds. It is only a
//! hint: loading ignores it.

use super::number::write_number;
use stampkv::{KvValue, Value};
use std::fmt::{self, Write};

/// Longest hint, in characters; longer ones are cut and end with `…`.
pub const MAX_CHARS: usize = 120;

/// The hint for a stored value: `None` unless it is V8 data stampkv can decode.
pub fn show(value: &KvValue) -> Option<String> {
    let KvValue::V8(_) = value else { return None };
    let decoded = value.to_value().ok()?;
    let mut out = String::new();
    // Writing to a String cannot fail.
    render(&decoded, &mut out).ok()?;
    if out.chars().count() > MAX_CHARS {
        let cut: String = out.chars().take(MAX_CHARS - 1).collect();
        out = cut + "…";
    }
    Some(out)
}

fn quoted(text: &str, out: &mut String) -> fmt::Result {
    out.write_str(&serde_json::Value::from(text).to_string())
}

fn list<'a>(items: impl Iterator<Item = &'a Value>, out: &mut String) -> fmt::Result {
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        render(item, out)?;
    }
    Ok(())
}

fn render(value: &Value, out: &mut String) -> fmt::Result {
    match value {
        Value::Undefined => out.write_str("undefined"),
        Value::Null => out.write_str("null"),
        Value::Bool(b) => write!(out, "{b}"),
        Value::Number(n) => write_number(out, *n),
        Value::BigInt(n) => write!(out, "{n}n"),
        Value::String(s) => quoted(s, out),
        Value::Bytes(bytes) => {
            write!(out, "Uint8Array({}) [", bytes.len())?;
            for (i, byte) in bytes.iter().enumerate() {
                write!(out, "{}{byte}", if i > 0 { ", " } else { "" })?;
            }
            out.write_char(']')
        }
        Value::Array(items) => {
            out.write_char('[')?;
            list(items.iter(), out)?;
            out.write_char(']')
        }
        Value::Object(props) => {
            out.write_char('{')?;
            for (i, (name, item)) in props.iter().enumerate() {
                out.write_str(if i > 0 { ", " } else { " " })?;
                quoted(name, out)?;
                out.write_str(": ")?;
                render(item, out)?;
            }
            out.write_str(if props.is_empty() { "}" } else { " }" })
        }
        Value::Map(pairs) => {
            write!(out, "Map({}) {{", pairs.len())?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                out.write_str(if i > 0 { ", " } else { " " })?;
                render(k, out)?;
                out.write_str(" => ")?;
                render(v, out)?;
            }
            out.write_str(if pairs.is_empty() { "}" } else { " }" })
        }
        Value::Set(items) => {
            write!(out, "Set({}) {{", items.len())?;
            if !items.is_empty() {
                out.write_char(' ')?;
                list(items.iter(), out)?;
                out.write_char(' ')?;
            }
            out.write_char('}')
        }
        Value::Date(ms) => {
            out.write_str("Date(")?;
            write_number(out, *ms)?;
            out.write_char(')')
        }
        Value::RegExp { source, flags } => write!(out, "/{source}/{flags}"),
        Value::U64(n) => write!(out, "Deno.KvU64({n}n)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v8(value: &Value) -> KvValue {
        KvValue::V8(stampkv::value::v8::serialize(value).unwrap())
    }

    #[test]
    fn values_render_in_javascript_syntax_and_long_ones_are_cut() {
        let value = Value::Object(vec![
            ("a".into(), Value::Array(vec![Value::Number(1.0), Value::String("x\"y".into())])),
            ("m".into(), Value::Map(vec![(Value::Number(f64::NAN), Value::Set(vec![Value::Null]))])),
            ("r".into(), Value::RegExp { source: "a+".into(), flags: "g".into() }),
            ("b".into(), Value::Bytes(vec![1, 2])),
            ("d".into(), Value::Date(0.0)),
        ]);
        assert_eq!(
            show(&v8(&value)).unwrap(),
            r#"{ "a": [1, "x\"y"], "m": Map(1) { NaN => Set(1) { null } }, "r": /a+/g, "b": Uint8Array(2) [1, 2], "d": Date(0) }"#
        );
        assert_eq!(show(&v8(&Value::Object(vec![]))).unwrap(), "{}");
        assert_eq!(show(&v8(&Value::Undefined)).unwrap(), "undefined");
        assert_eq!(show(&v8(&Value::BigInt((-5i64).into()))).unwrap(), "-5n");
        let long = show(&v8(&Value::String("x".repeat(500)))).unwrap();
        assert_eq!(long.chars().count(), MAX_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(show(&KvValue::Bytes(vec![1])), None);
        assert_eq!(show(&KvValue::U64(1)), None);
        assert_eq!(show(&KvValue::V8(vec![0xff, 0x0f, 0x99])), None);
    }
}
