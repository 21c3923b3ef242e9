//! KV Connect's wire formats, shared by stampkv's server and client: the protobuf messages
//! of the data path (`com.deno.kv.datapath`, written by hand so that the build needs no
//! `protoc`) and the framing of a watch stream ([`frame`]). `FORMAT.md` beside this crate
//! describes both byte by byte.
//!
//! ```
//! use prost::Message;
//! use stampkv_proto::{ReadRange, SnapshotRead};
//!
//! // What Deno sends for `kv.get(["a"])`.
//! let read = SnapshotRead {
//!     ranges: vec![ReadRange { start: vec![2, b'a', 0], end: vec![2, b'a', 0, 0], limit: 1, reverse: false }],
//! };
//! assert_eq!(read.encode_to_vec(), [0x0a, 0x0d, 0x0a, 0x03, 2, b'a', 0, 0x12, 0x04, 2, b'a', 0, 0, 0x18, 1]);
//! ```

pub mod frame;
mod messages;

pub use messages::*;
