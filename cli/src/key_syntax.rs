//! Keys written in Deno's own syntax: `["users", 42n, true, 1.5, "é"]`.
//!
//! A key is a JavaScript array literal whose elements are key parts:
//!
//! | part | written as |
//! |---|---|
//! | string | `"..."`, `'...'` or `` `...` `` (no `${}`), with JavaScript's escapes: `\n \t \r \b \f \v \0 \\ \' \" \xHH \uHHHH \u{H..}`, and a backslash before any other character standing for that character |
//! | number | `42`, `-0`, `1.5`, `.5`, `1e3`, `-2.5e-7`, `0xff`, `0o17`, `0b101`, `1_000`, `Infinity`, `-Infinity`, `NaN` |
//! | bigint | `42n`, `-7n`, `0xffn`, `0o17n`, `0b101n` |
//! | boolean | `true`, `false` |
//! | bytes | `new Uint8Array([1, 2, 3])`, `new Uint8Array()`, `new Uint8Array(4)` (four zero bytes), `Uint8Array(3) [ 1, 2, 3 ]` (what Deno's console prints), `Uint8Array.fromHex("010203")` |
//!
//! Elements are separated by commas (a trailing comma is allowed) and any whitespace,
//! newlines included, may surround them, so a key printed by Deno's console (or by
//! `stampkv`) can be pasted back as it is. A byte is an integer from 0 to 255 (decimal or
//! `0x..`); out-of-range bytes are refused rather than wrapped as JavaScript would.
//!
//! The typed JSON form that `get --json` and `list --json` print is accepted too:
//! `[{"type":"string","value":"users"},{"type":"bigint","value":"42"}]` (see
//! `cli/FORMAT.md`).
//!
//! Errors name the column (counted in characters from 1) where the input went wrong:
//! `expected ',' or ']' at column 12`.

use crate::value_json;
use stampkv::{Key, KeyPart, KvBigInt};
use std::fmt;

/// Why a text is not a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySyntaxError {
    /// What is wrong.
    pub message: String,
    /// Column (1-based, in characters) of the problem; `None` for the typed JSON form,
    /// whose parser reports its own position in the message.
    pub column: Option<usize>,
}

