//! `sstable_read`: opening and reading tables, intact, damaged or arbitrary.
//!
//! The first input byte chooses the variant (modulo 3):
//!
//! - 0, raw: the rest is a table file. `Table::open`, full forward and reverse iteration,
//!   seeks and gets never panic and always end.
//! - 1, damaged: entries from the input (shared prefixes, many versions per key, trailers up
//!   to `u64::MAX`, empty and multi-block values, random or repeating so that they compress)
//!   are built into a table with tiny blocks and restart intervals (bloom filter, LZ4 block
//!   compression or not; a tiny block cache holding the index and filter too, read at
//!   open or only on first use, or none),
//!   then damaged in place
//!   (byte changes, zeroed ranges, a block copied over another, truncation). Every read —
//!   open, forward and reverse scans, gets, seeks with `next`/`prev` from there — returns
//!   an error (`Corruption`) or exactly what the original table holds: never another entry
//!   or value, never a scan that ends early without an error. Undamaged, nothing may fail.
//! - 2, resealed: as 1, but after the damage every block trailer and the footer checksum
//!   are recomputed, so the block decoders (entries, restart arrays, index handles, the
//!   bloom filter, properties, the metaindex, footer handles, and the LZ4 decoder with its
//!   declared lengths) see arbitrary contents behind valid checksums: they must still
//!   never panic, and fail only with `Corruption` or `Unsupported`.

use crate::util::{filler, hex, SplitMix64};
use arbitrary::{Arbitrary, Unstructured};
use stampkv_sstable::{
    BlockCache, Compression, IndexFilterPlacement, ReadAt, Table, TableBuilder, TableError, TableIter,
    TableOptions,
};
use std::cmp::{Ordering, Reverse};
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

/// Steps of one scan before a read of arbitrary data is considered done (not an error:
/// an index may point at one block many times).
const MAX_STEPS: usize = 20_000;

/// Runs the `sstable_read` target on one input.
pub fn sstable_read(data: &[u8]) {
    let Some((&variant, rest)) = data.split_first() else { return };
    match variant % 3 {
        0 => raw(rest),
        v => {
            if let Ok(spec) = Spec::arbitrary(&mut Unstructured::new(rest)) {
                structured(spec, v == 2);
            }
        }
    }
}

type Entry = (Vec<u8>, u64, Vec<u8>);

/// Table order of (user key, trailer): user key ascending, trailer descending.
fn order(a_key: &[u8], a_trailer: u64, b_key: &[u8], b_trailer: u64) -> Ordering {
    a_key.cmp(b_key).then(b_trailer.cmp(&a_trailer))
}

/// Opens a table; with `cache`, its index and filter go through a block cache small enough
/// that data blocks evict them (or that they never fit), so reads reload and re-decode them.
/// With `on_first_use`, open reads neither index nor filter, and the first lookup that
/// needs one reads (and decodes) it.
fn open(bytes: Vec<u8>, cache: bool, on_first_use: bool) -> Result<Arc<Table>, TableError> {
    let file: Arc<dyn ReadAt> = Arc::new(bytes);
    let cache = cache.then(|| Arc::new(BlockCache::new(4 << 10)));
    let placement = match on_first_use {
        true => IndexFilterPlacement::BlockCacheOnFirstUse,
        false => IndexFilterPlacement::BlockCache,
    };
    Table::open_with(file, 7, "fuzz.sst".into(), cache, placement)
}

fn current(it: &TableIter) -> Option<Entry> {
    it.valid().then(|| (it.user_key().to_vec(), it.trailer(), it.value().to_vec()))
}

// ---------------------------------------------------------------------------------------
// Raw bytes (and resealed tables): no panic, every loop ends
// ---------------------------------------------------------------------------------------

fn raw(data: &[u8]) {
    // Probe keys from the input itself.
    let probes: Vec<&[u8]> = data.chunks(7).take(8).collect();
    read_anything(data.to_vec(), &probes, false);
}

