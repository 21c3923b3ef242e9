//! Leveled compaction: choosing what to compact, and doing it.
//!
//! **Targets** (`level_targets.rs`): with `Options::dynamic_level_bytes` (the default) each
//! level's target is derived from the largest level — level L may hold
//! `largest / level_size_ratio^(6-L)`, never less than `level1_target_bytes` — and level 0
//! compacts into the *base level*, the first level whose share is at most
//! `level1_target_bytes`; the levels above it stay empty. Without it, level L >= 1 may hold
//! `level1_target_bytes` × `level_size_ratio`^(L-1) and level 0 compacts into level 1.
//!
//! **Pick order.** Level 0 scores its file count over `l0_compaction_trigger`; level L
//! (1 to 5) its bytes over its target; a non-empty level above the base level scores 1
//! (it drains). The highest score >= 1 goes first, except that level 0 goes first once it
//! reaches `l0_slowdown_trigger` files, since writers are then being delayed. From level 0
//! every file is taken (they overlap); from a deeper level the one file whose overlap with
//! the level below, in bytes per byte of its own, is smallest (ties: the oldest file), plus
//! the files below it overlaps. A single file with nothing to merge with is moved down
//! without rewriting (a trivial move). One compaction runs at a time (`compaction_lock`),
//! so no file is in two compactions. When nothing is over its limit, the table whose
//! expired values waited longest is rewritten; when none holds any, a table that reads
//! kept positioning together with an older run (`Options::read_triggered_compaction`) is
//! merged down: all of level 0, or the one file with the files below it overlaps.
//!
//! **Stall bound.** Writers slow down (1 ms once per commit) at `l0_slowdown_trigger`
//! level-0 files and stop at `l0_stop_trigger` (`write.rs`). Since level 0 then goes first,
//! a stop lasts at most until the running compaction — one file plus about `ratio` files
//! below it, or level 0 — ends and one level-0 compaction (level 0 and its overlap in the
//! base level) has run.
//!
//! Outputs are cut at `target_file_size`, but never between two versions of one user key,
//! so the files of a level have disjoint user-key ranges.

use super::flush::TableOutput;
use super::gc::{Decision, GcFilter};
use super::level_targets::{LevelTargets, LAST_LEVEL};
use super::{DbInner, ReadState};
use crate::invariants::invariant;
use crate::iter::{InternalIterator, LevelIter, MergingIter};
use crate::stats::Counters;
use crate::version::{FileDesc, TableFile, Version, VersionEdit, NUM_LEVELS};
use crate::{Error, Result};
use std::sync::Arc;

/// A chosen compaction.
pub(crate) struct Plan {
    /// Level the inputs come from.
    pub level: usize,
    /// Level the outputs go to.
    pub output_level: usize,
    /// Files taken from `level`.
    pub inputs: Vec<Arc<TableFile>>,
    /// Files taken from `output_level`.
    pub overlapping: Vec<Arc<TableFile>>,
    /// Asked for by reads, not by sizes or expiry.
    pub read_triggered: bool,
}

impl Plan {
    fn is_trivial_move(&self) -> bool {
        self.level != self.output_level && self.inputs.len() == 1 && self.overlapping.is_empty()
    }

    fn all_inputs(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        self.inputs.iter().chain(self.overlapping.iter())
    }
}

/// The user-key range covered by `files`.
fn key_range(files: &[Arc<TableFile>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| &f.desc.smallest_key).min()?;
    let hi = files.iter().map(|f| &f.desc.largest_key).max()?;
    Some((lo.clone(), hi.clone()))
}