impl fmt::Display for KeySyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(column) => write!(f, "{} at column {column}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for KeySyntaxError {}

/// Parses a key: a JavaScript array literal of key parts, or the typed JSON form.
pub fn parse_key(text: &str) -> Result<Key, KeySyntaxError> {
    let mut parser = Parser { chars: text.chars().collect(), pos: 0 };
    parser.skip_whitespace();
    if parser.peek() == Some('[') {
        let mut look = Parser { chars: parser.chars.clone(), pos: parser.pos + 1 };
        look.skip_whitespace();
        if look.peek() == Some('{') {
            return value_json::parse_typed_key(text).map_err(|message| KeySyntaxError {
                message: format!("invalid typed JSON key: {message}"),
                column: None,
            });
        }
    }
    let key = parser.key()?;
    parser.skip_whitespace();
    if parser.peek().is_some() {
        return Err(parser.error("unexpected text after the key"));
    }
    Ok(key)
}

/// The most bytes `new Uint8Array(n)` may ask for (a key holds at most 2 KiB anyway).
const MAX_ZERO_BYTES: usize = 1 << 16;

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

/// What a part was: for useful messages about things that are not key parts.
fn describe(c: char) -> String {
    match c {
        '[' => "an array is not a key part (a key is one flat array)".to_owned(),
        '{' => "an object is not a key part".to_owned(),
        c => format!("unexpected {}", show_char(c)),
    }
}

fn show_char(c: char) -> String {
    if c.is_control() || c.is_whitespace() {
        format!("character U+{:04X}", c as u32)
    } else {
        format!("'{c}'")
    }
}

fn is_identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn error(&self, message: impl Into<String>) -> KeySyntaxError {
        self.error_at(self.pos, message)
    }

    fn error_at(&self, pos: usize, message: impl Into<String>) -> KeySyntaxError {
        KeySyntaxError { message: message.into(), column: Some(pos + 1) }
    }

    fn unexpected(&self, expected: &str) -> KeySyntaxError {
        match self.peek() {
            None => self.error(format!("expected {expected}, found the end of the input")),
            Some(c) => self.error(format!("expected {expected}, found {}", show_char(c))),
        }
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: char) -> Result<(), KeySyntaxError> {
        self.skip_whitespace();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{c}'")))
        }
    }

    fn word(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(is_identifier_char) {
            self.pos += 1;
        }
        self.chars.get(start..self.pos).unwrap_or_default().iter().collect()
    }

    fn key(&mut self) -> Result<Key, KeySyntaxError> {
        self.skip_whitespace();
        if self.peek() != Some('[') {
            let hint = "a key is an array in Deno's syntax, e.g. '[\"users\", 42]'";
            return Err(match self.peek() {
                None => self.error(format!("empty key text: {hint}")),
                Some(_) => self.error(format!("expected '[' ({hint})")),
            });
        }
        self.pos += 1;
        let mut parts = Vec::new();
        loop {
            self.skip_whitespace();
            match self.peek() {
                Some(']') => {
                    self.pos += 1;
                    return Ok(Key(parts));
                }
                Some(',') => return Err(self.error("empty element (holes are not key parts)")),
                _ => {}
            }
            parts.push(self.part()?);
            self.skip_whitespace();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(']') => {}
                _ => return Err(self.unexpected("',' or ']'")),
            }
        }
    }

    fn part(&mut self) -> Result<KeyPart, KeySyntaxError> {
        let Some(c) = self.peek() else {
            return Err(self.unexpected("a key part or ']'"));
        };
        match c {
            '"' | '\'' | '`' => Ok(KeyPart::String(self.string()?)),
            '0'..='9' | '.' | '-' | '+' => self.number_or_bigint(),
            c if is_identifier_char(c) => self.word_part(),
            c => Err(self.error(describe(c))),
        }
    }

    fn word_part(&mut self) -> Result<KeyPart, KeySyntaxError> {
        let start = self.pos;
        let word = self.word();
        match word.as_str() {
            "true" => Ok(KeyPart::Bool(true)),
            "false" => Ok(KeyPart::Bool(false)),
            "Infinity" => Ok(KeyPart::Number(f64::INFINITY)),
            "NaN" => Ok(KeyPart::Number(f64::NAN)),
            "new" => {
                self.skip_whitespace();
                let name_start = self.pos;
                if self.word() != "Uint8Array" {
                    return Err(self.error_at(name_start, "expected 'Uint8Array' after 'new'"));
                }
                self.new_uint8array()
            }
            "Uint8Array" => self.printed_uint8array(start),
            "null" | "undefined" => Err(self.error_at(
                start,
                format!("{word} is not a key part (parts are strings, numbers, bigints, booleans and Uint8Arrays)"),
            )),
            _ => Err(self.error_at(start, format!("unexpected '{word}' (a string needs quotes)"))),
        }
    }

    /// After `new Uint8Array`: `()`, `(n)` or `([bytes])`.
    fn new_uint8array(&mut self) -> Result<KeyPart, KeySyntaxError> {
        self.expect('(')?;
        self.skip_whitespace();
        let bytes = match self.peek() {
            Some(')') => Vec::new(),
            Some('[') => {
                self.pos += 1;
                self.byte_list(None)?
            }
            Some('0'..='9') => {
                let at = self.pos;
                let n = self.byte_count()?;
                if n > MAX_ZERO_BYTES {
                    return Err(self.error_at(at, format!("new Uint8Array({n}) is too large for a key")));
                }
                vec![0; n]
            }
            _ => return Err(self.unexpected("')', a length or '['")),
        };
        self.expect(')')?;
        Ok(KeyPart::Bytes(bytes))
    }

    /// After `Uint8Array`: `(n) [ ... ]` as Deno prints it, or `.fromHex("...")`.
    fn printed_uint8array(&mut self, start: usize) -> Result<KeyPart, KeySyntaxError> {
        self.skip_whitespace();
        if self.peek() == Some('.') {
            self.pos += 1;
            let method_start = self.pos;
            if self.word() != "fromHex" {
                return Err(self.error_at(method_start, "expected 'fromHex' after 'Uint8Array.'"));
            }
            self.expect('(')?;
            self.skip_whitespace();
            let hex_start = self.pos;
            if !matches!(self.peek(), Some('"' | '\'' | '`')) {
                return Err(self.unexpected("a string of hex digits"));
            }
            let hex = self.string()?;
            let bytes = decode_hex(&hex).map_err(|message| self.error_at(hex_start, message))?;
            self.expect(')')?;
            return Ok(KeyPart::Bytes(bytes));
        }
        if self.peek() != Some('(') {
            return Err(self.error_at(
                start,
                "expected 'Uint8Array(n) [ ... ]', 'new Uint8Array([...])' or 'Uint8Array.fromHex(\"...\")'",
            ));
        }
        self.pos += 1;
        self.skip_whitespace();
        let count = self.byte_count()?;
        self.expect(')')?;
        self.expect('[')?;
        let bytes = self.byte_list(Some(start))?;
        if bytes.len() != count {
            return Err(self.error_at(
                start,
                format!(
                    "Uint8Array({count}) lists {} byte{}",
                    bytes.len(),
                    if bytes.len() == 1 { "" } else { "s" }
                ),
            ));
        }
        Ok(KeyPart::Bytes(bytes))
    }

    /// A decimal length.
    fn byte_count(&mut self) -> Result<usize, KeySyntaxError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars.get(start..self.pos).unwrap_or_default().iter().collect();
        digits.parse().map_err(|_| self.error_at(start, "expected a length"))
    }

    /// Bytes up to and including `]` (the `[` is consumed).
    fn byte_list(&mut self, printed: Option<usize>) -> Result<Vec<u8>, KeySyntaxError> {
        let mut bytes = Vec::new();
        loop {
            self.skip_whitespace();
            match self.peek() {
                Some(']') => {
                    self.pos += 1;
                    return Ok(bytes);
                }
                Some('.') if self.peek_at(1) == Some('.') => {
                    let what =
                        if printed.is_some() { "this Uint8Array was printed" } else { "the byte list is" };
                    return Err(self.error(format!(
                        "{what} cut short ('... N more items'): give every byte, e.g. with `get --full`"
                    )));
                }
                _ => {}
            }
            let at = self.pos;
            let byte = match self.number_or_bigint()? {
                KeyPart::Number(x) if x.fract() == 0.0 && (0.0..=255.0).contains(&x) => x as u8,
                KeyPart::Number(x) => {
                    return Err(self.error_at(
                        at,
                        format!("byte {} is not an integer from 0 to 255", crate::value_display::number(x)),
                    ));
                }
                _ => return Err(self.error_at(at, "a byte is a number from 0 to 255, not a bigint")),
            };
            bytes.push(byte);
            self.skip_whitespace();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(']') => {}
                _ => return Err(self.unexpected("',' or ']'")),
            }
        }
    }

    /// A string literal in `"`, `'` or `` ` `` quotes.
    fn string(&mut self) -> Result<String, KeySyntaxError> {
        let start = self.pos;
        let Some(quote) = self.bump() else {
            return Err(self.unexpected("a string"));
        };
        let mut out = String::new();
        loop {
            let at = self.pos;
            let Some(c) = self.bump() else {
                return Err(self.error_at(start, "unterminated string"));
            };
            match c {
                c if c == quote => return Ok(out),
                '\\' => self.escape(&mut out, quote)?,
                '$' if quote == '`' && self.peek() == Some('{') => {
                    return Err(self.error_at(at, "template substitutions ('${') are not supported"));
                }
                '\r' if quote == '`' => {
                    // A template literal reads CR LF and CR as LF.
                    if self.peek() == Some('\n') {
                        self.pos += 1;
                    }
                    out.push('\n');
                }
                '\n' | '\r' if quote != '`' => {
                    return Err(self.error_at(start, "unterminated string (a line break needs \\n)"));
                }
                c => out.push(c),
            }
        }
    }

    /// After a backslash in a string.
    fn escape(&mut self, out: &mut String, quote: char) -> Result<(), KeySyntaxError> {
        let at = self.pos - 1;
        let Some(c) = self.bump() else {
            return Err(self.error_at(at, "unterminated string"));
        };
        match c {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            '0' if !self.peek().is_some_and(|c| c.is_ascii_digit()) => out.push('\0'),
            '0'..='9' => {
                return Err(self.error_at(at, "octal escapes are not allowed (use \\x or \\u)"));
            }
            'x' => {
                let code = self.hex_digits(2, at)?;
                out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            'u' => {
                let code = self.unicode_escape(at)?;
                if (0xD800..0xDC00).contains(&code) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    let low_at = self.pos;
                    if self.peek() == Some('\\') && self.peek_at(1) == Some('u') {
                        self.pos += 2;
                        let low = self.unicode_escape(low_at)?;
                        if (0xDC00..0xE000).contains(&low) {
                            let combined = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            out.push(char::from_u32(combined).unwrap_or(char::REPLACEMENT_CHARACTER));
                            return Ok(());
                        }
                    }
                    return Err(self.error_at(
                        at,
                        format!("lone surrogate \\u{code:04X} (a key string is Unicode text)"),
                    ));
                }
                match char::from_u32(code) {
                    Some(c) => out.push(c),
                    None => {
                        return Err(self.error_at(
                            at,
                            format!("lone surrogate \\u{code:04X} (a key string is Unicode text)"),
                        ))
                    }
                }
            }
            '\r' => {
                // A line continuation: backslash and line break stand for nothing.
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
            }
            c if is_line_terminator(c) => {}
            c if c == quote => out.push(c),
            c => out.push(c),
        }
        Ok(())
    }

    /// `HHHH` or `{H...}` after `\u`.
    fn unicode_escape(&mut self, at: usize) -> Result<u32, KeySyntaxError> {
        if self.peek() == Some('{') {
            self.pos += 1;
            let start = self.pos;
            while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                self.pos += 1;
            }
            let digits: String = self.chars.get(start..self.pos).unwrap_or_default().iter().collect();
            if self.peek() != Some('}') || digits.is_empty() {
                return Err(self.error_at(at, "invalid \\u{...} escape"));
            }
            self.pos += 1;
            return match u32::from_str_radix(&digits, 16) {
                Ok(code) if code <= 0x10FFFF => Ok(code),
                _ => Err(self.error_at(at, "\\u{...} escape beyond U+10FFFF")),
            };
        }
        self.hex_digits(4, at)
    }

    fn hex_digits(&mut self, count: usize, at: usize) -> Result<u32, KeySyntaxError> {
        let mut code = 0;
        for _ in 0..count {
            match self.peek().and_then(|c| c.to_digit(16)) {
                Some(digit) => {
                    code = code * 16 + digit;
                    self.pos += 1;
                }
                None => return Err(self.error_at(at, format!("invalid escape: expected {count} hex digits"))),
            }
        }
        Ok(code)
    }

    /// A number or bigint literal with an optional sign.
    fn number_or_bigint(&mut self) -> Result<KeyPart, KeySyntaxError> {
        let start = self.pos;
        let negative = match self.peek() {
            Some('-') => {
                self.pos += 1;
                true
            }
            Some('+') => {
                self.pos += 1;
                false
            }
            _ => false,
        };
        self.skip_whitespace();
        if self.peek().is_some_and(char::is_alphabetic) {
            let word_start = self.pos;
            let word = self.word();
            return match word.as_str() {
                "Infinity" => Ok(KeyPart::Number(if negative { f64::NEG_INFINITY } else { f64::INFINITY })),
                "NaN" => Ok(KeyPart::Number(f64::NAN)),
                _ => Err(self.error_at(word_start, format!("expected a number, found '{word}'"))),
            };
        }
        let part = self.unsigned_number(start)?;
        if self.peek().is_some_and(is_identifier_char) {
            return Err(self.error(format!(
                "unexpected {} right after a number",
                show_char(self.peek().unwrap_or(' '))
            )));
        }
        Ok(match part {
            KeyPart::Number(x) if negative => KeyPart::Number(-x),
            KeyPart::BigInt(n) if negative => {
                KeyPart::BigInt(KvBigInt::from_sign_magnitude(!n.is_negative(), n.magnitude_be()))
            }
            part => part,
        })
    }

    /// Digits (with `_` separators between them) in `radix`, as a string without the `_`.
    fn digits(&mut self, radix: u32) -> Result<String, KeySyntaxError> {
        let mut out = String::new();
        loop {
            match self.peek() {
                Some(c) if c.is_digit(radix) => {
                    out.push(c);
                    self.pos += 1;
                }
                Some('_') if !out.is_empty() && self.peek_at(1).is_some_and(|c| c.is_digit(radix)) => {
                    self.pos += 1;
                }
                Some('_') => return Err(self.error("a '_' separator must stand between two digits")),
                _ => return Ok(out),
            }
        }
    }

    fn unsigned_number(&mut self, start: usize) -> Result<KeyPart, KeySyntaxError> {
        let radix = match (self.peek(), self.peek_at(1)) {
            (Some('0'), Some('x' | 'X')) => 16,
            (Some('0'), Some('o' | 'O')) => 8,
            (Some('0'), Some('b' | 'B')) => 2,
            _ => 10,
        };
        if radix != 10 {
            self.pos += 2;
            let digits_start = self.pos;
            let digits = self.digits(radix)?;
            if digits.is_empty() {
                return Err(self.error_at(digits_start, "expected digits after the radix prefix"));
            }
            let magnitude = radix_magnitude(&digits, radix);
            if self.peek() == Some('n') {
                self.pos += 1;
                return Ok(KeyPart::BigInt(KvBigInt::from_sign_magnitude(false, &magnitude)));
            }
            return Ok(KeyPart::Number(magnitude_to_f64(&magnitude)));
        }
        let integer = self.digits(10)?;
        if integer.len() > 1 && integer.starts_with('0') {
            return Err(self.error_at(start, "a number cannot start with 0 (legacy octal is not allowed)"));
        }
        if self.peek() == Some('n') {
            if integer.is_empty() {
                return Err(self.error_at(start, "expected digits before 'n'"));
            }
            self.pos += 1;
            return integer
                .parse::<KvBigInt>()
                .map(KeyPart::BigInt)
                .map_err(|e| self.error_at(start, format!("invalid bigint: {e}")));
        }
        let mut literal = integer.clone();
        if self.peek() == Some('.') {
            self.pos += 1;
            let fraction = self.digits(10)?;
            if integer.is_empty() && fraction.is_empty() {
                return Err(self.error_at(start, "expected a number"));
            }
            literal.push('.');
            literal.push_str(&fraction);
        } else if integer.is_empty() {
            return Err(self.error_at(start, "expected a number"));
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            self.pos += 1;
            literal.push('e');
            if let Some(sign @ ('+' | '-')) = self.peek() {
                self.pos += 1;
                literal.push(sign);
            }
            let exponent = self.digits(10)?;
            if exponent.is_empty() {
                return Err(self.error("expected the exponent's digits"));
            }
            literal.push_str(&exponent);
        }
        if self.peek() == Some('n') {
            return Err(self.error("a bigint has no fraction or exponent"));
        }
        let literal = if literal.starts_with('.') { format!("0{literal}") } else { literal };
        literal.parse::<f64>().map(KeyPart::Number).map_err(|_| self.error_at(start, "invalid number"))
    }
}

