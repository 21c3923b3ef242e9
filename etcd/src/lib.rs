//! stampkv's cluster store: the Deno KV layer ([`stampkv::Kv`]) on an etcd 3.4+ cluster,
//! so that any number of stateless `stampkv serve --etcd` processes serve one replicated,
//! highly available database.
//!
//! etcd provides the replication (Raft), one global MVCC revision, compare-and-swap
//! transactions and watch; this crate maps the storage seam ([`stampkv::store::Store`])
//! onto them, and nothing of Deno KV itself: the data model above the seam is the same
//! code as on the LSM engine.
//!
//! - **Commits** are optimistic: built on a read point, applied by one etcd transaction
//!   that compares the commit counter `R m seq` and writes it with the commit's entries.
//!   Every commit writes the counter, so commits are serialised by etcd and the counter
//!   is the version (the versionstamp), increasing in commit order across all servers. A
//!   commit that lost the race to another server is built again.
//! - **A lost answer** (a leader died with the commit in flight) is settled, never retried
//!   blindly: a fence transaction either bumps the counter first, so the lost commit can
//!   never apply, or finds it moved and reads this server's receipt to learn whether the
//!   commit applied ([`EtcdStore`]'s `settle`).
//! - **Reads** take the latest revision with a linearizable read of the counter and read
//!   everything of one snapshot at that revision.
//! - **The change feed** is an etcd watch on the data range; it wakes watches and queue
//!   listeners for commits made through other servers.
//! - **The expiry sweeper** deletes entries whose expiry has passed (reads hide them from
//!   then on), found through an expiry index that commits write beside them.
//!
//! The layout of the keys and values in etcd is in FORMAT.md beside this crate.

#![forbid(unsafe_code)]

mod bridge;
mod bulk;
mod compactor;
mod error;
mod feed;
mod group;
mod layout;
mod metrics;
mod options;
mod snapshot;
mod status;
mod store;
mod sweeper;

pub use layout::{ENVELOPE_HEADER_BYTES, LAYOUT_VERSION as FORMAT_VERSION};
pub use metrics::{EtcdStats, LatencySummary};
pub use options::{EtcdOptions, DEFAULT_PREFIX};
pub use snapshot::{EtcdCursor, EtcdSnapshot};
pub use status::MemberStatus;
pub use store::{EtcdStore, REQUIRED_TXN_OPS};
