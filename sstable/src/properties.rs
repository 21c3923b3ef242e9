//! The properties block: table statistics, key range and user properties.
//!
//! Stored as a block (same entry format as data blocks, keys are plain names without a
//! trailer, sorted bytewise). Numbers are varint64 values; `format_version` too. Key
//! bounds are stored keys (user key ++ encoded trailer). User properties are stored
//! under `"user." ++ name`.

use std::collections::BTreeMap;

use crate::block::{Block, BlockIter};
use crate::block_builder::BlockBuilder;
use crate::key::{push_stored_key, split_stored_key};
use stampkv_coding::{get_varint64, put_varint64};

const DATA_BLOCKS: &str = "stampkv.data_blocks";
const DATA_BYTES: &str = "stampkv.data_bytes";
const ENTRIES: &str = "stampkv.entries";
const FILTER_BYTES: &str = "stampkv.filter_bytes";
const FORMAT_VERSION: &str = "stampkv.format_version";
const INDEX_BYTES: &str = "stampkv.index_bytes";
const LARGEST_KEY: &str = "stampkv.largest_key";
const RAW_KEY_BYTES: &str = "stampkv.raw_key_bytes";
const RAW_VALUE_BYTES: &str = "stampkv.raw_value_bytes";
const SMALLEST_KEY: &str = "stampkv.smallest_key";
const UNCOMPRESSED_DATA_BYTES: &str = "stampkv.uncompressed_data_bytes";
/// Prefix of user property names in the block.
const USER_PREFIX: &str = "user.";

/// What the properties block of a table records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableProperties {
    /// Format version of the file (1 or 2).
    pub format_version: u32,
    /// Number of entries.
    pub entry_count: u64,
    /// Number of data blocks.
    pub data_block_count: u64,
    /// Bytes of the data region: all data blocks as stored, including their 5-byte
    /// trailers.
    pub data_bytes: u64,
    /// What `data_bytes` would be with every data block stored uncompressed. Equal to
    /// `data_bytes` for format version 1 files, which do not record it.
    pub uncompressed_data_bytes: u64,
    /// Bytes of the index block including its trailer.
    pub index_bytes: u64,
    /// Bytes of the filter block including its trailer (0 without a filter).
    pub filter_bytes: u64,
    /// Sum over entries of user key length + 8 (the trailer).
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// The first (user key, trailer) in table order; `None` for an empty table.
    pub smallest: Option<(Vec<u8>, u64)>,
    /// The last (user key, trailer) in table order; `None` for an empty table.
    pub largest: Option<(Vec<u8>, u64)>,
    /// User properties passed to [`TableBuilder::finish`](crate::TableBuilder::finish).
    pub user: BTreeMap<String, Vec<u8>>,
}

impl TableProperties {
    /// Approximate heap bytes held (key bounds and user properties; BTreeMap nodes
    /// counted as one key and value slot per entry).
    pub(crate) fn memory_usage(&self) -> usize {
        let key = |k: &Option<(Vec<u8>, u64)>| k.as_ref().map_or(0, |(user, _)| user.capacity());
        let slot = std::mem::size_of::<String>() + std::mem::size_of::<Vec<u8>>();
        let user: usize =
            self.user.iter().map(|(name, value)| slot + name.capacity() + value.capacity()).sum();
        key(&self.smallest) + key(&self.largest) + user
    }

