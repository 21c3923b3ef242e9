//! Leveled compaction: choosing what to compact, and doing it.
//!
//! Level 0 is compacted into level 1 when it has `l0_compaction_trigger` files; level
//! L >= 1 into L+1 when its bytes exceed its target (`level1_target_bytes` ×
//! `level_size_ratio`^(L-1)). The level with the highest score goes first. From level 0
//! every file is taken (they overlap); from a deeper level one file, round robin through the
//! key space, plus every file of the next level it overlaps. A file with nothing to merge
//! with is moved down without rewriting (a trivial move). Outputs are cut at
//! `target_file_size`, but never between two versions of one user key, so the files of a
//! level have disjoint user-key ranges.

use super::flush::TableOutput;
use super::gc::{Decision, GcFilter};
use super::{DbInner, ReadState};
use crate::iter::{InternalIterator, LevelIter, MergingIter};
use crate::stats::Counters;
use crate::version::{TableFile, Version, VersionEdit, NUM_LEVELS};
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

impl DbInner {
    fn level_target_bytes(&self, level: usize) -> u64 {
        let mut target = self.options.level1_target_bytes;
        for _ in 1..level {
            target = target.saturating_mul(self.options.level_size_ratio);
        }
        target
    }

    /// The most urgent compaction of `version`: a level over its limit first, else a table
    /// holding values expired at `gc_time_ms`.
    fn pick(&self, version: &Version, pointers: &mut [Vec<u8>; NUM_LEVELS], gc_time_ms: u64) -> Option<Plan> {
        self.pick_by_size(version, pointers).or_else(|| Self::pick_expired(version, gc_time_ms))
    }

    /// The table whose expired values have waited longest, rewritten in place (from level
    /// 0, with the rest of level 0, into level 1). After the rewrite none of its values is
    /// expired at `gc_time_ms` (they are dropped or become tombstones), so it is not
    /// picked again for the same reason.
    fn pick_expired(version: &Version, gc_time_ms: u64) -> Option<Plan> {
        let (level, file) = version
            .all_files()
            .filter(|(_, f)| f.earliest_expiry_ms().is_some_and(|at| at <= gc_time_ms))
            .min_by_key(|(_, f)| f.earliest_expiry_ms())?;
        if level == 0 {
            return Some(Self::plan_whole_level(version, 0, 1));
        }
        Some(Plan { level, output_level: level, inputs: vec![file.clone()], overlapping: Vec::new() })
    }

    /// The level most over its size (or file count) limit, if any.
    fn pick_by_size(&self, version: &Version, pointers: &mut [Vec<u8>; NUM_LEVELS]) -> Option<Plan> {
        let mut best: Option<(f64, usize)> = None;
        let l0_score = version.files(0).len() as f64 / self.options.l0_compaction_trigger as f64;
        if l0_score >= 1.0 {
            best = Some((l0_score, 0));
        }
        for level in 1..NUM_LEVELS - 1 {
            let score = version.level_bytes(level) as f64 / self.level_target_bytes(level) as f64;
            if score >= 1.0 && best.is_none_or(|(s, _)| score > s) {
                best = Some((score, level));
            }
        }
        let (_, level) = best?;
        if level == 0 {
            return Some(Self::plan_whole_level(version, 0, 1));
        }
        let files = version.files(level);
        let pointer = pointers.get_mut(level)?;
        let file = files.iter().find(|f| f.desc.largest_key > *pointer).or(files.first())?.clone();
        *pointer = file.desc.largest_key.clone();
        let overlapping = version.overlapping(level + 1, &file.desc.smallest_key, &file.desc.largest_key);
        Some(Plan { level, output_level: level + 1, inputs: vec![file], overlapping })
    }

    /// All files of `level` and the files of `output_level` they overlap.
    fn plan_whole_level(version: &Version, level: usize, output_level: usize) -> Plan {
        let inputs = version.files(level).to_vec();
        let overlapping = match key_range(&inputs) {
            Some((lo, hi)) if output_level != level => version.overlapping(output_level, &lo, &hi),
            _ => Vec::new(),
        };
        Plan { level, output_level, inputs, overlapping }
    }

    /// Runs one compaction and installs its result.
    fn run(&self, plan: &Plan) -> Result<()> {
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
        // and disjoint: one level iterator holds one of them open at a time.
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if plan.level == 0 {
            children.extend(plan.inputs.iter().map(|f| Box::new(LevelIter::new(vec![f.clone()])) as _));
        } else {
            children.push(Box::new(LevelIter::new(plan.inputs.clone())));
        }
        if !plan.overlapping.is_empty() {
            children.push(Box::new(LevelIter::new(plan.overlapping.clone())));
        }
        let mut iter = MergingIter::new(children);
        iter.seek_to_first()?;
        let mut filter = GcFilter::new(self.gc_point());
        let mut base = BaseLevelCheck::new(version, plan.output_level);
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
                    output = Some(self.start_table(plan.output_level)?);
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
            let plan = {
                let mut versions = inner.versions.lock();
                inner.pick(&version, &mut versions.compact_pointers, gc_time_ms)
            };
            let Some(plan) = plan else {
                return Ok(());
            };
            inner.run(&plan)?;
        }
        // After releasing the compaction lock: waking writers takes the commit lock,
        // which comes first in the lock order.
        inner.notify_room();
    }
}

/// Compacts everything into the deepest non-empty level and rewrites that level, so no
/// shadowed version, tombstone or expired value a reader cannot see is left.
pub(crate) fn compact_all(inner: &DbInner) -> Result<()> {
    let running = inner.compaction_lock.lock();
    let version = inner.read_state.read().version.clone();
    let deepest = (1..NUM_LEVELS).rev().find(|&l| !version.files(l).is_empty()).unwrap_or(1);
    for level in 0..deepest {
        let version = inner.read_state.read().version.clone();
        if version.files(level).is_empty() {
            continue;
        }
        let plan = DbInner::plan_whole_level(&version, level, level + 1);
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
