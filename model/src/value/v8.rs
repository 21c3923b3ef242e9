//! The V8 `ValueSerializer` wire format (the bytes of Deno's value encoding 1), for the
//! subset of JavaScript values that [`Value`] holds.
//!
//! [`serialize`] writes format version 15 (header `FF 0F`) exactly as V8 writes the same
//! value (see `FORMAT.md` for every rule); [`deserialize`] reads versions 13 to 16 (Deno 2.9.6
//! writes `FF 10`, version 16). Content `Value` cannot hold (holes in arrays, typed arrays
//! other than `Uint8Array`, errors, wrapper objects, host objects, cycles, ...) gives
//! [`ValueError::Unrepresentable`]; bytes that are not valid V8 data give
//! [`ValueError::Malformed`]. Neither function panics or allocates more than the input can
//! justify.

use super::{Value, ValueError};
use crate::KvBigInt;
use stampkv_coding::{put_varint64, varint_len};
use std::collections::HashSet;

/// The format version [`serialize`] writes (`FF 0F`).
pub const WRITE_VERSION: u32 = 15;
/// The oldest format version [`deserialize`] reads.
pub const MIN_READ_VERSION: u32 = 13;
/// The newest format version [`deserialize`] reads (what Deno 2.9.6 writes).
pub const MAX_READ_VERSION: u32 = 16;
/// How deeply containers (arrays, objects, Maps, Sets) may nest, both ways: a value of
/// `MAX_DEPTH` nested containers is written and read; one more is refused. Leaves, object
/// keys and a `RegExp`'s source do not count.
pub const MAX_DEPTH: usize = 256;

/// How deeply [`deserialize`] may recurse: containers plus the items inside the innermost
/// one (a leaf, a `RegExp` and its source) and some slack. It only bounds the stack against
/// chains that are not containers (an Error's `cause`, `?` object-count prefixes); the
/// nesting rule itself is [`MAX_DEPTH`].
const MAX_READ_RECURSION: usize = MAX_DEPTH + 16;

// Serialization tags (V8's `SerializationTag`).
const TAG_VERSION: u8 = 0xFF;
const TAG_PADDING: u8 = 0x00;
const TAG_VERIFY_OBJECT_COUNT: u8 = b'?';
const TAG_THE_HOLE: u8 = b'-';
const TAG_UNDEFINED: u8 = b'_';
const TAG_NULL: u8 = b'0';
const TAG_TRUE: u8 = b'T';
const TAG_FALSE: u8 = b'F';
const TAG_INT32: u8 = b'I';
const TAG_UINT32: u8 = b'U';
const TAG_DOUBLE: u8 = b'N';
const TAG_BIGINT: u8 = b'Z';
const TAG_UTF8_STRING: u8 = b'S';
const TAG_ONE_BYTE_STRING: u8 = b'"';
const TAG_TWO_BYTE_STRING: u8 = b'c';
const TAG_OBJECT_REFERENCE: u8 = b'^';
const TAG_BEGIN_JS_OBJECT: u8 = b'o';
const TAG_END_JS_OBJECT: u8 = b'{';
const TAG_BEGIN_SPARSE_JS_ARRAY: u8 = b'a';
const TAG_END_SPARSE_JS_ARRAY: u8 = b'@';
const TAG_BEGIN_DENSE_JS_ARRAY: u8 = b'A';
const TAG_END_DENSE_JS_ARRAY: u8 = b'$';
const TAG_DATE: u8 = b'D';
const TAG_TRUE_OBJECT: u8 = b'y';
const TAG_FALSE_OBJECT: u8 = b'x';
const TAG_NUMBER_OBJECT: u8 = b'n';
const TAG_BIGINT_OBJECT: u8 = b'z';
const TAG_STRING_OBJECT: u8 = b's';
const TAG_REGEXP: u8 = b'R';
const TAG_BEGIN_JS_MAP: u8 = b';';
const TAG_END_JS_MAP: u8 = b':';
const TAG_BEGIN_JS_SET: u8 = b'\'';
const TAG_END_JS_SET: u8 = b',';
const TAG_ARRAY_BUFFER: u8 = b'B';
const TAG_IMMUTABLE_ARRAY_BUFFER: u8 = b'C';
const TAG_RESIZABLE_ARRAY_BUFFER: u8 = b'~';
const TAG_ARRAY_BUFFER_TRANSFER: u8 = b't';
const TAG_ARRAY_BUFFER_VIEW: u8 = b'V';
const TAG_SHARED_ARRAY_BUFFER: u8 = b'u';
const TAG_SHARED_OBJECT: u8 = b'p';
const TAG_WASM_MODULE_TRANSFER: u8 = b'w';
const TAG_HOST_OBJECT: u8 = b'\\';
const TAG_WASM_MEMORY_TRANSFER: u8 = b'm';
const TAG_ERROR: u8 = b'r';

// ArrayBufferView sub-tags.
const VIEW_UINT8_ARRAY: u8 = b'B';

/// `RegExp` flags in the order JavaScript's `RegExp.prototype.flags` lists them, with the
/// bit V8 uses for each.
const REGEXP_FLAGS: [(char, u32); 8] = [
    ('d', 1 << 7), // hasIndices
    ('g', 1 << 0), // global
    ('i', 1 << 1), // ignoreCase
    ('m', 1 << 2), // multiline
    ('s', 1 << 5), // dotAll
    ('u', 1 << 4), // unicode
    ('v', 1 << 8), // unicodeSets
    ('y', 1 << 3), // sticky
];
/// V8's internal "linear" (experimental engine) flag, refused by a default V8.
const REGEXP_FLAG_LINEAR: u32 = 1 << 6;
const REGEXP_FLAG_COUNT: u32 = 9;

/// Largest array index plus one (array lengths are at most 2^32 - 1).
const MAX_ARRAY_INDEX: u64 = (1 << 32) - 2;
/// V8's `String::kMaxLength` on 64-bit hosts, in UTF-16 code units.
const MAX_STRING_LENGTH: usize = (1 << 29) - 24;
/// V8's `BigInt::kMaxLengthBits` (2^30 bits), in bytes.
const MAX_BIGINT_BYTES: usize = 1 << 27;
/// How large the copies made for shared references may get in total (in nodes plus payload
/// bytes) before the value is declared unrepresentable: bounds the exponential blow-up of a
/// DAG of references.
const MAX_SHARED_COPY_WEIGHT: usize = 1 << 24;

// ---------------------------------------------------------------------------------------
// Serialization
// ---------------------------------------------------------------------------------------

