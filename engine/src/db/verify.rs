//! `verify`: reads every file of a closed database and checks everything that can be
//! checked, reporting each problem with its file and offset.
//!
//! - `CURRENT` must name a manifest that exists.
//! - The manifest: every chunk and its checksum ([`super::log_scan`]), every edit decodes
//!   and applies (no file deleted that is not live, none added twice), no torn last edit.
//! - Every table the manifest lists: it exists with the listed size; footer, index,
//!   metaindex, filter and properties blocks pass their checksums and the layout is
//!   contiguous; every data block passes its checksum and decodes ([`super::table_scan`]);
//!   entries are in order with known kinds, none newer than the manifest's last sequence;
//!   the entry count and the first and last keys match the manifest; the table opens with
//!   the engine's own reader, and looking up each entry through the index and the bloom
//!   filter finds exactly that entry. Files of levels >= 1 must not overlap.
//! - Every live WAL segment: every chunk and checksum, zeros in block padding and in
//!   unwritten space, every segment but the newest sealed, every record a well-formed
//!   batch, sequence numbers following the manifest's one by one.
//!
//! Files left behind by an interrupted flush, compaction or open (tables not in the
//! manifest, old manifests and log segments, temporary files) are noted, not reported as
//! problems: the next open removes them. Verification takes the directory's lock shared, so
//! it never runs beside a database open for writing (read-only opens may share it), and
//! writes nothing.

use super::dir_files::{self, Inventory};
use super::log_scan::scan_log;
use super::table_scan::{check_data_block, scan_table, TableEntry};
use crate::filename;
use crate::fs::Fs;
use crate::key::{self, EntryKind};
use crate::version::set::ManifestState;
use crate::version::FileDesc;
use crate::Result;
use stampkv_sstable::{BlockCache, ReadAt, Table};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// One problem found in a database's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file's name within the database directory.
    pub file: String,
    /// Byte offset of the damage in the file, when it has one.
    pub offset: Option<u64>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(offset) => write!(f, "{} at offset {offset}: {}", self.file, self.what),
            None => write!(f, "{}: {}", self.file, self.what),
        }
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Every problem, in the order found (manifest, tables, log).
    pub problems: Vec<Problem>,
    /// Things that are not damage, such as files the next open removes.
    pub notes: Vec<String>,
    /// Tables checked.
    pub tables: usize,
    /// Entries read from them.
    pub table_entries: u64,
    /// Live WAL segments checked.
    pub log_segments: usize,
    /// Commits read from them.
    pub log_records: u64,
    /// Bytes read and checked.
    pub bytes_checked: u64,
    /// The newest sequence number found (manifest or log).
    pub last_sequence: u64,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verifies the closed database in `dir` on `fs`. `progress` is called with (bytes checked
/// so far, bytes to check in all) as files are done.
///
/// Errors: the directory does not exist or holds no database
/// ([`crate::Error::InvalidArgument`]), it is open ([`crate::Error::Locked`]), or it cannot
/// be listed. Damage is never an error: it is what the report lists.
pub fn verify(
    fs: &dyn Fs,
    dir: impl AsRef<Path>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let inventory = Inventory::read(fs, dir)?;
    let _lock = dir_files::lock_for_reading(fs, dir)?;
    Ok(verify_locked(fs, dir, &inventory, progress))
}

/// [`verify`] for a caller that holds the directory's lock.
pub(crate) fn verify_locked(
    fs: &dyn Fs,
    dir: &Path,
    inventory: &Inventory,
    progress: &mut dyn FnMut(u64, u64),
) -> VerifyReport {
    let total = total_bytes(fs, dir, inventory);
    let mut verifier =
        Verifier { fs, dir, report: VerifyReport::default(), manifest_damaged: false, total, progress };
    let manifest = verifier.check_manifest(inventory);
    verifier.check_tables(inventory, manifest.as_ref());
    verifier.check_logs(inventory, manifest.as_ref());
    verifier.note_leftovers(inventory, manifest.as_ref());
    verifier.report
}

fn total_bytes(fs: &dyn Fs, dir: &Path, inventory: &Inventory) -> u64 {
    let tables = inventory.tables.iter().map(|&n| filename::table_path(dir, n));
    let logs = inventory.logs.iter().map(|&n| filename::wal_path(dir, n));
    let manifests = inventory.manifests.iter().map(|&n| dir.join(filename::manifest_name(n)));
    tables.chain(logs).chain(manifests).map(|p| dir_files::file_len(fs, &p)).sum()
}

struct Verifier<'a> {
    fs: &'a dyn Fs,
    dir: &'a Path,
    report: VerifyReport,
    /// The manifest had problems: the state read from it may be wrong.
    manifest_damaged: bool,
    total: u64,
    progress: &'a mut dyn FnMut(u64, u64),
}

