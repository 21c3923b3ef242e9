//! KV Connect, the protocol Deno's remote databases speak, shared by stampkv's server, edge
//! and client: the protobuf messages of the data path (`com.deno.kv.datapath`, written by
//! hand so that the build needs no `protoc`), the framing of a watch stream ([`frame`]),
//! values to and from their protobuf form ([`value_to_proto`], [`value_from_proto`]), and,
//! with the `http` feature, what every HTTP front end shares ([`http`]). `FORMAT.md` beside
//! this crate describes the bytes.
//!
//! ```
//! use prost::Message;
//! use stampkv_kvconnect::{ReadRange, SnapshotRead};
//!
//! // What Deno sends for `kv.get(["a"])`.
//! let read = SnapshotRead {
//!     ranges: vec![ReadRange { start: vec![2, b'a', 0], end: vec![2, b'a', 0, 0], limit: 1, reverse: false }],
//! };
//! assert_eq!(read.encode_to_vec(), [0x0a, 0x0d, 0x0a, 0x03, 2, b'a', 0, 0x12, 0x04, 2, b'a', 0, 0, 0x18, 1]);
//! ```

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod frame;
#[cfg(feature = "http")]
pub mod http;
mod messages;
mod values;

pub use messages::*;
pub use values::{value_from_proto, value_to_proto, InvalidEncoding};
