//! JSON in and out: values and keys in the typed JSON form of `get --json` / `list --json`
//! (every kind tagged, lossless; described in `cli/FORMAT.md`), and plain JSON read as
//! `JSON.parse` reads it (for `set`).
//!
//! The typed form is the one of `@kitsonk/kv-toolbox/json` (`valueToJSON` / `toValue`,
//! `keyToJSON` / `toKey`), so a script in Deno turns it back into the same JavaScript value
//! with `toValue`, plus one extension: `{"type": "V8", ...}` for stored V8 data that
//! stampkv cannot decode into a value (kept as its raw bytes).

use crate::value_display::{iso_date, js_number_to_string};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use stampkv::{Key, KeyPart, KvBigInt, KvValue, Value};
use std::collections::HashMap;
use std::fmt::{self, Write as _};

/// A parsed JSON document, objects kept in their written order (duplicates included).
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number, as the nearest double (as `JSON.parse` reads it).
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object's members in order.
    Object(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Number(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Json>()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            members.push((key, value));
        }
        Ok(Json::Object(members))
    }
}

/// How deeply arrays and objects may nest in a JSON document: enough for the deepest value
/// stampkv stores (256 containers) in typed JSON, where each level takes up to three.
pub const MAX_JSON_DEPTH: usize = 1024;