impl Verifier<'_> {
    fn problem(&mut self, file: &str, offset: Option<u64>, what: impl Into<String>) {
        self.report.problems.push(Problem { file: file.to_owned(), offset, what: what.into() });
    }

    fn read(&mut self, name: &str) -> Option<Vec<u8>> {
        match self.fs.read_all(&self.dir.join(name)) {
            Ok(data) => {
                self.report.bytes_checked += data.len() as u64;
                (self.progress)(self.report.bytes_checked, self.total.max(self.report.bytes_checked));
                Some(data)
            }
            Err(e) => {
                self.problem(name, None, format!("cannot be read: {e}"));
                None
            }
        }
    }

    /// `CURRENT` and the manifest it names; the state the manifest's intact edits describe.
    fn check_manifest(&mut self, inventory: &Inventory) -> Option<ManifestState> {
        if !inventory.has_current {
            self.problem("CURRENT", None, "missing, but the directory holds database files");
            return None;
        }
        let number = match dir_files::current_manifest(self.fs, self.dir) {
            Ok(number) => number,
            Err(what) => {
                self.problem("CURRENT", Some(0), what);
                return None;
            }
        };
        let name = filename::manifest_name(number);
        if !inventory.manifests.contains(&number) {
            self.problem("CURRENT", Some(0), format!("names {name}, which does not exist"));
            return None;
        }
        let data = self.read(&name)?;
        let manifest = dir_files::read_manifest_strictly(&data, number);
        self.manifest_damaged = !manifest.problems.is_empty();
        for (offset, what) in manifest.problems {
            self.problem(&name, offset, what);
        }
        if let Some(state) = &manifest.state {
            self.report.last_sequence = state.last_seq;
            self.check_levels(&name, state);
        }
        manifest.state
    }

    /// Files of each level >= 1 must not overlap; every file's key range must be ordered.
    fn check_levels(&mut self, manifest: &str, state: &ManifestState) {
        for (level, files) in state.levels.iter().enumerate() {
            let mut sorted: Vec<&FileDesc> = files.values().collect();
            sorted.sort_by(|a, b| a.smallest_key.cmp(&b.smallest_key));
            for desc in &sorted {
                if desc.smallest_key > desc.largest_key {
                    self.problem(manifest, None, format!("file {} has its key range reversed", desc.number));
                }
            }
            if level == 0 {
                continue;
            }
            for pair in sorted.windows(2) {
                if let [a, b] = pair {
                    if a.largest_key >= b.smallest_key {
                        let what = format!("level {level}: files {} and {} overlap", a.number, b.number);
                        self.problem(manifest, None, what);
                    }
                }
            }
        }
    }

    fn check_tables(&mut self, inventory: &Inventory, manifest: Option<&ManifestState>) {
        let cache = Arc::new(BlockCache::new(8 << 20));
        let listed: Vec<(usize, FileDesc)> = match manifest {
            Some(state) => state
                .levels
                .iter()
                .enumerate()
                .flat_map(|(level, files)| files.values().map(move |d| (level, d.clone())))
                .collect(),
            None => Vec::new(),
        };
        let last_seq = manifest.map(|m| m.last_seq);
        for (level, desc) in &listed {
            if !inventory.tables.contains(&desc.number) {
                let name = table_name(desc.number);
                self.problem(&name, None, format!("listed in the manifest (level {level}) but missing"));
                continue;
            }
            self.check_table(desc.number, Some(desc), last_seq, &cache);
        }
        if manifest.is_none() || self.manifest_damaged {
            // Without a manifest that can be trusted, every other table found is checked too.
            let listed: Vec<u64> = listed.iter().map(|(_, d)| d.number).collect();
            for &number in inventory.tables.iter().filter(|n| !listed.contains(n)) {
                self.check_table(number, None, None, &cache);
            }
        }
    }

    fn check_table(
        &mut self,
        number: u64,
        desc: Option<&FileDesc>,
        last_seq: Option<u64>,
        cache: &Arc<BlockCache>,
    ) {
        let name = table_name(number);
        let Some(data) = self.read(&name) else {
            return;
        };
        self.report.tables += 1;
        if let Some(desc) = desc {
            if data.len() as u64 != desc.size {
                self.problem(&name, None, format!("{} bytes, the manifest says {}", data.len(), desc.size));
            }
        }
        let scan = scan_table(&data);
        for (offset, what) in &scan.problems {
            self.problem(&name, Some(*offset), what.clone());
        }
        if let Some((start, end)) = scan.unlocated {
            self.problem(&name, Some(start), format!("the data blocks up to offset {end} cannot be located"));
        }
        let data = Arc::new(data);
        // The engine's own reader, when the structure is intact (else it would only repeat
        // the first problem found above).
        let table = if scan.problems.is_empty() && scan.unlocated.is_none() {
            let file: Arc<dyn ReadAt> = data.clone();
            match Table::open(file, number, name.clone(), Some(cache.clone())) {
                Ok(table) => Some(table),
                Err(e) => {
                    self.problem(&name, None, format!("the table reader refuses it: {e}"));
                    None
                }
            }
        } else {
            None
        };
        let mut checker =
            EntryChecker { name: &name, last_seq, table: table.as_deref(), ..EntryChecker::default() };
        for (span, outcome) in &scan.blocks {
            match outcome.as_ref().map_err(Clone::clone).and_then(|()| check_data_block(&data, *span)) {
                Ok(entries) => checker.block(&entries, span.offset, &mut self.report.problems),
                Err(what) => self.problem(&name, Some(span.offset), format!("data block: {what}")),
            }
        }
        self.report.table_entries += checker.count;
        if let (Some(desc), true) = (desc, scan.is_clean()) {
            checker.against_manifest(desc, table.as_deref(), &mut self.report.problems);
        }
    }

    fn check_logs(&mut self, inventory: &Inventory, manifest: Option<&ManifestState>) {
        let log_number = manifest.map_or(0, |m| m.log_number);
        let live: Vec<u64> = inventory.logs.iter().copied().filter(|&n| n >= log_number).collect();
        let mut previous_seq = manifest.map(|m| m.last_seq);
        for (index, &number) in live.iter().enumerate() {
            let name = log_name(number);
            let Some(data) = self.read(&name) else {
                continue;
            };
            self.report.log_segments += 1;
            let scan = scan_log(&data, number);
            for damage in &scan.damage {
                self.problem(&name, Some(damage.offset), damage.reason.clone());
            }
            if !scan.sealed && index + 1 < live.len() {
                self.problem(&name, Some(scan.valid_end), "not sealed, but a newer log segment exists");
            }
            for record in &scan.records {
                let decoded = match crate::batch::decode(&record.payload) {
                    Ok(decoded) => decoded,
                    Err(bad) => {
                        self.problem(&name, Some(record.offset), format!("bad commit record: {}", bad.0));
                        continue;
                    }
                };
                self.report.log_records += 1;
                let seq = decoded.seq;
                match previous_seq {
                    Some(previous) if seq <= previous => {
                        let what = format!("commit {seq} does not follow commit {previous}");
                        self.problem(&name, Some(record.offset), what);
                    }
                    Some(previous) if seq != previous + 1 => {
                        let what = if seq == previous + 2 {
                            format!("commit {} is missing", previous + 1)
                        } else {
                            format!("commits {} to {} are missing", previous + 1, seq - 1)
                        };
                        self.problem(&name, Some(record.offset), what);
                    }
                    _ => {}
                }
                previous_seq = Some(previous_seq.map_or(seq, |p| p.max(seq)));
                self.report.last_sequence = self.report.last_sequence.max(seq);
            }
        }
    }

    fn note_leftovers(&mut self, inventory: &Inventory, manifest: Option<&ManifestState>) {
        let Some(state) = manifest else {
            return;
        };
        let live = |n: &u64| state.levels.iter().any(|l| l.contains_key(n));
        for number in inventory.tables.iter().filter(|n| !live(n)) {
            self.report
                .notes
                .push(format!("{} is not in the manifest (removed at the next open)", table_name(*number)));
        }
        for number in inventory.logs.iter().filter(|&&n| n < state.log_number) {
            self.report
                .notes
                .push(format!("{} is already in tables (removed at the next open)", log_name(*number)));
        }
        let current = dir_files::current_manifest(self.fs, self.dir).ok();
        for number in inventory.manifests.iter().filter(|&&n| Some(n) != current) {
            let name = filename::manifest_name(*number);
            self.report.notes.push(format!("{name} is an old manifest (removed at the next open)"));
        }
        for number in &inventory.temps {
            self.report
                .notes
                .push(format!("{number:06}.dbtmp is a temporary file (removed at the next open)"));
        }
    }
}