/// Serializes `value` with header `FF 0F` (format version 15), byte for byte as V8 writes
/// the same JavaScript value.
///
/// Fails with [`ValueError::NotAllowed`] for a [`Value::U64`] (anywhere: a `KvU64` is stored
/// with encoding 2 by [`KvValue::from_value`](super::KvValue::from_value), never as V8),
/// duplicate object keys, invalid `RegExp` flags, values nested deeper than [`MAX_DEPTH`],
/// and sizes V8 cannot hold.
pub fn serialize(value: &Value) -> Result<Vec<u8>, ValueError> {
    let mut writer = Writer { out: Vec::with_capacity(16), depth: 0 };
    writer.out.push(TAG_VERSION);
    writer.varint(u64::from(WRITE_VERSION));
    writer.value(value)?;
    Ok(writer.out)
}

struct Writer {
    out: Vec<u8>,
    depth: usize,
}

fn not_allowed(what: impl Into<String>) -> ValueError {
    ValueError::NotAllowed(what.into())
}

impl Writer {
    fn varint(&mut self, value: u64) {
        put_varint64(&mut self.out, value);
    }

    fn length(&mut self, len: usize, what: &str) -> Result<(), ValueError> {
        let len = u32::try_from(len).map_err(|_| not_allowed(format!("{what} too large")))?;
        self.varint(u64::from(len));
        Ok(())
    }

    fn double(&mut self, value: f64) {
        self.out.extend_from_slice(&value.to_le_bytes());
    }

    /// A number as V8 writes it: a Smi (`I`, zigzag) when it is an int32 other than -0,
    /// a HeapNumber (`N`) otherwise.
    fn number(&mut self, value: f64) {
        match as_int32(value) {
            Some(int) => {
                self.out.push(TAG_INT32);
                self.varint(u64::from(((int << 1) ^ (int >> 31)) as u32));
            }
            None => {
                self.out.push(TAG_DOUBLE);
                self.double(value);
            }
        }
    }

    fn string(&mut self, value: &str) -> Result<(), ValueError> {
        if value.chars().all(|c| u32::from(c) <= 0xFF) {
            let len = value.chars().count();
            if len > MAX_STRING_LENGTH {
                return Err(not_allowed("string too long"));
            }
            self.out.push(TAG_ONE_BYTE_STRING);
            self.varint(len as u64);
            self.out.extend(value.chars().map(|c| c as u8));
        } else {
            let units = value.encode_utf16().count();
            if units > MAX_STRING_LENGTH {
                return Err(not_allowed("string too long"));
            }
            let byte_length = units as u64 * 2;
            // V8 aligns the UTF-16 data on an even offset of the whole buffer.
            if (self.out.len() + 1 + varint_len(byte_length)) & 1 == 1 {
                self.out.push(TAG_PADDING);
            }
            self.out.push(TAG_TWO_BYTE_STRING);
            self.varint(byte_length);
            self.out.reserve(units * 2);
            for unit in value.encode_utf16() {
                self.out.extend_from_slice(&unit.to_le_bytes());
            }
        }
        Ok(())
    }

    /// A bigint as V8 writes it: digits are 64-bit words, so the byte length is a multiple
    /// of 8 (zero has no digits).
    fn bigint(&mut self, value: &KvBigInt) -> Result<(), ValueError> {
        let magnitude = value.magnitude_be();
        let byte_length = magnitude.len().div_ceil(8) * 8;
        if byte_length > MAX_BIGINT_BYTES {
            return Err(not_allowed("bigint too large"));
        }
        self.out.push(TAG_BIGINT);
        self.varint(((byte_length as u64) << 1) | u64::from(value.is_negative()));
        self.out.extend(magnitude.iter().rev());
        self.out.resize(self.out.len() + byte_length - magnitude.len(), 0);
        Ok(())
    }

