//! "Checksum collision" robustness: corrupt bytes *inside* blocks (and the footer) and
//! then re-seal them with valid checksums, so that the decoders themselves see the
//! damage. Opening, scanning and point lookups must never panic; they may return errors
//! or wrong data (the checksum was defeated on purpose).

use std::sync::Arc;

use crate::block::{Block, BlockIter};
use crate::format::{block_checksum, BlockHandle, Footer, FOOTER_LEN};
use crate::table::read_metaindex;
use crate::{Compression, ReadAt, Table, TableBuilder, TableOptions};

/// A multi-block table: `n` entries, values of `value_len(i)` bytes.
fn build_with(
    n: u64,
    block_size: usize,
    restart_interval: usize,
    compression: Compression,
    value_len: impl Fn(u64) -> usize,
) -> (Vec<u8>, Vec<(Vec<u8>, u64)>) {
    let opts = TableOptions {
        block_size,
        restart_interval,
        bloom_bits_per_key: 10,
        compression,
        restart_bytes: 0,
        index_restart_interval: 1,
    };
    let mut b = TableBuilder::new(Vec::new(), opts);
    let mut keys = Vec::new();
    for i in 0..n {
        let user = format!("k{:02}", i / 2).into_bytes();
        let trailer = 1000 - i;
        b.add(&user, trailer, &vec![b'v'; value_len(i)]).unwrap();
        keys.push((user, trailer));
    }
    (b.finish(&[("p", b"q")]).unwrap().1, keys)
}

fn build(compression: Compression) -> (Vec<u8>, Vec<(Vec<u8>, u64)>) {
    build_with(90, 96, 3, compression, |i| (i % 7) as usize)
}

/// Every block of the file (data, filter, properties, metaindex, index).
fn all_blocks(file: &[u8]) -> Vec<BlockHandle> {
    let footer = Footer::decode(&file[file.len() - FOOTER_LEN..], "t", 0).unwrap();
    let meta = read_metaindex(&file.to_vec(), "t", footer).unwrap();
    let mut handles = vec![footer.index, footer.metaindex, meta.properties];
    handles.extend(meta.filter);
    let start = footer.index.offset as usize;
    let index = Block::new(file[start..start + footer.index.size as usize].to_vec()).unwrap();
    let mut it = BlockIter::new(&index, true);
    it.seek_to_first();
    while it.valid() {
        handles.push(BlockHandle::decode(it.value()).unwrap());
        it.next();
    }
    handles
}

/// Recomputes the trailer checksum of the block at `h`.
fn reseal(file: &mut [u8], h: BlockHandle) {
    let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
    let crc = block_checksum(&file[start..end], file[end], h.offset);
    file[end + 1..end + 5].copy_from_slice(&crc.to_le_bytes());
}

/// Recomputes the footer checksum.
fn reseal_footer(file: &mut [u8]) {
    let start = file.len() - FOOTER_LEN;
    let crc = stampkv_coding::crc::mask(crc32fast::hash(&file[start..start + 44]));
    file[start + 44..start + 48].copy_from_slice(&crc.to_le_bytes());
}

/// Runs every read path; only panics (and endless loops) count as failures. Returns
/// whether the damaged table opened.
fn exercise(file: Vec<u8>, keys: &[(Vec<u8>, u64)]) -> bool {
    let file: Arc<dyn ReadAt> = Arc::new(file);
    let Ok(table) = Table::open(file, 1, "t".into(), None) else {
        return false;
    };
    let limit = 4 * keys.len() + 16;
    let mut it = table.iter();
    let mut ok = it.seek_to_first().is_ok();
    for _ in 0..limit {
        if !ok || !it.valid() {
            break;
        }
        let _ = (it.user_key(), it.trailer(), it.value());
        ok = it.next().is_ok();
    }
    ok = it.seek_to_last().is_ok();
    for _ in 0..limit {
        if !ok || !it.valid() {
            break;
        }
        ok = it.prev().is_ok();
    }
    for (user, trailer) in keys.iter().step_by(3) {
        let _ = table.get(user, *trailer);
        let _ = it.seek(user, *trailer).and_then(|_| it.next());
        let _ = it.seek_for_prev(user, *trailer).and_then(|_| it.prev());
    }
    true
}

#[test]
fn resealed_corruption_never_panics() {
    resealed_corruption_never_panics_with(Compression::None);
}

/// As above, with most data blocks LZ4-compressed: the damage reaches the decompressor,
/// and whatever it produces reaches the block decoder.
#[test]
fn resealed_corruption_of_compressed_blocks_never_panics() {
    resealed_corruption_never_panics_with(Compression::Lz4);
}

fn resealed_corruption_never_panics_with(compression: Compression) {
    let (file, keys) = build(compression);
    let blocks = all_blocks(&file);
    if compression == Compression::Lz4 {
        let compressed = blocks.iter().filter(|h| file[(h.offset + h.size) as usize] == 1).count();
        assert!(compressed > 5, "only {compressed} blocks compressed");
    }
    assert!(blocks.len() > 10, "want a multi-block table");
    println!("file {} bytes, {} blocks", file.len(), blocks.len());
    let (mut runs, mut opened) = (0, 0);
    for h in &blocks {
        for pos in h.offset as usize..(h.offset + h.size) as usize {
            for variant in 0..4u8 {
                let mut damaged = file.clone();
                damaged[pos] = match variant {
                    0 => damaged[pos] ^ 0x01,
                    1 => damaged[pos] ^ 0x80,
                    2 => 0x00,
                    _ => 0xff,
                };
                reseal(&mut damaged, *h);
                runs += 1;
                opened += usize::from(exercise(damaged, &keys));
            }
        }
    }
    // Footer fields (handles, version, kind, padding) with a valid footer checksum.
    for pos in file.len() - FOOTER_LEN..file.len() - FOOTER_LEN + 44 {
        for delta in [1u8, 0x80, 0x10] {
            let mut damaged = file.clone();
            damaged[pos] ^= delta;
            reseal_footer(&mut damaged);
            exercise(damaged, &keys);
        }
    }
    // Data blocks are most of the file and are only checked when read: most damaged
    // files still open, so the scans above really ran over damaged blocks.
    assert!(opened * 2 > runs, "only {opened} of {runs} damaged tables opened");
}

/// Several random byte changes per block (random values, so multi-byte varints and huge
/// lengths show up), resealed; values long enough that lengths need 2-byte varints.
#[test]
fn resealed_random_damage_never_panics() {
    for compression in [Compression::None, Compression::Lz4] {
        resealed_random_damage_never_panics_with(compression);
    }
}

fn resealed_random_damage_never_panics_with(compression: Compression) {
    let (file, keys) = build_with(40, 600, 16, compression, |i| 100 + 7 * i as usize);
    let blocks = all_blocks(&file);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut damaged = file.clone();
        let h = blocks[(rnd() % blocks.len() as u64) as usize];
        for _ in 0..1 + rnd() % 4 {
            let pos = (h.offset + rnd() % h.size.max(1)) as usize;
            damaged[pos] = rnd() as u8;
        }
        reseal(&mut damaged, h);
        exercise(damaged, &keys);
    }
}
