//! How big each level may grow, and where each level compacts into.
//!
//! **Static** (`Options::dynamic_level_bytes == false`): level L >= 1 may hold
//! `level1_target_bytes` × `level_size_ratio`^(L-1); level 0 compacts into level 1.
//!
//! **Dynamic** (the default, RocksDB's `level_compaction_dynamic_level_bytes`): the targets
//! are derived from the largest level `S` (in a steady state the last one, level 6), as if
//! it sat in the last level: level L gets `S / ratio^(6-L)`. The **base level** is the
//! first level whose share `S / ratio^(6-L)` is at most `level1_target_bytes` (`B`), so it
//! is in (B/ratio, B] unless the base level is 1 or 6; level 0 compacts into it, the levels
//! between 0 and it are meant to be empty, and no level at or below it gets a target below
//! B (level 0 would otherwise outgrow its destination). With `ratio` 10, S = 10 GB and
//! B = 256 MiB: level 6 is 10 GB, level 5 1 GB, level 4 (100 MB natural share) is the
//! base level with target 256 MiB, levels 1 to 3 stay empty. The levels above the last
//! then hold at most about S/(ratio-1) (plus B at the base level), so a steady state uses
//! about (1 + 1/(ratio-1)) × S bytes.

use crate::options::Options;
use crate::version::{Version, NUM_LEVELS};

/// The deepest level.
pub(crate) const LAST_LEVEL: usize = NUM_LEVELS - 1;

/// Size targets of the levels and the level that level 0 compacts into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LevelTargets {
    /// The level that level 0 compacts into; the levels between 0 and it are meant to be
    /// empty.
    pub base_level: usize,
    /// Target bytes per level: 0 for level 0 (it has a file-count trigger instead) and for
    /// the levels above the base level. The last level's target is never enforced.
    pub bytes: [u64; NUM_LEVELS],
}

impl LevelTargets {
    /// The targets `options` gives `version`.
    pub(super) fn of(options: &Options, version: &Version) -> Self {
        if options.dynamic_level_bytes {
            let largest = (1..NUM_LEVELS).map(|l| version.level_bytes(l)).max().unwrap_or(0);
            Self::dynamic(largest, options.level1_target_bytes, options.level_size_ratio)
        } else {
            Self::fixed(options.level1_target_bytes, options.level_size_ratio)
        }
    }

    /// Static targets: `base` × `ratio`^(L-1) for level L >= 1.
    pub(super) fn fixed(base: u64, ratio: u64) -> Self {
        let mut bytes = [0; NUM_LEVELS];
        let mut target = base;
        for slot in bytes.iter_mut().skip(1) {
            *slot = target;
            target = target.saturating_mul(ratio);
        }
        LevelTargets { base_level: 1, bytes }
    }

    /// Dynamic targets for a largest level of `largest` bytes (see the module docs).
    pub(super) fn dynamic(largest: u64, base: u64, ratio: u64) -> Self {
        let ratio = ratio.max(2);
        let mut base_level = LAST_LEVEL;
        let mut share = largest;
        while base_level > 1 && share > base {
            base_level -= 1;
            share /= ratio;
        }
        let mut bytes = [0; NUM_LEVELS];
        let mut share = largest;
        for slot in bytes.iter_mut().skip(base_level).rev() {
            *slot = share.max(base);
            share /= ratio;
        }
        LevelTargets { base_level, bytes }
    }

    /// The target of `level` (0 if it has none).
    pub(super) fn target(&self, level: usize) -> u64 {
        self.bytes.get(level).copied().unwrap_or(0)
    }

    /// How urgently `level` (1 to 5) needs compacting; >= 1 means it must be. A non-empty
    /// level above the base level scores 1, so it drains once nothing more urgent waits.
    pub(super) fn score(&self, level: usize, level_bytes: u64) -> f64 {
        if level < self.base_level {
            return if level_bytes > 0 { 1.0 } else { 0.0 };
        }
        level_bytes as f64 / self.target(level).max(1) as f64
    }

