//! `repair`: after damage, salvages everything still readable into a consistent database,
//! and reports exactly what could not be salvaged.
//!
//! Opening refuses a damaged database, rightly: serving it would hide the damage. Repair
//! is the deliberate next step:
//!
//! 1. Verify ([`super::verify`]). Nothing is changed unless a problem is found.
//! 2. Read what is readable. Tables: every data block that passes its checksum, located
//!    through the index or, when the footer or index is damaged, by following the chain of
//!    block trailers ([`super::table_scan`]); a damaged block loses only its own entries.
//!    The log: every record whose chunks verify, resuming at the next valid chunk after
//!    damage ([`super::log_scan`]); a damaged chunk loses only its own commit. If
//!    `CURRENT` and the manifest are intact, the tables are the ones it lists and the log
//!    starts after its last sequence number; otherwise every table file in the directory
//!    is read and the log starts after the newest commit found in a table (every older
//!    commit was flushed).
//! 3. Merge it all, newest version of each key first, keeping the newest version of each
//!    key (with its sequence number: versionstamps do not change) and dropping keys whose
//!    newest version is a deletion. Write the result as new tables in the deepest level,
//!    then a new manifest, and point `CURRENT` at it (written, synced, renamed: a crash
//!    before that leaves the old state in place).
//! 4. Move every file it replaced into a subdirectory `repair-NNNNNN` (nothing is
//!    deleted), and verify the result.
//!
//! What was lost is reported per damaged place: the entries of a table between two keys
//! that were read, or the commits of the log between two sequence numbers that were read.
//! If the newest version of a key was lost, an older one may now be visible (the report's
//! key range covers it). The repaired database holds the commits that were read, so a
//! lost commit in the middle of the log leaves a hole: later commits are kept.

use super::dir_files::{self, Inventory};
use super::flush::TableEnv;
use super::gc::Decision;
use super::log_scan::scan_log;
use super::table_scan::{check_read_block, scan_table, Span, TableEntry};
use super::verify::{log_name, table_name, verify_locked, Problem};
use crate::filename;
use crate::fs::{Fs, LogFileHandle};
use crate::invariants::invariant;
use crate::key::{self, EntryKind};
use crate::options::Options;
use crate::version::{FileDesc, VersionEdit, NUM_LEVELS};
use crate::{batch, Error, Result};
use stampkv_wal::{LogWriter, WalOptions};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// Something [`repair`] could not salvage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loss {
    /// Entries of a table stored in a damaged region. Keys of the table from `after` to
    /// `before` (inclusive; unbounded where `None`) may have lost versions: those strictly
    /// between lost every version the table held; `after` and `before` themselves were
    /// read, but more versions of them may have been in the region.
    TableEntries {
        /// The table's file name.
        file: String,
        /// Start of the damaged region.
        offset: u64,
        /// End of the damaged region.
        end: u64,
        /// The last key read before the region (its version there was kept).
        after: Option<Vec<u8>>,
        /// The first key read after the region.
        before: Option<Vec<u8>>,
    },
    /// A table the manifest lists could not be read at all.
    Table {
        /// The table's file name.
        file: String,
        /// Its smallest key, as the manifest records it.
        smallest: Vec<u8>,
        /// Its largest key.
        largest: Vec<u8>,
        /// Why it could not be read.
        why: String,
    },
    /// Commits of the log stored in a damaged region: every commit with a sequence number
    /// strictly between `after` and `before` (with no upper bound if `None`: the damage
    /// reaches the end of the log, and whether it held commits is not known).
    Commits {
        /// The log segment's file name.
        file: String,
        /// Start of the damaged region.
        offset: u64,
        /// The last commit read before it.
        after: u64,
        /// The first commit read after it.
        before: Option<u64>,
    },
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loss::TableEntries { file, offset, end, after, before } => {
                write!(f, "{file} bytes {offset}..{end}: ")?;
                match (after.as_deref().map(escape), before.as_deref().map(escape)) {
                    (Some(a), Some(b)) => write!(f, "entries with keys from {a} to {b}"),
                    (Some(a), None) => write!(f, "entries with keys from {a} on"),
                    (None, Some(b)) => write!(f, "entries with keys up to {b}"),
                    (None, None) => write!(f, "all of its entries"),
                }
            }
            Loss::Table { file, smallest, largest, why } => {
                write!(f, "{file}: the whole table, keys {} to {} ({why})", escape(smallest), escape(largest))
            }
            Loss::Commits { file, offset, after, before: Some(before) } => {
                if before - after == 2 {
                    write!(f, "{file} at offset {offset}: commit {}", after + 1)
                } else {
                    write!(f, "{file} at offset {offset}: commits {} to {}", after + 1, before - 1)
                }
            }
            Loss::Commits { file, offset, after, before: None } => {
                write!(f, "{file} at offset {offset}: any commits after {after} (the damage reaches the end of the log)")
            }
        }
    }
}

