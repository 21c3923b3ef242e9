//! On-disk framing: block handles, block trailers (type + context checksum), the footer.
//!
//! See `FORMAT.md` for the byte-level description.

use crate::compression::decode_block;
use crate::error::TableError;
use crate::read_at::ReadAt;
use stampkv_coding::crc::mask;
use stampkv_coding::{get_u32_le, get_u64_le, get_varint64, put_varint64};

/// Bytes after every block: type (1) + masked CRC-32 (4).
pub(crate) const BLOCK_TRAILER_LEN: usize = 5;
/// Size of the footer at the end of the file.
pub(crate) const FOOTER_LEN: usize = 56;
/// The magic number closing every table file (stored as these 8 bytes).
pub(crate) const MAGIC: [u8; 8] = *b"\x89STAMPKV";
/// The format version this code writes: 2, which added compressed blocks (type 1).
pub(crate) const FORMAT_VERSION: u32 = 2;
/// The oldest format version this code reads. Version 1 files hold only type-0 blocks
/// and no `stampkv.uncompressed_data_bytes` property; otherwise they read as version 2.
pub(crate) const MIN_FORMAT_VERSION: u32 = 1;
/// Checksum kind 1: masked CRC-32 (IEEE) over block bytes, type byte and block offset.
pub(crate) const CHECKSUM_KIND_CRC32_CONTEXT: u8 = 1;

/// Offset of the masked footer CRC within the footer.
const FOOTER_CRC_POS: usize = 44;
/// Offset of the magic number within the footer.
const FOOTER_MAGIC_POS: usize = 48;

/// The masked checksum of a block: CRC-32 over its bytes, its type byte and its file
/// offset (u64 LE). Including the offset makes a valid block read from the wrong
/// place fail verification.
pub(crate) fn block_checksum(contents: &[u8], block_type: u8, offset: u64) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(contents);
    hasher.update(&[block_type]);
    hasher.update(&offset.to_le_bytes());
    mask(hasher.finalize())
}

/// The 5-byte trailer to write after a block of type `block_type` stored at `offset`.
pub(crate) fn block_trailer(stored: &[u8], block_type: u8, offset: u64) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = block_checksum(stored, block_type, offset).to_le_bytes();
    [block_type, crc[0], crc[1], crc[2], crc[3]]
}

/// Where a block lives: its file offset and its size excluding the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    /// File offset of the first byte of the block.
    pub(crate) offset: u64,
    /// Block size in bytes, not counting the 5-byte trailer.
    pub(crate) size: u64,
}

impl BlockHandle {
    /// Appends the varint form (offset, size) used in index and metaindex values.
    pub(crate) fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a varint-form handle that must occupy all of `src`.
    pub(crate) fn decode(src: &[u8]) -> Option<BlockHandle> {
        let (offset, n) = get_varint64(src)?;
        let (size, m) = get_varint64(src.get(n..)?)?;
        (n.checked_add(m)? == src.len()).then_some(BlockHandle { offset, size })
    }

    /// The file offset just past the block's trailer; `None` on overflow.
    pub(crate) fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)?.checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The fixed-size footer at the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    /// The metaindex block.
    pub(crate) metaindex: BlockHandle,
    /// The index block.
    pub(crate) index: BlockHandle,
    /// The format version the file was written with.
    pub(crate) version: u32,
}

impl Footer {
    /// The footer bytes.
    pub(crate) fn encode(&self) -> [u8; FOOTER_LEN] {
        let version = self.version;
        let mut buf = Vec::with_capacity(FOOTER_LEN);
        for v in [self.metaindex.offset, self.metaindex.size, self.index.offset, self.index.size] {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        buf.extend_from_slice(&version.to_le_bytes());
        buf.push(CHECKSUM_KIND_CRC32_CONTEXT);
        buf.resize(FOOTER_CRC_POS, 0); // padding
        let crc = mask(crc32fast::hash(&buf));
        buf.extend_from_slice(&crc.to_le_bytes());
        buf.extend_from_slice(&MAGIC);
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&buf);
        out
    }