/// The big-endian magnitude of digits in radix 2, 8 or 16.
fn radix_magnitude(digits: &str, radix: u32) -> Vec<u8> {
    let mut magnitude: Vec<u8> = Vec::new();
    for digit in digits.chars().filter_map(|c| c.to_digit(radix)) {
        let mut carry = digit;
        for byte in magnitude.iter_mut().rev() {
            let value = u32::from(*byte) * radix + carry;
            *byte = (value & 0xFF) as u8;
            carry = value >> 8;
        }
        while carry > 0 {
            magnitude.insert(0, (carry & 0xFF) as u8);
            carry >>= 8;
        }
    }
    magnitude
}

/// A big-endian magnitude as the nearest double (ties to even), as JavaScript reads a long
/// hexadecimal literal.
fn magnitude_to_f64(magnitude: &[u8]) -> f64 {
    let first = magnitude.iter().position(|b| *b != 0).unwrap_or(magnitude.len());
    let magnitude = magnitude.get(first..).unwrap_or_default();
    if magnitude.len() <= 16 {
        let mut bytes = [0u8; 16];
        if let Some(tail) = bytes.get_mut(16 - magnitude.len()..) {
            tail.copy_from_slice(magnitude);
        }
        return u128::from_be_bytes(bytes) as f64;
    }
    // Longer: the decimal digits, read by the correctly rounding parser.
    KvBigInt::from_sign_magnitude(false, magnitude).to_string().parse().unwrap_or(f64::INFINITY)
}