/// The file of `files` (a sorted level) whose overlap with `next` (the sorted level it
/// compacts into), in bytes per byte of its own, is smallest: it rewrites the least data
/// per byte moved down (RocksDB's `kMinOverlappingRatio`). A file overlapping nothing
/// wins, and moves down without a rewrite. Ties go to the oldest file (lowest number).
fn min_overlapping_ratio<'a, T>(files: &'a [T], next: &[T], desc: impl Fn(&T) -> &FileDesc) -> Option<&'a T> {
    // (overlapping bytes, own size, file): compared by cross-multiplication, exactly.
    let mut best: Option<(u128, u128, &T)> = None;
    // Both levels are sorted and disjoint: the next level's files that may meet the
    // current file start at `first`, which only moves forward.
    let mut first = 0;
    for file in files {
        let d = desc(file);
        while next.get(first).is_some_and(|n| desc(n).largest_key < d.smallest_key) {
            first += 1;
        }
        let overlap: u64 = next
            .iter()
            .skip(first)
            .map(&desc)
            .take_while(|n| n.smallest_key <= d.largest_key)
            .map(|n| n.size)
            .sum();
        let (overlap, size) = (u128::from(overlap), u128::from(d.size.max(1)));
        let better = best.is_none_or(|(best_overlap, best_size, best_file)| {
            let (mine, theirs) = (overlap * best_size, best_overlap * size);
            mine < theirs || (mine == theirs && d.number < desc(best_file).number)
        });
        if better {
            best = Some((overlap, size, file));
        }
    }
    best.map(|(_, _, file)| file)
}

impl DbInner {
    /// The most urgent compaction of `version`: a level over its limit first, else a table
    /// holding values expired at `gc_time_ms`, else a table whose seeks are used up.
    fn pick(&self, version: &Version, gc_time_ms: u64) -> Option<Plan> {
        let targets = LevelTargets::of(&self.options, version);
        self.pick_by_size(version, &targets)
            .or_else(|| Self::pick_expired(version, &targets, gc_time_ms))
            .or_else(|| self.pick_read_triggered(version, &targets))
    }

    /// The newest table whose seeks are used up, merged into the level below: with the rest
    /// of level 0 if it is a level-0 file, else with the files below that it overlaps.
    fn pick_read_triggered(&self, version: &Version, targets: &LevelTargets) -> Option<Plan> {
        if !self.options.read_triggered_compaction
            || self.idle_flush_pending.load(std::sync::atomic::Ordering::Acquire)
        {
            return None;
        }
        let (level, file) = version.seek_exhausted_file()?;
        let output_level = targets.output_level(version, level);
        if output_level > LAST_LEVEL {
            // Nothing lies below the last level (its files are never charged).
            return None;
        }
        let mut plan = if level == 0 {
            Self::plan_whole_level(version, 0, output_level)
        } else {
            let overlapping =
                version.overlapping(output_level, &file.desc.smallest_key, &file.desc.largest_key);
            Plan { level, output_level, inputs: vec![file.clone()], overlapping, read_triggered: false }
        };
        plan.read_triggered = true;
        Some(plan)
    }

    /// The table whose expired values have waited longest, rewritten in place (from level
    /// 0, with the rest of level 0, into the base level). After the rewrite none of its
    /// values is expired at `gc_time_ms` (they are dropped or become tombstones), so it is
    /// not picked again for the same reason.
    fn pick_expired(version: &Version, targets: &LevelTargets, gc_time_ms: u64) -> Option<Plan> {
        let (level, file) = version
            .all_files()
            .filter(|(_, f)| f.earliest_expiry_ms().is_some_and(|at| at <= gc_time_ms))
            .min_by_key(|(_, f)| f.earliest_expiry_ms())?;
        if level == 0 {
            return Some(Self::plan_whole_level(version, 0, targets.output_level(version, 0)));
        }
        Some(Plan {
            level,
            output_level: level,
            inputs: vec![file.clone()],
            overlapping: Vec::new(),
            read_triggered: false,
        })
    }

    /// The level most over its size (or file count) limit, if any: all of level 0, or the
    /// file of a deeper level that overlaps the fewest bytes below per byte of its own.
    fn pick_by_size(&self, version: &Version, targets: &LevelTargets) -> Option<Plan> {
        let mut best: Option<(f64, usize)> = None;
        let l0_files = version.files(0).len();
        let l0_score = l0_files as f64 / self.options.l0_compaction_trigger as f64;
        if l0_files >= self.options.l0_slowdown_trigger {
            // Writers are being delayed: level 0 before anything else.
            best = Some((f64::INFINITY, 0));
        } else if l0_score >= 1.0 {
            best = Some((l0_score, 0));
        }
        for level in 1..LAST_LEVEL {
            let score = targets.score(level, version.level_bytes(level));
            if score >= 1.0 && best.is_none_or(|(s, _)| score > s) {
                best = Some((score, level));
            }
        }
        let (_, level) = best?;
        let output_level = targets.output_level(version, level);
        if level == 0 {
            return Some(Self::plan_whole_level(version, 0, output_level));
        }
        let file =
            min_overlapping_ratio(version.files(level), version.files(output_level), |f| &f.desc)?.clone();
        let overlapping = version.overlapping(output_level, &file.desc.smallest_key, &file.desc.largest_key);
        Some(Plan { level, output_level, inputs: vec![file], overlapping, read_triggered: false })
    }

