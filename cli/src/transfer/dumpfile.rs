//! The dump format (described byte by byte in `cli/FORMAT.md`, section "dump format"): one
//! JSON object per line — a header, the entries in key order, the queued messages in
//! delivery order, and an end line with the counts and a CRC-32 of everything before it,
//! so that a truncated or altered dump is detected before anything is loaded.

use super::base64;
use super::number::{parse_number, write_number};
use super::show::show;
use serde_json::{Map, Value as Json};
use stampkv::{BulkEntry, Key, KeyPart, KvBigInt, KvValue, QueuedMessage, Versionstamp};
use std::fmt;
use std::io::{self, BufRead, Read, Write};

/// The format's name, the member of the header line.
pub const FORMAT_NAME: &str = "stampkv-dump";
/// The only version of the format.
pub const FORMAT_VERSION: u64 = 1;
/// The longest line a reader accepts, newline included.
pub const MAX_LINE_BYTES: u64 = 256 << 20;

/// What a dump holds, from its header line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Entries carry their versionstamps.
    pub versionstamps: bool,
    /// Entries carry their expiry times.
    pub expiry: bool,
    /// Queued messages are included.
    pub queue: bool,
    /// The database's last versionstamp when it was dumped (with `versionstamps` only).
    pub last_versionstamp: Option<Versionstamp>,
}

/// An entry read from a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpEntry {
    /// The key.
    pub key: Key,
    /// The stored value.
    pub value: KvValue,
    /// Its versionstamp, if the dump keeps them.
    pub versionstamp: Option<Versionstamp>,
    /// Its expiry time in milliseconds since the Unix epoch, if it expires and the dump
    /// keeps expiry times.
    pub expires_at_ms: Option<u64>,
}

/// A record read from a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// An entry.
    Entry(DumpEntry),
    /// A queued message.
    Message(QueuedMessage),
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// Writes a dump line by line.
pub struct DumpWriter<W: Write> {
    out: W,
    header: Header,
    crc: crc32fast::Hasher,
    line: Vec<u8>,
    entries: u64,
    messages: u64,
}

/// `fmt::Write` into a byte buffer (for number formatting).
struct VecText<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for VecText<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.0.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

/// Appends `bytes` as lowercase hex.
fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        for nibble in [byte >> 4, byte & 15] {
            out.push(DIGITS.get(usize::from(nibble)).copied().unwrap_or(b'0'));
        }
    }
}

fn json_string(out: &mut Vec<u8>, text: &str) {
    // Serializing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

fn write_key(out: &mut Vec<u8>, key: &Key) {
    out.push(b'[');
    for (i, part) in key.parts().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match part {
            KeyPart::Bytes(bytes) => {
                out.extend_from_slice(b"[\"bytes\",\"");
                base64::encode_into(out, bytes);
                out.extend_from_slice(b"\"]");
            }
            KeyPart::String(text) => {
                out.extend_from_slice(b"[\"string\",");
                json_string(out, text);
                out.push(b']');
            }
            KeyPart::BigInt(n) => {
                // Writing to a Vec cannot fail.
                let _ = write!(out, "[\"bigint\",\"{n}\"]");
            }
            KeyPart::Number(n) => {
                out.extend_from_slice(b"[\"number\",\"");
                let _ = write_number(&mut VecText(out), *n);
                out.extend_from_slice(b"\"]");
            }
            KeyPart::Bool(b) => {
                out.extend_from_slice(if *b { b"[\"bool\",true]" } else { b"[\"bool\",false]" })
            }
        }
    }
    out.push(b']');
}

fn write_value(out: &mut Vec<u8>, value: &KvValue) {
    match value {
        KvValue::V8(bytes) => {
            out.extend_from_slice(b"{\"v8\":\"");
            base64::encode_into(out, bytes);
            out.extend_from_slice(b"\"}");
        }
        KvValue::Bytes(bytes) => {
            out.extend_from_slice(b"{\"bytes\":\"");
            base64::encode_into(out, bytes);
            out.extend_from_slice(b"\"}");
        }
        KvValue::U64(n) => {
            // Writing to a Vec cannot fail.
            let _ = write!(out, "{{\"u64\":\"{n}\"}}");
        }
    }
    if let Some(text) = show(value) {
        out.extend_from_slice(b",\"show\":");
        json_string(out, &text);
    }
}