/// A key for a message: printable ASCII as is, other bytes as `\xNN`.
pub(crate) fn escape(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(b));
            }
            0x20..=0x7E => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// What [`repair`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// The problems verification found before the repair.
    pub problems: Vec<Problem>,
    /// Whether the database was rewritten (false: no problem, nothing done).
    pub repaired: bool,
    /// What could not be salvaged.
    pub lost: Vec<Loss>,
    /// Remarks on how the salvage went (for example, that the manifest was unusable).
    pub notes: Vec<String>,
    /// Live entries in the repaired database.
    pub entries: u64,
    /// Commits read back from the log.
    pub commits_replayed: u64,
    /// Tables written.
    pub tables_written: usize,
    /// The sequence number the repaired database continues after.
    pub last_sequence: u64,
    /// The subdirectory (of the database directory) holding the replaced files.
    pub moved_to: Option<String>,
    /// The problems verification finds after the repair (none, unless it failed).
    pub problems_after: Vec<Problem>,
}

/// Entries read from the log: (user key, newest version first) to value.
type LogEntries = BTreeMap<(Vec<u8>, Reverse<u64>), Vec<u8>>;

/// Repairs the closed database in `dir` on `fs`; new tables use `options`' table format
/// and file size. `progress` is called with (bytes done, bytes in all).
///
/// Errors: the directory is not a database, it is open ([`Error::Locked`]), or writing the
/// repaired database failed (the old state then stays in place).
pub fn repair(
    fs: Arc<dyn Fs>,
    dir: impl AsRef<Path>,
    options: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RepairReport> {
    let dir = dir.as_ref();
    let inventory = Inventory::read(&*fs, dir)?;
    let _lock = dir_files::lock(&*fs, dir)?;
    let before = verify_locked(&*fs, dir, &inventory, &mut |_, _| {});
    let mut report = RepairReport { problems: before.problems, ..RepairReport::default() };
    if report.problems.is_empty() {
        report.last_sequence = before.last_sequence;
        return Ok(report);
    }
    let mut salvage = Salvage { fs: fs.clone(), dir, report, done: 0, total: 0, progress };
    salvage.run(&inventory, options)?;
    let mut report = salvage.report;
    let after = Inventory::read(&*fs, dir)?;
    report.problems_after = verify_locked(&*fs, dir, &after, &mut |_, _| {}).problems;
    report.repaired = true;
    Ok(report)
}

struct Salvage<'a> {
    fs: Arc<dyn Fs>,
    dir: &'a Path,
    report: RepairReport,
    done: u64,
    total: u64,
    progress: &'a mut dyn FnMut(u64, u64),
}

/// A table to read, with the manifest's description when there is one.
struct TableInput {
    number: u64,
    desc: Option<FileDesc>,
}

/// A table whose readable blocks are known.
struct ReadableTable {
    number: u64,
    blocks: Vec<Span>,
}

