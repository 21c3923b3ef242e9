//! Footer checks: magic, checksum, version.

use std::sync::Arc;

use stampkv_sstable::{ReadAt, Table, TableError, TableOptions, FOOTER_SIZE, FORMAT_VERSION};

use crate::common::{build, fixed_entries};

fn open_err(bytes: Vec<u8>) -> TableError {
    let file: Arc<dyn ReadAt> = Arc::new(bytes);
    Table::open(file, 1, "f.sst".into(), None).unwrap_err()
}

/// The masked CRC, spelled exactly as FORMAT.md documents it.
#[allow(clippy::manual_rotate)]
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32fast::hash(bytes);
    ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8)
}

#[test]
fn bad_magic_is_corruption() {
    let mut file = build(&fixed_entries(10, 10), TableOptions::default());
    let last = file.len() - 1;
    file[last] ^= 0x20;
    match open_err(file) {
        TableError::Corruption { file, offset, reason } => {
            assert_eq!(file, "f.sst");
            assert!(reason.contains("magic"), "{reason}");
            assert!(offset > 0);
        }
        e => panic!("unexpected {e}"),
    }
}

#[test]
fn bad_footer_checksum_is_corruption() {
    let mut file = build(&fixed_entries(10, 10), TableOptions::default());
    let footer = file.len() - FOOTER_SIZE;
    file[footer + 40] ^= 1; // padding, covered by the footer CRC
    assert!(matches!(open_err(file), TableError::Corruption { .. }));
}

#[test]
fn unknown_version_is_unsupported() {
    let mut file = build(&fixed_entries(10, 10), TableOptions::default());
    let footer = file.len() - FOOTER_SIZE;
    assert_eq!(file[footer + 32..footer + 36], FORMAT_VERSION.to_le_bytes());
    file[footer + 32..footer + 36].copy_from_slice(&3u32.to_le_bytes());
    let crc = masked_crc(&file[footer..footer + 44]);
    file[footer + 44..footer + 48].copy_from_slice(&crc.to_le_bytes());
    match open_err(file) {
        TableError::Unsupported { file, version } => {
            assert_eq!((file.as_str(), version), ("f.sst", 3));
        }
        e => panic!("unexpected {e}"),
    }
}

#[test]
fn footer_layout_matches_format_doc() {
    let file = build(&fixed_entries(10, 10), TableOptions::default());
    let footer = &file[file.len() - FOOTER_SIZE..];
    assert_eq!(FOOTER_SIZE, 56);
    assert_eq!(&footer[48..], b"\x89STAMPKV");
    assert_eq!(footer[36], 1, "checksum kind");
    assert!(footer[37..44].iter().all(|&b| b == 0), "padding");
    assert_eq!(masked_crc(&footer[..44]).to_le_bytes(), footer[44..48]);
    // Index block (+ 5-byte trailer) ends exactly at the footer.
    let index_offset = u64::from_le_bytes(footer[16..24].try_into().unwrap());
    let index_size = u64::from_le_bytes(footer[24..32].try_into().unwrap());
    assert_eq!(index_offset + index_size + 5, (file.len() - FOOTER_SIZE) as u64);
    let err = TableError::Corruption { file: "x".into(), offset: 3, reason: "r".into() };
    assert_eq!(err.to_string(), "corrupt table x at offset 3: r");
}