impl<W: Write> DumpWriter<W> {
    /// Starts a dump: writes its header line.
    pub fn new(out: W, header: Header) -> io::Result<DumpWriter<W>> {
        let mut writer = DumpWriter {
            out,
            header,
            crc: crc32fast::Hasher::new(),
            line: Vec::with_capacity(4096),
            entries: 0,
            messages: 0,
        };
        let mut line = format!(
            "{{\"{FORMAT_NAME}\":{{\"version\":{FORMAT_VERSION},\"versionstamps\":{},\"expiry\":{},\"queue\":{}",
            header.versionstamps, header.expiry, header.queue
        );
        if let (true, Some(last)) = (header.versionstamps, header.last_versionstamp) {
            line.push_str(&format!(",\"lastVersionstamp\":\"{last}\""));
        }
        line.push_str("}}");
        writer.line.extend_from_slice(line.as_bytes());
        writer.emit()?;
        Ok(writer)
    }

    /// Writes the line being built, and a newline.
    fn emit(&mut self) -> io::Result<()> {
        self.line.push(b'\n');
        self.crc.update(&self.line);
        self.out.write_all(&self.line)?;
        self.line.clear();
        Ok(())
    }

    /// Writes an entry (without its versionstamp or expiry time if the header says so).
    pub fn entry(&mut self, entry: &BulkEntry) -> io::Result<()> {
        self.line.extend_from_slice(b"{\"entry\":{\"key\":");
        write_key(&mut self.line, &entry.key);
        self.line.extend_from_slice(b",\"value\":");
        write_value(&mut self.line, &entry.value);
        if self.header.versionstamps {
            self.line.extend_from_slice(b",\"versionstamp\":\"");
            push_hex(&mut self.line, &entry.versionstamp.0);
            self.line.push(b'"');
        }
        if let (true, Some(at)) = (self.header.expiry, entry.expires_at_ms) {
            // Writing to a Vec cannot fail.
            let _ = write!(self.line, ",\"expireAt\":{at}");
        }
        self.line.extend_from_slice(b"}}");
        self.entries += 1;
        self.emit()
    }

    /// Writes a queued message (after every entry).
    pub fn message(&mut self, message: &QueuedMessage) -> io::Result<()> {
        let backoff: Vec<String> = message.backoff_ms.iter().map(u32::to_string).collect();
        self.line.extend_from_slice(
            format!(
                "{{\"message\":{{\"deadline\":{},\"attempts\":{},\"backoff\":[{}],\"keysIfUndelivered\":[",
                message.deadline_ms,
                message.attempts,
                backoff.join(",")
            )
            .as_bytes(),
        );
        for (i, key) in message.keys_if_undelivered.iter().enumerate() {
            if i > 0 {
                self.line.push(b',');
            }
            write_key(&mut self.line, key);
        }
        self.line.extend_from_slice(b"],\"value\":");
        write_value(&mut self.line, &message.value);
        self.line.extend_from_slice(b"}}");
        self.messages += 1;
        self.emit()
    }

