//! Prints every entry of a database directory as one JSON line each, in key order, in the
//! canonical form of `server/e2e/canon.mjs` (what Deno and `@deno/kv` see over the server).
//!
//! `cargo run -p stampkv-server --example dump_json -- DIR`

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "example code: a panic is a failure"
)]

use serde_json::{json, Value as Json};
use stampkv::{Key, KeyPart, Kv, KvOptions, KvValue, ListOptions, Selector, Value};

fn f64_canon(n: f64) -> Json {
    if n.is_nan() {
        json!("NaN")
    } else {
        json!(n.to_be_bytes().iter().map(|b| format!("{b:02x}")).collect::<String>())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key_part(part: &KeyPart) -> Json {
    match part {
        KeyPart::Bytes(b) => json!(["bytes", hex(b)]),
        KeyPart::String(s) => json!(["string", s]),
        KeyPart::BigInt(n) => json!(["bigint", n.to_string()]),
        KeyPart::Number(n) => json!(["number", f64_canon(*n)]),
        KeyPart::Bool(b) => json!(["bool", b]),
    }
}

fn value(v: &Value) -> Json {
    match v {
        Value::Undefined => json!(["undefined"]),
        Value::Null => json!(["null"]),
        Value::Bool(b) => json!(["bool", b]),
        Value::Number(n) => json!(["number", f64_canon(*n)]),
        Value::BigInt(n) => json!(["bigint", n.to_string()]),
        Value::String(s) => json!(["string", s]),
        Value::Bytes(b) => json!(["bytes", hex(b)]),
        Value::Array(items) => json!(["array", items.iter().map(value).collect::<Vec<_>>()]),
        Value::Object(props) => {
            json!(["object", props.iter().map(|(k, x)| json!([k, value(x)])).collect::<Vec<_>>()])
        }
        Value::Map(pairs) => {
            json!(["map", pairs.iter().map(|(k, x)| json!([value(k), value(x)])).collect::<Vec<_>>()])
        }
        Value::Set(items) => json!(["set", items.iter().map(value).collect::<Vec<_>>()]),
        Value::Date(ms) => json!(["date", f64_canon(*ms)]),
        Value::RegExp { source, flags } => json!(["regexp", source, flags]),
        Value::U64(n) => json!(["u64", n.to_string()]),
    }
}

fn stored(v: &KvValue) -> Json {
    match v {
        KvValue::U64(n) => json!(["u64", n.to_string()]),
        KvValue::Bytes(b) => json!(["bytes", hex(b)]),
        KvValue::V8(bytes) => match v.to_value() {
            Ok(decoded) => value(&decoded),
            Err(_) => json!(["raw-v8", hex(bytes)]),
        },
    }
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: dump_json DIR");
    let kv = Kv::open(&dir, KvOptions::default()).expect("open the database");
    let entries =
        kv.list::<KvValue>(&Selector::prefix(Key::default()), &ListOptions::default()).expect("list");
    for entry in entries {
        let entry = entry.expect("read an entry");
        let key: Vec<Json> = entry.key.parts().iter().map(key_part).collect();
        let line =
            json!({ "key": key, "value": stored(&entry.value), "versionstamp": entry.versionstamp.to_hex() });
        println!("{line}");
    }
    kv.close().expect("close the database");
}