/// File name of table `number`.
pub(crate) fn table_name(number: u64) -> String {
    format!("{number:06}.sst")
}

/// File name of WAL segment `number`.
pub(crate) fn log_name(number: u64) -> String {
    format!("{number:06}.log")
}

/// Checks the entries of one table, block by block.
#[derive(Default)]
struct EntryChecker<'a> {
    name: &'a str,
    last_seq: Option<u64>,
    table: Option<&'a Table>,
    count: u64,
    first: Option<(Vec<u8>, u64)>,
    last: Option<(Vec<u8>, u64)>,
}

impl EntryChecker<'_> {
    fn block(&mut self, entries: &[TableEntry], offset: u64, problems: &mut Vec<Problem>) {
        let mut problem = |what: String| {
            problems.push(Problem { file: self.name.to_owned(), offset: Some(offset), what });
        };
        for entry in entries {
            if let Some((key, trailer)) = &self.last {
                if !key::compare(key, *trailer, &entry.key, entry.trailer).is_lt() {
                    problem("data block starts before the end of the previous one".into());
                }
            }
            let seq = key::trailer_seq(entry.trailer);
            match EntryKind::from_byte(key::trailer_kind(entry.trailer)) {
                None => problem(format!("entry of unknown kind {}", key::trailer_kind(entry.trailer))),
                Some(EntryKind::PutExpiring) if entry.value.len() < 8 => {
                    problem("expiring entry without its expiry time".into());
                }
                _ => {}
            }
            if self.last_seq.is_some_and(|last| seq > last) {
                problem(format!("entry of commit {seq}, newer than the manifest's last commit"));
            }
            if let Some(table) = self.table {
                let found = table.get(&entry.key, entry.trailer);
                if !matches!(&found, Ok(Some((t, v))) if *t == entry.trailer && *v == entry.value) {
                    problem("the index or the filter does not lead to an entry of this block".into());
                }
            }
            self.count += 1;
            if self.first.is_none() {
                self.first = Some((entry.key.clone(), entry.trailer));
            }
            self.last = Some((entry.key.clone(), entry.trailer));
        }
    }

    fn against_manifest(&self, desc: &FileDesc, table: Option<&Table>, problems: &mut Vec<Problem>) {
        let mut problem =
            |what: String| problems.push(Problem { file: self.name.to_owned(), offset: None, what });
        if self.count != desc.entry_count || table.is_some_and(|t| t.entry_count() != self.count) {
            problem(format!("{} entries, the manifest says {}", self.count, desc.entry_count));
        }
        let listed_first = (desc.smallest_key.clone(), desc.smallest_trailer);
        let listed_last = (desc.largest_key.clone(), desc.largest_trailer);
        if self.count > 0
            && (self.first.as_ref() != Some(&listed_first) || self.last.as_ref() != Some(&listed_last))
        {
            problem("its first or last key differs from the manifest's".into());
        }
    }
}