    fn value(&mut self, value: &Value) -> Result<(), ValueError> {
        match value {
            Value::Undefined => self.out.push(TAG_UNDEFINED),
            Value::Null => self.out.push(TAG_NULL),
            Value::Bool(true) => self.out.push(TAG_TRUE),
            Value::Bool(false) => self.out.push(TAG_FALSE),
            Value::Number(n) => self.number(*n),
            Value::BigInt(n) => self.bigint(n)?,
            Value::String(s) => self.string(s)?,
            Value::Date(ms) => {
                self.out.push(TAG_DATE);
                self.double(time_clip(*ms));
            }
            Value::RegExp { source, flags } => {
                let bits = regexp_flag_bits(flags)?;
                self.out.push(TAG_REGEXP);
                self.string(&escape_regexp_source(source))?;
                self.varint(u64::from(bits));
            }
            Value::Bytes(bytes) => {
                // An ArrayBuffer holding exactly the bytes, then a Uint8Array view on all of it.
                self.out.push(TAG_ARRAY_BUFFER);
                self.length(bytes.len(), "Uint8Array")?;
                self.out.extend_from_slice(bytes);
                self.out.extend_from_slice(&[TAG_ARRAY_BUFFER_VIEW, VIEW_UINT8_ARRAY, 0]);
                self.length(bytes.len(), "Uint8Array")?;
                self.varint(0); // flags: not length-tracking, not backed by a resizable buffer
            }
            Value::U64(_) => {
                return Err(not_allowed(
                    "a KvU64 can only be stored as a whole value, not inside another value",
                ))
            }
            Value::Array(items) => {
                if items.len() as u64 > MAX_ARRAY_INDEX + 1 {
                    return Err(not_allowed("array too long"));
                }
                self.enter()?;
                self.out.push(TAG_BEGIN_DENSE_JS_ARRAY);
                self.length(items.len(), "array")?;
                for item in items {
                    self.value(item)?;
                }
                self.out.extend_from_slice(&[TAG_END_DENSE_JS_ARRAY, 0]);
                self.length(items.len(), "array")?;
                self.depth -= 1;
            }
            Value::Object(properties) => {
                check_unique_keys(properties)?;
                self.enter()?;
                self.out.push(TAG_BEGIN_JS_OBJECT);
                for (key, item) in properties {
                    self.property_key(key)?;
                    self.value(item)?;
                }
                self.out.push(TAG_END_JS_OBJECT);
                self.length(properties.len(), "object")?;
                self.depth -= 1;
            }
            Value::Map(entries) => {
                self.enter()?;
                self.out.push(TAG_BEGIN_JS_MAP);
                for (key, item) in entries {
                    self.value(key)?;
                    self.value(item)?;
                }
                self.out.push(TAG_END_JS_MAP);
                self.length(entries.len().saturating_mul(2), "Map")?;
                self.depth -= 1;
            }
            Value::Set(items) => {
                self.enter()?;
                self.out.push(TAG_BEGIN_JS_SET);
                for item in items {
                    self.value(item)?;
                }
                self.out.push(TAG_END_JS_SET);
                self.length(items.len(), "Set")?;
                self.depth -= 1;
            }
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), ValueError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(not_allowed(format!("values nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    /// Array-index keys are elements in V8 and are written as numbers: a Smi up to 2^31 - 1,
    /// a double above. Other keys are strings.
    fn property_key(&mut self, key: &str) -> Result<(), ValueError> {
        match array_index(key) {
            Some(index) if index <= i32::MAX as u64 => self.number(index as f64),
            Some(index) => {
                self.out.push(TAG_DOUBLE);
                self.double(index as f64);
            }
            None => self.string(key)?,
        }
        Ok(())
    }
}

/// The value as an int32 if V8 would hold it as a Smi (an integer in range, not -0).
fn as_int32(value: f64) -> Option<i32> {
    if value >= i32::MIN as f64 && value <= i32::MAX as f64 && value.fract() == 0.0 {
        if value == 0.0 && value.is_sign_negative() {
            return None;
        }
        return Some(value as i32);
    }
    None
}

fn check_unique_keys(properties: &[(String, Value)]) -> Result<(), ValueError> {
    let duplicate = if properties.len() <= 8 {
        properties
            .iter()
            .enumerate()
            .find(|(i, (key, _))| properties.iter().take(*i).any(|(other, _)| other == key))
    } else {
        let mut seen = HashSet::with_capacity(properties.len());
        properties.iter().enumerate().find(|(_, (key, _))| !seen.insert(key.as_str()))
    };
    match duplicate {
        Some((_, (key, _))) => Err(not_allowed(format!("duplicate object key {key:?}"))),
        None => Ok(()),
    }
}

/// ECMAScript `TimeClip`, which every `Date` goes through: NaN outside ±8.64e15 ms,
/// otherwise truncated towards zero (and never -0).
pub(crate) fn time_clip(ms: f64) -> f64 {
    if !ms.is_finite() || ms.abs() > 8.64e15 {
        return f64::NAN;
    }
    ms.trunc() + 0.0
}

/// The canonical array index a property key denotes (`"0"`, `"42"`, up to 2^32 - 2).
fn array_index(key: &str) -> Option<u64> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes.first() == Some(&b'0') {
        return None;
    }
    let index: u64 = key.parse().ok()?;
    (index <= MAX_ARRAY_INDEX).then_some(index)
}

fn regexp_flag_bits(flags: &str) -> Result<u32, ValueError> {
    let mut bits = 0;
    for c in flags.chars() {
        let Some(&(_, bit)) = REGEXP_FLAGS.iter().find(|(flag, _)| *flag == c) else {
            return Err(not_allowed(format!("invalid RegExp flags {flags:?}")));
        };
        if bits & bit != 0 {
            return Err(not_allowed(format!("invalid RegExp flags {flags:?}")));
        }
        bits |= bit;
    }
    if bits & (1 << 4) != 0 && bits & (1 << 8) != 0 {
        return Err(not_allowed(format!("invalid RegExp flags {flags:?}: 'u' and 'v' exclude each other")));
    }
    Ok(bits)
}

fn regexp_flags_string(bits: u32) -> String {
    REGEXP_FLAGS.iter().filter(|(_, bit)| bits & bit != 0).map(|(flag, _)| *flag).collect()
}

/// The source as V8 keeps it (and `RegExp.prototype.source` shows it): `(?:)` for the
/// empty pattern, `/` outside character classes and line terminators escaped. Escaping an
/// already escaped source changes nothing.
pub(crate) fn escape_regexp_source(source: &str) -> String {
    if source.is_empty() {
        return "(?:)".to_owned();
    }
    let is_line_terminator = |c: char| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}');
    let mut out = String::with_capacity(source.len() + 2);
    let mut in_class = false;
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                match chars.peek() {
                    // The backslash is dropped: the line terminator is escaped below.
                    Some(&next) if is_line_terminator(next) => {}
                    Some(&next) => {
                        out.push('\\');
                        out.push(next);
                        chars.next();
                    }
                    None => out.push('\\'),
                }
                continue;
            }
            '/' if !in_class => out.push('\\'),
            '[' => in_class = true,
            ']' => in_class = false,
            '\n' => {
                out.push_str("\\n");
                continue;
            }
            '\r' => {
                out.push_str("\\r");
                continue;
            }
            '\u{2028}' => {
                out.push_str("\\u2028");
                continue;
            }
            '\u{2029}' => {
                out.push_str("\\u2029");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Deserialization
// ---------------------------------------------------------------------------------------

/// Deserializes V8 `ValueSerializer` bytes (format versions 13 to 16).
///
/// Shared references (the same object reached twice) are decoded as copies; cycles, and
/// anything else [`Value`] cannot hold, give [`ValueError::Unrepresentable`]; invalid bytes
/// give [`ValueError::Malformed`] with the offset of the problem. Padding after the value is
/// allowed, any other trailing byte is malformed.
pub fn deserialize(bytes: &[u8]) -> Result<Value, ValueError> {
    // Pass 1 decodes everything but resolves no references; it also finds out which
    // objects are referenced. Only if there are any does pass 2 decode again, keeping
    // copies of just those objects.
    let mut first = Reader::new(bytes, None);
    let value = first.read_all()?;
    if !first.referenced.iter().any(|r| *r) {
        return Ok(value);
    }
    drop(value);
    let referenced = std::mem::take(&mut first.referenced);
    Reader::new(bytes, Some(referenced)).read_all()
}

/// What the object table knows about an object id.
/// A decoded object that a later reference (`^id`) copies.
struct SharedCopy {
    value: Value,
    /// Its [`weight`], charged to the copy budget at every copy.
    weight: usize,
    /// Its [`container_depth`]: a copy placed `n` containers deep nests `n + depth` deep.
    depth: usize,
}

enum Slot {
    /// Being decoded: a reference to it is a cycle.
    Pending,
    /// Decoded; the copy is kept only in pass 2 and only for referenced objects.
    Done(Option<SharedCopy>),
    /// An ArrayBuffer: where its bytes are (`len` is `usize::MAX` for a transferred or shared
    /// buffer, whose size is unknown), whether it is a plain one (on which a `Uint8Array` is
    /// representable) and whether it is resizable.
    Buffer { start: usize, len: usize, plain: bool, resizable: bool },
    /// Something `Value` cannot hold (already reported).
    Opaque,
}

/// The result of reading one item: a value, or an ArrayBuffer (which a view may follow).
enum Item {
    Value(Value),
    Buffer(usize),
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    version: u32,
    /// `read_value` frames on the stack (bounded by [`MAX_READ_RECURSION`]).
    recursion: usize,
    /// Containers being read around the current position (bounded by [`MAX_DEPTH`]).
    containers: usize,
    objects: Vec<Slot>,
    /// Pass 1: which ids are referenced. Pass 2: the same, given.
    referenced: Vec<bool>,
    resolve_references: bool,
    unrepresentable: Option<String>,
    copy_weight: usize,
}

type ReadResult<T> = Result<T, ValueError>;

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], referenced: Option<Vec<bool>>) -> Self {
        let resolve_references = referenced.is_some();
        Reader {
            data,
            pos: 0,
            version: 0,
            recursion: 0,
            containers: 0,
            objects: Vec::new(),
            referenced: referenced.unwrap_or_default(),
            resolve_references,
            unrepresentable: None,
            copy_weight: 0,
        }
    }