impl Salvage<'_> {
    fn advance(&mut self, bytes: u64) {
        self.done += bytes;
        (self.progress)(self.done, self.total.max(self.done));
    }

    fn run(&mut self, inventory: &Inventory, options: &Options) -> Result<()> {
        let manifest = self.usable_manifest(inventory);
        let inputs: Vec<TableInput> = match &manifest {
            Some(state) => state
                .levels
                .iter()
                .flat_map(|files| files.values())
                .map(|d| TableInput { number: d.number, desc: Some(d.clone()) })
                .collect(),
            None => inventory.tables.iter().map(|&number| TableInput { number, desc: None }).collect(),
        };
        let logs: Vec<u64> = match &manifest {
            Some(state) => inventory.logs.iter().copied().filter(|&n| n >= state.log_number).collect(),
            None => inventory.logs.iter().copied().collect(),
        };
        self.total =
            inputs.iter().map(|t| 2 * self.len(&filename::table_path(self.dir, t.number))).sum::<u64>()
                + logs.iter().map(|&n| self.len(&filename::wal_path(self.dir, n))).sum::<u64>();
        let mut max_table_seq = 0;
        let mut readable = Vec::new();
        for input in &inputs {
            if let Some(table) = self.read_table(input, &mut max_table_seq) {
                readable.push(table);
            }
        }
        let floor = manifest.as_ref().map_or(max_table_seq, |m| m.last_seq.max(max_table_seq));
        let (log_entries, log_seq) = self.read_logs(&logs, floor);
        let mut next_number = inventory.highest_number() + 1;
        let written = self.merge_and_write(&readable, log_entries, options, &mut next_number)?;
        let last_seq = floor.max(log_seq);
        self.report.last_sequence = last_seq;
        self.report.tables_written = written.len();
        self.install(inventory, &written, next_number, last_seq)
    }

    fn len(&self, path: &Path) -> u64 {
        dir_files::file_len(&*self.fs, path)
    }

    /// The manifest's state, if `CURRENT` and the manifest are wholly intact.
    fn usable_manifest(&mut self, inventory: &Inventory) -> Option<crate::version::set::ManifestState> {
        let number =
            if inventory.has_current { dir_files::current_manifest(&*self.fs, self.dir).ok() } else { None };
        let state = number.and_then(|number| {
            let data = self.fs.read_all(&self.dir.join(filename::manifest_name(number))).ok()?;
            let manifest = dir_files::read_manifest_strictly(&data, number);
            manifest.problems.is_empty().then_some(manifest.state).flatten()
        });
        if state.is_none() {
            self.report.notes.push(
                "CURRENT or the manifest is damaged: every table file in the directory was read, and \
                 the log from the newest commit found in a table on; a table that a compaction had \
                 replaced but not yet removed may bring back older versions"
                    .into(),
            );
        }
        state
    }

    /// Finds the readable blocks of a table (recording what is lost) and its newest commit.
    fn read_table(&mut self, input: &TableInput, max_seq: &mut u64) -> Option<ReadableTable> {
        let name = table_name(input.number);
        let data = match self.fs.read_all(&filename::table_path(self.dir, input.number)) {
            Ok(data) => data,
            Err(e) => {
                let (smallest, largest) = input
                    .desc
                    .as_ref()
                    .map(|d| (d.smallest_key.clone(), d.largest_key.clone()))
                    .unwrap_or_default();
                let why = format!("cannot be read: {e}");
                self.report.lost.push(Loss::Table { file: name, smallest, largest, why });
                return None;
            }
        };
        self.advance(data.len() as u64);
        let scan = scan_table(&data);
        let mut blocks = Vec::new();
        // (offset, end) of a damaged region, waiting for the first key read after it.
        let mut pending: Option<(u64, u64, Option<Vec<u8>>)> = None;
        let mut last_key: Option<Vec<u8>> = None;
        // Each located block (decoded one at a time), then the part of the data region
        // whose blocks could not be located, if any.
        let unlocated = scan.unlocated.map(|(start, end)| (Span { offset: start, size: end - start }, false));
        let regions = scan.blocks.iter().map(|(span, outcome)| (*span, outcome.is_ok())).chain(unlocated);
        for (span, good) in regions {
            let entries =
                if good { super::table_scan::check_data_block(&data, span) } else { Err(String::new()) };
            match entries {
                Ok(entries) => {
                    if let Some((offset, end, after)) = pending.take() {
                        let before = entries.first().map(|e| e.key.clone());
                        self.report.lost.push(Loss::TableEntries {
                            file: name.clone(),
                            offset,
                            end,
                            after,
                            before,
                        });
                    }
                    for entry in &entries {
                        *max_seq = (*max_seq).max(key::trailer_seq(entry.trailer));
                    }
                    last_key = entries.last().map(|e| e.key.clone()).or(last_key);
                    blocks.push(span);
                }
                Err(_) => {
                    let end = span.offset.saturating_add(span.size).saturating_add(5).min(data.len() as u64);
                    pending = match pending {
                        Some((offset, _, after)) => Some((offset, end, after)),
                        None => Some((span.offset, end, last_key.clone())),
                    };
                }
            }
        }
        if let Some((offset, end, after)) = pending {
            self.report.lost.push(Loss::TableEntries { file: name, offset, end, after, before: None });
        }
        Some(ReadableTable { number: input.number, blocks })
    }

    /// The entries of every commit after `floor` that the log segments hold, newest version
    /// first per key; and the newest sequence number read.
    fn read_logs(&mut self, logs: &[u64], floor: u64) -> (LogEntries, u64) {
        let mut entries = BTreeMap::new();
        let mut last = floor;
        // Damage seen since the last commit read: (file, offset) of its start.
        let mut pending: Option<(String, u64)> = None;
        for &number in logs {
            let name = log_name(number);
            let Ok(data) = self.fs.read_all(&filename::wal_path(self.dir, number)) else {
                pending.get_or_insert((name, 0));
                continue;
            };
            self.advance(data.len() as u64);
            let scan = scan_log(&data, number);
            let mut damage = scan.damage.iter().filter(|d| d.loses_data).peekable();
            for record in &scan.records {
                while let Some(d) = damage.next_if(|d| d.offset < record.offset) {
                    pending.get_or_insert((name.clone(), d.offset));
                }
                let Ok(decoded) = batch::decode(&record.payload) else {
                    pending.get_or_insert((name.clone(), record.offset));
                    continue;
                };
                if decoded.seq <= floor {
                    // Already in tables; so was anything lost before it.
                    pending = None;
                    continue;
                }
                if let Some((file, offset)) = pending.take() {
                    if decoded.seq > last + 1 {
                        self.report.lost.push(Loss::Commits {
                            file,
                            offset,
                            after: last,
                            before: Some(decoded.seq),
                        });
                    }
                }
                self.report.commits_replayed += 1;
                for entry in batch::effective_entries(&decoded.entries) {
                    let trailer = key::trailer(decoded.seq, entry.kind);
                    entries.insert((entry.key.to_vec(), Reverse(trailer)), entry.value.to_vec());
                }
                last = last.max(decoded.seq);
            }
            if let Some(d) = damage.next() {
                pending.get_or_insert((name.clone(), d.offset));
            }
        }
        if let Some((file, offset)) = pending {
            self.report.lost.push(Loss::Commits { file, offset, after: last, before: None });
        }
        (entries, last)
    }

    /// Merges the readable tables and the log, newest version of each key kept, into new
    /// tables numbered from `next_number`.
    fn merge_and_write(
        &mut self,
        tables: &[ReadableTable],
        log: LogEntries,
        options: &Options,
        next_number: &mut u64,
    ) -> Result<Vec<Arc<crate::version::TableFile>>> {
        let env = TableEnv::new(
            self.fs.clone(),
            self.dir,
            options.table.clone(),
            options.compression_per_level.clone(),
            1 << 20,
            options.max_open_files,
            options.cache_index_and_filter_blocks,
        );
        let mut sources: Vec<Box<dyn Iterator<Item = Result<TableEntry>> + '_>> = Vec::new();
        for table in tables {
            sources.push(Box::new(table_entries(&*self.fs, self.dir, table)?));
        }
        sources.push(Box::new(
            log.into_iter().map(|((key, Reverse(trailer)), value)| Ok(TableEntry { key, trailer, value })),
        ));
        let mut heap = BinaryHeap::new();
        for (index, source) in sources.iter_mut().enumerate() {
            if let Some(entry) = source.next().transpose()? {
                heap.push(Head { entry, source: index });
            }
        }
        let mut written = Vec::new();
        let mut output = None;
        let mut last_key: Option<Vec<u8>> = None;
        while let Some(Head { entry, source }) = heap.pop() {
            if let Some(next) = sources.get_mut(source).and_then(|s| s.next()).transpose()? {
                heap.push(Head { entry: next, source });
            }
            if last_key.as_deref() == Some(&entry.key[..]) {
                continue; // an older version (or the same one from another file)
            }
            // The merge yields user keys in ascending order: the new tables are sorted and,
            // one version per key, disjoint.
            invariant!(
                last_key.as_deref().is_none_or(|last| last < &entry.key[..]),
                "repair merge: key {:?} after {:?}",
                entry.key,
                last_key
            );
            last_key = Some(entry.key.clone());
            if key::trailer_kind(entry.trailer) == EntryKind::Delete as u8 {
                continue; // nothing older survives in the repaired database
            }
            let out = match &mut output {
                Some(out) => out,
                None => {
                    let number = *next_number;
                    *next_number += 1;
                    output.insert(env.start(number, NUM_LEVELS - 1)?)
                }
            };
            out.add(&entry.key, entry.trailer, &entry.value, Decision::Keep)?;
            self.report.entries += 1;
            if out.size() >= options.target_file_size {
                if let Some(done) = output.take() {
                    written.extend(env.finish(done)?);
                }
            }
        }
        if let Some(done) = output.take() {
            written.extend(env.finish(done)?);
        }
        Ok(written)
    }

    /// Writes the new manifest and `CURRENT`, then moves the replaced files aside.
    fn install(
        &mut self,
        inventory: &Inventory,
        written: &[Arc<crate::version::TableFile>],
        mut next_number: u64,
        last_seq: u64,
    ) -> Result<()> {
        let fs = &*self.fs;
        let sync_dir = || fs.sync_dir(self.dir).map_err(|e| Error::io("syncing the database directory", e));
        sync_dir()?;
        let manifest_number = next_number;
        let log_number = next_number + 1;
        let temp_number = next_number + 2;
        next_number += 3;
        let edit = VersionEdit {
            format_version: Some(1),
            log_number: Some(log_number),
            next_file_number: Some(next_number),
            last_seq: Some(last_seq),
            deleted: Vec::new(),
            added: written.iter().map(|f| (NUM_LEVELS - 1, f.desc.clone())).collect(),
        };
        let name = filename::manifest_name(manifest_number);
        let file = fs.create(&self.dir.join(&name)).map_err(|e| Error::io(format!("creating {name}"), e))?;
        let mut writer = LogWriter::create(
            LogFileHandle(file),
            manifest_number,
            WalOptions { preallocate_bytes: 0, ..WalOptions::default() },
        )?;
        writer.add_record(&edit.encode())?;
        writer.sync()?;
        drop(writer);
        super::checkpoint::write_current(fs, self.dir, &name, temp_number)?;
        // The new state is live. Move everything it replaced out of the way.
        let aside = format!("repair-{manifest_number:06}");
        let aside_dir = self.dir.join(&aside);
        fs.create_dir_all(&aside_dir).map_err(|e| Error::io(format!("creating {aside}"), e))?;
        let new_tables: Vec<u64> = written.iter().map(|f| f.desc.number).collect();
        let old_names = inventory
            .tables
            .iter()
            .filter(|n| !new_tables.contains(n))
            .map(|&n| table_name(n))
            .chain(inventory.logs.iter().map(|&n| log_name(n)))
            .chain(inventory.manifests.iter().map(|&n| filename::manifest_name(n)))
            .chain(inventory.temps.iter().map(|&n| format!("{n:06}.dbtmp")));
        for old in old_names {
            fs.rename(&self.dir.join(&old), &aside_dir.join(&old))
                .map_err(|e| Error::io(format!("moving {old} to {aside}"), e))?;
        }
        fs.sync_dir(&aside_dir).map_err(|e| Error::io(format!("syncing {aside}"), e))?;
        sync_dir()?;
        self.report.moved_to = Some(aside);
        Ok(())
    }
}