/// Hex digits (whitespace ignored) as bytes.
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u32> = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_digit(16).ok_or_else(|| format!("'{c}' is not a hex digit")))
        .collect::<Result<_, _>>()?;
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    Ok(digits.chunks(2).map(|pair| pair.iter().fold(0u32, |acc, d| acc * 16 + d) as u8).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampkv::key;
    use stampkv_testkit::SplitMix64;

    fn parse(text: &str) -> Key {
        parse_key(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn error(text: &str) -> String {
        parse_key(text).unwrap_err().to_string()
    }

    #[test]
    fn every_part_kind() {
        assert_eq!(
            parse(r#"["users", 42n, true, 1.5, "é"]"#),
            key!["users", KvBigInt::from(42), true, 1.5, "é"]
        );
        assert_eq!(parse("[]"), Key::new());
        assert_eq!(parse("  [ 'a' , `b`, ]  "), key!["a", "b"]);
        assert_eq!(parse("[false, -0, 1e3, .5, 0x10, 0o17, 0b101, 1_000]"), {
            key![false, -0.0, 1000.0, 0.5, 16.0, 15.0, 5.0, 1000.0]
        });
        let negative_zero = parse("[-0]");
        assert!(matches!(negative_zero.parts()[0], KeyPart::Number(x) if x == 0.0 && x.is_sign_negative()));
        assert_eq!(parse("[Infinity, -Infinity]"), key![f64::INFINITY, f64::NEG_INFINITY]);
        assert!(matches!(parse("[NaN]").parts()[0], KeyPart::Number(x) if x.is_nan()));
        assert_eq!(parse("[-7n, 0xffn, 0n, -0n]"), {
            key![KvBigInt::from(-7), KvBigInt::from(255), KvBigInt::from(0), KvBigInt::from(0)]
        });
        let big = "123456789012345678901234567890";
        assert_eq!(parse(&format!("[{big}n]")), key![big.parse::<KvBigInt>().unwrap()]);
    }

    #[test]
    fn byte_parts_in_every_spelling() {
        let bytes = key![vec![1u8, 2, 3]];
        assert_eq!(parse("[new Uint8Array([1, 2, 3])]"), bytes);
        assert_eq!(parse("[Uint8Array(3) [ 1, 2, 3 ]]"), bytes);
        assert_eq!(parse("[Uint8Array.fromHex('010203')]"), bytes);
        assert_eq!(parse("[new Uint8Array([0x01, 2, 3,])]"), bytes);
        assert_eq!(parse("[new Uint8Array()]"), key![Vec::<u8>::new()]);
        assert_eq!(parse("[Uint8Array(0) []]"), key![Vec::<u8>::new()]);
        assert_eq!(parse("[new Uint8Array(2)]"), key![vec![0u8, 0]]);
        // Deno's multi-line grouping of a long Uint8Array reads back.
        let printed = "[\n  Uint8Array(8) [\n    1, 2, 3, 4,\n    5, 6, 7, 8\n  ]\n]";
        assert_eq!(parse(printed), key![vec![1u8, 2, 3, 4, 5, 6, 7, 8]]);
    }

    #[test]
    fn string_escapes() {
        assert_eq!(parse(r#"["a\nb\t\"\\\x41\u0042\u{1F600}\0"]"#), key!["a\nb\t\"\\AB\u{1F600}\0"]);
        assert_eq!(parse(r#"["\uD83D\uDE00"]"#), key!["\u{1F600}"]);
        assert_eq!(parse(r#"['it\'s', "\q"]"#), key!["it's", "q"]);
        assert_eq!(parse("[`two\nlines`]"), key!["two\nlines"]);
        assert_eq!(parse("[\"a\\\nb\"]"), key!["ab"]);
    }

    #[test]
    fn errors_name_the_column() {
        assert_eq!(error(r#"["users" 42]"#), "expected ',' or ']', found '4' at column 10");
        assert_eq!(error(r#"["a""#), "expected ',' or ']', found the end of the input at column 5");
        assert_eq!(
            error("users"),
            "expected '[' (a key is an array in Deno's syntax, e.g. '[\"users\", 42]') at column 1"
        );
        assert_eq!(
            error(""),
            "empty key text: a key is an array in Deno's syntax, e.g. '[\"users\", 42]' at column 1"
        );
        assert_eq!(error("[users]"), "unexpected 'users' (a string needs quotes) at column 2");
        assert_eq!(error("[\"abc]"), "unterminated string at column 2");
        assert_eq!(error("[1,,2]"), "empty element (holes are not key parts) at column 4");
        assert_eq!(error("[[1]]"), "an array is not a key part (a key is one flat array) at column 2");
        assert_eq!(error("[null]"), "null is not a key part (parts are strings, numbers, bigints, booleans and Uint8Arrays) at column 2");
        assert_eq!(error("[new Uint8Array([256])]"), "byte 256 is not an integer from 0 to 255 at column 18");
        assert_eq!(error("[Uint8Array(3) [ 1, 2 ]]"), "Uint8Array(3) lists 2 bytes at column 2");
        assert_eq!(error("[1.5n]"), "a bigint has no fraction or exponent at column 5");
        assert_eq!(error("[012]"), "a number cannot start with 0 (legacy octal is not allowed) at column 2");
        assert_eq!(error("[12abc]"), "unexpected 'a' right after a number at column 4");
        assert_eq!(
            error(r#"["\uD800"]"#),
            "lone surrogate \\uD800 (a key string is Unicode text) at column 3"
        );
        assert_eq!(error("[1] x"), "unexpected text after the key at column 5");
        assert_eq!(error("[`${x}`]"), "template substitutions ('${') are not supported at column 3");
        assert!(error("[Uint8Array(101) [ 0, ... 100 more items ]]").contains("cut short"));
    }

    fn random_part(rng: &mut SplitMix64) -> KeyPart {
        const CHARS: &[char] = &[
            'a', 'Z', ' ', '"', '\'', '`', '\\', '\n', '\r', '\t', '\0', '\u{7f}', '\u{85}', 'é', '日', '😀',
            '$', '{', '[', '\u{2028}',
        ];
        match rng.below(5) {
            0 => KeyPart::String(
                (0..rng.below(8)).map(|_| CHARS[rng.below(CHARS.len() as u64) as usize]).collect(),
            ),
            1 => KeyPart::Number(match rng.below(6) {
                0 => f64::from_bits(rng.next_u64()),
                1 => -0.0,
                2 => [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 5e-324, 1e21, f64::MAX]
                    [rng.below(6) as usize],
                _ => (rng.below(2_000_000) as f64 - 1_000_000.0) / [1.0, 8.0, 1000.0][rng.below(3) as usize],
            }),
            2 => {
                let magnitude: Vec<u8> = (0..rng.below(20)).map(|_| rng.next_u64() as u8).collect();
                KeyPart::BigInt(KvBigInt::from_sign_magnitude(rng.below(2) == 0, &magnitude))
            }
            3 => KeyPart::Bool(rng.below(2) == 0),
            _ => KeyPart::Bytes((0..rng.below(12)).map(|_| rng.next_u64() as u8).collect()),
        }
    }

    #[test]
    fn printed_and_typed_keys_read_back_as_the_same_key() {
        let mut rng = SplitMix64::new(0x5eed_1234_abcd_0001);
        for _ in 0..3000 {
            let key = Key((0..rng.below(6)).map(|_| random_part(&mut rng)).collect());
            let printed = crate::value_display::inspect_key(&key);
            assert_eq!(parse_key(&printed), Ok(key.clone()), "{printed}");
            let typed = crate::value_json::key_json(&key);
            assert_eq!(parse_key(&typed), Ok(key.clone()), "{typed}");
        }
    }

    #[test]
    fn arbitrary_text_never_panics() {
        const PIECES: &[&str] = &[
            "[",
            "]",
            ",",
            " ",
            "\"",
            "'",
            "`",
            "\\",
            "u",
            "{",
            "}",
            "x",
            "0x",
            "1",
            "9",
            ".",
            "e",
            "-",
            "+",
            "n",
            "_",
            "new",
            "Uint8Array",
            "(",
            ")",
            ".fromHex",
            "true",
            "NaN",
            "Infinity",
            "...",
            "${",
            "é",
            "\\u{",
            "\\uD83D",
            "\n",
            "\"type\"",
            ":",
        ];
        let mut rng = SplitMix64::new(0x0dd_ba11);
        for _ in 0..20_000 {
            let text: String =
                (0..rng.below(16)).map(|_| PIECES[rng.below(PIECES.len() as u64) as usize]).collect();
            if let Err(error) = parse_key(&text) {
                assert!(!error.to_string().is_empty());
                assert!(
                    error.column.is_none_or(|column| column <= text.chars().count() + 1),
                    "{text:?}: {error}"
                );
            }
        }
    }
}