    fn malformed<T>(&self, offset: usize, reason: impl Into<String>) -> ReadResult<T> {
        Err(ValueError::Malformed { offset, reason: reason.into() })
    }

    /// Notes content `Value` cannot hold and carries on, so that the rest is still checked.
    fn unrepresentable(&mut self, what: impl Into<String>) {
        if self.unrepresentable.is_none() {
            self.unrepresentable = Some(what.into());
        }
    }

    fn read_all(&mut self) -> ReadResult<Value> {
        if self.data.first() != Some(&TAG_VERSION) {
            return self.malformed(0, "missing V8 serialization header (0xFF)");
        }
        self.pos = 1;
        let version = self.varint_u32()?;
        if !(MIN_READ_VERSION..=MAX_READ_VERSION).contains(&version) {
            return Err(ValueError::Unrepresentable(format!(
                "V8 serialization format version {version} is not supported (only {MIN_READ_VERSION} to {MAX_READ_VERSION})"
            )));
        }
        self.version = version;
        let value = self.read_value()?;
        while self.data.get(self.pos) == Some(&TAG_PADDING) {
            self.pos += 1;
        }
        if self.pos < self.data.len() {
            return self.malformed(self.pos, "trailing bytes after the value");
        }
        match self.unrepresentable.take() {
            Some(what) => Err(ValueError::Unrepresentable(what)),
            None => Ok(value),
        }
    }

