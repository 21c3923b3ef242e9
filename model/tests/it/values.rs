//! The value layer: V8 bytes observed from real Deno 2.9.6 (`kv.set` into a SQLite file, then
//! the `kv` table read raw), byte-exact encoding, round trips, robustness against malformed
//! input, sums on V8 numbers, and serde.

use stampkv_model::value::{sum_v8, v8, SumError};
use stampkv_model::{KvBigInt, KvValue, Value, ValueError};

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
}

fn s(text: &str) -> Value {
    Value::String(text.into())
}

fn n(value: f64) -> Value {
    Value::Number(value)
}

fn big(value: i128) -> Value {
    Value::BigInt(KvBigInt::from(value))
}

fn obj(properties: &[(&str, Value)]) -> Value {
    Value::Object(properties.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

fn arr(items: &[Value]) -> Value {
    Value::Array(items.to_vec())
}

fn re(source: &str, flags: &str) -> Value {
    Value::RegExp { source: source.into(), flags: flags.into() }
}

/// 2^200 + 12345.
fn big_2p200() -> KvBigInt {
    let mut magnitude = vec![0u8; 26];
    magnitude[0] = 1;
    magnitude[24] = 0x30;
    magnitude[25] = 0x39;
    KvBigInt::from_sign_magnitude(false, &magnitude)
}

enum Expect {
    /// Decodes to the value, and the value encodes to the same bytes (after the header).
    Exact(Value),
    /// Decodes to the value; its own encoding differs (shared references, offset views, ...).
    Decodes(Value),
    /// Valid V8 data that `Value` cannot hold.
    Unrepresentable,
}
use Expect::*;

/// Every value written by Deno 2.9.6 with `kv.set` (the `v` column, header `FF 10`), with
/// the JavaScript expression that produced it.
fn deno_cases() -> Vec<(&'static str, &'static str, Expect)> {
    let long = "abcdefghij".repeat(20);
    let euros = "\u{20ac}".repeat(100);
    let long_hex =
        format!("ff 10 22 c8 01 {}", long.bytes().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "));
    let euros_hex = format!("ff 10 00 63 c8 01 {}", "ac 20 ".repeat(100));
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    vec![
        // Strings.
        (r#""hello""#, "ff 10 22 05 68 65 6c 6c 6f", Exact(s("hello"))),
        (r#""""#, "ff 10 22 00", Exact(s(""))),
        (r#""café ÿ""#, "ff 10 22 06 63 61 66 e9 20 ff", Exact(s("café ÿ"))),
        (r#""héllo €""#, "ff 10 63 0e 68 00 e9 00 6c 00 6c 00 6f 00 20 00 ac 20", Exact(s("héllo €"))),
        (r#""a😀b""#, "ff 10 63 08 61 00 3d d8 00 de 62 00", Exact(s("a😀b"))),
        (r#""abcdefghij".repeat(20)"#, leak(long_hex), Exact(s(&long))),
        // Two-byte string preceded by a padding byte (data 2-aligned in the buffer).
        (r#""€".repeat(100)"#, leak(euros_hex), Exact(s(&euros))),
        (r#""€abc".slice(1)"#, "ff 10 22 03 61 62 63", Exact(s("abc"))),
        (r#""x\uD800y" (lone surrogate)"#, "ff 10 63 06 78 00 00 d8 79 00", Unrepresentable),
        // Numbers: Smi (I) for int32 values, HeapNumber (N) otherwise.
        ("42", "ff 10 49 54", Exact(n(42.0))),
        ("-1", "ff 10 49 01", Exact(n(-1.0))),
        ("0", "ff 10 49 00", Exact(n(0.0))),
        ("0.5 + 0.5", "ff 10 49 02", Exact(n(1.0))),
        ("-0", "ff 10 4e 00 00 00 00 00 00 00 80", Exact(n(-0.0))),
        ("NaN", "ff 10 4e 00 00 00 00 00 00 f8 7f", Exact(n(f64::NAN))),
        ("Infinity", "ff 10 4e 00 00 00 00 00 00 f0 7f", Exact(n(f64::INFINITY))),
        ("-Infinity", "ff 10 4e 00 00 00 00 00 00 f0 ff", Exact(n(f64::NEG_INFINITY))),
        ("1.5", "ff 10 4e 00 00 00 00 00 00 f8 3f", Exact(n(1.5))),
        ("2 ** 30", "ff 10 49 80 80 80 80 08", Exact(n(1073741824.0))),
        ("2 ** 30 - 1", "ff 10 49 fe ff ff ff 07", Exact(n(1073741823.0))),
        ("-(2 ** 30)", "ff 10 49 ff ff ff ff 07", Exact(n(-1073741824.0))),
        ("-(2 ** 30) - 1", "ff 10 49 81 80 80 80 08", Exact(n(-1073741825.0))),
        ("2 ** 31 - 1", "ff 10 49 fe ff ff ff 0f", Exact(n(2147483647.0))),
        ("-(2 ** 31)", "ff 10 49 ff ff ff ff 0f", Exact(n(-2147483648.0))),
        ("2 ** 31", "ff 10 4e 00 00 00 00 00 00 e0 41", Exact(n(2147483648.0))),
        ("-(2 ** 31) - 1", "ff 10 4e 00 00 20 00 00 00 e0 c1", Exact(n(-2147483649.0))),
        ("2 ** 53", "ff 10 4e 00 00 00 00 00 00 40 43", Exact(n(9007199254740992.0))),
        ("Number.MAX_VALUE", "ff 10 4e ff ff ff ff ff ff ef 7f", Exact(n(f64::MAX))),
        ("5e-324", "ff 10 4e 01 00 00 00 00 00 00 00", Exact(n(5e-324))),
        // BigInts: 64-bit digits, little-endian; bitfield = byte length << 1 | sign.
        ("42n", "ff 10 5a 10 2a 00 00 00 00 00 00 00", Exact(big(42))),
        ("0n", "ff 10 5a 00", Exact(big(0))),
        ("-1n", "ff 10 5a 11 01 00 00 00 00 00 00 00", Exact(big(-1))),
        ("-42n", "ff 10 5a 11 2a 00 00 00 00 00 00 00", Exact(big(-42))),
        ("2n ** 63n", "ff 10 5a 10 00 00 00 00 00 00 00 80", Exact(big(1 << 63))),
        ("2n ** 64n - 1n", "ff 10 5a 10 ff ff ff ff ff ff ff ff", Exact(big(u64::MAX as i128))),
        ("2n ** 64n", "ff 10 5a 20 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00", Exact(big(1 << 64))),
        (
            "2n ** 200n + 12345n",
            "ff 10 5a 40 39 30 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00",
            Exact(Value::BigInt(big_2p200())),
        ),
        (
            "-(2n ** 200n + 12345n)",
            "ff 10 5a 41 39 30 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00",
            Exact(Value::BigInt(KvBigInt::from_sign_magnitude(true, big_2p200().magnitude_be()))),
        ),
        // Oddballs.
        ("true", "ff 10 54", Exact(Value::Bool(true))),
        ("false", "ff 10 46", Exact(Value::Bool(false))),
        ("null", "ff 10 30", Exact(Value::Null)),
        ("undefined", "ff 10 5f", Exact(Value::Undefined)),
        // Objects: array-index keys are numbers (I up to 2^31-1, N above), in ascending order first.
        ("{a: 1}", "ff 10 6f 22 01 61 49 02 7b 01", Exact(obj(&[("a", n(1.0))]))),
        ("{}", "ff 10 6f 7b 00", Exact(obj(&[]))),
        ("{b: 1, a: 2}", "ff 10 6f 22 01 62 49 02 22 01 61 49 04 7b 02", Exact(obj(&[("b", n(1.0)), ("a", n(2.0))]))),
        (r#"{"": 1}"#, "ff 10 6f 22 00 49 02 7b 01", Exact(obj(&[("", n(1.0))]))),
        (
            r#"{0: "a", 1: "b", 42: "c"}"#,
            "ff 10 6f 49 00 22 01 61 49 02 22 01 62 49 54 22 01 63 7b 03",
            Exact(obj(&[("0", s("a")), ("1", s("b")), ("42", s("c"))])),
        ),
        (
            r#"{b: 1, 2: "two", a: 2, 1: "one"}"#,
            "ff 10 6f 49 02 22 03 6f 6e 65 49 04 22 03 74 77 6f 22 01 62 49 02 22 01 61 49 04 7b 04",
            Exact(obj(&[("1", s("one")), ("2", s("two")), ("b", n(1.0)), ("a", n(2.0))])),
        ),
        (
            "{z: 1, 10: 2, 9: 3}",
            "ff 10 6f 49 12 49 06 49 14 49 04 22 01 7a 49 02 7b 03",
            Exact(obj(&[("9", n(3.0)), ("10", n(2.0)), ("z", n(1.0))])),
        ),
        (
            r#"{4294967294: "max", 4294967295: "notindex", 1073741823: "smi", 1073741824: "2p30", 2147483647: "i32max", 2147483648: "2p31"}"#,
            "ff 10 6f 49 fe ff ff ff 07 22 03 73 6d 69 49 80 80 80 80 08 22 04 32 70 33 30 49 fe ff ff ff 0f 22 06 69 33 32 6d 61 78 \
             4e 00 00 00 00 00 00 e0 41 22 04 32 70 33 31 4e 00 00 c0 ff ff ff ef 41 22 03 6d 61 78 \
             22 0a 34 32 39 34 39 36 37 32 39 35 22 08 6e 6f 74 69 6e 64 65 78 7b 06",
            Exact(obj(&[
                ("1073741823", s("smi")),
                ("1073741824", s("2p30")),
                ("2147483647", s("i32max")),
                ("2147483648", s("2p31")),
                ("4294967294", s("max")),
                ("4294967295", s("notindex")),
            ])),
        ),
        (
            r#"{"-1": 1, "01": 2, "1.5": 3}"#,
            "ff 10 6f 22 02 2d 31 49 02 22 02 30 31 49 04 22 03 31 2e 35 49 06 7b 03",
            Exact(obj(&[("-1", n(1.0)), ("01", n(2.0)), ("1.5", n(3.0))])),
        ),
        (
            r#"{"€": 1, "café": 2}"#,
            "ff 10 6f 00 63 02 ac 20 49 02 22 04 63 61 66 e9 49 04 7b 02",
            Exact(obj(&[("€", n(1.0)), ("café", n(2.0))])),
        ),
        ("{x: -(2 ** 31)}", "ff 10 6f 22 01 78 49 ff ff ff ff 0f 7b 01", Exact(obj(&[("x", n(-2147483648.0))]))),
        (
            r#"{a: {b: {c: [1, {d: "e"}]}}, list: [[], [[]]]}"#,
            "ff 10 6f 22 01 61 6f 22 01 62 6f 22 01 63 41 02 49 02 6f 22 01 64 22 01 65 7b 01 24 00 02 7b 01 7b 01 \
             22 04 6c 69 73 74 41 02 41 00 24 00 00 41 01 41 00 24 00 00 24 00 01 24 00 02 7b 02",
            Exact(obj(&[
                ("a", obj(&[("b", obj(&[("c", arr(&[n(1.0), obj(&[("d", s("e"))])]))]))])),
                ("list", arr(&[arr(&[]), arr(&[arr(&[])])])),
            ])),
        ),
        // Arrays.
        (r#"[1, "x"]"#, "ff 10 41 02 49 02 22 01 78 24 00 02", Exact(arr(&[n(1.0), s("x")]))),
        ("[]", "ff 10 41 00 24 00 00", Exact(arr(&[]))),
        (
            "[1.5, 2.5]",
            "ff 10 41 02 4e 00 00 00 00 00 00 f8 3f 4e 00 00 00 00 00 00 04 40 24 00 02",
            Exact(arr(&[n(1.5), n(2.5)])),
        ),
        // A double-elements array holds 1 as a double: written `N`, which our encoder writes as `I`.
        (
            "[1, 1.5]",
            "ff 10 41 02 4e 00 00 00 00 00 00 f0 3f 4e 00 00 00 00 00 00 f8 3f 24 00 02",
            Decodes(arr(&[n(1.0), n(1.5)])),
        ),
        (
            "[[1, 2], [3, [4]]]",
            "ff 10 41 02 41 02 49 02 49 04 24 00 02 41 02 49 06 41 01 49 08 24 00 01 24 00 02 24 00 02",
            Exact(arr(&[arr(&[n(1.0), n(2.0)]), arr(&[n(3.0), arr(&[n(4.0)])])])),
        ),
        ("[undefined, null]", "ff 10 41 02 5f 30 24 00 02", Exact(arr(&[Value::Undefined, Value::Null]))),
        // Arrays Deno has read from storage are written back as sparse arrays with every index.
        (r#"[1, "x"] read back and set again"#, "ff 10 61 02 49 00 49 02 49 02 22 01 78 40 02 02", Decodes(arr(&[n(1.0), s("x")]))),
        (
            "[[1, 2], [3, [4]]] read back and set again",
            "ff 10 61 02 49 00 61 02 49 00 49 02 49 02 49 04 40 02 02 49 02 61 02 49 00 49 06 49 02 61 01 49 00 49 08 40 01 01 40 02 02 40 02 02",
            Decodes(arr(&[arr(&[n(1.0), n(2.0)]), arr(&[n(3.0), arr(&[n(4.0)])])])),
        ),
        (
            r#"{a: {b: {c: [1, {d: "e"}]}}, list: [[], [[]]]} read back and set again"#,
            "ff 10 6f 22 01 61 6f 22 01 62 6f 22 01 63 61 02 49 00 49 02 49 02 6f 22 01 64 22 01 65 7b 01 40 02 02 7b 01 7b 01 \
             22 04 6c 69 73 74 61 02 49 00 61 00 40 00 00 49 02 61 01 49 00 61 00 40 00 00 40 01 01 40 02 02 7b 02",
            Decodes(obj(&[
                ("a", obj(&[("b", obj(&[("c", arr(&[n(1.0), obj(&[("d", s("e"))])]))]))])),
                ("list", arr(&[arr(&[]), arr(&[arr(&[])])])),
            ])),
        ),
        ("[1, , 3]", "ff 10 61 03 49 00 49 02 49 04 49 06 40 02 03", Unrepresentable),
        (r#"a = []; a[5] = "x""#, "ff 10 61 06 49 0a 22 01 78 40 01 06", Unrepresentable),
        ("new Array(3)", "ff 10 61 03 40 00 03", Unrepresentable),
        (r#"a = [1, 2]; a.foo = "bar""#, "ff 10 41 02 49 02 49 04 22 03 66 6f 6f 22 03 62 61 72 24 01 02", Unrepresentable),
        // Maps and Sets.
        ("new Map([[1, 2]])", "ff 10 3b 49 02 49 04 3a 02", Exact(Value::Map(vec![(n(1.0), n(2.0))]))),
        ("new Map()", "ff 10 3b 3a 00", Exact(Value::Map(vec![]))),
        (
            r#"new Map([["a", {x: 1}], [{k: 1}, [1]], [1n, null]])"#,
            "ff 10 3b 22 01 61 6f 22 01 78 49 02 7b 01 6f 22 01 6b 49 02 7b 01 41 01 49 02 24 00 01 5a 10 01 00 00 00 00 00 00 00 30 3a 06",
            Exact(Value::Map(vec![
                (s("a"), obj(&[("x", n(1.0))])),
                (obj(&[("k", n(1.0))]), arr(&[n(1.0)])),
                (big(1), Value::Null),
            ])),
        ),
        (
            r#"new Set([1, "a", 2n])"#,
            "ff 10 27 49 02 22 01 61 5a 10 02 00 00 00 00 00 00 00 2c 03",
            Exact(Value::Set(vec![n(1.0), s("a"), big(2)])),
        ),
        ("new Set()", "ff 10 27 2c 00", Exact(Value::Set(vec![]))),
        // Dates (TimeClip applies: new Date(1.7) is 1).
        ("new Date(0)", "ff 10 44 00 00 00 00 00 00 00 00", Exact(Value::Date(0.0))),
        ("new Date(1700000000123)", "ff 10 44 00 b0 87 56 fe bc 78 42", Exact(Value::Date(1700000000123.0))),
        ("new Date(NaN)", "ff 10 44 00 00 00 00 00 00 f8 7f", Exact(Value::Date(f64::NAN))),
        ("new Date(1.7)", "ff 10 44 00 00 00 00 00 00 f0 3f", Exact(Value::Date(1.0))),
        ("new Date(-1)", "ff 10 44 00 00 00 00 00 00 f0 bf", Exact(Value::Date(-1.0))),
        ("new Date(8.64e15)", "ff 10 44 00 00 dc c2 08 b2 3e 43", Exact(Value::Date(8.64e15))),
        // RegExps: source as V8 keeps it, flag bits.
        ("/ab+c/", "ff 10 52 22 04 61 62 2b 63 00", Exact(re("ab+c", ""))),
        ("/x/gimsuyd", "ff 10 52 22 01 78 bf 01", Exact(re("x", "dgimsuy"))),
        (r"/[\p{L}]/v", "ff 10 52 22 07 5b 5c 70 7b 4c 7d 5d 80 02", Exact(re(r"[\p{L}]", "v"))),
        (r"/\u20ac/g", "ff 10 52 22 06 5c 75 32 30 61 63 01", Exact(re(r"\u20ac", "g"))),
        (r#"new RegExp("")"#, "ff 10 52 22 04 28 3f 3a 29 00", Exact(re("(?:)", ""))),
        (r#"new RegExp("a/b")"#, "ff 10 52 22 04 61 5c 2f 62 00", Exact(re(r"a\/b", ""))),
        (r"/a\/b/", "ff 10 52 22 04 61 5c 2f 62 00", Exact(re(r"a\/b", ""))),
        (r#"new RegExp("a\nb")"#, "ff 10 52 22 04 61 5c 6e 62 00", Exact(re(r"a\nb", ""))),
        (r#"new RegExp("[/]")"#, "ff 10 52 22 03 5b 2f 5d 00", Exact(re("[/]", ""))),
        (r#"new RegExp("€/")"#, "ff 10 52 00 63 06 ac 20 5c 00 2f 00 00", Exact(re(r"€\/", ""))),
        // V8 builds this escaped source as a two-byte string although it is ASCII.
        (
            r#"new RegExp("a\r\u2028b")"#,
            "ff 10 52 00 63 14 61 00 5c 00 72 00 5c 00 75 00 32 00 30 00 32 00 38 00 62 00 00",
            Decodes(re(r"a\r\u2028b", "")),
        ),
        // Uint8Arrays inside other values: ArrayBuffer + view.
        (
            "{data: new Uint8Array([1, 2, 3])}",
            "ff 10 6f 22 04 64 61 74 61 42 03 01 02 03 56 42 00 03 00 7b 01",
            Exact(obj(&[("data", Value::Bytes(vec![1, 2, 3]))])),
        ),
        (
            "[new Uint8Array([]), new Uint8Array([255])]",
            "ff 10 41 02 42 00 56 42 00 00 00 42 01 ff 56 42 00 01 00 24 00 02",
            Exact(arr(&[Value::Bytes(vec![]), Value::Bytes(vec![255])])),
        ),
        (
            "{v: new Uint8Array(new ArrayBuffer(8), 2, 3) /* [7, 8, 9] */}",
            "ff 10 6f 22 01 76 42 08 00 00 07 08 09 00 00 00 56 42 02 03 00 7b 01",
            Decodes(obj(&[("v", Value::Bytes(vec![7, 8, 9]))])),
        ),
        (
            "b = new ArrayBuffer(4); [new Uint8Array(b, 0, 2), new Uint8Array(b, 2, 2)]",
            "ff 10 41 02 42 04 00 00 00 00 56 42 00 02 00 5e 01 56 42 02 02 00 24 00 02",
            Decodes(arr(&[Value::Bytes(vec![0, 0]), Value::Bytes(vec![0, 0])])),
        ),
        (
            "u = new Uint8Array([5]); {a: u, b: u}",
            "ff 10 6f 22 01 61 42 01 05 56 42 00 01 00 22 01 62 5e 02 7b 02",
            Decodes(obj(&[("a", Value::Bytes(vec![5])), ("b", Value::Bytes(vec![5]))])),
        ),
        ("new ArrayBuffer(2)", "ff 10 42 02 00 00", Unrepresentable),
        ("new DataView(new ArrayBuffer(2))", "ff 10 42 02 00 00 56 3f 00 02 00", Unrepresentable),
        ("new Int16Array([1, -1])", "ff 10 42 04 01 00 ff ff 56 77 00 04 00", Unrepresentable),
        ("new Float64Array([1.5])", "ff 10 42 08 00 00 00 00 00 00 f8 3f 56 46 00 08 00", Unrepresentable),
        // Shared references decode as copies; cycles cannot be represented.
        (
            "s = {s: 1}; {x: s, y: s}",
            "ff 10 6f 22 01 78 6f 22 01 73 49 02 7b 01 22 01 79 5e 01 7b 02",
            Decodes(obj(&[("x", obj(&[("s", n(1.0))])), ("y", obj(&[("s", n(1.0))]))])),
        ),
        ("c = {a: 1}; c.self = c", "ff 10 6f 22 01 61 49 02 22 04 73 65 6c 66 5e 00 7b 02", Unrepresentable),
        // Wrapper objects and errors.
        (r#"new String("s")"#, "ff 10 73 22 01 73", Unrepresentable),
        ("new Number(1)", "ff 10 6e 00 00 00 00 00 00 f0 3f", Unrepresentable),
        ("new Boolean(true)", "ff 10 79", Unrepresentable),
        (
            r#"new Error("boom")"#,
            "ff 10 72 6d 22 04 62 6f 6f 6d 73 22 35 45 72 72 6f 72 3a 20 62 6f 6f 6d 0a 20 20 20 20 61 74 20 66 69 6c 65 3a 2f \
             2f 2f 74 6d 70 2f 64 65 6e 6f 76 61 6c 2f 77 72 69 74 65 2e 74 73 3a 33 33 3a 38 37 2e",
            Unrepresentable,
        ),
    ]
}

fn with_header(bytes: &[u8], version: u8) -> Vec<u8> {
    let mut out = vec![0xff, version];
    out.extend_from_slice(&bytes[2..]);
    out
}

#[test]
fn deno_bytes_decode() {
    for (js, bytes, expect) in deno_cases() {
        let bytes = hex(bytes);
        assert_eq!(&bytes[..2], &[0xff, 0x10], "{js}");
        // Versions 15 and 16 are identical for all of these.
        for version in [0x10, 0x0f, 0x0e, 0x0d] {
            let bytes = with_header(&bytes, version);
            let decoded = v8::deserialize(&bytes);
            match &expect {
                Exact(value) | Decodes(value) => {
                    let decoded = decoded.unwrap_or_else(|e| panic!("{js}: {e}"));
                    assert!(decoded.same_value(value), "{js}: decoded {decoded:?}, expected {value:?}");
                }
                Unrepresentable => {
                    assert!(matches!(decoded, Err(ValueError::Unrepresentable(_))), "{js}: {decoded:?}")
                }
            }
        }
    }
}

#[test]
fn encoding_matches_deno_byte_for_byte() {
    for (js, bytes, expect) in deno_cases() {
        let Exact(value) = expect else { continue };
        let deno = hex(bytes);
        let ours = v8::serialize(&value).unwrap_or_else(|e| panic!("{js}: {e}"));
        assert_eq!(&ours[..2], &[0xff, 0x0f], "{js}");
        assert_eq!(ours[2..], deno[2..], "{js}: ours {:02x?}, Deno {:02x?}", &ours[2..], &deno[2..]);
        assert_eq!(KvValue::from_value(&value).unwrap(), KvValue::V8(ours), "{js}");
    }
}

#[test]
fn reference_examples() {
    // deno-kv-semantics.md §8.
    let cases = [
        ("ff 10 22 05 68 65 6c 6c 6f", s("hello")),
        ("ff 10 22 00", s("")),
        ("ff 10 49 54", n(42.0)),
        ("ff 10 49 01", n(-1.0)),
        ("ff 10 4e 00 00 00 00 00 00 f8 3f", n(1.5)),
        ("ff 10 5a 10 2a 00 00 00 00 00 00 00", big(42)),
        ("ff 10 54", Value::Bool(true)),
        ("ff 10 46", Value::Bool(false)),
        ("ff 10 30", Value::Null),
        ("ff 10 5f", Value::Undefined),
        ("ff 10 6f 22 01 61 49 02 7b 01", obj(&[("a", n(1.0))])),
        ("ff 10 41 02 49 02 22 01 78 24 00 02", arr(&[n(1.0), s("x")])),
        ("ff 10 44 00 00 00 00 00 00 00 00", Value::Date(0.0)),
        ("ff 10 3b 49 02 49 04 3a 02", Value::Map(vec![(n(1.0), n(2.0))])),
    ];
    for (bytes, value) in cases {
        assert_eq!(v8::deserialize(&hex(bytes)).unwrap(), value, "{bytes}");
        assert_eq!(KvValue::V8(hex(bytes)).to_value().unwrap(), value, "{bytes}");
    }
    assert!(matches!(v8::deserialize(&hex("ff 10 42 02 00 00")), Err(ValueError::Unrepresentable(_))));
    // Encodings 2 and 3.
    assert_eq!(
        KvValue::from_value(&Value::U64(258)).unwrap().encode_stored(),
        hex("02 02 01 00 00 00 00 00 00")
    );
    assert_eq!(
        KvValue::from_value(&Value::Bytes(vec![1, 2, 3])).unwrap().encode_stored(),
        hex("03 01 02 03")
    );
    assert_eq!(
        KvValue::decode_stored(&hex("03 01 02 03")).unwrap().to_value().unwrap(),
        Value::Bytes(vec![1, 2, 3])
    );
    assert_eq!(
        KvValue::decode_stored(&hex("02 02 01 00 00 00 00 00 00")).unwrap().to_value().unwrap(),
        Value::U64(258)
    );
}

#[test]
fn stored_form() {
    for (value, stored) in [
        (s("hello"), "01 ff 0f 22 05 68 65 6c 6c 6f"),
        (Value::U64(u64::MAX), "02 ff ff ff ff ff ff ff ff"),
        (Value::Bytes(vec![]), "03"),
        (
            obj(&[("data", Value::Bytes(vec![1]))]),
            "01 ff 0f 6f 22 04 64 61 74 61 42 01 01 56 42 00 01 00 7b 01",
        ),
    ] {
        let kv = KvValue::from_value(&value).unwrap();
        assert_eq!(kv.encode_stored(), hex(stored), "{value:?}");
        assert_eq!(KvValue::decode_stored(&hex(stored)).unwrap(), kv);
        assert!(kv.to_value().unwrap().same_value(&value));
    }
    for n in [0u8, 4, 9, 255] {
        let err = KvValue::decode_stored(&[n, 1, 2]).unwrap_err();
        assert_eq!(err.to_string(), format!("The value encoding {n} is unknown."));
        assert_eq!(err, ValueError::UnknownEncoding(n));
    }
    for len in [0, 1, 7, 9] {
        let mut stored = vec![2];
        stored.resize(1 + len, 0);
        assert!(matches!(KvValue::decode_stored(&stored), Err(ValueError::Malformed { .. })), "{len}");
    }
    // V8 data stays opaque in the stored form: even garbage passes through unchanged.
    let garbage = hex("01 ff 0f 5c 01 02 03");
    assert_eq!(KvValue::decode_stored(&garbage).unwrap().encode_stored(), garbage);
}

#[test]
fn encoding_rules() {
    let ser = |value: &Value| v8::serialize(value).unwrap();
    // Numbers: int32 and not -0 → I; everything else → N.
    assert_eq!(ser(&n(-2147483648.0)), hex("ff 0f 49 ff ff ff ff 0f"));
    assert_eq!(ser(&n(0.5)), hex("ff 0f 4e 00 00 00 00 00 00 e0 3f"));
    // A two-byte string at an odd offset gets no padding, at an even one it does.
    assert_eq!(ser(&s("€")), hex("ff 0f 63 02 ac 20"));
    assert_eq!(ser(&obj(&[("€", n(1.0))])), hex("ff 0f 6f 00 63 02 ac 20 49 02 7b 01"));
    assert_eq!(ser(&arr(&[s("a"), s("€")])), hex("ff 0f 41 02 22 01 61 00 63 02 ac 20 24 00 02"));
    // Unescaped RegExp sources are stored the way V8 keeps them.
    assert_eq!(ser(&re("a/b", "")), ser(&re(r"a\/b", "")));
    assert_eq!(ser(&re("", "")), ser(&re("(?:)", "")));
    assert_eq!(ser(&re("x", "yvsmigd")), hex("ff 0f 52 22 01 78 af 03"));
    // Dates go through TimeClip.
    assert_eq!(ser(&Value::Date(1.7)), ser(&Value::Date(1.0)));
    assert_eq!(ser(&Value::Date(1e20)), ser(&Value::Date(f64::NAN)));
    // Not allowed.
    for value in [
        Value::U64(1),
        arr(&[Value::U64(1)]),
        obj(&[("a", n(1.0)), ("a", n(2.0))]),
        re("x", "gg"),
        re("x", "q"),
        re("x", "uv"),
    ] {
        assert!(matches!(v8::serialize(&value), Err(ValueError::NotAllowed(_))), "{value:?}");
    }
    let mut deep = Value::Null;
    for _ in 0..300 {
        deep = arr(&[deep]);
    }
    assert!(matches!(v8::serialize(&deep), Err(ValueError::NotAllowed(_))));
}

#[test]
fn decoding_details() {
    let de = |bytes: &str| v8::deserialize(&hex(bytes));
    // Uint32, UTF-8 strings, verify-count and padding.
    assert_eq!(de("ff 0f 55 ff ff ff ff 0f").unwrap(), n(4294967295.0));
    assert_eq!(de("ff 0f 53 03 e2 82 ac").unwrap(), s("€"));
    assert_eq!(de("ff 0f 53 02 c3 28").unwrap(), s("\u{fffd}("));
    assert_eq!(de("ff 0f 3f 00 00 00 30").unwrap(), Value::Null);
    assert_eq!(de("ff 0f 30 00 00").unwrap(), Value::Null);
    // Numeric keys of every form become their JavaScript names.
    assert_eq!(
        de("ff 0f 6f 55 05 30 4e 00 00 00 00 00 00 f8 3f 30 4e 00 00 00 00 00 00 f0 7f 30 7b 03").unwrap(),
        obj(&[("5", Value::Null), ("1.5", Value::Null), ("Infinity", Value::Null)])
    );
    // A sparse array with every index is an array (keys in any order).
    assert_eq!(de("ff 0f 61 02 49 02 22 01 62 49 00 22 01 61 40 02 02").unwrap(), arr(&[s("a"), s("b")]));
    assert_eq!(de("ff 0f 61 00 40 00 00").unwrap(), arr(&[]));
    // A RegExp's flags come back in JavaScript's order.
    assert_eq!(de("ff 0f 52 22 01 78 af 03").unwrap(), re("x", "dgimsvy"));
    // Invalid content is malformed, with its offset.
    for (bytes, offset) in [
        ("", 0),
        ("00", 0),
        ("ff", 1),
        ("ff 0f", 2),
        ("ff 0f 30 30", 3),
        ("ff 0f 22 05 68 65", 4),
        ("ff 0f 63 03 68 00 65", 3),
        ("ff 0f 6f 22 01 61 49 02 7b 02", 9),
        ("ff 0f 6f 22 01 61 49 02 22 01 61 49 02 7b 02", 8),
        ("ff 0f 6f 30 49 02 7b 01", 3),
        ("ff 0f 41 02 49 02 24 00 02", 6),
        ("ff 0f 41 01 49 02 24 00 02", 8),
        ("ff 0f 41 ff ff 03 30", 3),
        ("ff 0f 3b 49 02 3a 01", 5),
        ("ff 0f 27 49 02 2c 02", 6),
        ("ff 0f 5e 00", 3),
        ("ff 0f 7b 00", 2),
        ("ff 0f 56 42 00 00 00", 2),
        ("ff 0f 2d", 2),
        ("ff 0f 99", 2),
        ("ff 0f 42 02 00 00 56 42 01 02 00", 7),
        ("ff 0f 42 03 00 00 00 56 77 00 03 00", 8),
        ("ff 0f 42 02 00 00 56 42 00 02 01", 7),
        ("ff 0f 42 02 00 00 56 5a 00 02 00", 7),
        ("ff 0f 52 22 01 78 40", 6),
        ("ff 0f 52 22 01 78 80 04", 6),
        ("ff 0f 52 22 01 78 90 02", 6),
        ("ff 0f 52 49 02 00", 3),
        ("ff 0f 5a 10 01", 4),
    ] {
        match de(bytes) {
            Err(ValueError::Malformed { offset: at, reason }) => assert_eq!(at, offset, "{bytes}: {reason}"),
            other => panic!("{bytes}: expected malformed, got {other:?}"),
        }
    }
    // Valid but unsupported or unrepresentable.
    for bytes in [
        "ff 0c 30",
        "ff 11 30",
        "ff 0f 5c 01 02",
        "ff 0f 61 02 49 00 30 40 01 02",
        "ff 0f 41 01 2d 24 00 01",
        "ff 0f 7e 02 04 00 00 56 42 00 02 02",
        "ff 10 43 01 05 56 42 00 01 00",
        "ff 0f 75 00",
        "ff 0f 74 00 56 42 00 02 00",
        "ff 0f 63 02 00 dc",
    ] {
        assert!(matches!(de(bytes), Err(ValueError::Unrepresentable(_))), "{bytes}: {:?}", de(bytes));
    }
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    for tag in ["41 01", "6f 22 01 61", "3b", "27", "61 01 49 00"] {
        let mut bytes = vec![0xff, 0x0f];
        for _ in 0..100_000 {
            bytes.extend(hex(tag));
        }
        bytes.push(b'0');
        assert!(matches!(v8::deserialize(&bytes), Err(ValueError::Unrepresentable(_))), "{tag}");
    }
    // 256 levels are fine.
    let mut bytes = vec![0xff, 0x0f];
    for _ in 0..255 {
        bytes.extend(hex("41 01"));
    }
    bytes.push(b'0');
    for _ in 0..255 {
        bytes.extend(hex("24 00 01"));
    }
    let mut value = v8::deserialize(&bytes).unwrap();
    let mut depth = 0;
    while let Value::Array(mut items) = value {
        value = items.pop().unwrap();
        depth += 1;
    }
    assert_eq!((depth, value), (255, Value::Null));
}

#[test]
fn shared_references_are_bounded() {
    // L0 = []; Lk = [L(k-1), L(k-1)] with the second a back-reference: 2^k copies.
    fn dag(levels: usize) -> Vec<u8> {
        let mut bytes = vec![0xff, 0x0f];
        for _ in 0..levels {
            bytes.extend(hex("41 02"));
        }
        bytes.extend(hex("41 00 24 00 00"));
        for level in (0..levels).rev() {
            // The first element of this array is the array with id level + 1.
            bytes.push(b'^');
            bytes.push(level as u8 + 1);
            bytes.extend(hex("24 00 02"));
        }
        bytes
    }
    let small = v8::deserialize(&dag(3)).unwrap();
    let leaf = arr(&[]);
    let l1 = arr(&[leaf.clone(), leaf]);
    let l2 = arr(&[l1.clone(), l1]);
    assert_eq!(small, arr(&[l2.clone(), l2]));
    assert!(matches!(v8::deserialize(&dag(60)), Err(ValueError::Unrepresentable(_))));
}

// ---------------------------------------------------------------------------------------
// Random values
// ---------------------------------------------------------------------------------------

use stampkv_testkit::SplitMix64 as Rng;

fn random_number(rng: &mut Rng) -> f64 {
    match rng.below(6) {
        0 => *rng.pick(&[
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            2147483647.0,
            2147483648.0,
            -2147483648.0,
            -2147483649.0,
            5e-324,
            f64::MAX,
            9007199254740993.0,
        ]),
        1 => f64::from_bits(rng.next_u64()),
        2 => (rng.below(2000) as f64) - 1000.0,
        3 => (rng.next_u64() as i32) as f64,
        4 => (rng.below(1 << 40) as f64) / 7.0,
        _ => (rng.next_u64() as i64 >> rng.below(64)) as f64,
    }
}

fn random_string(rng: &mut Rng) -> String {
    let len = rng.below(12);
    let kind = rng.below(3);
    (0..len)
        .map(|_| match (kind, rng.below(4)) {
            (0, _) | (_, 0) => char::from(b' ' + rng.below(95) as u8),
            (1, _) | (_, 1) => char::from(rng.below(256) as u8),
            (_, 2) => char::from_u32(0x100 + rng.below(0xd700) as u32).unwrap_or('?'),
            _ => char::from_u32(0x10000 + rng.below(0x10000) as u32).unwrap_or('?'),
        })
        .collect()
}

fn random_bigint(rng: &mut Rng) -> KvBigInt {
    let len = rng.below(20) as usize;
    let magnitude: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    KvBigInt::from_sign_magnitude(rng.below(2) == 0, &magnitude)
}

fn random_key(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => rng.below(20).to_string(),
        1 => rng
            .pick(&["4294967294", "4294967295", "2147483647", "2147483648", "-1", "01", "1.5", ""])
            .to_string(),
        _ => random_string(rng),
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    let kinds = if depth >= 4 { 9 } else { 13 };
    match rng.below(kinds) {
        0 => rng.pick(&[Value::Undefined, Value::Null, Value::Bool(true), Value::Bool(false)]).clone(),
        1 | 2 => Value::Number(random_number(rng)),
        3 => Value::BigInt(random_bigint(rng)),
        4 | 5 => Value::String(random_string(rng)),
        6 => Value::Bytes((0..rng.below(10)).map(|_| rng.next_u64() as u8).collect()),
        7 => Value::Date(match rng.below(3) {
            0 => f64::NAN,
            _ => (rng.next_u64() as i64 % 8_640_000_000_000_000) as f64,
        }),
        8 => {
            let (source, flags) = *rng.pick(&[
                ("ab+c", "g"),
                (r"\d+", "dgimsuy"),
                ("(?:)", ""),
                (r"a\/b", "i"),
                (r"[\p{L}]", "v"),
                ("€", ""),
            ]);
            re(source, flags)
        }
        9 => Value::Array((0..rng.below(5)).map(|_| random_value(rng, depth + 1)).collect()),
        10 => {
            let mut properties: Vec<(String, Value)> = Vec::new();
            for _ in 0..rng.below(5) {
                let key = random_key(rng);
                if !properties.iter().any(|(k, _)| *k == key) {
                    properties.push((key, random_value(rng, depth + 1)));
                }
            }
            Value::Object(properties)
        }
        11 => Value::Map(
            (0..rng.below(4)).map(|_| (random_value(rng, depth + 1), random_value(rng, depth + 1))).collect(),
        ),
        _ => Value::Set((0..rng.below(4)).map(|_| random_value(rng, depth + 1)).collect()),
    }
}

#[test]
fn random_values_round_trip() {
    let mut rng = Rng::new(0x5eed);
    for i in 0..20_000 {
        let value = random_value(&mut rng, 0);
        let bytes = v8::serialize(&value).unwrap_or_else(|e| panic!("#{i} {value:?}: {e}"));
        let decoded = v8::deserialize(&bytes).unwrap_or_else(|e| panic!("#{i} {value:?}: {e}"));
        assert!(decoded.same_value(&value), "#{i}: {value:?} came back as {decoded:?}");
        // Encoding is deterministic and decoding then encoding reproduces the bytes.
        assert_eq!(v8::serialize(&decoded).unwrap(), bytes, "#{i}");
        // Through the stored form.
        let stored = KvValue::from_value(&value).unwrap().encode_stored();
        let back = KvValue::decode_stored(&stored).unwrap().to_value().unwrap();
        assert!(back.same_value(&value), "#{i}");
    }
}

#[test]
fn every_kind_round_trips() {
    let value = obj(&[
        ("undefined", Value::Undefined),
        ("null", Value::Null),
        ("bool", Value::Bool(true)),
        ("number", n(-0.0)),
        ("nan", n(f64::NAN)),
        ("bigint", Value::BigInt(big_2p200())),
        ("string", s("a😀€é")),
        ("bytes", Value::Bytes(vec![0, 1, 255])),
        ("array", arr(&[n(1.0), arr(&[])])),
        ("0", obj(&[("4294967294", n(1.0)), ("x", n(2.0))])),
        ("map", Value::Map(vec![(n(f64::NAN), s("nan")), (obj(&[]), Value::Bytes(vec![]))])),
        ("set", Value::Set(vec![big(-1), Value::Date(-8.64e15)])),
        ("date", Value::Date(1.0)),
        ("regexp", re(r"^\w+$", "giu")),
    ]);
    let bytes = v8::serialize(&value).unwrap();
    assert!(v8::deserialize(&bytes).unwrap().same_value(&value));
    for top in [Value::U64(0), Value::U64(u64::MAX), Value::Bytes(vec![7; 100])] {
        let stored = KvValue::from_value(&top).unwrap().encode_stored();
        assert_eq!(KvValue::decode_stored(&stored).unwrap().to_value().unwrap(), top);
    }
}

// ---------------------------------------------------------------------------------------
// Robustness
// ---------------------------------------------------------------------------------------

fn robustness_corpus() -> Vec<Vec<u8>> {
    let mut corpus: Vec<Vec<u8>> = deno_cases().into_iter().map(|(_, bytes, _)| hex(bytes)).collect();
    let mut rng = Rng::new(7);
    for _ in 0..40 {
        corpus.push(v8::serialize(&random_value(&mut rng, 1)).unwrap());
    }
    corpus.push(hex("ff 0f 61 02 49 02 22 01 62 49 00 22 01 61 40 02 02"));
    corpus.push(hex("ff 0f 7e 02 04 00 00 56 42 00 02 02"));
    corpus.push(hex("ff 0f 6d 02 00 75 00"));
    corpus.push(hex("ff 0f 72 54 6d 22 01 78 63 30 2e"));
    corpus
}

#[test]
fn truncations_and_mutations_never_panic() {
    let mut decoded = 0usize;
    for bytes in robustness_corpus() {
        for end in 0..bytes.len() {
            // A strict prefix is a complete value only if what was cut is trailing padding.
            if let Ok(value) = v8::deserialize(&bytes[..end]) {
                assert!(bytes[end..].iter().all(|b| *b == 0), "{bytes:02x?}[..{end}] gave {value:?}");
            }
        }
        let mut mutated = bytes.clone();
        for at in 0..bytes.len() {
            let values: Vec<u8> = if bytes.len() <= 64 {
                (0..=255).collect()
            } else {
                vec![0, 1, 0x7f, 0x80, 0xff, bytes[at] ^ 1]
            };
            for value in values {
                mutated[at] = value;
                if v8::deserialize(&mutated).is_ok() {
                    decoded += 1;
                }
            }
            mutated[at] = bytes[at];
        }
    }
    assert!(decoded > 0);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(99);
    let tags = b"\0?-_0TFINUZS\"c^o{a@A$DyxnzsR;:',BC~tVupw\\mr";
    for _ in 0..100_000 {
        let len = rng.below(40) as usize;
        let mut bytes = Vec::with_capacity(len + 2);
        if rng.below(8) != 0 {
            bytes.extend_from_slice(&[0xff, 13 + rng.below(4) as u8]);
        }
        for _ in 0..len {
            bytes.push(if rng.below(2) == 0 { *rng.pick(tags) } else { rng.next_u64() as u8 });
        }
        let _ = v8::deserialize(&bytes);
        let _ = KvValue::decode_stored(&bytes).and_then(|v| v.to_value());
    }
}

#[test]
fn huge_lengths_do_not_allocate() {
    for bytes in [
        "ff 0f 22 ff ff ff ff 0f",
        "ff 0f 63 fe ff ff ff 0f",
        "ff 0f 41 ff ff ff ff 0f",
        "ff 0f 42 ff ff ff ff 0f",
        "ff 10 42 ff ff ff ff ff ff ff ff ff 01",
        "ff 0f 5a ff ff ff ff 0f",
        "ff 0f 61 ff ff ff ff 0f 40 00 ff ff ff ff 0f",
    ] {
        assert!(v8::deserialize(&hex(bytes)).is_err(), "{bytes}");
    }
}

// ---------------------------------------------------------------------------------------
// Sums on V8 numbers (results observed from Deno 2.9.6)
// ---------------------------------------------------------------------------------------

fn v8_value(value: Value) -> KvValue {
    KvValue::from_value(&value).unwrap()
}

/// As Deno 2.9.6 writes it with `kv.set` (header `FF 10`).
fn deno_v8(bytes: &str) -> KvValue {
    KvValue::V8(hex(bytes))
}

#[test]
fn sum_results_match_deno() {
    let nan_stored = deno_v8("ff 10 4e 00 00 00 00 00 00 f8 7f");
    let cases: Vec<(Option<KvValue>, KvValue, KvValue)> = vec![
        // 1 + 2 = 3, written as a double.
        (Some(deno_v8("ff 10 49 02")), deno_v8("ff 10 49 04"), deno_v8("ff 0f 4e 00 00 00 00 00 00 08 40")),
        (Some(v8_value(n(1.5))), v8_value(n(2.25)), deno_v8("ff 0f 4e 00 00 00 00 00 00 0e 40")),
        (None, deno_v8("ff 10 49 0a"), deno_v8("ff 0f 4e 00 00 00 00 00 00 14 40")),
        (None, v8_value(n(5.5)), deno_v8("ff 0f 4e 00 00 00 00 00 00 16 40")),
        (Some(v8_value(n(0.5))), v8_value(n(0.5)), deno_v8("ff 0f 4e 00 00 00 00 00 00 f0 3f")),
        (Some(nan_stored), v8_value(n(1.0)), deno_v8("ff 0f 4e 00 00 00 00 00 00 f8 7f")),
        (Some(v8_value(n(1e308))), v8_value(n(1e308)), deno_v8("ff 0f 4e 00 00 00 00 00 00 f0 7f")),
        (Some(v8_value(n(-0.0))), v8_value(n(-0.0)), deno_v8("ff 0f 4e 00 00 00 00 00 00 00 80")),
        (Some(v8_value(n(1.0))), v8_value(n(-0.0)), deno_v8("ff 0f 4e 00 00 00 00 00 00 f0 3f")),
        // Bigints: minimal little-endian bytes.
        (Some(deno_v8("ff 10 5a 10 0a 00 00 00 00 00 00 00")), v8_value(big(32)), deno_v8("ff 0f 5a 02 2a")),
        (Some(v8_value(big(-1))), v8_value(big(1)), deno_v8("ff 0f 5a 02 00")),
        (Some(v8_value(big(1))), v8_value(big(-3)), deno_v8("ff 0f 5a 03 02")),
        (
            Some(v8_value(big(1 << 64))),
            v8_value(big(1 << 64)),
            deno_v8("ff 0f 5a 12 00 00 00 00 00 00 00 00 02"),
        ),
        (None, v8_value(big(7)), deno_v8("ff 0f 5a 02 07")),
        (None, v8_value(big(0)), deno_v8("ff 0f 5a 02 00")),
        (None, v8_value(big(1 << 70)), deno_v8("ff 0f 5a 12 00 00 00 00 00 00 00 00 40")),
        // KvU64 stored + bigint operand in 0..2^64: wrapping KvU64 addition.
        (Some(KvValue::U64(5)), v8_value(big(2)), KvValue::U64(7)),
        (Some(KvValue::U64(u64::MAX)), v8_value(big(3)), KvValue::U64(2)),
        // KvU64 operands (`atomic().sum`).
        (None, KvValue::U64(3), KvValue::U64(3)),
        (Some(KvValue::U64(u64::MAX)), KvValue::U64(3), KvValue::U64(2)),
    ];
    for (stored, operand, expected) in cases {
        let result = sum_v8(stored.as_ref(), &operand);
        assert_eq!(result, Ok(expected.clone()), "{stored:?} + {operand:?}");
    }
}

#[test]
fn sum_errors_match_deno() {
    let cases: Vec<(Option<KvValue>, KvValue, &str)> = vec![
        (Some(v8_value(n(1.0))), v8_value(big(2)), "Cannot sum Number with BigInt"),
        (Some(v8_value(big(1))), v8_value(n(2.0)), "Cannot sum BigInt with Number"),
        (Some(KvValue::U64(5)), v8_value(n(2.0)), "Cannot sum KvU64 with Number"),
        (Some(KvValue::U64(5)), v8_value(big(-1)), "Cannot sum KvU64 with BigInt"),
        (Some(KvValue::U64(5)), v8_value(big(1 << 64)), "Cannot sum KvU64 with BigInt"),
        (Some(v8_value(s("str"))), v8_value(n(1.0)), "unsupported value type"),
        (Some(KvValue::Bytes(vec![1])), v8_value(n(1.0)), "unsupported value type"),
        (Some(v8_value(obj(&[("a", n(1.0))]))), v8_value(n(1.0)), "unsupported value type"),
        (Some(v8_value(Value::Null)), v8_value(n(1.0)), "unsupported value type"),
        (Some(v8_value(n(1.0))), v8_value(s("str")), "Some of the parameters are not valid V8 values"),
        (Some(v8_value(n(1.0))), v8_value(Value::Null), "Some of the parameters are not valid V8 values"),
        (Some(v8_value(n(1.0))), KvValue::Bytes(vec![1]), "Some of the parameters are not valid V8 values"),
        (None, KvValue::V8(vec![]), "Some of the parameters are not valid V8 values"),
        (None, KvValue::V8(hex("ff 0f 4e 00")), "Some of the parameters are not valid V8 values"),
        (Some(KvValue::V8(hex("ff 0f 4e 00"))), v8_value(n(1.0)), "invalid v8 value"),
        (Some(KvValue::V8(vec![])), v8_value(n(1.0)), "operand cannot be empty"),
        (
            Some(v8_value(n(1.0))),
            KvValue::U64(1),
            "Failed to perform 'sum' mutation on a non-U64 value in the database",
        ),
    ];
    for (stored, operand, message) in cases {
        let err = sum_v8(stored.as_ref(), &operand).unwrap_err();
        assert_eq!(err.to_string(), message, "{stored:?} + {operand:?}");
    }
    assert_eq!(
        sum_v8(Some(&v8_value(n(1.0))), &v8_value(big(2))),
        Err(SumError::Mismatch { stored: "Number", operand: "BigInt" })
    );
}

// ---------------------------------------------------------------------------------------
// serde
// ---------------------------------------------------------------------------------------

#[cfg(feature = "serde")]
mod serde_support {
    use super::*;
    use serde::{Deserialize, Serialize};
    use stampkv_model::value::{from_value, to_value};
    use std::collections::{BTreeMap, HashMap};

    /// Bytes the way `serde_bytes` serializes them.
    #[derive(Debug, Clone, PartialEq)]
    struct Blob(Vec<u8>);

    impl Serialize for Blob {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(&self.0)
        }
    }

    impl<'de> Deserialize<'de> for Blob {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct BlobVisitor;
            impl<'de> serde::de::Visitor<'de> for BlobVisitor {
                type Value = Blob;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Blob, E> {
                    Ok(Blob(v))
                }
                fn visit_bytes<E>(self, v: &[u8]) -> Result<Blob, E> {
                    Ok(Blob(v.to_vec()))
                }
            }
            deserializer.deserialize_byte_buf(BlobVisitor)
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    enum Role {
        Admin,
        Guest(String),
        Custom { name: String, level: u8 },
        Pair(i32, i32),
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Address {
        city: String,
        zip: Option<String>,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct User {
        id: u64,
        name: String,
        score: f64,
        balance: i128,
        active: bool,
        tags: Vec<String>,
        address: Address,
        previous: Vec<Address>,
        roles: Vec<Role>,
        avatar: Blob,
        raw: Vec<u8>,
        by_year: BTreeMap<u16, u32>,
        settings: HashMap<String, bool>,
        pair: (u8, char),
        nothing: (),
        maybe: Option<Box<User>>,
    }

    fn user() -> User {
        User {
            id: u64::MAX,
            name: "Ada €".into(),
            score: -0.5,
            balance: -(1 << 100),
            active: true,
            tags: vec!["a".into(), "b".into()],
            address: Address { city: "Zürich".into(), zip: Some("8000".into()) },
            previous: vec![Address { city: "Bern".into(), zip: None }],
            roles: vec![
                Role::Admin,
                Role::Guest("x".into()),
                Role::Custom { name: "ops".into(), level: 3 },
                Role::Pair(-1, 2),
            ],
            avatar: Blob(vec![1, 2, 3]),
            raw: vec![9, 8],
            by_year: [(2024, 1), (2025, 2)].into_iter().collect(),
            settings: [("dark".to_string(), true)].into_iter().collect(),
            pair: (7, 'é'),
            nothing: (),
            maybe: Some(Box::new(User {
                id: 1,
                name: String::new(),
                score: 0.0,
                balance: 0,
                active: false,
                tags: vec![],
                address: Address { city: String::new(), zip: None },
                previous: vec![],
                roles: vec![],
                avatar: Blob(vec![]),
                raw: vec![],
                by_year: BTreeMap::new(),
                settings: HashMap::new(),
                pair: (0, 'a'),
                nothing: (),
                maybe: None,
            })),
        }
    }

    #[test]
    fn derived_struct_round_trips_through_value_and_v8() {
        let user = user();
        let value = to_value(&user).unwrap();
        assert_eq!(value.get("id"), Some(&Value::BigInt(KvBigInt::from(u64::MAX))));
        assert_eq!(value.get("score"), Some(&n(-0.5)));
        assert_eq!(value.get("avatar"), Some(&Value::Bytes(vec![1, 2, 3])));
        assert_eq!(value.get("raw"), Some(&arr(&[n(9.0), n(8.0)])));
        assert_eq!(value.get("nothing"), Some(&Value::Null));
        assert_eq!(value.get("address").and_then(|a| a.get("zip")), Some(&s("8000")));
        assert_eq!(value.get("by_year"), Some(&Value::Map(vec![(n(2024.0), n(1.0)), (n(2025.0), n(2.0))])));
        assert_eq!(
            value.get("roles"),
            Some(&arr(&[
                s("Admin"),
                obj(&[("Guest", s("x"))]),
                obj(&[("Custom", obj(&[("name", s("ops")), ("level", n(3.0))]))]),
                obj(&[("Pair", arr(&[n(-1.0), n(2.0)]))]),
            ]))
        );
        assert_eq!(from_value::<User>(value.clone()).unwrap(), user);

        let stored = KvValue::from_value(&value).unwrap();
        assert_eq!(stored.encoding(), 1);
        let back = KvValue::decode_stored(&stored.encode_stored()).unwrap().to_value().unwrap();
        assert_eq!(from_value::<User>(back).unwrap(), user);
    }

    #[test]
    fn reads_values_written_by_deno() {
        #[derive(Debug, PartialEq, Deserialize)]
        struct Row {
            data: Blob,
        }
        let value =
            v8::deserialize(&hex("ff 10 6f 22 04 64 61 74 61 42 03 01 02 03 56 42 00 03 00 7b 01")).unwrap();
        assert_eq!(from_value::<Row>(value).unwrap(), Row { data: Blob(vec![1, 2, 3]) });
        // {0: "a", 1: "b", 42: "c"} into an integer-keyed map.
        let value =
            v8::deserialize(&hex("ff 10 6f 49 00 22 01 61 49 02 22 01 62 49 54 22 01 63 7b 03")).unwrap();
        let map: BTreeMap<u32, String> = from_value(value).unwrap();
        assert_eq!(map, [(0, "a".into()), (1, "b".into()), (42, "c".into())].into_iter().collect());
        // 42n and 2n ** 64n - 1n as integers.
        assert_eq!(
            from_value::<u8>(v8::deserialize(&hex("ff 10 5a 10 2a 00 00 00 00 00 00 00")).unwrap()).unwrap(),
            42
        );
        assert_eq!(
            from_value::<u64>(v8::deserialize(&hex("ff 10 5a 10 ff ff ff ff ff ff ff ff")).unwrap()).unwrap(),
            u64::MAX
        );
        // Sets are sequences, undefined is None, Uint8Arrays are sequences of u8.
        assert_eq!(from_value::<Vec<i32>>(Value::Set(vec![n(1.0), n(2.0)])).unwrap(), vec![1, 2]);
        assert_eq!(from_value::<Option<i32>>(Value::Undefined).unwrap(), None);
        assert_eq!(from_value::<Vec<u8>>(Value::Bytes(vec![4, 5])).unwrap(), vec![4, 5]);
    }

    #[test]
    fn errors_are_clear() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Small {
            n: u8,
        }
        let err = from_value::<Small>(obj(&[("n", n(256.0))])).unwrap_err();
        assert_eq!(err.to_string(), "invalid value: 256 is out of range for u8");
        let err = from_value::<Small>(obj(&[("n", big(-1))])).unwrap_err();
        assert_eq!(err.to_string(), "invalid value: -1n is out of range for u8");
        let err = from_value::<Small>(obj(&[])).unwrap_err();
        assert_eq!(err.to_string(), "missing field `n`");
        let err = from_value::<Small>(s("x")).unwrap_err();
        assert!(matches!(err, ValueError::Serde(_)), "{err:?}");
        let err = from_value::<String>(n(1.0)).unwrap_err();
        assert_eq!(err.to_string(), "invalid type: floating point `1.0`, expected a string");
        assert!(from_value::<Role>(s("Nope")).is_err());
        assert!(from_value::<f64>(re("x", "")).is_err());
    }

    #[test]
    fn untagged_and_dynamic_targets() {
        #[derive(Debug, PartialEq, Deserialize)]
        #[serde(untagged)]
        enum Loose {
            Int(i64),
            Float(f64),
            Text(String),
            List(Vec<Loose>),
        }
        assert_eq!(from_value::<Loose>(n(3.0)).unwrap(), Loose::Int(3));
        assert_eq!(from_value::<Loose>(n(-0.0)).unwrap(), Loose::Float(-0.0));
        assert_eq!(from_value::<Loose>(n(2.5)).unwrap(), Loose::Float(2.5));
        assert_eq!(from_value::<Loose>(big(-5)).unwrap(), Loose::Int(-5));
        assert_eq!(
            from_value::<Loose>(arr(&[s("a"), n(1.0)])).unwrap(),
            Loose::List(vec![Loose::Text("a".into()), Loose::Int(1)])
        );
    }
}