    /// All files of `level` and the files of `output_level` they overlap.
    fn plan_whole_level(version: &Version, level: usize, output_level: usize) -> Plan {
        let inputs = version.files(level).to_vec();
        let overlapping = match key_range(&inputs) {
            Some((lo, hi)) if output_level != level => version.overlapping(output_level, &lo, &hi),
            _ => Vec::new(),
        };
        Plan { level, output_level, inputs, overlapping, read_triggered: false }
    }

    /// Runs one compaction and installs its result.
    fn run(&self, plan: &Plan) -> Result<()> {
        if plan.read_triggered {
            Counters::add(&self.counters.read_compactions, 1);
        }
        if let (true, [file]) = (plan.is_trivial_move(), plan.inputs.as_slice()) {
            let edit = VersionEdit {
                deleted: vec![(plan.level, file.desc.number)],
                added: vec![(plan.output_level, file.desc.clone())],
                ..VersionEdit::default()
            };
            self.install(edit, std::slice::from_ref(file), &[])?;
            Counters::add(&self.counters.trivial_moves, 1);
            Counters::add(&self.counters.compactions, 1);
            return Ok(());
        }
        let version = self.read_state.read().version.clone();
        let outputs = self.merge_inputs(plan, &version)?;
        if !outputs.is_empty() {
            self.sync_dir()?;
        }
        let mut edit = VersionEdit::default();
        edit.deleted.extend(plan.inputs.iter().map(|f| (plan.level, f.desc.number)));
        edit.deleted.extend(plan.overlapping.iter().map(|f| (plan.output_level, f.desc.number)));
        edit.added.extend(outputs.iter().map(|f| (plan.output_level, f.desc.clone())));
        self.install(edit, &outputs, &plan.all_inputs().cloned().collect::<Vec<_>>())?;
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.compaction_bytes_read, plan.all_inputs().map(|f| f.desc.size).sum());
        Counters::add(&self.counters.compaction_bytes_written, outputs.iter().map(|f| f.desc.size).sum());
        Counters::add(
            &self.counters.compaction_bytes_written_uncompressed,
            outputs.iter().map(|f| f.uncompressed_size()).sum(),
        );
        Ok(())
    }

    /// Whether a compaction's outputs go into the block cache as they are written: those
    /// of a compaction that reads asked for, when every table of the database fits in
    /// half the cache. The seeks that asked for it keep reading that data, and would
    /// otherwise miss the cache once per block of the new tables (each a `pread` and a
    /// checksum) just as they start to profit from it. A larger database is left to the
    /// reads themselves: caching it would evict blocks as hot as the ones it adds (at
    /// 10 M keys and a 1 GiB cache, reading every read-triggered compaction's output into
    /// the cache halved the seek rate).
    fn caches_outputs(&self, plan: &Plan, version: &Version) -> bool {
        if !plan.read_triggered {
            return false;
        }
        // The tables before the compaction: its outputs replace inputs at least as large.
        let bytes: u64 = version.all_files().map(|(_, f)| f.uncompressed_size()).sum();
        bytes <= self.tables.cache.capacity_bytes() as u64 / 2
    }

    /// Makes an edit durable, installs the new version and retires replaced files.
    fn install(
        &self,
        edit: VersionEdit,
        added: &[Arc<TableFile>],
        replaced: &[Arc<TableFile>],
    ) -> Result<()> {
        let mut versions = self.versions.lock();
        let version = versions.log_and_apply(edit, added, &self.next_file)?;
        {
            let mut state = self.read_state.write();
            *state = Arc::new(ReadState { mem: state.mem.clone(), imms: state.imms.clone(), version });
        }
        drop(versions);
        for file in replaced {
            file.mark_obsolete();
        }
        Ok(())
    }

    /// Merges the inputs into new tables of the output level.
    fn merge_inputs(&self, plan: &Plan, version: &Version) -> Result<Vec<Arc<TableFile>>> {
        // Level-0 inputs overlap: one iterator each. The files of a deeper level are sorted
        // and disjoint: one level iterator holds one of them open at a time. The blocks read
        // stay out of the block cache: each is read once, and caching them would evict the
        // blocks readers keep coming back to.
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if plan.level == 0 {
            children.extend(
                plan.inputs.iter().map(|f| Box::new(LevelIter::without_caching(vec![f.clone()])) as _),
            );
        } else {
            children.push(Box::new(LevelIter::without_caching(plan.inputs.clone())));
        }
        if !plan.overlapping.is_empty() {
            children.push(Box::new(LevelIter::without_caching(plan.overlapping.clone())));
        }
        let mut iter = MergingIter::new(children);
        iter.seek_to_first()?;
        let mut filter = GcFilter::new(self.gc_point());
        let mut base = BaseLevelCheck::new(version, plan.output_level);
        let fill_cache = self.caches_outputs(plan, version).then(|| self.tables.cache.clone());
        let mut outputs = Vec::new();
        let mut output: Option<TableOutput> = None;
        let mut steps = 0u64;
        while iter.valid() {
            steps += 1;
            if steps.is_multiple_of(1024) && self.shutting_down() {
                return Err(Error::Closed);
            }
            let (user_key, trailer, value) = (iter.user_key(), iter.trailer(), iter.value());
            let decision = filter.decide(user_key, trailer, value, |k| base.is_base_level(k));
            if decision != Decision::Drop {
                let cut = output
                    .as_ref()
                    .is_some_and(|o| o.size() >= self.options.target_file_size && o.last_key() != user_key);
                if cut {
                    if let Some(done) = output.take() {
                        outputs.extend(self.finish_table(done)?);
                    }
                }
                if output.is_none() {
                    let mut table = self.start_table(plan.output_level)?;
                    if let Some(cache) = &fill_cache {
                        table.fill_block_cache(cache.clone());
                    }
                    output = Some(table);
                }
                if let Some(out) = output.as_mut() {
                    out.add(user_key, trailer, value, decision)?;
                }
            }
            iter.next()?;
        }
        if let Some(done) = output.take() {
            outputs.extend(self.finish_table(done)?);
        }
        Ok(outputs)
    }
}

