//! Test support shared by stampkv's crates (a dev-dependency only; never part of the
//! database): the seeded generator that every randomised test uses, so that a seed means
//! the same sequence everywhere, and the plumbing of the process-kill tests.

#![forbid(unsafe_code)]

mod data;
pub mod etcd;
pub mod process;
mod rng;

pub use data::json_like_record;
pub use rng::SplitMix64;