/// The deepest nesting of arrays and objects in `text` (brackets inside strings ignored).
fn json_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for byte in text.bytes() {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') | (false, _, b'"') => in_string = !in_string,
            (false, _, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses one JSON document (nested at most [`MAX_JSON_DEPTH`] levels).
pub fn parse_json(text: &str) -> Result<Json, String> {
    if json_depth(text) > MAX_JSON_DEPTH {
        return Err(format!("invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels"));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    // serde_json stops at 128 levels; the depth was bounded above instead.
    deserializer.disable_recursion_limit();
    let json = Json::deserialize(&mut deserializer).map_err(|e| format!("invalid JSON: {e}"))?;
    deserializer.end().map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(json)
}

/// Whether `key` is a canonical array index (`"0"`, `"42"`, up to 2^32 - 2): JavaScript
/// lists such keys first, in ascending order.
fn array_index(key: &str) -> Option<u64> {
    if key.is_empty() || (key.len() > 1 && key.starts_with('0')) || !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    key.parse::<u64>().ok().filter(|n| *n <= (1 << 32) - 2)
}

/// Orders properties as a JavaScript object holds them (array indices ascending, then the
/// rest in insertion order); a repeated key keeps its first place and its last value.
fn javascript_object(members: Vec<(String, Value)>) -> Value {
    let mut properties: Vec<(String, Value)> = Vec::with_capacity(members.len());
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (key, value) in members {
        match seen.get(&key).and_then(|index| properties.get_mut(*index)) {
            Some(slot) => slot.1 = value,
            None => {
                seen.insert(key.clone(), properties.len());
                properties.push((key, value));
            }
        }
    }
    let (mut indices, named): (Vec<_>, Vec<_>) =
        properties.into_iter().partition(|(key, _)| array_index(key).is_some());
    indices.sort_by_key(|(key, _)| array_index(key));
    indices.extend(named);
    Value::Object(indices)
}

/// A plain JSON document as the value `JSON.parse` makes of it.
pub fn plain_to_value(json: Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(b),
        Json::Number(x) => Value::Number(x),
        Json::String(s) => Value::String(s),
        Json::Array(items) => Value::Array(items.into_iter().map(plain_to_value).collect()),
        Json::Object(members) => {
            javascript_object(members.into_iter().map(|(k, v)| (k, plain_to_value(v))).collect())
        }
    }
}

// ---------------------------------------------------------------------------------------
// Typed JSON: output
// ---------------------------------------------------------------------------------------

/// A JSON string literal.
pub fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A number in typed JSON: a JSON number (JavaScript's digits, `-0` kept), or the string
/// `"NaN"`, `"Infinity"`, `"-Infinity"`.
fn json_number(x: f64) -> String {
    if x.is_finite() {
        if x == 0.0 && x.is_sign_negative() {
            "-0".to_owned()
        } else {
            js_number_to_string(x)
        }
    } else {
        json_string(&js_number_to_string(x))
    }
}

/// URL-safe base64 without padding.
pub fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Either alphabet (URL-safe or standard), padding optional, bits after the last byte zero.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes base64 (URL-safe or standard alphabet, padding optional).
pub fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    if let Some(c) = text.chars().find(|c| !(c.is_ascii_alphanumeric() || "-_+/=".contains(*c))) {
        return Err(format!("'{c}' is not a base64 character"));
    }
    let url_safe = text.replace('+', "-").replace('/', "_");
    LENIENT.decode(url_safe).map_err(|_| "base64 text of an impossible length or with stray bits".to_owned())
}

/// A key part in typed JSON.
pub fn key_part_json(part: &KeyPart) -> String {
    match part {
        KeyPart::Bytes(bytes) => format!(r#"{{"type":"Uint8Array","value":"{}"}}"#, base64url(bytes)),
        KeyPart::String(text) => format!(r#"{{"type":"string","value":{}}}"#, json_string(text)),
        KeyPart::BigInt(n) => format!(r#"{{"type":"bigint","value":"{n}"}}"#),
        KeyPart::Number(x) => format!(r#"{{"type":"number","value":{}}}"#, json_number(*x)),
        KeyPart::Bool(b) => format!(r#"{{"type":"boolean","value":{b}}}"#),
    }
}

/// A key in typed JSON: an array of typed parts.
pub fn key_json(key: &Key) -> String {
    let parts: Vec<String> = key.parts().iter().map(key_part_json).collect();
    format!("[{}]", parts.join(","))
}

/// A value in typed JSON.
pub fn value_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Stored V8 data stampkv cannot decode: its bytes, and why.
pub fn raw_v8_json(bytes: &[u8], reason: &str) -> String {
    format!(r#"{{"type":"V8","value":"{}","reason":{}}}"#, base64url(bytes), json_string(reason))
}

fn write_value(out: &mut String, value: &Value) {
    let mut typed = |kind: &str, value: &str| {
        let _ = write!(out, r#"{{"type":"{kind}","value":{value}}}"#);
    };
    match value {
        Value::Undefined => out.push_str(r#"{"type":"undefined"}"#),
        Value::Null => typed("null", "null"),
        Value::Bool(b) => typed("boolean", &b.to_string()),
        Value::Number(x) => typed("number", &json_number(*x)),
        Value::BigInt(n) => typed("bigint", &format!("\"{n}\"")),
        Value::String(text) => typed("string", &json_string(text)),
        Value::Bytes(bytes) => {
            let _ = write!(
                out,
                r#"{{"type":"Uint8Array","byteLength":{},"value":"{}"}}"#,
                bytes.len(),
                base64url(bytes)
            );
        }
        Value::Date(ms) => {
            typed("Date", &iso_date(*ms).map_or_else(|| "null".to_owned(), |iso| json_string(&iso)))
        }
        Value::RegExp { source, flags } => {
            let source = if source.is_empty() { "(?:)" } else { source };
            typed("RegExp", &json_string(&format!("/{source}/{flags}")));
        }
        Value::U64(n) => typed("KvU64", &format!("\"{n}\"")),
        Value::Array(items) | Value::Set(items) => {
            let kind = if matches!(value, Value::Array(_)) { "json_array" } else { "json_set" };
            let _ = write!(out, r#"{{"type":"{kind}","value":["#);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push_str("]}");
        }
        Value::Object(properties) => {
            out.push_str(r#"{"type":"json_object","value":{"#);
            for (i, (key, item)) in properties.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&json_string(key));
                out.push(':');
                write_value(out, item);
            }
            out.push_str("}}");
        }
        Value::Map(entries) => {
            out.push_str(r#"{"type":"json_map","value":["#);
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('[');
                write_value(out, key);
                out.push(',');
                write_value(out, item);
                out.push(']');
            }
            out.push_str("]}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Typed JSON: input
// ---------------------------------------------------------------------------------------

/// A typed node taken apart: its `type`, its `value` (absent for `undefined`) and any
/// other members (`byteLength`, ...).
type TypedParts = (String, Option<Json>, Vec<(String, Json)>);

/// Takes a typed node apart.
fn typed_parts(json: Json) -> Result<TypedParts, String> {
    let Json::Object(members) = json else {
        return Err(r#"expected an object like {"type": "string", "value": "..."}"#.to_owned());
    };
    let mut kind = None;
    let mut value = None;
    let mut rest = Vec::new();
    for (key, member) in members {
        match key.as_str() {
            "type" if kind.is_none() => match member {
                Json::String(s) => kind = Some(s),
                _ => return Err(r#""type" must be a string"#.to_owned()),
            },
            "value" if value.is_none() => value = Some(member),
            "type" | "value" => return Err(format!(r#""{key}" given twice"#)),
            _ => rest.push((key, member)),
        }
    }
    let kind = kind.ok_or_else(|| r#"missing "type""#.to_owned())?;
    Ok((kind, value, rest))
}

fn expect_value(kind: &str, value: Option<Json>) -> Result<Json, String> {
    value.ok_or_else(|| format!(r#"a "{kind}" needs a "value""#))
}

fn expect_string(kind: &str, value: Option<Json>) -> Result<String, String> {
    match expect_value(kind, value)? {
        Json::String(s) => Ok(s),
        _ => Err(format!(r#"the "value" of a "{kind}" must be a string"#)),
    }
}

fn typed_number(value: Option<Json>) -> Result<f64, String> {
    match expect_value("number", value)? {
        Json::Number(x) => Ok(x),
        Json::String(s) if s == "NaN" => Ok(f64::NAN),
        Json::String(s) if s == "Infinity" => Ok(f64::INFINITY),
        Json::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
        _ => {
            Err(r#"the "value" of a "number" must be a number, "NaN", "Infinity" or "-Infinity""#.to_owned())
        }
    }
}

fn typed_bigint(value: Option<Json>) -> Result<KvBigInt, String> {
    let text = expect_string("bigint", value)?;
    text.parse::<KvBigInt>().map_err(|e| format!("invalid bigint {text:?}: {e}"))
}

fn typed_bytes(kind: &str, value: Option<Json>, rest: &[(String, Json)]) -> Result<Vec<u8>, String> {
    let bytes = decode_base64(&expect_string(kind, value)?)?;
    if let Some((_, length)) = rest.iter().find(|(key, _)| key == "byteLength") {
        if *length != Json::Number(bytes.len() as f64) {
            return Err(format!("byteLength does not match the {} bytes of the value", bytes.len()));
        }
    }
    Ok(bytes)
}

/// Kinds of the typed form that stampkv values cannot hold.
const FOREIGN_KINDS: &[&str] = &[
    "ArrayBuffer",
    "DataView",
    "Int8Array",
    "Uint8ClampedArray",
    "Int16Array",
    "Uint16Array",
    "Int32Array",
    "Uint32Array",
    "Float32Array",
    "Float64Array",
    "BigInt64Array",
    "BigUint64Array",
    "Error",
    "EvalError",
    "RangeError",
    "ReferenceError",
    "SyntaxError",
    "TypeError",
    "URIError",
];

const VALUE_KINDS: &str = "undefined, null, boolean, number, bigint, string, Uint8Array, json_array, \
     json_object, json_map, json_set, Date, RegExp, KvU64, V8";

/// Prefixes an error with where in the document it is.
fn at(path: &str) -> impl Fn(String) -> String + '_ {
    move |message| if message.starts_with("at ") { message } else { format!("at {path}: {message}") }
}

/// A typed JSON document (as `get --json` prints a value) as the value to store.
pub fn typed_to_kv_value(json: Json) -> Result<KvValue, String> {
    if let Json::Object(members) = &json {
        if members.iter().any(|(k, v)| k == "type" && *v == Json::String("V8".to_owned())) {
            let (_, value, _) = typed_parts(json)?;
            return Ok(KvValue::V8(decode_base64(&expect_string("V8", value)?)?));
        }
    }
    let value = typed_to_value(json, "$")?;
    KvValue::from_value(&value).map_err(|e| e.to_string())
}

/// A typed JSON node as a value; `path` names it in errors (`$`, `$.value[2]`, ...).
pub fn typed_to_value(json: Json, path: &str) -> Result<Value, String> {
    let (kind, value, rest) = typed_parts(json).map_err(at(path))?;
    let element = |i: usize| format!("{path}.value[{i}]");
    let result = match kind.as_str() {
        "undefined" => Ok(Value::Undefined),
        "null" => match value {
            None | Some(Json::Null) => Ok(Value::Null),
            Some(_) => Err(r#"the "value" of a "null" must be null"#.to_owned()),
        },
        "boolean" => match expect_value(&kind, value) {
            Ok(Json::Bool(b)) => Ok(Value::Bool(b)),
            Ok(_) => Err(r#"the "value" of a "boolean" must be true or false"#.to_owned()),
            Err(e) => Err(e),
        },
        "number" => typed_number(value).map(Value::Number),
        "bigint" => typed_bigint(value).map(Value::BigInt),
        "string" => expect_string(&kind, value).map(Value::String),
        "Uint8Array" => typed_bytes(&kind, value, &rest).map(Value::Bytes),
        "Date" => match expect_value(&kind, value) {
            Ok(Json::Null) => Ok(Value::Date(f64::NAN)),
            Ok(Json::String(text)) => parse_iso_date(&text).map(Value::Date),
            Ok(_) => Err(r#"the "value" of a "Date" must be an ISO date string or null"#.to_owned()),
            Err(e) => Err(e),
        },
        "RegExp" => expect_string(&kind, value).and_then(|text| parse_regexp(&text)),
        "KvU64" => expect_string(&kind, value).and_then(|text| {
            text.parse::<u64>()
                .map(Value::U64)
                .map_err(|_| format!("invalid KvU64 {text:?}: expected 0 to 2^64-1"))
        }),
        "json_array" | "json_set" => match expect_value(&kind, value) {
            Ok(Json::Array(items)) => {
                let items = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| typed_to_value(item, &element(i)))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(if kind == "json_array" { Value::Array(items) } else { Value::Set(items) })
            }
            Ok(_) => Err(format!(r#"the "value" of a "{kind}" must be an array"#)),
            Err(e) => Err(e),
        },
        "json_object" => match expect_value(&kind, value) {
            Ok(Json::Object(members)) => {
                let mut properties = Vec::with_capacity(members.len());
                let mut seen = std::collections::HashSet::new();
                for (key, member) in members {
                    if !seen.insert(key.clone()) {
                        return Err(at(path)(format!("property {} given twice", json_string(&key))));
                    }
                    let member_path = format!("{path}.value[{}]", json_string(&key));
                    properties.push((key, typed_to_value(member, &member_path)?));
                }
                Ok(javascript_object(properties))
            }
            Ok(_) => Err(r#"the "value" of a "json_object" must be an object"#.to_owned()),
            Err(e) => Err(e),
        },
        "json_map" => match expect_value(&kind, value) {
            Ok(Json::Array(pairs)) => {
                let mut entries = Vec::with_capacity(pairs.len());
                for (i, pair) in pairs.into_iter().enumerate() {
                    match pair {
                        Json::Array(kv) if kv.len() == 2 => {
                            let mut kv = kv.into_iter();
                            let (Some(k), Some(v)) = (kv.next(), kv.next()) else {
                                return Err(at(&element(i))("expected a [key, value] pair".to_owned()));
                            };
                            entries.push((
                                typed_to_value(k, &format!("{}[0]", element(i)))?,
                                typed_to_value(v, &format!("{}[1]", element(i)))?,
                            ));
                        }
                        _ => return Err(at(&element(i))("expected a [key, value] pair".to_owned())),
                    }
                }
                Ok(Value::Map(entries))
            }
            Ok(_) => Err(r#"the "value" of a "json_map" must be an array of [key, value] pairs"#.to_owned()),
            Err(e) => Err(e),
        },
        // The older plain forms of the same format.
        "Array" | "object" | "Set" => {
            expect_value(&kind, value).map(|plain| match (kind.as_str(), plain_to_value(plain)) {
                ("Set", Value::Array(items)) => Value::Set(items),
                (_, value) => value,
            })
        }
        "Map" => match expect_value(&kind, value) {
            Ok(Json::Array(pairs)) => pairs
                .into_iter()
                .map(|pair| match pair {
                    Json::Array(kv) if kv.len() == 2 => {
                        let mut kv = kv.into_iter().map(plain_to_value);
                        Ok((kv.next().unwrap_or(Value::Undefined), kv.next().unwrap_or(Value::Undefined)))
                    }
                    _ => Err("expected [key, value] pairs".to_owned()),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Map),
            Ok(_) => Err(r#"the "value" of a "Map" must be an array of [key, value] pairs"#.to_owned()),
            Err(e) => Err(e),
        },
        "V8" => Err("raw V8 data can only be a whole value, not part of one".to_owned()),
        other if FOREIGN_KINDS.contains(&other) => Err(format!("stampkv values cannot hold a {other}")),
        other => Err(format!("unknown type {other:?} (known: {VALUE_KINDS})")),
    };
    result.map_err(at(path))
}

/// A key in typed JSON (an array of typed parts).
pub fn parse_typed_key(text: &str) -> Result<Key, String> {
    let Json::Array(items) = parse_json(text)? else {
        return Err("expected an array of typed key parts".to_owned());
    };
    let mut parts = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = format!("$[{i}]");
        let (kind, value, rest) = typed_parts(item).map_err(at(&path))?;
        let part = match kind.as_str() {
            "string" => expect_string(&kind, value).map(KeyPart::String),
            "number" => typed_number(value).map(KeyPart::Number),
            "bigint" => typed_bigint(value).map(KeyPart::BigInt),
            "boolean" => match expect_value(&kind, value) {
                Ok(Json::Bool(b)) => Ok(KeyPart::Bool(b)),
                Ok(_) => Err(r#"the "value" of a "boolean" must be true or false"#.to_owned()),
                Err(e) => Err(e),
            },
            "Uint8Array" => typed_bytes(&kind, value, &rest).map(KeyPart::Bytes),
            other => {
                Err(format!("{other:?} is not a key part type (string, number, bigint, boolean, Uint8Array)"))
            }
        };
        parts.push(part.map_err(at(&path))?);
    }
    Ok(Key(parts))
}

/// `String(regexp)` back into a RegExp: `/source/flags`.
fn parse_regexp(text: &str) -> Result<Value, String> {
    let invalid = || format!("invalid RegExp {text:?}: expected /source/flags");
    let body = text.strip_prefix('/').ok_or_else(invalid)?;
    let (source, flags) = body.rsplit_once('/').ok_or_else(invalid)?;
    if !flags.chars().all(|c| "dgimsuvy".contains(c)) {
        return Err(format!("invalid RegExp flags {flags:?}"));
    }
    Ok(Value::RegExp { source: source.to_owned(), flags: flags.to_owned() })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Parses the ECMAScript date-time string format (what `toISOString` prints):
/// `YYYY[-MM[-DD]]` (UTC), optionally `THH:mm[:ss[.sss]]` followed by `Z` or `±HH:mm`;
/// the year may be `±YYYYYY`. A time without `Z` or an offset is refused (JavaScript would
/// read it in the local time zone).
pub fn parse_iso_date(text: &str) -> Result<f64, String> {
    let invalid = |why: &str| format!("invalid date {text:?}: {why}");
    let bytes = text.as_bytes();
    let mut pos = 0;
    let number = |pos: &mut usize, len: usize| -> Option<i64> {
        let digits = bytes.get(*pos..*pos + len)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        *pos += len;
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let year = match bytes.first() {
        Some(sign @ (b'+' | b'-')) => {
            pos = 1;
            let magnitude =
                number(&mut pos, 6).ok_or_else(|| invalid("expected a six-digit year after the sign"))?;
            if *sign == b'-' && magnitude == 0 {
                return Err(invalid("-000000 is not a year"));
            }
            if *sign == b'-' {
                -magnitude
            } else {
                magnitude
            }
        }
        _ => number(&mut pos, 4).ok_or_else(|| invalid("expected a four-digit year"))?,
    };
    let field = |pos: &mut usize, separator: u8, what: &str| -> Result<Option<i64>, String> {
        if bytes.get(*pos) != Some(&separator) {
            return Ok(None);
        }
        *pos += 1;
        number(pos, 2).map(Some).ok_or_else(|| invalid(&format!("expected two digits of {what}")))
    };
    let month_field = field(&mut pos, b'-', "month")?;
    let day_field = if month_field.is_some() { field(&mut pos, b'-', "day")? } else { None };
    let (month, day) = (month_field.unwrap_or(1), day_field.unwrap_or(1));
    if !(1..=12).contains(&month) {
        return Err(invalid("month out of range"));
    }
    let month_days = [31, if is_leap(year) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if day < 1 || day > month_days.get(month as usize - 1).copied().unwrap_or(31) {
        return Err(invalid("day out of range"));
    }
    let mut ms_of_day = 0i64;
    let mut offset_minutes = 0i64;
    if bytes.get(pos) == Some(&b'T') {
        pos += 1;
        let hour = number(&mut pos, 2).ok_or_else(|| invalid("expected two digits of hours"))?;
        let minute = field(&mut pos, b':', "minutes")?.ok_or_else(|| invalid("expected ':' and minutes"))?;
        let second = field(&mut pos, b':', "seconds")?.unwrap_or(0);
        let mut millis = 0i64;
        if bytes.get(pos) == Some(&b'.') {
            pos += 1;
            let start = pos;
            while bytes.get(pos).is_some_and(u8::is_ascii_digit) {
                pos += 1;
            }
            let digits = text.get(start..pos).unwrap_or_default();
            if digits.is_empty() {
                return Err(invalid("expected digits after '.'"));
            }
            // Only milliseconds are kept (further digits are dropped, as V8 does).
            let padded = format!("{digits:0<3}");
            millis = padded.get(..3).unwrap_or("0").parse().unwrap_or(0);
        }
        if hour > 24 || minute > 59 || second > 59 || (hour == 24 && (minute, second, millis) != (0, 0, 0)) {
            return Err(invalid("time out of range"));
        }
        ms_of_day = ((hour * 60 + minute) * 60 + second) * 1000 + millis;
        match bytes.get(pos) {
            Some(b'Z') => pos += 1,
            Some(sign @ (b'+' | b'-')) => {
                let sign = if *sign == b'-' { -1 } else { 1 };
                pos += 1;
                let hours = number(&mut pos, 2).ok_or_else(|| invalid("expected the offset's hours"))?;
                let minutes = field(&mut pos, b':', "offset minutes")?
                    .ok_or_else(|| invalid("expected the offset as ±HH:mm"))?;
                if hours > 23 || minutes > 59 {
                    return Err(invalid("offset out of range"));
                }
                offset_minutes = sign * (hours * 60 + minutes);
            }
            _ => return Err(invalid("a date with a time needs 'Z' or an offset like +02:00")),
        }
    }
    if pos != bytes.len() {
        return Err(invalid("unexpected text"));
    }
    let ms = stampkv_model::civil::days_from_civil(year, month as u32, day as u32) * 86_400_000 + ms_of_day
        - offset_minutes * 60_000;
    if (ms as f64).abs() > 8.64e15 {
        return Err(invalid("beyond the range of a Date (±8.64e15 ms)"));
    }
    Ok(ms as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_json_reads_like_json_parse() {
        let value =
            plain_to_value(parse_json(r#"{"b":1,"2":"two","a":[true,null,-0,1e400]}"#).unwrap_or(Json::Null));
        // 1e400 is out of range for serde_json: the whole document is refused.
        assert_eq!(value, Value::Null);
        let value =
            plain_to_value(parse_json(r#"{"b":1,"2":"two","a":[true,null,-0],"b":3,"1":0}"#).unwrap());
        let Value::Object(properties) = &value else { panic!("{value:?}") };
        let keys: Vec<&str> = properties.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["1", "2", "b", "a"]);
        assert_eq!(value.get("b"), Some(&Value::Number(3.0)));
        let Some(Value::Array(items)) = value.get("a") else { panic!() };
        assert!(matches!(items[2], Value::Number(x) if x == 0.0 && x.is_sign_negative()));
        assert_eq!(
            plain_to_value(parse_json("12345678901234567890123").unwrap()),
            Value::Number(1.2345678901234568e22)
        );
    }

    #[test]
    fn json_nests_to_the_depth_limit() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(parse_json(&nested(MAX_JSON_DEPTH)).is_ok());
        assert_eq!(
            parse_json(&nested(MAX_JSON_DEPTH + 1)),
            Err("invalid JSON: nested deeper than 1024 levels".to_owned())
        );
        assert_eq!(json_depth(r#"{"a":"[[[\\\"[[","b":[{}]}"#), 3);
        assert!(parse_json("[1] x").unwrap_err().starts_with("invalid JSON: trailing characters"));
    }

    #[test]
    fn base64_round_trips() {
        for bytes in [&b""[..], b"\x01", b"\x01\x02", b"\x01\x02\x03", b"\xfb\xff\xfe\x00"] {
            assert_eq!(decode_base64(&base64url(bytes)).unwrap(), bytes);
        }
        assert_eq!(base64url(&[1, 2, 3]), "AQID");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(decode_base64("+/8=").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode_base64("").unwrap(), Vec::<u8>::new());
        assert!(decode_base64("A").is_err());
        assert!(decode_base64("AQ!D").is_err());
    }

    #[test]
    fn iso_dates_parse() {
        assert_eq!(parse_iso_date("1970-01-01T00:00:00.000Z"), Ok(0.0));
        assert_eq!(parse_iso_date("2017-07-14T02:40:00.000Z"), Ok(1.5e12));
        assert_eq!(parse_iso_date("2017-07-14T04:40+02:00"), Ok(1.5e12));
        assert_eq!(parse_iso_date("+275760-09-13T00:00:00.000Z"), Ok(8.64e15));
        assert_eq!(parse_iso_date("-001199-02-15T14:13:20.000Z"), Ok(-1e14));
        assert_eq!(parse_iso_date("2000-02-29"), Ok(951_782_400_000.0));
        assert_eq!(parse_iso_date("2000"), Ok(946_684_800_000.0));
        assert_eq!(parse_iso_date("2000-03"), Ok(951_868_800_000.0));
        assert!(parse_iso_date("2001-02-29").is_err());
        assert!(parse_iso_date("2017-07-14T02:40:00").is_err());
        assert!(parse_iso_date("+275760-09-13T00:00:00.001Z").is_err());
        assert!(parse_iso_date("yesterday").is_err());
        for ms in [0.0, 1.5e12, -1.0, 8.64e15, -8.64e15, 123_456_789.0] {
            assert_eq!(parse_iso_date(&iso_date(ms).unwrap()), Ok(ms));
        }
    }

    fn random_value(seed: &mut u64, depth: usize) -> Value {
        let mut next = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        };
        let kind = next() % if depth > 3 { 9 } else { 14 };
        let size = (next() % 4) as usize;
        match kind {
            0 => Value::Undefined,
            1 => Value::Null,
            2 => Value::Bool(next() % 2 == 0),
            3 => Value::Number(
                [f64::from_bits(next()), -0.0, f64::NAN, f64::NEG_INFINITY, 1e21, 0.1][(next() % 6) as usize],
            ),
            4 => Value::BigInt(KvBigInt::from_sign_magnitude(next() % 2 == 0, &next().to_be_bytes())),
            5 => Value::String(["", "a\"b", "é\n", "\u{1F600}\\"][(next() % 4) as usize].to_owned()),
            6 => Value::Bytes((0..size * 3).map(|_| next() as u8).collect()),
            7 => Value::Date([0.0, -1e14, 8.64e15, f64::NAN][(next() % 4) as usize]),
            8 => Value::RegExp {
                source: ["a\\/b", "(?:)", "[/]"][(next() % 3) as usize].to_owned(),
                flags: "gi".to_owned(),
            },
            9 => Value::Array((0..size).map(|_| random_value(seed, depth + 1)).collect()),
            10 => Value::Set((0..size).map(|_| random_value(seed, depth + 1)).collect()),
            11 => Value::Map(
                (0..size).map(|_| (random_value(seed, depth + 1), random_value(seed, depth + 1))).collect(),
            ),
            // Plain objects are kept in JavaScript's order (integer-like names first).
            _ => javascript_object(
                (0..size)
                    .map(|i| (["b", "1", "a b", ""][i].to_owned(), random_value(seed, depth + 1)))
                    .collect(),
            ),
        }
    }

    #[test]
    fn typed_json_round_trips_every_kind() {
        let mut seed = 0x1234_5678_9abc_def1;
        for _ in 0..2000 {
            let value = random_value(&mut seed, 0);
            let text = value_json(&value);
            let back = typed_to_value(parse_json(&text).unwrap(), "$").unwrap();
            assert!(back.same_value(&value), "{text}");
            assert_eq!(value_json(&back), text);
        }
        assert_eq!(
            typed_to_kv_value(parse_json(r#"{"type":"KvU64","value":"7"}"#).unwrap()),
            Ok(KvValue::U64(7))
        );
        assert_eq!(
            typed_to_kv_value(parse_json(r#"{"type":"V8","value":"_w8w","reason":"x"}"#).unwrap()),
            Ok(KvValue::V8(vec![0xFF, 0x0F, 0x30]))
        );
    }
}