/// Answers "can a level below the output level hold this key?" for keys in ascending order.
struct BaseLevelCheck<'a> {
    version: &'a Version,
    output_level: usize,
    /// Per deeper level, the index of the first file that may still contain later keys.
    positions: [usize; NUM_LEVELS],
}

impl<'a> BaseLevelCheck<'a> {
    fn new(version: &'a Version, output_level: usize) -> Self {
        BaseLevelCheck { version, output_level, positions: [0; NUM_LEVELS] }
    }

    fn is_base_level(&mut self, user_key: &[u8]) -> bool {
        for (level, position) in self.positions.iter_mut().enumerate().skip(self.output_level + 1) {
            let files = self.version.files(level);
            while files.get(*position).is_some_and(|f| f.desc.largest_key.as_slice() < user_key) {
                *position += 1;
            }
            if files.get(*position).is_some_and(|f| f.desc.smallest_key.as_slice() <= user_key) {
                return false;
            }
        }
        true
    }
}

/// Runs compactions until no level is over its limit (or the database shuts down).
pub(crate) fn compact_while_needed(inner: &DbInner) -> Result<()> {
    loop {
        {
            let _running = inner.compaction_lock.lock();
            if inner.shutting_down() {
                return Ok(());
            }
            let version = inner.read_state.read().version.clone();
            let gc_time_ms = inner.gc_point().time_ms;
            let Some(plan) = inner.pick(&version, gc_time_ms) else {
                // Idle: nothing is over its target, so nothing is left above the base level.
                let targets = LevelTargets::of(&inner.options, &version);
                invariant!(
                    (1..targets.base_level).all(|l| version.files(l).is_empty()),
                    "compaction idle with files above base level {}: {:?}",
                    targets.base_level,
                    (0..NUM_LEVELS).map(|l| version.files(l).len()).collect::<Vec<_>>()
                );
                return Ok(());
            };
            inner.run(&plan)?;
        }
        // After releasing the compaction lock: waking writers takes the commit lock,
        // which comes first in the lock order.
        inner.notify_room();
        inner.trim_heap_if_due();
    }
}

