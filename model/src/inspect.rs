//! Values and keys printed the way Deno's `console.log` (`Deno.inspect`) shows them.
//!
//! [`inspect`] follows the algorithm of Deno's console (`ext/console`, itself Node's
//! `util.inspect`) with Deno's defaults: `compact: 3`, `breakLength: 80`, `depth: 4`, at most
//! 100 items of an array, typed array, `Map` or `Set`, at most 10 000 characters of a
//! string. So `{ name: "Ann", tags: [ "a" ] }` stays on one line, a value nested more than
//! four levels deep prints `[Object]`, an array of more than six numbers is grouped in
//! aligned columns, and a long value is broken across lines at 80 columns exactly where
//! Deno breaks it. Two differences, both about width: Deno measures a string's display
//! width after Unicode NFC normalization, this module without it (they differ only for
//! strings holding decomposed characters), and a string cut at 10 000 UTF-16 units
//! between the halves of a surrogate pair shows U+FFFD where Deno writes the lone half.
//!
//! [`InspectOptions::FULL`] lifts the depth and length limits (nothing is elided), and
//! [`InspectOptions::ONE_LINE`] also puts every value on one line: the same notation, with
//! every container joined by `, ` whatever its width. Keys are always printed on one line
//! ([`inspect_key`]): a short key prints exactly as Deno prints it, and any key prints in a
//! form the command line's key parser reads back.

use crate::{Key, KeyPart, Value};
use std::fmt;

/// Limits and layout of [`inspect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InspectOptions {
    /// Containers nested deeper than this print as `[Object]`, `[Array]`, ... (`None`: no limit).
    pub depth: Option<usize>,
    /// Items shown of an array, `Uint8Array`, `Map` or `Set` before `... N more items`.
    pub max_items: Option<usize>,
    /// UTF-16 units shown of a string before `... N more characters`.
    pub max_string_length: Option<usize>,
    /// Everything on one line (no grouping, no breaking, no string splitting).
    pub single_line: bool,
}

impl InspectOptions {
    /// Deno's `console.log` defaults.
    pub const DENO: InspectOptions = InspectOptions {
        depth: Some(4),
        max_items: Some(100),
        max_string_length: Some(10_000),
        single_line: false,
    };
    /// Deno's layout without any limit: nothing is elided.
    pub const FULL: InspectOptions =
        InspectOptions { depth: None, max_items: None, max_string_length: None, single_line: false };
    /// No limit and one line.
    pub const ONE_LINE: InspectOptions =
        InspectOptions { depth: None, max_items: None, max_string_length: None, single_line: true };
}

/// Deno's `breakLength`.
const BREAK_LENGTH: usize = 80;
/// Deno's `compact` (entries of the innermost three levels may share a line).
const COMPACT: usize = 3;
/// Strings shorter than this are never split across lines.
const MIN_LINE_LENGTH: usize = 16;

/// Prints a value as `Deno.inspect` does (a string in quotes, as inside an object).
pub fn inspect(value: &Value, options: &InspectOptions) -> String {
    Inspector { options: *options, indentation: 0, current_depth: 0 }.value(value, 0)
}

/// Prints a key on one line: `[ "users", 42n, true, Uint8Array(2) [ 1, 2 ] ]`.
pub fn inspect_key(key: &Key) -> String {
    let parts: Vec<String> = key.parts().iter().map(inspect_key_part).collect();
    if parts.is_empty() {
        "[]".to_owned()
    } else {
        format!("[ {} ]", parts.join(", "))
    }
}

/// Prints one key part as Deno does.
pub fn inspect_key_part(part: &KeyPart) -> String {
    match part {
        KeyPart::Bytes(bytes) => bytes_one_line(bytes),
        KeyPart::String(text) => quote(text),
        KeyPart::BigInt(n) => format!("{n}n"),
        KeyPart::Number(x) => number(*x),
        KeyPart::Bool(b) => b.to_string(),
    }
}

fn bytes_one_line(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "Uint8Array(0) []".to_owned();
    }
    let items: Vec<String> = bytes.iter().map(u8::to_string).collect();
    format!("Uint8Array({}) [ {} ]", bytes.len(), items.join(", "))
}

/// A number as `Deno.inspect` prints it: JavaScript's `Number.prototype.toString`, and
/// `-0` for negative zero.
pub fn number(x: f64) -> String {
    if x == 0.0 && x.is_sign_negative() {
        "-0".to_owned()
    } else {
        js_number_to_string(x)
    }
}