    /// Entries written so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Messages written so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Writes the end line and flushes; returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        let crc = self.crc.clone().finalize();
        let line = format!(
            "{{\"end\":{{\"entries\":{},\"messages\":{},\"crc32\":\"{crc:08x}\"}}}}\n",
            self.entries, self.messages
        );
        self.out.write_all(line.as_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Why a dump cannot be read: what is wrong, and on which line (0: reading failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    /// The line (1-based).
    pub line: u64,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Reads a dump record by record, checking everything: an error names the line.
pub struct DumpReader<R: BufRead> {
    input: R,
    header: Header,
    crc: crc32fast::Hasher,
    buf: Vec<u8>,
    line: u64,
    bytes_read: u64,
    entries: u64,
    messages: u64,
    ended: bool,
}

/// A JSON object's members, each to be taken once; members left over are an error.
struct Members {
    what: &'static str,
    map: Map<String, Json>,
}

impl Members {
    fn new(what: &'static str, json: Json) -> Result<Members, String> {
        match json {
            Json::Object(map) => Ok(Members { what, map }),
            _ => Err(format!("{what} is not a JSON object")),
        }
    }

    fn take(&mut self, name: &str) -> Option<Json> {
        self.map.remove(name)
    }

    fn required(&mut self, name: &str) -> Result<Json, String> {
        self.take(name).ok_or_else(|| format!("{} has no \"{name}\"", self.what))
    }

    fn done(self) -> Result<(), String> {
        match self.map.keys().next() {
            Some(name) => Err(format!("{} has an unknown member \"{name}\"", self.what)),
            None => Ok(()),
        }
    }
}

fn as_bool(json: Json, what: &str) -> Result<bool, String> {
    json.as_bool().ok_or_else(|| format!("{what} must be true or false"))
}

fn as_u64(json: &Json, what: &str) -> Result<u64, String> {
    json.as_u64().ok_or_else(|| format!("{what} must be an integer from 0 to 2^64-1"))
}

fn as_u32(json: &Json, what: &str) -> Result<u32, String> {
    as_u64(json, what)?.try_into().map_err(|_| format!("{what} must be an integer from 0 to 2^32-1"))
}

fn as_str<'a>(json: &'a Json, what: &str) -> Result<&'a str, String> {
    json.as_str().ok_or_else(|| format!("{what} must be a string"))
}

fn as_base64(json: &Json, what: &str) -> Result<Vec<u8>, String> {
    base64::decode(as_str(json, what)?).ok_or_else(|| format!("{what} is not valid padded base64"))
}

fn as_versionstamp(json: &Json, what: &str) -> Result<Versionstamp, String> {
    let text = as_str(json, what)?;
    let lowercase = text.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    match text.parse::<Versionstamp>() {
        Ok(v) if lowercase => Ok(v),
        _ => Err(format!("{what} must be 20 lowercase hex digits")),
    }
}

fn parse_key_part(json: &Json) -> Result<KeyPart, String> {
    let Some([kind, data]) = json.as_array().map(Vec::as_slice) else {
        return Err("a key part must be a [kind, data] pair".into());
    };
    let kind = as_str(kind, "a key part's kind")?;
    match kind {
        "string" => Ok(KeyPart::String(as_str(data, "a string key part")?.to_owned())),
        "bytes" => Ok(KeyPart::Bytes(as_base64(data, "a bytes key part")?)),
        "bigint" => {
            let text = as_str(data, "a bigint key part")?;
            let n: KvBigInt =
                text.parse().map_err(|_| format!("bigint key part {text:?} is not an integer"))?;
            Ok(KeyPart::BigInt(n))
        }
        "number" => {
            let text = as_str(data, "a number key part")?;
            parse_number(text)
                .map(KeyPart::Number)
                .ok_or_else(|| format!("number key part {text:?} is not a number"))
        }
        "bool" => Ok(KeyPart::Bool(as_bool(data.clone(), "a bool key part")?)),
        other => Err(format!("unknown key part kind {other:?}")),
    }
}

fn parse_key(json: &Json) -> Result<Key, String> {
    let parts = json.as_array().ok_or("a key must be an array of parts")?;
    let key = Key(parts.iter().map(parse_key_part).collect::<Result<_, _>>()?);
    key.encode().map_err(|e| format!("the key cannot be encoded: {e}"))?;
    Ok(key)
}

/// Reads a value (`{"v8": ...}`, `{"bytes": ...}` or `{"u64": ...}`) from `members`,
/// dropping its `show` hint.
fn parse_value(members: &mut Members) -> Result<KvValue, String> {
    let json = members.required("value")?;
    members.take("show");
    let mut value = Members::new("the value", json)?;
    let kinds: Vec<String> = value.map.keys().cloned().collect();
    let [kind] = kinds.as_slice() else {
        return Err(format!("a value must have exactly one member (its kind), found {}", kinds.len()));
    };
    let data = value.required(kind)?;
    match kind.as_str() {
        "v8" => Ok(KvValue::V8(as_base64(&data, "a v8 value")?)),
        "bytes" => Ok(KvValue::Bytes(as_base64(&data, "a bytes value")?)),
        "u64" => {
            let text = as_str(&data, "a u64 value")?;
            match text.parse::<u64>() {
                Ok(n) if n.to_string() == text => Ok(KvValue::U64(n)),
                _ => Err(format!("u64 value {text:?} is not an integer from 0 to 2^64-1")),
            }
        }
        other => Err(format!("unknown value kind {other:?} (expected v8, bytes or u64)")),
    }
}

fn parse_header(json: Json) -> Result<Header, String> {
    let mut outer = Members::new("the first line", json)?;
    let body = outer.take(FORMAT_NAME).ok_or("not a stampkv dump (the first line is not its header)")?;
    outer.done()?;
    let mut members = Members::new("the header", body)?;
    let version = as_u64(&members.required("version")?, "the header's version")?;
    if version != FORMAT_VERSION {
        return Err(format!(
            "dump format version {version} is not supported (this stampkv reads version {FORMAT_VERSION})"
        ));
    }
    let versionstamps = as_bool(members.required("versionstamps")?, "the header's versionstamps")?;
    let expiry = as_bool(members.required("expiry")?, "the header's expiry")?;
    let queue = as_bool(members.required("queue")?, "the header's queue")?;
    let last_versionstamp = match members.take("lastVersionstamp") {
        Some(json) if versionstamps => Some(as_versionstamp(&json, "the header's lastVersionstamp")?),
        Some(_) => return Err("the header has a lastVersionstamp but no versionstamps".into()),
        None if versionstamps => return Err("the header has versionstamps but no lastVersionstamp".into()),
        None => None,
    };
    members.done()?;
    Ok(Header { versionstamps, expiry, queue, last_versionstamp })
}

impl<R: BufRead> DumpReader<R> {
    /// Starts reading a dump: reads and checks its header line.
    pub fn new(input: R) -> Result<DumpReader<R>, FormatError> {
        let mut reader = DumpReader {
            input,
            header: Header { versionstamps: false, expiry: false, queue: false, last_versionstamp: None },
            crc: crc32fast::Hasher::new(),
            buf: Vec::with_capacity(4096),
            line: 0,
            bytes_read: 0,
            entries: 0,
            messages: 0,
            ended: false,
        };
        let json = match reader.read_line()? {
            Some(json) => json,
            None => return Err(reader.error("the file is empty: not a stampkv dump")),
        };
        reader.header = parse_header(json).map_err(|e| reader.error(e))?;
        Ok(reader)
    }

