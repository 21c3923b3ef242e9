//! `stampkv-coding`: the byte encodings every stampkv on-disk format is built from.
//!
//! * Varints ([`put_varint64`], [`get_varint64`], [`put_varint32`], [`get_varint32`]) are
//!   LevelDB's / protobuf's LEB128: seven value bits per byte, least significant group
//!   first, the high bit set on every byte except the last. A `u64` takes at most
//!   [`MAX_VARINT64_LEN`] bytes, a `u32` at most [`MAX_VARINT32_LEN`].
//! * [`Reader`] is a cursor over untrusted bytes whose every read is checked.
//! * [`crc::mask`] and [`crc::unmask`] are LevelDB's masking of stored CRC-32 checksums.
//!
//! Decoders never panic: they return `None` on truncated input, on encodings longer than
//! the type allows and on values that overflow it (for a `u64`, a tenth byte above 1).
//!
//! ```
//! use stampkv_coding::{get_varint64, put_varint64};
//! let mut buf = Vec::new();
//! put_varint64(&mut buf, 300);
//! assert_eq!(buf, [0xAC, 0x02]);
//! assert_eq!(get_varint64(&buf), Some((300, 2)));
//! ```

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod crc;
mod reader;
mod varint;

pub use reader::Reader;
pub use varint::{
    get_u32_le, get_u64_le, get_varint32, get_varint64, put_length_prefixed, put_varint32, put_varint64,
    varint_len, MAX_VARINT32_LEN, MAX_VARINT64_LEN,
};