/// JavaScript's `Number.prototype.toString()` (ECMAScript Number::toString, radix 10):
/// the shortest digits that read back as `x`, positional from 1e-7 to below 1e21,
/// exponential (`1e+21`, `1.5e-7`) outside. `-0` prints as `0`.
pub fn js_number_to_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    // `{:e}` prints the shortest round-trip digits: "1.5e-7", "1e21", "1.2345e2".
    let scientific = format!("{:e}", x.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    // The decimal point sits after `n` digits: value = 0.digits × 10^n.
    let n = exponent + 1;
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.push_str(&"0".repeat((n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-n) as usize));
        out.push_str(&digits);
    } else {
        let e = n - 1;
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&e.abs().to_string());
    }
    out
}

/// The largest time value a JavaScript `Date` holds, in milliseconds (ECMAScript TimeClip).
const MAX_TIME_MS: f64 = 8.64e15;

/// `Date.prototype.toISOString()` of a time value, or `None` for an invalid date (`NaN` or
/// beyond ±8.64e15 ms): `2017-07-14T02:40:00.000Z`, `+275760-09-13T00:00:00.000Z`,
/// `-001199-02-15T14:13:20.000Z`.
pub fn iso_date(ms: f64) -> Option<String> {
    if !ms.is_finite() || ms.abs() > MAX_TIME_MS {
        return None;
    }
    let ms = ms.trunc() as i64;
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = crate::civil::civil_from_days(days);
    let year_text = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year < 0 {
        format!("-{:06}", -year)
    } else {
        format!("+{year:06}")
    };
    Some(format!(
        "{year_text}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    ))
}

/// A string in quotes as Deno prints it: the first of `"`, `'`, `` ` `` that the string does
/// not contain (`"` if it contains all three), that quote and `\` escaped with a backslash,
/// `\b \f \n \r \t \v` as such and other C0/C1 control characters as `\xHH`.
pub fn quote(text: &str) -> String {
    let quote = ['"', '\'', '`'].into_iter().find(|q| !text.contains(*q)).unwrap_or('"');
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c == quote || c == '\\' => {
                out.push('\\');
                out.push(c);
            }
            // In a template literal `${` starts a substitution: escaped, it is text.
            '$' if quote == '`' && chars.peek() == Some(&'{') => out.push_str("\\$"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// An object property name: bare if it is an identifier of ASCII letters, digits and `_`,
/// quoted otherwise; `__proto__` as `['__proto__']`.
fn property_name(name: &str) -> String {
    let mut chars = name.chars();
    let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if name == "__proto__" {
        "['__proto__']".to_owned()
    } else if identifier {
        name.to_owned()
    } else {
        quote(name)
    }
}

/// JavaScript's `string.length`: UTF-16 code units.
fn js_length(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Display columns of `text` (Deno's `getStringWidth` without NFC normalization).
fn display_width(text: &str) -> usize {
    text.chars()
        .map(|c| {
            let code = c as u32;
            if is_full_width(code) {
                2
            } else if is_zero_width(code) {
                0
            } else {
                1
            }
        })
        .sum()
}

fn is_zero_width(code: u32) -> bool {
    code <= 0x1F
        || (0x7F..=0x9F).contains(&code)
        || (0x300..=0x36F).contains(&code)
        || (0x200B..=0x200F).contains(&code)
        || (0x20D0..=0x20FF).contains(&code)
        || (0xFE00..=0xFE0F).contains(&code)
        || (0xFE20..=0xFE2F).contains(&code)
        || (0xE0100..=0xE01EF).contains(&code)
}

fn is_full_width(code: u32) -> bool {
    code >= 0x1100
        && (code <= 0x115f
            || code == 0x2329
            || code == 0x232a
            || ((0x2e80..=0x3247).contains(&code) && code != 0x303f)
            || (0x3250..=0x4dbf).contains(&code)
            || (0x4e00..=0xa4c6).contains(&code)
            || (0xa960..=0xa97c).contains(&code)
            || (0xac00..=0xd7a3).contains(&code)
            || (0xf900..=0xfaff).contains(&code)
            || (0xfe10..=0xfe19).contains(&code)
            || (0xfe30..=0xfe6b).contains(&code)
            || (0xff01..=0xff60).contains(&code)
            || (0xffe0..=0xffe6).contains(&code)
            || (0x1b000..=0x1b001).contains(&code)
            || (0x1f200..=0x1f251).contains(&code)
            || (0x1f300..=0x1f64f).contains(&code)
            || (0x20000..=0x3fffd).contains(&code))
}

fn more_items(remaining: usize) -> String {
    format!("... {remaining} more item{}", if remaining > 1 { "s" } else { "" })
}

/// `padStart`/`padEnd` to `width` UTF-16 units with spaces.
fn pad(text: &str, width: usize, at_start: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(js_length(text)));
    if at_start {
        format!("{fill}{text}")
    } else {
        format!("{text}{fill}")
    }
}

/// The state of one `inspect` call (Deno's `ctx`).
struct Inspector {
    options: InspectOptions,
    /// Spaces before the current line's entries.
    indentation: usize,
    /// Depth of the container most recently entered.
    current_depth: usize,
}

/// What a container's entries are laid out as.
struct Braces {
    open: String,
    close: &'static str,
    /// Array-like (`[ ... ]`, may be grouped in columns).
    array_like: bool,
    /// Every element is a number or bigint (columns are right-aligned).
    numeric: bool,
}

impl Inspector {
    fn value(&mut self, value: &Value, recurse: usize) -> String {
        match value {
            Value::Undefined => "undefined".to_owned(),
            Value::Null => "null".to_owned(),
            Value::Bool(b) => b.to_string(),
            Value::Number(x) => number(*x),
            Value::BigInt(n) => format!("{n}n"),
            Value::String(text) => self.string(text),
            Value::U64(n) => format!("[Deno.KvU64: {n}n]"),
            Value::Date(ms) => iso_date(*ms).unwrap_or_else(|| "Invalid Date".to_owned()),
            Value::RegExp { source, flags } => {
                format!("/{}/{flags}", if source.is_empty() { "(?:)" } else { source })
            }
            Value::Array(items) if items.is_empty() => "[]".to_owned(),
            Value::Object(properties) if properties.is_empty() => "{}".to_owned(),
            Value::Map(entries) if entries.is_empty() => "Map(0) {}".to_owned(),
            Value::Set(items) if items.is_empty() => "Set(0) {}".to_owned(),
            Value::Bytes(bytes) if bytes.is_empty() => "Uint8Array(0) []".to_owned(),
            Value::Array(_) | Value::Object(_) | Value::Map(_) | Value::Set(_) | Value::Bytes(_) => {
                self.container(value, recurse)
            }
        }
    }

    /// A string (Deno's `formatPrimitive`): cut after `max_string_length` units, and split
    /// after each line break into `"..." +` lines when it does not fit the line.
    fn string(&self, text: &str) -> String {
        let length = js_length(text);
        let (shown, trailer) = match self.options.max_string_length {
            Some(max) if length > max => {
                let units: Vec<u16> = text.encode_utf16().take(max).collect();
                let remaining = length - max;
                let plural = if remaining > 1 { "s" } else { "" };
                (String::from_utf16_lossy(&units), format!("... {remaining} more character{plural}"))
            }
            _ => (text.to_owned(), String::new()),
        };
        let shown_length = length.min(self.options.max_string_length.unwrap_or(usize::MAX));
        let room = BREAK_LENGTH as isize - self.indentation as isize - 4;
        if !self.options.single_line && shown_length > MIN_LINE_LENGTH && shown_length as isize > room {
            let separator = format!(" +\n{}", " ".repeat(self.indentation + 2));
            let lines: Vec<String> = shown.split_inclusive('\n').map(quote).collect();
            return lines.join(&separator) + &trailer;
        }
        quote(&shown) + &trailer
    }

    /// A non-empty array, object, Map, Set or Uint8Array (Deno's `formatRaw`).
    fn container(&mut self, value: &Value, recurse: usize) -> String {
        let name = match value {
            Value::Array(_) => "Array",
            Value::Map(_) => "Map",
            Value::Set(_) => "Set",
            Value::Bytes(_) => "Uint8Array",
            _ => "Object",
        };
        if self.options.depth.is_some_and(|depth| recurse > depth) {
            return format!("[{name}]");
        }
        let recurse = recurse + 1;
        self.current_depth = recurse;
        let limit = self.options.max_items.unwrap_or(usize::MAX);
        let mut output = Vec::new();
        let braces = match value {
            Value::Array(items) => {
                for item in items.iter().take(limit) {
                    self.indentation += 2;
                    output.push(self.value(item, recurse));
                    self.indentation -= 2;
                }
                if items.len() > limit {
                    output.push(more_items(items.len() - limit));
                }
                let numeric = items
                    .iter()
                    .take(output.len())
                    .all(|item| matches!(item, Value::Number(_) | Value::BigInt(_)));
                Braces { open: "[".to_owned(), close: "]", array_like: true, numeric }
            }
            Value::Bytes(bytes) => {
                output.extend(bytes.iter().take(limit).map(u8::to_string));
                if bytes.len() > limit {
                    output.push(more_items(bytes.len() - limit));
                }
                let open = format!("Uint8Array({}) [", bytes.len());
                Braces { open, close: "]", array_like: true, numeric: true }
            }
            Value::Map(entries) => {
                self.indentation += 2;
                for (key, item) in entries.iter().take(limit) {
                    let key = self.value(key, recurse);
                    let item = self.value(item, recurse);
                    output.push(format!("{key} => {item}"));
                }
                self.indentation -= 2;
                if entries.len() > limit {
                    output.push(more_items(entries.len() - limit));
                }
                let open = format!("Map({}) {{", entries.len());
                Braces { open, close: "}", array_like: false, numeric: false }
            }
            Value::Set(items) => {
                self.indentation += 2;
                for item in items.iter().take(limit) {
                    output.push(self.value(item, recurse));
                }
                self.indentation -= 2;
                if items.len() > limit {
                    output.push(more_items(items.len() - limit));
                }
                let open = format!("Set({}) {{", items.len());
                Braces { open, close: "}", array_like: false, numeric: false }
            }
            Value::Object(properties) => {
                for (key, item) in properties {
                    self.indentation += 2;
                    let item = self.value(item, recurse);
                    self.indentation -= 2;
                    output.push(format!("{}: {item}", property_name(key)));
                }
                Braces { open: "{".to_owned(), close: "}", array_like: false, numeric: false }
            }
            _ => Braces { open: "{".to_owned(), close: "}", array_like: false, numeric: false },
        };
        self.reduce_to_single_string(output, &braces, recurse)
    }

    /// Joins a container's entries on one line if they fit, else one (or, for arrays, one
    /// row of columns) per line (Deno's `reduceToSingleString`).
    fn reduce_to_single_string(&self, output: Vec<String>, braces: &Braces, recurse: usize) -> String {
        let (open, close) = (&braces.open, braces.close);
        if self.options.single_line {
            return format!("{open} {} {close}", output.join(", "));
        }
        let entries = output.len();
        let output = if braces.array_like && entries > 6 {
            self.group_array_elements(output, braces.numeric)
        } else {
            output
        };
        if self.current_depth.saturating_sub(recurse) < COMPACT && entries == output.len() {
            let start = output.len() + self.indentation + js_length(open) + 10;
            if is_below_break_length(&output, start) {
                let joined = output.join(", ");
                if !joined.contains('\n') {
                    return format!("{open} {joined} {close}");
                }
            }
        }
        let indentation = format!("\n{}", " ".repeat(self.indentation));
        let separator = format!(",{indentation}  ");
        format!("{open}{indentation}  {}{indentation}{close}", output.join(&separator))
    }

    /// Lays out more than six array entries in aligned columns when they are short enough
    /// (Deno's `groupArrayElements`).
    fn group_array_elements(&self, output: Vec<String>, numeric: bool) -> Vec<String> {
        let has_more = self.options.max_items.is_some_and(|max| max < output.len());
        let output_length = if has_more { output.len() - 1 } else { output.len() };
        let separator_space = 2;
        let data_len: Vec<usize> = output.iter().take(output_length).map(|s| display_width(s)).collect();
        let total_length: usize = data_len.iter().map(|len| len + separator_space).sum();
        let max_length = data_len.iter().copied().max().unwrap_or(0);
        let actual_max = max_length + separator_space;
        if actual_max * 3 + self.indentation >= BREAK_LENGTH
            || (total_length as f64 / actual_max as f64 <= 5.0 && max_length > 6)
        {
            return output;
        }
        let approx_char_heights = 2.5;
        let average_bias = (actual_max as f64 - total_length as f64 / output.len() as f64).sqrt();
        let biased_max = (actual_max as f64 - 3.0 - average_bias).max(1.0);
        let columns = ((approx_char_heights * biased_max * output_length as f64).sqrt() / biased_max)
            .round()
            .min(((BREAK_LENGTH - self.indentation) / actual_max) as f64)
            .min((COMPACT * 4) as f64)
            .min(15.0);
        if columns <= 1.0 {
            return output;
        }
        let columns = columns as usize;
        let max_line_length: Vec<usize> = (0..columns)
            .map(|i| data_len.iter().skip(i).step_by(columns).copied().max().unwrap_or(0) + separator_space)
            .collect();
        let mut grouped = Vec::new();
        let cells: Vec<(&String, usize, usize)> = output
            .iter()
            .zip(&data_len)
            .zip(max_line_length.iter().cycle())
            .map(|((text, width), column_width)| (text, *width, *column_width))
            .collect();
        for row in cells.chunks(columns) {
            let mut line = String::new();
            let last = row.len().saturating_sub(1);
            for (index, (text, width, column_width)) in row.iter().enumerate() {
                // The target counts UTF-16 units, the column widths count display columns.
                let target = (column_width + js_length(text)).saturating_sub(*width);
                if index < last {
                    line.push_str(&pad(&format!("{text}, "), target, numeric));
                } else if numeric {
                    line.push_str(&pad(text, target.saturating_sub(separator_space), true));
                } else {
                    line.push_str(text);
                }
            }
            grouped.push(line);
        }
        if has_more {
            if let Some(more) = output.last() {
                grouped.push(more.clone());
            }
        }
        grouped
    }
}

/// Whether entries joined by `, ` fit in the line (Deno's `isBelowBreakLength`).
fn is_below_break_length(output: &[String], start: usize) -> bool {
    let mut total = output.len() + start;
    if total + output.len() > BREAK_LENGTH {
        return false;
    }
    for entry in output {
        total += js_length(entry);
        if total > BREAK_LENGTH {
            return false;
        }
    }
    true
}

impl fmt::Display for Value {
    /// As `console.log` in Deno prints it ([`InspectOptions::DENO`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&inspect(self, &InspectOptions::DENO))
    }
}

impl fmt::Display for Key {
    /// As Deno prints a key: `[ "users", 42 ]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&inspect_key(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        // Expected strings: `String(x)` in Deno 2.9.6.
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (-2.5e-7, "-2.5e-7"),
            (1e-7, "1e-7"),
            (1e-6, "0.000001"),
            (123e-20, "1.23e-18"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123456789012345680000.0, "123456789012345680000"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (9007199254740993.0, "9007199254740992"),
            (0.000001234, "0.000001234"),
            (1234.5678, "1234.5678"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (x, expected) in cases {
            assert_eq!(js_number_to_string(*x), *expected, "{x:e}");
        }
        assert_eq!(number(-0.0), "-0");
        assert_eq!(js_number_to_string(-0.0), "0");
    }

    #[test]
    fn dates_print_as_iso_strings() {
        // Expected strings: `new Date(ms).toISOString()` in Deno 2.9.6.
        assert_eq!(iso_date(0.0).unwrap(), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_date(1.5e12).unwrap(), "2017-07-14T02:40:00.000Z");
        assert_eq!(iso_date(8.64e15).unwrap(), "+275760-09-13T00:00:00.000Z");
        assert_eq!(iso_date(-8.64e15).unwrap(), "-271821-04-20T00:00:00.000Z");
        assert_eq!(iso_date(-1e14).unwrap(), "-001199-02-15T14:13:20.000Z");
        assert_eq!(iso_date(-1.0).unwrap(), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso_date(951_782_400_000.0).unwrap(), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_date(f64::NAN), None);
        assert_eq!(iso_date(8.64e15 + 1.0), None);
    }

    #[test]
    fn strings_choose_their_quote_and_escape() {
        // Expected strings: `Deno.inspect(s)` in Deno 2.9.6.
        assert_eq!(quote("abc"), "\"abc\"");
        assert_eq!(quote("a\"b"), "'a\"b'");
        assert_eq!(quote("a\"b'c"), "`a\"b'c`");
        assert_eq!(quote("a`b'c\""), "\"a`b'c\\\"\"");
        assert_eq!(quote("line\nbreak\ttab"), "\"line\\nbreak\\ttab\"");
        assert_eq!(quote("\u{0}\u{1}\u{1f}\u{7f}\u{80}\u{a0}"), "\"\\x00\\x01\\x1f\\x7f\\x80\u{a0}\"");
        assert_eq!(quote("back\\slash"), "\"back\\\\slash\"");
    }
}