/// Reads everything a table offers; returns nothing, asserts only that errors are of the
/// right kind (`resealed`: structural errors; raw: anything but a panic).
fn read_anything(bytes: Vec<u8>, probes: &[&[u8]], resealed: bool) {
    let check = |e: &TableError| {
        if resealed {
            assert!(
                matches!(e, TableError::Corruption { .. } | TableError::Unsupported { .. }),
                "a table with valid checksums failed with {e}"
            );
        }
    };
    // Odd lengths defer the index and filter to their first use.
    let on_first_use = bytes.len() % 2 == 1;
    let table = match open(bytes, resealed, on_first_use) {
        Ok(table) => table,
        Err(e) => return check(&e),
    };
    let _ = (table.entry_count(), table.properties(), table.pinned_memory_bytes(), table.has_filter());
    let mut it = table.iter();
    let mut step = it.seek_to_first();
    let mut steps = 0;
    while step.is_ok() && it.valid() && steps < MAX_STEPS {
        step = it.next();
        steps += 1;
    }
    if let Err(e) = &step {
        check(e);
        assert!(!it.valid(), "iterator valid after an error");
    }
    let mut step = it.seek_to_last();
    steps = 0;
    while step.is_ok() && it.valid() && steps < MAX_STEPS {
        step = it.prev();
        steps += 1;
    }
    if let Err(e) = &step {
        check(e);
        assert!(!it.valid(), "iterator valid after an error");
    }
    for (i, key) in probes.iter().enumerate() {
        let trailer = if i % 2 == 0 { u64::MAX } else { i as u64 };
        if let Err(e) = table.get(key, trailer) {
            check(&e);
        }
        for seek_for_prev in [false, true] {
            let mut it = table.iter();
            let moved = if seek_for_prev { it.seek_for_prev(key, trailer) } else { it.seek(key, trailer) };
            let mut step = moved;
            for k in 0..4 {
                if step.is_err() {
                    break;
                }
                step = if k % 2 == 0 { it.next() } else { it.prev() };
            }
            if let Err(e) = &step {
                check(e);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Structured: build, damage, read against the model
// ---------------------------------------------------------------------------------------

#[derive(Arbitrary, Debug)]
struct EntrySpec {
    prefix: u8,
    suffix: u8,
    trailer: TrailerSpec,
    value_len: u8,
    value_seed: u8,
}

#[derive(Arbitrary, Debug)]
enum TrailerSpec {
    Small(u8),
    Any(u64),
    Max,
    Zero,
}

impl TrailerSpec {
    fn value(&self) -> u64 {
        match *self {
            TrailerSpec::Small(n) => u64::from(n) << 8 | 1,
            TrailerSpec::Any(n) => n,
            TrailerSpec::Max => u64::MAX,
            TrailerSpec::Zero => 0,
        }
    }
}

const PREFIXES: [&[u8]; 8] = [b"", b"a", b"ab", b"abc", b"b", b"k\0", b"key-", b"\xff\xff"];

fn user_key(prefix: u8, suffix: u8) -> Vec<u8> {
    let mut key = PREFIXES[usize::from(prefix % 8)].to_vec();
    match suffix % 4 {
        0 => {}
        1 => key.push(suffix),
        2 => key.extend_from_slice(format!("{suffix:03}").as_bytes()),
        _ => key.extend_from_slice(&[suffix; 3]),
    }
    key
}

#[derive(Arbitrary, Debug)]
enum Damage {
    Set {
        at: u32,
        byte: u8,
    },
    Xor {
        at: u32,
        mask: u8,
    },
    Zero {
        at: u32,
        len: u8,
    },
    /// Copies `len` bytes from `from` over `at` (a block written to the wrong place).
    Copy {
        from: u32,
        at: u32,
        len: u16,
    },
    Truncate {
        at: u32,
    },
}

#[derive(Arbitrary, Debug)]
enum KeyChoice {
    /// The key of entry `n` (modulo the entry count).
    Existing(u8),
    New {
        prefix: u8,
        suffix: u8,
    },
}

#[derive(Arbitrary, Debug)]
enum TrailerChoice {
    /// The trailer of the chosen entry, or one more / one less.
    Near(i8),
    Exact(TrailerSpec),
}

#[derive(Arbitrary, Debug)]
enum Probe {
    Get { key: KeyChoice, trailer: TrailerChoice },
    Seek { key: KeyChoice, trailer: TrailerChoice, moves: u16 },
    SeekForPrev { key: KeyChoice, trailer: TrailerChoice, moves: u16 },
    First { moves: u16 },
    Last { moves: u16 },
}

#[derive(Arbitrary, Debug)]
struct Spec {
    block_size: u16,
    restart_interval: u8,
    bloom: bool,
    cache: bool,
    /// Open without reading index and filter (`BlockCacheOnFirstUse`; with `cache` only).
    on_first_use: bool,
    /// LZ4-compress data blocks (those that shrink by more than 1/8).
    compress: bool,
    property: Option<Vec<u8>>,
    entries: Vec<EntrySpec>,
    damage: Vec<Damage>,
    probes: Vec<Probe>,
}

/// A `Write` that remembers where each write landed: the builder writes every block
/// (with its trailer) and the footer with one `write_all` each.
#[derive(Default)]
struct Recorder {
    bytes: Vec<u8>,
    writes: Vec<(usize, usize)>,
}

impl Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writes.push((self.bytes.len(), buf.len()));
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn build(spec: &Spec) -> (Vec<Entry>, Recorder) {
    let mut sorted: BTreeSet<(Vec<u8>, Reverse<u64>)> = BTreeSet::new();
    let mut values = std::collections::HashMap::new();
    for (i, e) in spec.entries.iter().take(300).enumerate() {
        let key = user_key(e.prefix, e.suffix);
        let trailer = e.trailer.value();
        let len = match e.value_len {
            250..=255 => 300 + usize::from(e.value_len) * 4,
            n => usize::from(n % 40),
        };
        let mut rng = SplitMix64::new(((i as u64) << 8) | u64::from(e.value_seed));
        let value = if e.value_seed % 2 == 0 {
            // A short pattern repeated: such values compress, random ones do not, so the
            // blocks of one table are stored both ways.
            let pattern = filler(&mut rng, 1 + usize::from(e.value_seed % 7));
            pattern.iter().copied().cycle().take(len).collect()
        } else {
            filler(&mut rng, len)
        };
        if sorted.insert((key.clone(), Reverse(trailer))) {
            values.insert((key, trailer), value);
        }
    }
    let entries: Vec<Entry> = sorted
        .into_iter()
        .map(|(key, Reverse(trailer))| {
            let value = values.remove(&(key.clone(), trailer)).unwrap_or_default();
            (key, trailer, value)
        })
        .collect();
    let options = TableOptions {
        block_size: 32 + usize::from(spec.block_size % 1024),
        restart_interval: 1 + usize::from(spec.restart_interval % 16),
        // 0 (entry count only), 48, 96 or 144 bytes between restart points.
        restart_bytes: usize::from(spec.block_size >> 10) % 4 * 48,
        index_restart_interval: 1 + usize::from(spec.restart_interval >> 4) % 4,
        bloom_bits_per_key: if spec.bloom { 10 } else { 0 },
        compression: if spec.compress { Compression::Lz4 } else { Compression::None },
    };
    let mut builder = TableBuilder::new(Recorder::default(), options);
    for (key, trailer, value) in &entries {
        builder.add(key, *trailer, value).expect("entries are added in order");
    }
    let property = spec.property.as_deref().unwrap_or_default();
    let properties: Vec<(&str, &[u8])> =
        if spec.property.is_some() { vec![("fuzz", property)] } else { vec![] };
    let (_, recorder) = builder.finish(&properties).expect("finish");
    (entries, recorder)
}

fn damage(bytes: &mut Vec<u8>, damage: &[Damage], allow_truncation: bool) {
    for d in damage.iter().take(6) {
        let len = bytes.len();
        if len == 0 {
            return;
        }
        match *d {
            Damage::Set { at, byte } => bytes[at as usize % len] = byte,
            Damage::Xor { at, mask } => bytes[at as usize % len] ^= mask.max(1),
            Damage::Zero { at, len: n } => {
                let i = at as usize % len;
                let end = (i + usize::from(n)).min(len);
                bytes[i..end].fill(0);
            }
            Damage::Copy { from, at, len: n } => {
                let (from, at) = (from as usize % len, at as usize % len);
                let n = usize::from(n).min(len - from).min(len - at);
                bytes.copy_within(from..from + n, at);
            }
            Damage::Truncate { at } if allow_truncation => bytes.truncate(at as usize % (len + 1)),
            Damage::Truncate { .. } => {}
        }
    }
}

/// Recomputes every block trailer and the footer checksum over the (damaged) contents.
fn reseal(bytes: &mut [u8], writes: &[(usize, usize)]) {
    let Some((&(footer_at, footer_len), blocks)) = writes.split_last() else { return };
    for &(at, len) in blocks {
        if len < 5 {
            continue;
        }
        let contents_end = at + len - 5;
        let mut h = crc32fast::Hasher::new();
        h.update(&bytes[at..contents_end]);
        h.update(&[bytes[contents_end]]); // the block type, as stored
        h.update(&(at as u64).to_le_bytes());
        let crc = h.finalize().rotate_right(15).wrapping_add(0xa282_ead8);
        bytes[contents_end + 1..contents_end + 5].copy_from_slice(&crc.to_le_bytes());
    }
    if footer_len == 56 {
        let footer = &mut bytes[footer_at..footer_at + 56];
        let crc = crc32fast::hash(&footer[..44]).rotate_right(15).wrapping_add(0xa282_ead8);
        footer[44..48].copy_from_slice(&crc.to_le_bytes());
    }
}

fn structured(spec: Spec, resealed: bool) {
    let (entries, recorder) = build(&spec);
    let mut bytes = recorder.bytes.clone();
    damage(&mut bytes, &spec.damage, !resealed);
    if resealed {
        reseal(&mut bytes, &recorder.writes);
        let probes: Vec<&[u8]> = entries.iter().take(8).map(|(k, _, _)| k.as_slice()).collect();
        read_anything(bytes, &probes, true);
        return;
    }
    let intact = bytes == recorder.bytes;
    Checker { entries: &entries, intact, file: &bytes }.run(&spec);
}

struct Checker<'a> {
    entries: &'a [Entry],
    intact: bool,
    file: &'a [u8],
}

impl Checker<'_> {
    fn ctx(&self, what: &str) -> String {
        format!("{what} ({} entries, intact {}; table {})", self.entries.len(), self.intact, hex(self.file))
    }

    /// An error is fine if the table was damaged, and must then be a corruption.
    fn error(&self, e: &TableError, what: &str) {
        assert!(!self.intact, "{}", self.ctx(&format!("{what}: error on an intact table: {e}")));
        assert!(
            matches!(e, TableError::Corruption { .. }),
            "{}",
            self.ctx(&format!("{what}: damage reported as {e}"))
        );
    }

    /// Index of the first entry at or after (key, trailer) in table order.
    fn lower_bound(&self, key: &[u8], trailer: u64) -> usize {
        self.entries.partition_point(|(k, t, _)| order(k, *t, key, trailer) == Ordering::Less)
    }

    fn run(&self, spec: &Spec) {
        let table = match open(self.file.to_vec(), spec.cache, spec.on_first_use) {
            Ok(table) => table,
            Err(e) => return self.error(&e, "open"),
        };
        self.scans(&table);
        if spec.cache {
            // Again with the blocks the first pass cached: a forward scan then takes each
            // next block from the cache one block ahead.
            self.scans(&table);
        }
        for probe in spec.probes.iter().take(16) {
            self.probe(&table, probe);
        }
        // Every entry by point lookup with its own trailer.
        for (key, trailer, value) in self.entries.iter().take(64) {
            match table.get(key, *trailer) {
                Ok(found) => assert_eq!(
                    found.as_ref(),
                    Some(&(*trailer, value.clone())),
                    "{}",
                    self.ctx(&format!("get {} @{trailer}", hex(key)))
                ),
                Err(e) => self.error(&e, "get"),
            }
        }
    }

    fn scans(&self, table: &Arc<Table>) {
        for reverse in [false, true] {
            let mut it = table.iter();
            let mut got = Vec::new();
            let mut step = if reverse { it.seek_to_last() } else { it.seek_to_first() };
            while step.is_ok() && it.valid() && got.len() <= self.entries.len() {
                got.extend(current(&it));
                step = if reverse { it.prev() } else { it.next() };
            }
            let expected: Vec<&Entry> =
                if reverse { self.entries.iter().rev().collect() } else { self.entries.iter().collect() };
            let what = if reverse { "reverse scan" } else { "forward scan" };
            assert!(
                got.len() <= expected.len() && got.iter().zip(&expected).all(|(g, e)| g == *e),
                "{}",
                self.ctx(&format!("{what}: an entry that is not the original one"))
            );
            match step {
                Err(e) => {
                    self.error(&e, what);
                    assert!(!it.valid(), "{}", self.ctx("iterator valid after an error"));
                }
                Ok(()) => {
                    assert_eq!(got.len(), expected.len(), "{}", self.ctx(&format!("{what} ended early")))
                }
            }
        }
    }

    fn key_of(&self, choice: &KeyChoice) -> Vec<u8> {
        match choice {
            KeyChoice::Existing(n) if !self.entries.is_empty() => {
                self.entries[usize::from(*n) % self.entries.len()].0.clone()
            }
            KeyChoice::Existing(n) => user_key(*n, *n),
            KeyChoice::New { prefix, suffix } => user_key(*prefix, *suffix),
        }
    }

    fn trailer_of(&self, key: &[u8], choice: &TrailerChoice) -> u64 {
        match choice {
            TrailerChoice::Near(d) => {
                let base = self.entries.iter().find(|(k, _, _)| k == key).map_or(0, |e| e.1);
                base.wrapping_add_signed(i64::from(*d % 2))
            }
            TrailerChoice::Exact(t) => t.value(),
        }
    }

    fn probe(&self, table: &Arc<Table>, probe: &Probe) {
        let (start, moves, what) = match probe {
            Probe::Get { key, trailer } => {
                let key = self.key_of(key);
                let trailer = self.trailer_of(&key, trailer);
                let i = self.lower_bound(&key, trailer);
                let expected =
                    self.entries.get(i).filter(|(k, _, _)| *k == key).map(|(_, t, v)| (*t, v.clone()));
                match table.get(&key, trailer) {
                    Ok(found) => {
                        assert_eq!(found, expected, "{}", self.ctx(&format!("get {} @{trailer}", hex(&key))))
                    }
                    Err(e) => self.error(&e, "get"),
                }
                return;
            }
            Probe::Seek { key, trailer, moves } => {
                let key = self.key_of(key);
                let trailer = self.trailer_of(&key, trailer);
                let mut it = table.iter();
                let r = it.seek(&key, trailer);
                let i = self.lower_bound(&key, trailer);
                (
                    Some((it, r, (i < self.entries.len()).then_some(i))),
                    *moves,
                    format!("seek {}@{trailer}", hex(&key)),
                )
            }
            Probe::SeekForPrev { key, trailer, moves } => {
                let key = self.key_of(key);
                let trailer = self.trailer_of(&key, trailer);
                let mut it = table.iter();
                let r = it.seek_for_prev(&key, trailer);
                // The last entry at or before the target.
                let after = self
                    .entries
                    .partition_point(|(k, t, _)| order(k, *t, &key, trailer) != Ordering::Greater);
                (
                    Some((it, r, after.checked_sub(1))),
                    *moves,
                    format!("seek_for_prev {}@{trailer}", hex(&key)),
                )
            }
            Probe::First { moves } => {
                let mut it = table.iter();
                let r = it.seek_to_first();
                (Some((it, r, (!self.entries.is_empty()).then_some(0))), *moves, "seek_to_first".to_string())
            }
            Probe::Last { moves } => {
                let mut it = table.iter();
                let r = it.seek_to_last();
                (Some((it, r, self.entries.len().checked_sub(1))), *moves, "seek_to_last".to_string())
            }
        };
        let Some((mut it, mut step, mut at)) = start else { return };
        // Then up to 16 moves, each bit of `moves` choosing next (1) or prev (0).
        for m in 0..=16 {
            match &step {
                Err(e) => return self.error(e, &what),
                Ok(()) => {
                    let expected = at.map(|i| &self.entries[i]);
                    assert_eq!(
                        current(&it).as_ref(),
                        expected,
                        "{}",
                        self.ctx(&format!("{what}, after {m} moves ({moves:#06x})"))
                    );
                }
            }
            if m == 16 || at.is_none() {
                break;
            }
            let forward = moves >> m & 1 == 1;
            step = if forward { it.next() } else { it.prev() };
            at = at.and_then(|i| {
                if forward {
                    Some(i + 1).filter(|&j| j < self.entries.len())
                } else {
                    i.checked_sub(1)
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, reason = "test code: a panic is a failed test")]

    use super::*;

    fn spec(compress: bool, damage: Vec<Damage>) -> Spec {
        let entries = (0..120u8)
            .map(|i| EntrySpec {
                prefix: i % 8,
                suffix: i,
                trailer: TrailerSpec::Small(i),
                value_len: 30 + i % 10,
                value_seed: i / 10, // runs of ten repeating, then ten random values
            })
            .collect();
        let probes = vec![
            Probe::First { moves: 0xffff },
            Probe::Last { moves: 0 },
            Probe::Seek { key: KeyChoice::Existing(60), trailer: TrailerChoice::Near(0), moves: 0x5555 },
            Probe::Get { key: KeyChoice::New { prefix: 3, suffix: 9 }, trailer: TrailerChoice::Near(1) },
        ];
        Spec {
            block_size: 100,
            restart_interval: 3,
            bloom: true,
            cache: true,
            on_first_use: false,
            compress,
            property: None,
            entries,
            damage,
            probes,
        }
    }

    /// The type byte of every block the builder wrote (the last write is the footer).
    fn block_types(recorder: &Recorder) -> Vec<(usize, u8)> {
        let blocks = recorder.writes.split_last().map_or(&[][..], |(_, blocks)| blocks);
        blocks.iter().map(|&(at, len)| (at, recorder.bytes[at + len - 5])).collect()
    }

    #[test]
    fn structured_tables_mix_compressed_and_uncompressed_blocks() {
        let (_, plain) = build(&spec(false, Vec::new()));
        assert!(block_types(&plain).iter().all(|&(_, t)| t == 0));
        let (_, recorder) = build(&spec(true, Vec::new()));
        let types = block_types(&recorder);
        let compressed: Vec<usize> = types.iter().filter(|&&(_, t)| t == 1).map(|&(at, _)| at).collect();
        assert!(compressed.len() > 3 && compressed.len() + 3 < types.len(), "{types:?}");
        // Intact, then each compressed block damaged (detected by its checksum), then
        // damaged and resealed (reaching the LZ4 decoder): the target's checks hold.
        structured(spec(true, Vec::new()), false);
        for &at in &compressed {
            for (offset, mask) in [(0, 0x01), (1, 0x80), (2, 0x10)] {
                let at = (at + offset) as u32;
                structured(spec(true, vec![Damage::Xor { at, mask }]), false);
                structured(spec(true, vec![Damage::Xor { at, mask }]), true);
                let deferred = Spec { on_first_use: true, ..spec(true, vec![Damage::Xor { at, mask }]) };
                structured(deferred, false);
            }
            structured(spec(true, vec![Damage::Set { at: at as u32, byte: 0xff }]), true);
        }
    }
}
