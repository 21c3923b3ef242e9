//! `dump_reader`: arbitrary bytes as a `stampkv dump` file, read by the command line's
//! `DumpReader` (`cli/src/transfer/dumpfile.rs`, what `stampkv load` uses).
//!
//! The whole input is the file. Properties:
//!
//! - Reading never panics and always ends: every record is read or an error names a line
//!   of the file (1 to the number of lines, plus one past the last for a missing end line).
//! - Sealed: a file whose lines all read as records but that lacks its end line (the fuzzer
//!   cannot forge the CRC-32 of the end line) is given the right one — the counts and the
//!   checksum of the lines read — and then reads as exactly the same records to the end.
//!   So everything the reader checks line by line is reached with arbitrary lines.
//! - Round trip: whatever reads to the end is written again by `DumpWriter` with the same
//!   header, and that output reads back as the same header and records; writing those again
//!   gives the same bytes (the writer's output is a fixpoint).

use crate::util::hex;
use stampkv::{BulkEntry, Versionstamp};
use stampkv_cli::transfer::dumpfile::{DumpReader, DumpWriter, FormatError, Header, Record};

/// Most records read from one input (an input of `n` bytes holds fewer than `n` lines).
const MAX_RECORDS: usize = 1 << 20;

/// What reading a whole dump gave.
struct Read {
    /// The header, if the first line was one.
    header: Option<Header>,
    /// The records read before the end or the error.
    records: Vec<Record>,
    /// The error, if reading stopped at one.
    error: Option<FormatError>,
    /// Lines read.
    lines: u64,
}

fn read_all(data: &[u8]) -> Read {
    let mut reader = match DumpReader::new(data) {
        Ok(reader) => reader,
        Err(error) => return Read { header: None, records: Vec::new(), error: Some(error), lines: 0 },
    };
    let header = Some(reader.header());
    let mut records = Vec::new();
    let error = loop {
        assert!(records.len() < MAX_RECORDS, "more records than lines in {} bytes", data.len());
        match reader.next_record() {
            Ok(Some(record)) => records.push(record),
            Ok(None) => break None,
            Err(error) => break Some(error),
        }
    };
    assert!(reader.bytes_read() <= data.len() as u64, "read {} of {} bytes", reader.bytes_read(), data.len());
    Read { header, records, error, lines: reader.line() }
}

/// Runs the `dump_reader` target on one input.
pub fn dump_reader(data: &[u8]) {
    let read = read_all(data);
    let lines = data.split(|b| *b == b'\n').count() as u64;
    if let Some(error) = &read.error {
        assert!(!error.message.is_empty(), "an error without a message");
        assert!(
            error.line <= lines + 1,
            "error on line {} of a {lines}-line input: {}",
            error.line,
            error.message
        );
    }
    if read.error.is_none() {
        round_trip(data, &read);
        return;
    }
    seal(data, &read);
}

/// If every line of `data` (up to its last newline) read as a record and only the end line
/// is missing, appends the right end line and checks that the result reads to the end.
fn seal(data: &[u8], read: &Read) {
    let Some(header) = read.header else { return };
    let Some(last_newline) = data.iter().rposition(|b| *b == b'\n') else { return };
    let Some(body) = data.get(..=last_newline) else { return };
    let body_lines = body.iter().filter(|b| **b == b'\n').count() as u64;
    if read.records.len() as u64 + 1 != body_lines || read.lines < body_lines {
        return; // a line failed: the sealed file would fail there too
    }
    // Every line of `body` is the header or a record (none is an end line): the checksum
    // covers all of it.
    let entries = read.records.iter().filter(|r| matches!(r, Record::Entry(_))).count();
    let messages = read.records.len() - entries;
    let mut sealed = body.to_vec();
    sealed.extend_from_slice(
        format!(
            "{{\"end\":{{\"entries\":{entries},\"messages\":{messages},\"crc32\":\"{:08x}\"}}}}\n",
            crc32fast::hash(body)
        )
        .as_bytes(),
    );
    let again = read_all(&sealed);
    if let Some(error) = &again.error {
        panic!("{} with its end line added does not read: {error}", hex(&sealed));
    }
    assert_eq!(again.header, Some(header), "sealed: header");
    assert_eq!(again.records, read.records, "sealed: records of {}", hex(&sealed));
    round_trip(&sealed, &again);
}

/// Writes what was read again and checks that it reads back the same.
fn round_trip(data: &[u8], read: &Read) {
    let Some(header) = read.header else { return };
    let written = write(header, &read.records);
    let back = read_all(&written);
    if let Some(error) = &back.error {
        panic!(
            "{} read, written again as {:?}, does not read back: {error}",
            hex(data),
            String::from_utf8_lossy(&written)
        );
    }
    assert_eq!(back.header, Some(header), "round trip: header");
    assert_eq!(back.records, read.records, "round trip of {}", hex(data));
    assert_eq!(write(header, &back.records), written, "writing is not a fixpoint for {}", hex(data));
}

fn write(header: Header, records: &[Record]) -> Vec<u8> {
    let mut writer = DumpWriter::new(Vec::new(), header).expect("writing to memory");
    for record in records {
        match record {
            Record::Entry(entry) => {
                let bulk = BulkEntry {
                    key: entry.key.clone(),
                    value: entry.value.clone(),
                    versionstamp: entry.versionstamp.unwrap_or(Versionstamp([0; 10])),
                    expires_at_ms: entry.expires_at_ms,
                };
                writer.entry(&bulk).expect("writing to memory");
            }
            Record::Message(message) => writer.message(message).expect("writing to memory"),
        }
    }
    writer.finish().expect("writing to memory")
}