/// Compacts everything into one level and rewrites that level, so no shadowed version,
/// tombstone or expired value a reader cannot see is left. The level is the last one with
/// dynamic level targets, else the deepest non-empty level (level 1 if there is none).
/// Each non-empty level goes straight into the next non-empty one below it.
pub(crate) fn compact_all(inner: &DbInner) -> Result<()> {
    let running = inner.compaction_lock.lock();
    let version = inner.read_state.read().version.clone();
    let deepest = if inner.options.dynamic_level_bytes {
        LAST_LEVEL
    } else {
        (1..NUM_LEVELS).rev().find(|&l| !version.files(l).is_empty()).unwrap_or(1)
    };
    for level in 0..deepest {
        let version = inner.read_state.read().version.clone();
        if version.files(level).is_empty() {
            continue;
        }
        let output_level = (level + 1..deepest).find(|&l| !version.files(l).is_empty()).unwrap_or(deepest);
        let plan = DbInner::plan_whole_level(&version, level, output_level);
        inner.run(&plan)?;
    }
    let version = inner.read_state.read().version.clone();
    if !version.files(deepest).is_empty() {
        inner.run(&DbInner::plan_whole_level(&version, deepest, deepest))?;
    }
    drop(running);
    inner.notify_room();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(number: u64, smallest: &str, largest: &str, size: u64) -> FileDesc {
        FileDesc {
            number,
            size,
            entry_count: 1,
            smallest_key: smallest.into(),
            smallest_trailer: 0,
            largest_key: largest.into(),
            largest_trailer: 0,
        }
    }

    fn pick(files: &[FileDesc], next: &[FileDesc]) -> Option<u64> {
        min_overlapping_ratio(files, next, |d| d).map(|d| d.number)
    }

    #[test]
    fn the_file_overlapping_the_fewest_bytes_per_byte_is_picked() {
        let next = [
            file(10, "a", "c", 100),
            file(11, "d", "f", 300),
            file(12, "g", "k", 50),
            file(13, "m", "p", 10),
        ];
        // Overlap per own byte: 1 (100/100), 7 (350/50 — two files below), 0.25 (50/200),
        // 0.5 (10/20).
        let files =
            [file(1, "a", "b", 100), file(2, "e", "h", 50), file(3, "i", "j", 200), file(4, "n", "o", 20)];
        assert_eq!(pick(&files, &next), Some(3));
        // A file overlapping nothing below wins (it moves down without a rewrite).
        let files = [file(1, "a", "b", 100), file(3, "i", "j", 200), file(5, "l", "l", 1)];
        assert_eq!(pick(&files, &next), Some(5));
        // The last file below can meet two files of this level.
        let files = [file(6, "d", "d", 10), file(7, "e", "e", 30), file(8, "z", "z", 1)];
        assert_eq!(pick(&files[..2], &next), Some(7));
        assert_eq!(pick(&files, &next), Some(8));
        assert_eq!(pick(&[], &next), None);
    }

    #[test]
    fn ties_go_to_the_oldest_file() {
        let next = [file(10, "a", "c", 100), file(11, "x", "z", 100)];
        let files = [file(9, "a", "b", 50), file(4, "x", "y", 50)];
        assert_eq!(pick(&files, &next), Some(4));
        // Every file of an empty level below ties at 0.
        let files = [file(9, "a", "b", 50), file(4, "x", "y", 60), file(7, "m", "n", 1)];
        assert_eq!(pick(&files, &[]), Some(4));
    }
}