    /// The level that `level` compacts into: the next one from the base level down; from
    /// above the base level, the first non-empty level on the way to the base level (the
    /// empty levels in between are skipped, which keeps newer data above older data).
    pub(super) fn output_level(&self, version: &Version, level: usize) -> usize {
        if level >= self.base_level {
            return level + 1;
        }
        (level + 1..self.base_level).find(|&l| !version.files(l).is_empty()).unwrap_or(self.base_level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GB: u64 = 1_000_000_000;

    #[test]
    fn static_targets_grow_by_the_ratio_from_level_1() {
        let targets = LevelTargets::fixed(256 * MIB, 10);
        assert_eq!(targets.base_level, 1);
        assert_eq!(
            targets.bytes,
            [0, 256 * MIB, 2560 * MIB, 25600 * MIB, 256000 * MIB, 2560000 * MIB, 25600000 * MIB]
        );
    }

    #[test]
    fn a_10_gb_last_level_makes_level_4_the_base_level() {
        let targets = LevelTargets::dynamic(10 * GB, 256 * MIB, 10);
        assert_eq!(targets.base_level, 4, "{targets:?}");
        // Level 4's natural share (100 MB) is raised to the base target.
        assert_eq!(targets.bytes, [0, 0, 0, 0, 256 * MIB, GB, 10 * GB]);
    }

    #[test]
    fn a_small_database_compacts_level_0_straight_into_the_last_level() {
        for largest in [0, 1, 256 * MIB] {
            let targets = LevelTargets::dynamic(largest, 256 * MIB, 10);
            assert_eq!(targets.base_level, LAST_LEVEL, "{largest}");
            assert_eq!(targets.bytes, [0, 0, 0, 0, 0, 0, 256 * MIB], "{largest}");
        }
        // One byte more and level 5 takes over as base level.
        let targets = LevelTargets::dynamic(256 * MIB + 1, 256 * MIB, 10);
        assert_eq!(targets.base_level, 5);
        assert_eq!(targets.bytes, [0, 0, 0, 0, 0, 256 * MIB, 256 * MIB + 1]);
    }

    #[test]
    fn the_base_level_moves_up_one_level_per_factor_of_the_ratio() {
        let base = 32 << 10;
        let mut previous = LAST_LEVEL;
        for exponent in 0..12 {
            let largest = (base + 4) * 4u64.pow(exponent);
            let targets = LevelTargets::dynamic(largest, base, 4);
            let expected = LAST_LEVEL.saturating_sub(exponent as usize + 1).max(1);
            assert_eq!(targets.base_level, expected, "{largest}: {targets:?}");
            assert!(targets.base_level <= previous);
            previous = targets.base_level;
            // The natural share of the base level is in (B/ratio, B] until level 1 is reached.
            let share = largest / 4u64.pow((LAST_LEVEL - targets.base_level) as u32);
            if targets.base_level > 1 {
                assert!(share > base / 4 && share <= base, "{largest}: share {share}");
            }
            assert_eq!(targets.target(LAST_LEVEL), largest.max(base));
            for level in 1..targets.base_level {
                assert_eq!(targets.target(level), 0);
            }
            for level in targets.base_level..LAST_LEVEL {
                assert!(targets.target(level) >= base);
                assert!(targets.target(level + 1) >= targets.target(level));
            }
        }
    }

    #[test]
    fn level_1_becomes_a_large_base_level_when_the_last_level_is_huge() {
        let targets = LevelTargets::dynamic(u64::MAX, 256 * MIB, 10);
        assert_eq!(targets.base_level, 1);
        assert_eq!(targets.target(LAST_LEVEL), u64::MAX);
        assert_eq!(targets.target(1), u64::MAX / 100_000);
    }

    #[test]
    fn levels_above_the_base_level_score_1_when_not_empty() {
        let targets = LevelTargets::dynamic(10 * GB, 256 * MIB, 10);
        assert_eq!(targets.score(2, 0), 0.0);
        assert_eq!(targets.score(2, 1), 1.0);
        assert_eq!(targets.score(4, 128 * MIB), 0.5);
        assert_eq!(targets.score(5, 2 * GB), 2.0);
    }
}