    // --- primitives -----------------------------------------------------------------

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn byte(&mut self) -> ReadResult<u8> {
        match self.data.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => self.malformed(self.pos, "unexpected end of data"),
        }
    }

    fn raw(&mut self, len: usize) -> ReadResult<&'a [u8]> {
        let data: &'a [u8] = self.data;
        let Some(slice) = data.get(self.pos..).and_then(|rest| rest.get(..len)) else {
            return self
                .malformed(self.pos, format!("length {len} exceeds the {} bytes left", self.remaining()));
        };
        self.pos += len;
        Ok(slice)
    }

    fn varint(&mut self, max_bits: u32) -> ReadResult<u64> {
        let start = self.pos;
        let mut value: u64 = 0;
        let mut shift: u32 = 0;
        loop {
            let byte = self.byte()?;
            let bits = u64::from(byte & 0x7f);
            let available = max_bits.saturating_sub(shift);
            if available == 0 || (available < 7 && bits >> available != 0) {
                return self.malformed(start, format!("varint does not fit in {max_bits} bits"));
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    fn varint_u32(&mut self) -> ReadResult<u32> {
        Ok(self.varint(32)? as u32)
    }

    /// Lengths and offsets of ArrayBuffers and views: 32-bit up to version 15, `size_t` from
    /// version 16.
    fn varint_size(&mut self) -> ReadResult<u64> {
        if self.version >= 16 {
            self.varint(64)
        } else {
            Ok(u64::from(self.varint_u32()?))
        }
    }

    fn double(&mut self) -> ReadResult<f64> {
        let bytes = self.raw(8)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        Ok(f64::from_le_bytes(array))
    }

    /// The next tag, after any padding, without consuming it.
    fn peek_tag(&self) -> Option<u8> {
        self.data.get(self.pos..)?.iter().copied().find(|&b| b != TAG_PADDING)
    }

    fn read_tag(&mut self) -> ReadResult<u8> {
        loop {
            let tag = self.byte()?;
            if tag != TAG_PADDING {
                return Ok(tag);
            }
        }
    }

    /// Consumes the tag `peek_tag` saw.
    fn consume_tag(&mut self) {
        while self.data.get(self.pos) == Some(&TAG_PADDING) {
            self.pos += 1;
        }
        self.pos += 1;
    }

    // --- object table ---------------------------------------------------------------

    fn new_id(&mut self, slot: Slot) -> usize {
        self.objects.push(slot);
        if !self.resolve_references {
            self.referenced.push(false);
        }
        self.objects.len() - 1
    }

    fn is_referenced(&self, id: usize) -> bool {
        self.resolve_references && self.referenced.get(id).copied().unwrap_or(false)
    }

    /// Records a decoded object, keeping a copy if pass 2 will need it.
    fn finish_object(&mut self, id: usize, value: &Value) -> ReadResult<()> {
        let copy = if self.is_referenced(id) {
            let weight = weight(value);
            self.add_copy_weight(weight)?;
            Some(SharedCopy { value: value.clone(), weight, depth: container_depth(value) })
        } else {
            None
        };
        // `id` came from `new_id`, so the slot exists.
        if let Some(slot) = self.objects.get_mut(id) {
            *slot = Slot::Done(copy);
        }
        Ok(())
    }

    fn add_copy_weight(&mut self, weight: usize) -> ReadResult<()> {
        self.copy_weight = self.copy_weight.saturating_add(weight);
        if self.copy_weight > MAX_SHARED_COPY_WEIGHT {
            return Err(ValueError::Unrepresentable("shared references expand to too large a value".into()));
        }
        Ok(())
    }

    // --- values ---------------------------------------------------------------------

    /// V8's `ReadObject`: one item, and the view that may follow an ArrayBuffer.
    fn read_value(&mut self) -> ReadResult<Value> {
        self.recursion += 1;
        if self.recursion > MAX_READ_RECURSION {
            return Err(too_deep());
        }
        let value = match self.read_item()? {
            Item::Value(value) => value,
            Item::Buffer(buffer_id) => {
                if self.peek_tag() == Some(TAG_ARRAY_BUFFER_VIEW) {
                    self.consume_tag();
                    self.read_view(buffer_id)?
                } else {
                    self.unrepresentable("an ArrayBuffer (only Uint8Array views are supported)");
                    Value::Undefined
                }
            }
        };
        self.recursion -= 1;
        Ok(value)
    }

    /// Starts reading a container (array, object, Map, Set).
    fn enter_container(&mut self) -> ReadResult<()> {
        self.containers += 1;
        if self.containers > MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(())
    }

    fn leave_container(&mut self) {
        self.containers -= 1;
    }

    /// V8's `ReadObjectInternal`.
    fn read_item(&mut self) -> ReadResult<Item> {
        let tag_offset = self.pos;
        let tag = self.read_tag()?;
        let value = match tag {
            TAG_VERIFY_OBJECT_COUNT => {
                self.varint_u32()?;
                self.read_value()?
            }
            TAG_UNDEFINED => Value::Undefined,
            TAG_NULL => Value::Null,
            TAG_TRUE => Value::Bool(true),
            TAG_FALSE => Value::Bool(false),
            TAG_INT32 => {
                let raw = self.varint_u32()?;
                Value::Number(f64::from(((raw >> 1) as i32) ^ -((raw & 1) as i32)))
            }
            TAG_UINT32 => Value::Number(f64::from(self.varint_u32()?)),
            TAG_DOUBLE => Value::Number(self.double()?),
            TAG_BIGINT => Value::BigInt(self.bigint_contents()?),
            TAG_UTF8_STRING | TAG_ONE_BYTE_STRING | TAG_TWO_BYTE_STRING => {
                Value::String(self.string_contents(tag)?)
            }
            TAG_OBJECT_REFERENCE => return self.object_reference(),
            TAG_BEGIN_JS_OBJECT => self.read_object()?,
            TAG_BEGIN_SPARSE_JS_ARRAY => self.read_sparse_array()?,
            TAG_BEGIN_DENSE_JS_ARRAY => self.read_dense_array()?,
            TAG_DATE => {
                let ms = self.double()?;
                let value = Value::Date(time_clip(ms));
                let id = self.new_id(Slot::Pending);
                self.finish_object(id, &value)?;
                value
            }
            TAG_TRUE_OBJECT | TAG_FALSE_OBJECT | TAG_NUMBER_OBJECT | TAG_BIGINT_OBJECT
            | TAG_STRING_OBJECT => {
                self.new_id(Slot::Opaque);
                match tag {
                    TAG_NUMBER_OBJECT => {
                        self.double()?;
                    }
                    TAG_BIGINT_OBJECT => {
                        self.bigint_contents()?;
                    }
                    TAG_STRING_OBJECT => {
                        self.read_string()?;
                    }
                    _ => {}
                }
                self.unrepresentable("a Boolean, Number, BigInt or String wrapper object");
                Value::Undefined
            }
            TAG_REGEXP => self.read_regexp()?,
            TAG_BEGIN_JS_MAP => self.read_map()?,
            TAG_BEGIN_JS_SET => self.read_set()?,
            TAG_ARRAY_BUFFER | TAG_IMMUTABLE_ARRAY_BUFFER | TAG_RESIZABLE_ARRAY_BUFFER => {
                let id = self.new_id(Slot::Opaque);
                let len = self.varint_size()?;
                let max_len = if tag == TAG_RESIZABLE_ARRAY_BUFFER { self.varint_size()? } else { len };
                if len > max_len {
                    return self.malformed(tag_offset, "ArrayBuffer longer than its maximum length");
                }
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                let start = self.pos;
                self.raw(len)?;
                if let Some(slot) = self.objects.get_mut(id) {
                    *slot = Slot::Buffer {
                        start,
                        len,
                        plain: tag == TAG_ARRAY_BUFFER,
                        resizable: tag == TAG_RESIZABLE_ARRAY_BUFFER,
                    };
                }
                return Ok(Item::Buffer(id));
            }
            TAG_ARRAY_BUFFER_TRANSFER | TAG_SHARED_ARRAY_BUFFER => {
                // Only meaningful with the transfer list / SharedArrayBuffer registry of a
                // live isolate; the buffer's size is unknown here.
                let id =
                    self.new_id(Slot::Buffer { start: 0, len: usize::MAX, plain: false, resizable: false });
                self.varint_u32()?;
                self.unrepresentable("a transferred or shared ArrayBuffer");
                return Ok(Item::Buffer(id));
            }
            TAG_SHARED_OBJECT if self.version >= 15 => {
                self.varint_u32()?;
                self.unrepresentable("a shared object");
                Value::Undefined
            }
            TAG_WASM_MODULE_TRANSFER => {
                self.varint_u32()?;
                self.new_id(Slot::Opaque);
                self.unrepresentable("a WebAssembly module");
                Value::Undefined
            }
            TAG_WASM_MEMORY_TRANSFER => {
                self.new_id(Slot::Opaque);
                self.varint_u32()?; // maximum pages, zigzag
                if self.byte()? > 1 {
                    return self.malformed(self.pos - 1, "invalid WebAssembly.Memory flag");
                }
                self.read_value()?;
                self.unrepresentable("a WebAssembly.Memory");
                Value::Undefined
            }
            TAG_ERROR => self.read_error()?,
            TAG_HOST_OBJECT => {
                // The embedder's own format follows: nothing after it can be read.
                return Err(ValueError::Unrepresentable("a host object".into()));
            }
            other => return self.malformed(tag_offset, format!("unexpected tag 0x{other:02x}")),
        };
        Ok(Item::Value(value))
    }

    fn object_reference(&mut self) -> ReadResult<Item> {
        let offset = self.pos;
        let id = self.varint_u32()? as usize;
        let Some(slot) = self.objects.get(id) else {
            return self.malformed(offset, format!("reference to unknown object {id}"));
        };
        match slot {
            Slot::Pending => {
                self.unrepresentable("a cyclic reference");
                Ok(Item::Value(Value::Undefined))
            }
            Slot::Buffer { .. } => Ok(Item::Buffer(id)),
            Slot::Opaque => Ok(Item::Value(Value::Undefined)),
            Slot::Done(copy) => {
                if !self.resolve_references {
                    if let Some(referenced) = self.referenced.get_mut(id) {
                        *referenced = true;
                    }
                    return Ok(Item::Value(Value::Undefined));
                }
                match copy {
                    Some(copy) => {
                        // The copy nests as deep as where it is placed plus its own depth.
                        if self.containers + copy.depth > MAX_DEPTH {
                            return Err(too_deep());
                        }
                        let (value, weight) = (copy.value.clone(), copy.weight);
                        self.add_copy_weight(weight)?;
                        Ok(Item::Value(value))
                    }
                    // Pass 1 saw the same bytes, so this cannot happen; be safe anyway.
                    None => Err(ValueError::Unrepresentable("an unexpected object reference".into())),
                }
            }
        }
    }

    fn bigint_contents(&mut self) -> ReadResult<KvBigInt> {
        let bitfield = self.varint_u32()?;
        let negative = bitfield & 1 == 1;
        let len = (bitfield >> 1) as usize;
        let digits = self.raw(len)?;
        let magnitude: Vec<u8> = digits.iter().rev().copied().collect();
        Ok(KvBigInt::from_sign_magnitude(negative, &magnitude))
    }

    fn string_contents(&mut self, tag: u8) -> ReadResult<String> {
        let offset = self.pos;
        let len = self.varint_u32()? as usize;
        let bytes = self.raw(len)?;
        match tag {
            TAG_ONE_BYTE_STRING => Ok(bytes.iter().map(|&b| char::from(b)).collect()),
            // V8 replaces invalid UTF-8 with U+FFFD, and so do we.
            TAG_UTF8_STRING => Ok(String::from_utf8_lossy(bytes).into_owned()),
            _ => {
                if !len.is_multiple_of(2) {
                    return self.malformed(offset, "two-byte string with an odd byte length");
                }
                let units = bytes.as_chunks::<2>().0.iter().map(|pair| u16::from_le_bytes(*pair));
                let mut out = String::with_capacity(len / 2);
                let mut lone_surrogate = false;
                for c in char::decode_utf16(units) {
                    out.push(c.unwrap_or_else(|_| {
                        lone_surrogate = true;
                        char::REPLACEMENT_CHARACTER
                    }));
                }
                if lone_surrogate {
                    self.unrepresentable("a string with an unpaired UTF-16 surrogate");
                }
                Ok(out)
            }
        }
    }

    /// V8's `ReadString`: any item that is a string.
    fn read_string(&mut self) -> ReadResult<String> {
        let offset = self.pos;
        match self.read_value()? {
            Value::String(s) => Ok(s),
            _ => self.malformed(offset, "expected a string"),
        }
    }

    /// An object key: a string, or a number (V8 writes array indices as numbers).
    fn read_key(&mut self) -> ReadResult<String> {
        let offset = self.pos;
        match self.read_value()? {
            Value::String(s) => Ok(s),
            Value::Number(n) => Ok(crate::inspect::js_number_to_string(n)),
            _ => self.malformed(offset, "invalid property key"),
        }
    }

    /// Key/value pairs up to `end_tag`, then the property count.
    fn read_properties(&mut self, end_tag: u8) -> ReadResult<Vec<(String, Value)>> {
        let mut properties = Vec::new();
        let mut seen = HashSet::new();
        loop {
            match self.peek_tag() {
                None => return self.malformed(self.data.len(), "unexpected end of data"),
                Some(tag) if tag == end_tag => {
                    self.consume_tag();
                    break;
                }
                Some(_) => {}
            }
            let key_offset = self.pos;
            let key = self.read_key()?;
            if !seen.insert(key.clone()) {
                return self.malformed(key_offset, format!("duplicate property {key:?}"));
            }
            let value = self.read_value()?;
            properties.push((key, value));
        }
        let offset = self.pos;
        let count = self.varint_u32()?;
        if count as usize != properties.len() {
            return self
                .malformed(offset, format!("property count {count} but {} properties", properties.len()));
        }
        Ok(properties)
    }

    fn read_object(&mut self) -> ReadResult<Value> {
        let id = self.new_id(Slot::Pending);
        self.enter_container()?;
        let value = Value::Object(self.read_properties(TAG_END_JS_OBJECT)?);
        self.leave_container();
        self.finish_object(id, &value)?;
        Ok(value)
    }

    /// The property count and length that end an array; the length must match the start.
    fn array_end(&mut self, length: u32) -> ReadResult<()> {
        let offset = self.pos;
        let expected = self.varint_u32()?;
        if expected != length {
            return self
                .malformed(offset, format!("array length {length} at the start but {expected} at the end"));
        }
        Ok(())
    }

    fn read_dense_array(&mut self) -> ReadResult<Value> {
        let offset = self.pos;
        let length = self.varint_u32()?;
        if length as usize > self.remaining() {
            return self.malformed(offset, format!("array length {length} exceeds the bytes left"));
        }
        let id = self.new_id(Slot::Pending);
        self.enter_container()?;
        let mut items = Vec::with_capacity(length as usize);
        for _ in 0..length {
            if self.peek_tag() == Some(TAG_THE_HOLE) {
                self.consume_tag();
                self.unrepresentable("an array with holes");
                items.push(Value::Undefined);
            } else {
                items.push(self.read_value()?);
            }
        }
        let properties = self.read_properties(TAG_END_DENSE_JS_ARRAY)?;
        self.leave_container();
        if !properties.is_empty() {
            self.unrepresentable("an array with named properties");
        }
        self.array_end(length)?;
        let value = Value::Array(items);
        self.finish_object(id, &value)?;
        Ok(value)
    }

    fn read_sparse_array(&mut self) -> ReadResult<Value> {
        let length = self.varint_u32()?;
        let id = self.new_id(Slot::Pending);
        self.enter_container()?;
        let properties = self.read_properties(TAG_END_SPARSE_JS_ARRAY)?;
        self.leave_container();
        self.array_end(length)?;
        // Representable only if the properties are exactly the indices 0..length.
        let mut elements: Vec<(u64, Value)> = Vec::with_capacity(properties.len());
        let mut named = false;
        for (key, value) in properties {
            match array_index(&key) {
                Some(index) if index < u64::from(length) => elements.push((index, value)),
                _ => named = true,
            }
        }
        let value = if named || elements.len() != length as usize {
            self.unrepresentable("a sparse array (with holes or named properties)");
            Value::Undefined
        } else {
            // Keys are unique, all below `length`, and there are `length` of them.
            elements.sort_by_key(|(index, _)| *index);
            Value::Array(elements.into_iter().map(|(_, value)| value).collect())
        };
        self.finish_object(id, &value)?;
        Ok(value)
    }

    fn read_regexp(&mut self) -> ReadResult<Value> {
        let id = self.new_id(Slot::Pending);
        let source = self.read_string()?;
        let offset = self.pos;
        let bits = self.varint_u32()?;
        if bits >> REGEXP_FLAG_COUNT != 0 || bits & REGEXP_FLAG_LINEAR != 0 {
            return self.malformed(offset, format!("invalid RegExp flags 0x{bits:x}"));
        }
        if bits & (1 << 4) != 0 && bits & (1 << 8) != 0 {
            return self.malformed(offset, "RegExp flags 'u' and 'v' together");
        }
        let value = Value::RegExp { source, flags: regexp_flags_string(bits) };
        self.finish_object(id, &value)?;
        Ok(value)
    }

    fn read_map(&mut self) -> ReadResult<Value> {
        let id = self.new_id(Slot::Pending);
        self.enter_container()?;
        let mut entries = Vec::new();
        loop {
            match self.peek_tag() {
                None => return self.malformed(self.data.len(), "unexpected end of data"),
                Some(TAG_END_JS_MAP) => {
                    self.consume_tag();
                    self.leave_container();
                    break;
                }
                Some(_) => {}
            }
            let key = self.read_value()?;
            let value = self.read_value()?;
            entries.push((key, value));
        }
        let offset = self.pos;
        let count = self.varint_u32()?;
        if count as usize != entries.len() * 2 {
            return self
                .malformed(offset, format!("Map count {count} but {} keys and values", entries.len() * 2));
        }
        let value = Value::Map(entries);
        self.finish_object(id, &value)?;
        Ok(value)
    }

    fn read_set(&mut self) -> ReadResult<Value> {
        let id = self.new_id(Slot::Pending);
        self.enter_container()?;
        let mut items = Vec::new();
        loop {
            match self.peek_tag() {
                None => return self.malformed(self.data.len(), "unexpected end of data"),
                Some(TAG_END_JS_SET) => {
                    self.consume_tag();
                    self.leave_container();
                    break;
                }
                Some(_) => {}
            }
            items.push(self.read_value()?);
        }
        let offset = self.pos;
        let count = self.varint_u32()?;
        if count as usize != items.len() {
            return self.malformed(offset, format!("Set count {count} but {} elements", items.len()));
        }
        let value = Value::Set(items);
        self.finish_object(id, &value)?;
        Ok(value)
    }

    /// An ArrayBufferView on the buffer `buffer_id` just read (or referenced).
    fn read_view(&mut self, buffer_id: usize) -> ReadResult<Value> {
        let offset = self.pos;
        let subtag = self.varint_u32()?;
        let byte_offset = self.varint_size()?;
        let byte_length = self.varint_size()?;
        let flags = if self.version >= 14 { self.varint_u32()? } else { 0 };
        let (buffer_start, buffer_len, plain, resizable) = match self.objects.get(buffer_id) {
            Some(&Slot::Buffer { start, len, plain, resizable }) => (start, len as u64, plain, resizable),
            // Not reachable: only buffers are read before a view.
            _ => return Err(ValueError::Unrepresentable("an ArrayBufferView on an unknown buffer".into())),
        };
        if byte_offset > buffer_len || byte_length > buffer_len - byte_offset {
            return self.malformed(offset, "ArrayBufferView outside its buffer");
        }
        let element_size = match u8::try_from(subtag).unwrap_or(0) {
            b'b' | b'B' | b'C' | b'?' => 1,
            b'w' | b'W' | b'h' => 2,
            b'd' | b'D' | b'f' => 4,
            b'F' | b'q' | b'Q' => 8,
            _ => return self.malformed(offset, format!("unknown ArrayBufferView type 0x{subtag:x}")),
        };
        if !byte_offset.is_multiple_of(element_size) || !byte_length.is_multiple_of(element_size) {
            return self.malformed(offset, "misaligned typed array");
        }
        let length_tracking = flags & 1 != 0;
        let backed_by_resizable = flags & 2 != 0;
        if ((length_tracking || backed_by_resizable) && !resizable) || (resizable && !backed_by_resizable) {
            return self.malformed(offset, "ArrayBufferView flags do not match its buffer");
        }
        let id = self.new_id(Slot::Opaque);
        if subtag != u32::from(VIEW_UINT8_ARRAY) || !plain || flags != 0 {
            self.unrepresentable(
                "a typed array other than a Uint8Array on a plain ArrayBuffer, or a DataView",
            );
            return Ok(Value::Undefined);
        }
        let start = buffer_start + byte_offset as usize;
        let Some(bytes) = self.data.get(start..).and_then(|rest| rest.get(..byte_length as usize)) else {
            return self.malformed(offset, "ArrayBufferView outside its buffer");
        };
        let value = Value::Bytes(bytes.to_vec());
        self.finish_object(id, &value)?;
        Ok(value)
    }

    fn read_error(&mut self) -> ReadResult<Value> {
        self.new_id(Slot::Opaque);
        loop {
            let offset = self.pos;
            match self.varint_u32()? {
                // Prototype tags: EvalError, RangeError, ReferenceError, SyntaxError,
                // TypeError, URIError.
                tag if [b'E', b'R', b'F', b'S', b'T', b'U'].map(u32::from).contains(&tag) => {}
                tag if tag == u32::from(b'm') || tag == u32::from(b's') => {
                    self.read_string()?;
                }
                tag if tag == u32::from(b'c') => {
                    self.read_value()?;
                }
                tag if tag == u32::from(b'.') => break,
                tag => return self.malformed(offset, format!("unknown Error field 0x{tag:x}")),
            }
        }
        self.unrepresentable("an Error object");
        Ok(Value::Undefined)
    }
}

fn too_deep() -> ValueError {
    ValueError::Unrepresentable(format!("values nested deeper than {MAX_DEPTH} levels"))
}

/// How many containers (arrays, objects, Maps, Sets) nest in `value`, counted the way
/// [`MAX_DEPTH`] counts them.
fn container_depth(value: &Value) -> usize {
    let deepest = |items: &mut dyn Iterator<Item = &Value>| items.map(container_depth).max().unwrap_or(0);
    match value {
        Value::Array(items) | Value::Set(items) => 1 + deepest(&mut items.iter()),
        Value::Object(properties) => 1 + deepest(&mut properties.iter().map(|(_, v)| v)),
        Value::Map(entries) => 1 + deepest(&mut entries.iter().flat_map(|(k, v)| [k, v])),
        _ => 0,
    }
}

/// The size of a value for the shared-reference copy budget: one per node plus the bytes
/// of strings and byte arrays.
fn weight(value: &Value) -> usize {
    match value {
        Value::String(s) => 1 + s.len(),
        Value::Bytes(b) => 1 + b.len(),
        Value::RegExp { source, flags } => 1 + source.len() + flags.len(),
        Value::BigInt(n) => 1 + n.magnitude_be().len(),
        Value::Array(items) | Value::Set(items) => {
            items.iter().fold(1usize, |w, v| w.saturating_add(weight(v)))
        }
        Value::Object(properties) => {
            properties.iter().fold(1usize, |w, (k, v)| w.saturating_add(k.len()).saturating_add(weight(v)))
        }
        Value::Map(entries) => {
            entries.iter().fold(1usize, |w, (k, v)| w.saturating_add(weight(k)).saturating_add(weight(v)))
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::js_number_to_string;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
    }

    #[test]
    fn number_to_string_matches_javascript() {
        for (n, s) in [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (2147483648.0, "2147483648"),
            (4294967294.0, "4294967294"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (0.000001, "0.000001"),
            (0.0000001, "1e-7"),
            (1.25e-7, "1.25e-7"),
            (0.1, "0.1"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
        ] {
            assert_eq!(js_number_to_string(n), s, "{n:?}");
        }
    }

    #[test]
    fn array_indices() {
        assert_eq!(array_index("0"), Some(0));
        assert_eq!(array_index("4294967294"), Some(4294967294));
        for not_index in ["", "01", "-1", "1.5", "4294967295", "99999999999", "a", " 1", "+1"] {
            assert_eq!(array_index(not_index), None, "{not_index}");
        }
    }

    #[test]
    fn regexp_source_escaping_matches_v8() {
        for (source, escaped) in [
            ("", "(?:)"),
            ("a/b", "a\\/b"),
            ("a\\/b", "a\\/b"),
            ("[/]", "[/]"),
            ("a\nb", "a\\nb"),
            ("a\r\u{2028}b\u{2029}", "a\\r\\u2028b\\u2029"),
            ("a\\\nb", "a\\nb"),
            ("\\", "\\"),
            ("[a]/", "[a]\\/"),
        ] {
            assert_eq!(escape_regexp_source(source), escaped, "{source:?}");
            assert_eq!(escape_regexp_source(escaped), escaped, "idempotent for {escaped:?}");
        }
    }

    #[test]
    fn varints_are_bounded() {
        // 5-byte u32 varint with the top bits set.
        assert!(deserialize(&hex("ff 0f 55 ff ff ff ff 0f")).is_ok());
        assert!(matches!(
            deserialize(&hex("ff 0f 55 ff ff ff ff 1f")),
            Err(ValueError::Malformed { offset: 3, .. })
        ));
        assert!(matches!(deserialize(&hex("ff 0f 55 ff ff ff ff ff 01")), Err(ValueError::Malformed { .. })));
        assert!(matches!(deserialize(&hex("ff 0f 55 80")), Err(ValueError::Malformed { offset: 4, .. })));
    }

    #[test]
    fn time_clip_is_ecmascript() {
        assert_eq!(time_clip(1.7), 1.0);
        assert_eq!(time_clip(-1.7), -1.0);
        assert!(time_clip(-0.5).is_sign_positive());
        assert!(time_clip(8.64e15 + 1.0).is_nan());
        assert_eq!(time_clip(-8.64e15), -8.64e15);
        assert!(time_clip(f64::INFINITY).is_nan());
    }

    /// `[[...[1]...]]` with `levels` arrays, as V8 writes it (version 15).
    fn nested_arrays(levels: usize) -> Vec<u8> {
        let mut bytes = vec![0xFF, 0x0F];
        bytes.extend(std::iter::repeat_n([TAG_BEGIN_DENSE_JS_ARRAY, 1], levels).flatten());
        bytes.extend_from_slice(&[TAG_INT32, 2]);
        bytes.extend(std::iter::repeat_n([TAG_END_DENSE_JS_ARRAY, 0, 1], levels).flatten());
        bytes
    }

    #[test]
    fn writer_and_reader_agree_on_the_depth_limit() {
        let mut value = Value::Number(1.0);
        for _ in 0..MAX_DEPTH {
            value = Value::Array(vec![value]);
        }
        let bytes = serialize(&value).expect("MAX_DEPTH containers are written");
        assert_eq!(bytes, nested_arrays(MAX_DEPTH));
        assert_eq!(deserialize(&bytes).expect("and read"), value);
        assert!(matches!(serialize(&Value::Array(vec![value])), Err(ValueError::NotAllowed(_))));
        assert!(matches!(deserialize(&nested_arrays(MAX_DEPTH + 1)), Err(ValueError::Unrepresentable(_))));
    }

    #[test]
    fn copies_of_shared_objects_count_their_depth() {
        // `[[[]], [^2]]`: the copy of object 2 (`[]`) lands 2 containers deep plus its own 1.
        let shared = hex("FF 0F 41 02 41 01 41 00 24 00 00 24 00 01 41 01 5E 02 24 00 01 24 00 02");
        let expected = Value::Array(vec![
            Value::Array(vec![Value::Array(vec![])]),
            Value::Array(vec![Value::Array(vec![])]),
        ]);
        assert_eq!(deserialize(&shared).expect("a shallow shared reference"), expected);
        // The same shape with the shared array MAX_DEPTH - 1 deep inside the outer one: the
        // original fits, the copy (one level deeper) does not.
        let mut deep = Value::Array(vec![]);
        for _ in 0..MAX_DEPTH - 2 {
            deep = Value::Array(vec![deep]);
        }
        let placeholder = Value::Array(vec![Value::String("@@".into())]);
        let bytes = serialize(&Value::Array(vec![deep, placeholder])).expect("MAX_DEPTH containers");
        let at = bytes.windows(3).position(|w| w == b"\"\x02@").expect("placeholder");
        let with_reference = [&bytes[..at], &[TAG_OBJECT_REFERENCE, 1], &bytes[at + 4..]].concat();
        assert!(matches!(deserialize(&with_reference), Err(ValueError::Unrepresentable(_))));
    }

    #[test]
    fn chains_that_are_not_containers_are_bounded() {
        // Object-count prefixes (`?`) do not nest containers but do recurse.
        let mut bytes = vec![0xFF, 0x0F];
        bytes.extend(std::iter::repeat_n([TAG_VERIFY_OBJECT_COUNT, 0], 100_000).flatten());
        bytes.push(TAG_NULL);
        assert!(matches!(deserialize(&bytes), Err(ValueError::Unrepresentable(_))));
    }
}
