//! The typed reads and single writes of [`RemoteKv`], named and typed as `stampkv::Kv`'s.

use crate::convert::{entry_from_proto, point_range, point_read_key};
use crate::watch::WatchStream;
use crate::{RemoteAtomic, RemoteError, RemoteKv};
use stampkv_kvconnect as proto;
use stampkv_model::{
    Consistency, FromKvValue, Key, KvEntryMaybe, KvError, Limits, SetOptions, ToKvValue, Versionstamp,
};

impl RemoteKv {
    /// Reads one key, strongly consistent.
    pub async fn get<T: FromKvValue>(&self, key: &Key) -> Result<KvEntryMaybe<T>, RemoteError> {
        self.get_with(key, Consistency::Strong).await
    }

    /// Reads one key with the given consistency (an eventual read goes to the eventual
    /// endpoint when the server lists one).
    pub async fn get_with<T: FromKvValue>(
        &self,
        key: &Key,
        consistency: Consistency,
    ) -> Result<KvEntryMaybe<T>, RemoteError> {
        let mut entries = self.get_many_with(std::slice::from_ref(key), consistency).await?;
        entries.pop().ok_or_else(|| RemoteError::Decode("a read of one key returned no result".into()))
    }

    /// Reads up to 10 keys from one snapshot, strongly consistent; results in argument order.
    pub async fn get_many<T: FromKvValue>(&self, keys: &[Key]) -> Result<Vec<KvEntryMaybe<T>>, RemoteError> {
        self.get_many_with(keys, Consistency::Strong).await
    }

    /// [`RemoteKv::get_many`] with the given consistency.
    pub async fn get_many_with<T: FromKvValue>(
        &self,
        keys: &[Key],
        consistency: Consistency,
    ) -> Result<Vec<KvEntryMaybe<T>>, RemoteError> {
        let limits = Limits::default();
        if keys.len() > limits.max_read_ranges {
            return Err(KvError::TooManyRanges { max: limits.max_read_ranges }.into());
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let ranges = keys
            .iter()
            .map(|key| point_read_key(key, &limits).map(point_range))
            .collect::<Result<Vec<_>, _>>()?;
        let output = self.snapshot_read_raw(&proto::SnapshotRead { ranges }, consistency).await?;
        if output.ranges.len() != keys.len() {
            return Err(RemoteError::Decode(format!(
                "{} ranges answered for {} asked",
                output.ranges.len(),
                keys.len()
            )));
        }
        keys.iter()
            .zip(output.ranges)
            .map(|(key, range)| match range.values.into_iter().next() {
                None => Ok(KvEntryMaybe { key: key.clone(), value: None, versionstamp: None }),
                Some(entry) => {
                    let (_, value, versionstamp) = entry_from_proto(entry)?;
                    let value = T::from_kv_value(value)?;
                    Ok(KvEntryMaybe {
                        key: key.clone(),
                        value: Some(value),
                        versionstamp: Some(versionstamp),
                    })
                }
            })
            .collect()
    }

    /// Sets `key` to `value` in its own atomic write; returns the commit's versionstamp.
    pub async fn set(
        &self,
        key: &Key,
        value: &(impl ToKvValue + ?Sized),
    ) -> Result<Versionstamp, RemoteError> {
        self.set_with(key, value, SetOptions::default()).await
    }

    /// [`RemoteKv::set`] with options (expiry).
    pub async fn set_with(
        &self,
        key: &Key,
        value: &(impl ToKvValue + ?Sized),
        options: SetOptions,
    ) -> Result<Versionstamp, RemoteError> {
        let result = self.atomic().set_with(key, value, options).commit().await?;
        result.versionstamp().ok_or_else(|| {
            RemoteError::Decode("a write without checks was answered as a check failure".into())
        })
    }

    /// Deletes `key` in its own atomic write.
    pub async fn delete(&self, key: &Key) -> Result<(), RemoteError> {
        self.atomic().delete(key).commit().await?;
        Ok(())
    }

    /// Starts an atomic operation; nothing is sent until [`RemoteAtomic::commit`].
    pub fn atomic(&self) -> RemoteAtomic {
        RemoteAtomic::new(self.clone())
    }

    /// Watches up to 10 keys (protocol version 3): the stream yields their entries at
    /// once, then whenever a commit changes one of them. It ends when the server closes
    /// it or after an error.
    pub async fn watch(&self, keys: &[Key]) -> Result<WatchStream, RemoteError> {
        let limits = Limits::default();
        if keys.len() > limits.max_watched_keys {
            return Err(KvError::TooManyWatchedKeys { max: limits.max_watched_keys }.into());
        }
        let encoded = keys.iter().map(|key| point_read_key(key, &limits)).collect::<Result<Vec<_>, _>>()?;
        let raw = self.watch_raw(encoded).await?;
        Ok(WatchStream::new(raw, keys))
    }
}