    /// Decodes and verifies a footer read from `offset` of file `file`. Checks, in this
    /// order: magic, CRC (both Corruption), version (Unsupported), checksum kind.
    pub(crate) fn decode(buf: &[u8], file: &str, offset: u64) -> Result<Footer, TableError> {
        let corrupt = |reason: &str| TableError::corruption(file, offset, reason);
        if buf.len() != FOOTER_LEN {
            return Err(corrupt("footer has the wrong length"));
        }
        if buf.get(FOOTER_MAGIC_POS..) != Some(&MAGIC[..]) {
            return Err(corrupt("bad magic number (not a stampkv table)"));
        }
        let stored_crc = get_u32_le(buf, FOOTER_CRC_POS).ok_or_else(|| corrupt("short footer"))?;
        let covered = buf.get(..FOOTER_CRC_POS).unwrap_or_default();
        if mask(crc32fast::hash(covered)) != stored_crc {
            return Err(corrupt("footer checksum mismatch"));
        }
        let version = get_u32_le(buf, 32).ok_or_else(|| corrupt("short footer"))?;
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(TableError::Unsupported { file: file.to_owned(), version });
        }
        if buf.get(36) != Some(&CHECKSUM_KIND_CRC32_CONTEXT) {
            return Err(corrupt("unknown checksum kind"));
        }
        let field = |pos: usize| get_u64_le(buf, pos).ok_or_else(|| corrupt("short footer"));
        Ok(Footer {
            metaindex: BlockHandle { offset: field(0)?, size: field(8)? },
            index: BlockHandle { offset: field(16)?, size: field(24)? },
            version,
        })
    }
}

/// Reads the block at `handle`, verifies its trailer and decodes it (decompressing a
/// compressed block); returns the block bytes. The block (with trailer) must end at or before `limit`, which callers set
/// to the end of the region the block belongs to; this bounds the allocation by the file
/// size whatever the handle says.
pub(crate) fn read_block(
    file: &dyn ReadAt,
    name: &str,
    handle: BlockHandle,
    limit: u64,
) -> Result<Vec<u8>, TableError> {
    read_block_with(name, handle, limit, |len| {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, handle.offset)?;
        Ok(buf)
    })
}

/// [`read_block`] with the block's stored bytes and trailer (`len` bytes at the handle's
/// offset) fetched by `fetch`: from the file, or from a readahead window.
pub(crate) fn read_block_with(
    name: &str,
    handle: BlockHandle,
    limit: u64,
    fetch: impl FnOnce(usize) -> std::io::Result<Vec<u8>>,
) -> Result<Vec<u8>, TableError> {
    let offset = handle.offset;
    let corrupt = |reason: String| TableError::corruption(name, offset, reason);
    let end = handle
        .end()
        .filter(|&end| end <= limit)
        .ok_or_else(|| corrupt(format!("block handle (size {}) out of range", handle.size)))?;
    let total =
        usize::try_from(end - offset).map_err(|_| corrupt("block too large for this platform".into()))?;
    let mut buf = fetch(total).map_err(|e| TableError::read_error(name, offset, e))?;
    if buf.len() != total {
        return Err(TableError::read_error(name, offset, std::io::ErrorKind::UnexpectedEof.into()));
    }
    let size = total - BLOCK_TRAILER_LEN;
    let (contents, trailer) = buf.split_at_checked(size).unwrap_or_default();
    let block_type = trailer.first().copied().unwrap_or(u8::MAX);
    let stored = get_u32_le(trailer, 1).unwrap_or_default();
    if block_checksum(contents, block_type, offset) != stored {
        return Err(corrupt("block checksum mismatch".into()));
    }
    buf.truncate(size);
    decode_block(block_type, buf).map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trip() {
        let f = Footer {
            metaindex: BlockHandle { offset: 1234, size: 56 },
            index: BlockHandle { offset: u64::MAX, size: 7 },
            version: FORMAT_VERSION,
        };
        for version in [MIN_FORMAT_VERSION, FORMAT_VERSION] {
            let f = Footer { version, ..f };
            assert_eq!(Footer::decode(&f.encode(), "t", 0).unwrap(), f);
        }
        for version in [0, FORMAT_VERSION + 1] {
            let bad = Footer { version, ..f }.encode();
            let err = Footer::decode(&bad, "t", 0).unwrap_err();
            assert!(matches!(err, TableError::Unsupported { version: v, .. } if v == version));
        }
    }

    #[test]
    fn handle_decoding_is_exact() {
        let h = BlockHandle { offset: 300, size: 1 << 40 };
        let mut buf = Vec::new();
        h.encode_to(&mut buf);
        assert_eq!(BlockHandle::decode(&buf), Some(h));
        buf.push(0);
        assert_eq!(BlockHandle::decode(&buf), None);
        assert_eq!(BlockHandle::decode(&[]), None);
        assert_eq!(BlockHandle { offset: u64::MAX, size: 1 }.end(), None);
    }
}
