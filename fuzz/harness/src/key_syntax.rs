//! `key_syntax`: the command line's key parser (`cli/src/key_syntax.rs`: keys written in
//! Deno's syntax, `["users", 42n]`, or the typed JSON form) on arbitrary text, and its
//! formatters (`inspect_key`, Deno's console notation, and `key_json`, the typed JSON form).
//!
//! - Raw: the input, as UTF-8 (invalid sequences replaced), is parsed. `parse_key` never
//!   panics; an error has a message and a column within the text (at most one past its
//!   end). A key it accepts prints (both ways) as text that parses back to the same key,
//!   and, if the key encodes, its encoding decodes back to it too.
//! - Structured: a key built from the input (every part kind: strings with quotes,
//!   backslashes, control, line-separator and astral characters; any f64 bit pattern; bigints
//!   of any length; bytes) prints both ways as text that parses back to the same key.

use crate::util::hex;
use arbitrary::{Result as ArbResult, Unstructured};
use stampkv::{Key, KeyPart, KvBigInt};
use stampkv_cli::key_syntax::parse_key;
use stampkv_cli::value_display::inspect_key;
use stampkv_cli::value_json::key_json;

/// Runs the `key_syntax` target on one input.
pub fn key_syntax(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match parse_key(&text) {
        Ok(key) => {
            prints_back(&key, &format!("parsed from {text:?}"));
            if let Ok(encoded) = key.encode() {
                assert_eq!(Key::decode(&encoded).as_ref(), Ok(&key), "{text:?}: encoding {}", hex(&encoded));
            }
        }
        Err(error) => {
            assert!(!error.message.is_empty(), "{text:?}: an error without a message");
            let chars = text.chars().count();
            assert!(
                error.column.is_none_or(|column| (1..=chars + 1).contains(&column)),
                "{text:?}: error column {:?} of {chars} characters: {error}",
                error.column
            );
        }
    }
    if let Ok(key) = gen_key(&mut Unstructured::new(data)) {
        prints_back(&key, "built from the input");
    }
}

/// Both printed forms of `key` parse back to `key`.
fn prints_back(key: &Key, origin: &str) {
    let printed = inspect_key(key);
    match parse_key(&printed) {
        Ok(again) => {
            assert_eq!(&again, key, "{key:?} ({origin}) printed as {printed:?} reads back as {again:?}")
        }
        Err(e) => panic!("{key:?} ({origin}) printed as {printed:?} does not parse: {e}"),
    }
    let typed = key_json(key);
    match parse_key(&typed) {
        Ok(again) => {
            assert_eq!(&again, key, "{key:?} ({origin}) as typed JSON {typed:?} reads back as {again:?}")
        }
        Err(e) => panic!("{key:?} ({origin}) as typed JSON {typed:?} does not parse: {e}"),
    }
}

/// Characters that need care in a quoted string.
const TRICKY: &[char] = &[
    '"',
    '\'',
    '`',
    '\\',
    '$',
    '{',
    '}',
    '[',
    ']',
    ',',
    '\n',
    '\r',
    '\t',
    '\0',
    '\u{7f}',
    '\u{85}',
    '\u{2028}',
    '\u{2029}',
    '\u{feff}',
    '\u{fffd}',
    'é',
    '日',
    '😀',
    '\u{10ffff}',
    ' ',
];

fn gen_part(u: &mut Unstructured) -> ArbResult<KeyPart> {
    Ok(match u.int_in_range(0..=6u8)? {
        0 => KeyPart::String(u.arbitrary()?),
        1 => {
            let len = u.int_in_range(0..=12usize)?;
            let mut text = String::new();
            for _ in 0..len {
                text.push(*u.choose(TRICKY)?);
            }
            KeyPart::String(text)
        }
        2 => KeyPart::Number(f64::from_bits(u.arbitrary()?)),
        3 => KeyPart::Number(f64::from(u.arbitrary::<i32>()?) / f64::from(u.int_in_range(1..=1024u16)?)),
        4 => {
            let magnitude: Vec<u8> = u.arbitrary()?;
            KeyPart::BigInt(KvBigInt::from_sign_magnitude(u.arbitrary()?, &magnitude))
        }
        5 => KeyPart::Bool(u.arbitrary()?),
        _ => KeyPart::Bytes(u.arbitrary()?),
    })
}

fn gen_key(u: &mut Unstructured) -> ArbResult<Key> {
    let len = u.int_in_range(0..=6usize)?;
    (0..len).map(|_| gen_part(u)).collect::<ArbResult<Vec<_>>>().map(Key)
}