/// The entries of a table's readable blocks, read again one block at a time.
fn table_entries<'t>(
    fs: &dyn Fs,
    dir: &Path,
    table: &'t ReadableTable,
) -> Result<impl Iterator<Item = Result<TableEntry>> + 't> {
    let path = filename::table_path(dir, table.number);
    let name = path.display().to_string();
    let file = fs.open(&path).map_err(|e| Error::io(format!("opening {name}"), e))?;
    let blocks = table.blocks.iter().flat_map(move |span| {
        let mut bytes = vec![0; usize::try_from(span.size).unwrap_or(0).saturating_add(5)];
        let read = file
            .read_exact_at(&mut bytes, span.offset)
            .map_err(|e| Error::io(format!("reading {name}"), e))
            .and_then(|()| {
                check_read_block(&bytes, *span)
                    .map_err(|why| Error::corruption(&name, Some(span.offset), why))
            });
        match read {
            Ok(entries) => entries.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        }
    });
    Ok(blocks)
}

/// The next entry of one source, ordered for a max-heap so that the smallest key, and for
/// equal keys the newest version, comes out first.
struct Head {
    entry: TableEntry,
    source: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        key::compare(&other.entry.key, other.entry.trailer, &self.entry.key, self.entry.trailer)
            .then_with(|| other.source.cmp(&self.source))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}