    /// The properties block contents.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut entries: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut num = |name: &str, v: u64| {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            entries.insert(name.as_bytes().to_vec(), buf);
        };
        num(DATA_BLOCKS, self.data_block_count);
        num(DATA_BYTES, self.data_bytes);
        num(ENTRIES, self.entry_count);
        num(FILTER_BYTES, self.filter_bytes);
        num(FORMAT_VERSION, u64::from(self.format_version));
        num(INDEX_BYTES, self.index_bytes);
        num(RAW_KEY_BYTES, self.raw_key_bytes);
        num(RAW_VALUE_BYTES, self.raw_value_bytes);
        num(UNCOMPRESSED_DATA_BYTES, self.uncompressed_data_bytes);
        for (name, bound) in [(SMALLEST_KEY, &self.smallest), (LARGEST_KEY, &self.largest)] {
            if let Some((user, trailer)) = bound {
                let mut key = Vec::new();
                push_stored_key(&mut key, user, *trailer);
                entries.insert(name.as_bytes().to_vec(), key);
            }
        }
        for (name, value) in &self.user {
            let key = [USER_PREFIX.as_bytes(), name.as_bytes()].concat();
            entries.insert(key, value.clone());
        }
        let mut block = BlockBuilder::new(16);
        for (k, v) in &entries {
            block.add(k, v);
        }
        std::mem::take(block.finish())
    }

    /// Decodes a properties block. Unknown `stampkv.` names are ignored (forward
    /// compatibility); every numeric property must be present.
    pub(crate) fn decode(block: &Block) -> Result<TableProperties, String> {
        let mut props = TableProperties::default();
        let mut seen: Vec<&'static str> = Vec::new();
        let mut it = BlockIter::new(block, false);
        it.seek_to_first();
        while it.valid() {
            if let Some(name) = props.apply(it.key(), it.value())? {
                seen.push(name);
            }
            it.next();
        }
        if it.is_corrupt() {
            return Err("malformed properties block".into());
        }
        for required in [
            DATA_BLOCKS,
            DATA_BYTES,
            ENTRIES,
            FILTER_BYTES,
            FORMAT_VERSION,
            INDEX_BYTES,
            RAW_KEY_BYTES,
            RAW_VALUE_BYTES,
        ] {
            if !seen.contains(&required) {
                return Err(format!("missing property {required}"));
            }
        }
        if props.format_version >= 2 && !seen.contains(&UNCOMPRESSED_DATA_BYTES) {
            return Err(format!("missing property {UNCOMPRESSED_DATA_BYTES}"));
        }
        if props.format_version < 2 {
            props.uncompressed_data_bytes = props.data_bytes;
        }
        if (props.entry_count > 0) != (props.smallest.is_some() && props.largest.is_some()) {
            return Err("key range does not match the entry count".into());
        }
        Ok(props)
    }

    /// Records one property; returns the known name it set, if any.
    fn apply(&mut self, key: &[u8], value: &[u8]) -> Result<Option<&'static str>, String> {
        if let Some(user_name) = key.strip_prefix(USER_PREFIX.as_bytes()) {
            let name =
                std::str::from_utf8(user_name).map_err(|_| "user property name is not UTF-8".to_string())?;
            self.user.insert(name.to_owned(), value.to_vec());
            return Ok(None);
        }
        let Ok(name) = std::str::from_utf8(key) else {
            return Ok(None);
        };
        if let Some((known, field)) = self.number_field(name) {
            *field = decode_number(known, value)?;
            return Ok(Some(known));
        }
        match name {
            FORMAT_VERSION => {
                let v = decode_number(FORMAT_VERSION, value)?;
                self.format_version = u32::try_from(v).map_err(|_| "bad format_version".to_string())?;
                Ok(Some(FORMAT_VERSION))
            }
            SMALLEST_KEY => {
                self.smallest = Some(decode_bound(value)?);
                Ok(Some(SMALLEST_KEY))
            }
            LARGEST_KEY => {
                self.largest = Some(decode_bound(value)?);
                Ok(Some(LARGEST_KEY))
            }
            _ => Ok(None),
        }
    }

    /// The numeric (u64) field a property name sets.
    fn number_field(&mut self, name: &str) -> Option<(&'static str, &mut u64)> {
        Some(match name {
            DATA_BLOCKS => (DATA_BLOCKS, &mut self.data_block_count),
            DATA_BYTES => (DATA_BYTES, &mut self.data_bytes),
            ENTRIES => (ENTRIES, &mut self.entry_count),
            FILTER_BYTES => (FILTER_BYTES, &mut self.filter_bytes),
            INDEX_BYTES => (INDEX_BYTES, &mut self.index_bytes),
            RAW_KEY_BYTES => (RAW_KEY_BYTES, &mut self.raw_key_bytes),
            RAW_VALUE_BYTES => (RAW_VALUE_BYTES, &mut self.raw_value_bytes),
            UNCOMPRESSED_DATA_BYTES => (UNCOMPRESSED_DATA_BYTES, &mut self.uncompressed_data_bytes),
            _ => return None,
        })
    }
}

/// A varint64 value that must fill the whole property value.
fn decode_number(name: &str, value: &[u8]) -> Result<u64, String> {
    match get_varint64(value) {
        Some((v, n)) if n == value.len() => Ok(v),
        _ => Err(format!("bad value for property {name}")),
    }
}

/// A stored-key bound (user key ++ encoded trailer).
fn decode_bound(value: &[u8]) -> Result<(Vec<u8>, u64), String> {
    split_stored_key(value)
        .map(|(user, trailer)| (user.to_vec(), trailer))
        .ok_or_else(|| "bad key bound property".to_string())
}