    /// The header.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The line last read (1-based).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    fn error(&self, message: impl Into<String>) -> FormatError {
        FormatError { line: self.line, message: message.into() }
    }

    /// Reads the next line as JSON (`None` at the end of the input), adding it to the
    /// checksum unless it is the end line.
    fn read_line(&mut self) -> Result<Option<Json>, FormatError> {
        self.buf.clear();
        let read = (&mut self.input)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| FormatError { line: self.line + 1, message: format!("reading failed: {e}") })?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        self.bytes_read += read as u64;
        let Some(text) = self.buf.strip_suffix(b"\n") else {
            return Err(if read as u64 == MAX_LINE_BYTES {
                self.error(format!("the line is longer than {MAX_LINE_BYTES} bytes"))
            } else {
                self.error("the last line is cut off (no newline at its end): the dump is truncated")
            });
        };
        let json: Json =
            serde_json::from_slice(text).map_err(|e| self.error(format!("not a JSON line: {e}")))?;
        let is_end = json.as_object().is_some_and(|o| o.contains_key("end"));
        if !is_end {
            self.crc.update(&self.buf);
        }
        Ok(Some(json))
    }

    /// The next record; `Ok(None)` once the end line has been read and checked (counts and
    /// checksum) and nothing follows it.
    pub fn next_record(&mut self) -> Result<Option<Record>, FormatError> {
        if self.ended {
            return Ok(None);
        }
        let Some(json) = self.read_line()? else {
            return Err(self.error(format!(
                "the dump ends after line {} without its end line: it is truncated",
                self.line
            )));
        };
        let mut outer = Members::new("the line", json).map_err(|e| self.error(e))?;
        let kinds: Vec<String> = outer.map.keys().cloned().collect();
        let [kind] = kinds.as_slice() else {
            return Err(self.error("a line must be an object with exactly one member (its record type)"));
        };
        let body = outer.required(kind).map_err(|e| self.error(e))?;
        match kind.as_str() {
            "entry" => {
                if self.messages > 0 {
                    return Err(self.error("an entry after a queued message: entries come first"));
                }
                let entry = self.parse_entry(body).map_err(|e| self.error(e))?;
                self.entries += 1;
                Ok(Some(Record::Entry(entry)))
            }
            "message" => {
                if !self.header.queue {
                    return Err(self.error("a queued message in a dump whose header says it has no queue"));
                }
                let message = parse_message(body).map_err(|e| self.error(e))?;
                self.messages += 1;
                Ok(Some(Record::Message(message)))
            }
            "end" => {
                self.check_end(body).map_err(|e| self.error(e))?;
                self.ended = true;
                let mut rest = [0u8; 1];
                let more =
                    self.input.read(&mut rest).map_err(|e| self.error(format!("reading failed: {e}")))?;
                if more > 0 {
                    return Err(self.error("data follows the end line"));
                }
                Ok(None)
            }
            other => {
                Err(self.error(format!("unknown record type {other:?} (expected entry, message or end)")))
            }
        }
    }

    fn parse_entry(&self, json: Json) -> Result<DumpEntry, String> {
        let mut members = Members::new("an entry", json)?;
        let key = parse_key(&members.required("key")?)?;
        let value = parse_value(&mut members)?;
        let versionstamp = match members.take("versionstamp") {
            Some(json) if self.header.versionstamps => Some(as_versionstamp(&json, "the versionstamp")?),
            Some(_) => return Err("an entry has a versionstamp but the header says the dump has none".into()),
            None if self.header.versionstamps => return Err("an entry has no versionstamp".into()),
            None => None,
        };
        let expires_at_ms = match members.take("expireAt") {
            Some(json) if self.header.expiry => Some(as_u64(&json, "expireAt")?),
            Some(_) => {
                return Err("an entry has an expireAt but the header says the dump has no expiry".into())
            }
            None => None,
        };
        members.done()?;
        Ok(DumpEntry { key, value, versionstamp, expires_at_ms })
    }

    fn check_end(&self, json: Json) -> Result<(), String> {
        let mut members = Members::new("the end line", json)?;
        let entries = as_u64(&members.required("entries")?, "the end line's entries")?;
        let messages = as_u64(&members.required("messages")?, "the end line's messages")?;
        let crc = members.required("crc32")?;
        let crc = as_str(&crc, "the end line's crc32")?;
        members.done()?;
        if entries != self.entries || messages != self.messages {
            return Err(format!(
                "the end line counts {entries} entries and {messages} messages, the dump holds {} and {}",
                self.entries, self.messages
            ));
        }
        let actual = format!("{:08x}", self.crc.clone().finalize());
        if crc != actual {
            return Err(format!(
                "checksum mismatch: the end line says {crc}, the lines before it give {actual}"
            ));
        }
        Ok(())
    }
}

fn parse_message(json: Json) -> Result<QueuedMessage, String> {
    let mut members = Members::new("a message", json)?;
    let deadline_ms = as_u64(&members.required("deadline")?, "deadline")?;
    let attempts = as_u32(&members.required("attempts")?, "attempts")?;
    let backoff = members.required("backoff")?;
    let backoff_ms = backoff
        .as_array()
        .ok_or("backoff must be an array")?
        .iter()
        .map(|n| as_u32(n, "a backoff interval"))
        .collect::<Result<_, _>>()?;
    let keys = members.required("keysIfUndelivered")?;
    let keys_if_undelivered = keys
        .as_array()
        .ok_or("keysIfUndelivered must be an array of keys")?
        .iter()
        .map(parse_key)
        .collect::<Result<_, _>>()?;
    let value = parse_value(&mut members)?;
    members.done()?;
    Ok(QueuedMessage { deadline_ms, attempts, value, backoff_ms, keys_if_undelivered })
}
