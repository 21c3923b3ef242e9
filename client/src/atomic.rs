//! [`RemoteAtomic`]: an atomic operation built like `stampkv::AtomicOperation`, checked
//! against Deno's limits, sent as one `AtomicWrite`.

use crate::convert::{value_size, value_to_proto, versionstamp};
use crate::{RemoteError, RemoteKv};
use stampkv_kvconnect as proto;
use stampkv_model::{
    CommitResult, Key, KvEntryMaybe, KvError, KvValue, Limits, SetOptions, ToKvValue, Versionstamp,
};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An atomic operation on a [`RemoteKv`]: checks, then mutations applied in order, all or
/// nothing. Nothing is sent until [`RemoteAtomic::commit`].
///
/// Errors are reported by `commit`, before anything is sent, in Deno's order and with
/// Deno's texts: a value that cannot be converted or a bad `expire_in` first, then the
/// count, key, value and total size limits.
#[derive(Debug)]
pub struct RemoteAtomic {
    kv: RemoteKv,
    checks: Vec<(Key, Option<Versionstamp>)>,
    mutations: Vec<(Key, Op)>,
    error: Option<KvError>,
}

/// One mutation as given.
#[derive(Debug, Clone)]
enum Op {
    Set(KvValue, Option<Duration>),
    Delete,
    Sum(u64),
    Min(u64),
    Max(u64),
    SetVersionstampedKey(KvValue),
}

impl RemoteAtomic {
    pub(crate) fn new(kv: RemoteKv) -> RemoteAtomic {
        RemoteAtomic { kv, checks: Vec::new(), mutations: Vec::new(), error: None }
    }

    fn push_value(
        mut self,
        key: &Key,
        value: &(impl ToKvValue + ?Sized),
        make: impl FnOnce(KvValue) -> Op,
    ) -> Self {
        match value.to_kv_value() {
            Ok(value) => self.mutations.push((key.clone(), make(value))),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self
    }

    /// Requires `key` to have `versionstamp` (`None`: to be absent) when the write runs.
    pub fn check(mut self, key: &Key, versionstamp: Option<Versionstamp>) -> Self {
        self.checks.push((key.clone(), versionstamp));
        self
    }

    /// Requires the entry to be unchanged since it was read.
    pub fn check_entry<T>(self, entry: &KvEntryMaybe<T>) -> Self {
        let versionstamp = entry.versionstamp;
        self.check(&entry.key, versionstamp)
    }

    /// Sets `key` to `value`.
    pub fn set(self, key: &Key, value: &(impl ToKvValue + ?Sized)) -> Self {
        self.push_value(key, value, |v| Op::Set(v, None))
    }

    /// Sets `key` to `value` with options: `expire_in` (a whole number of milliseconds)
    /// is sent as the absolute time now plus `expire_in` on this machine's clock.
    pub fn set_with(mut self, key: &Key, value: &(impl ToKvValue + ?Sized), options: SetOptions) -> Self {
        if let Some(expire_in) = options.expire_in {
            if expire_in.subsec_nanos() % 1_000_000 != 0 {
                let received = (expire_in.as_secs_f64() * 1000.0).to_string();
                self.error.get_or_insert(KvError::InvalidExpireIn { received });
                return self;
            }
        }
        self.push_value(key, value, |v| Op::Set(v, options.expire_in))
    }

    /// Deletes `key`.
    pub fn delete(mut self, key: &Key) -> Self {
        self.mutations.push((key.clone(), Op::Delete));
        self
    }

    /// Adds `operand` to the `KvU64` at `key` (modulo 2^64; a missing key takes `operand`).
    pub fn sum(mut self, key: &Key, operand: u64) -> Self {
        self.mutations.push((key.clone(), Op::Sum(operand)));
        self
    }

    /// Keeps the smaller of the `KvU64` at `key` and `operand`.
    pub fn min(mut self, key: &Key, operand: u64) -> Self {
        self.mutations.push((key.clone(), Op::Min(operand)));
        self
    }

    /// Keeps the larger of the `KvU64` at `key` and `operand`.
    pub fn max(mut self, key: &Key, operand: u64) -> Self {
        self.mutations.push((key.clone(), Op::Max(operand)));
        self
    }

    /// Sets `value` under `key_prefix` extended by the commit's versionstamp (a string
    /// part of 20 lowercase hex characters).
    pub fn set_versionstamped_key(self, key_prefix: &Key, value: &(impl ToKvValue + ?Sized)) -> Self {
        self.push_value(key_prefix, value, Op::SetVersionstampedKey)
    }

    /// The `AtomicWrite` this operation sends, checked against Deno's limits.
    pub fn to_proto(&self) -> Result<proto::AtomicWrite, RemoteError> {
        build(&self.checks, &self.mutations, self.error.as_ref().map(copy_error), now_ms())
    }

    /// Sends the operation: [`CommitResult::Committed`] with the commit's versionstamp, or
    /// [`CommitResult::CheckFailed`] when a check did not hold (nothing was applied).
    pub async fn commit(self) -> Result<CommitResult, RemoteError> {
        let RemoteAtomic { kv, checks, mutations, error } = self;
        let request = build(&checks, &mutations, error, now_ms())?;
        let output = kv.atomic_write_raw(&request).await?;
        if output.status == proto::AW_SUCCESS {
            Ok(CommitResult::Committed(versionstamp(&output.versionstamp)?))
        } else {
            Ok(CommitResult::CheckFailed)
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Builds the message, validating in Deno's order (`op_kv_atomic_write`).
fn build(
    checks: &[(Key, Option<Versionstamp>)],
    mutations: &[(Key, Op)],
    error: Option<KvError>,
    now_ms: u64,
) -> Result<proto::AtomicWrite, RemoteError> {
    let limits = Limits::default();
    if let Some(e) = error {
        return Err(RemoteError::Invalid(e));
    }
    if checks.len() > limits.max_checks {
        return Err(KvError::TooManyChecks { max: limits.max_checks }.into());
    }
    if mutations.len() > limits.max_mutations {
        return Err(KvError::TooManyMutations { max: limits.max_mutations }.into());
    }
    let mut write = proto::AtomicWrite::default();
    for (key, stamp) in checks {
        let key = key.encode().map_err(|_| KvError::InvalidCheck)?;
        let versionstamp = stamp.map(|s| s.0.to_vec()).unwrap_or_default();
        write.checks.push(proto::Check { key, versionstamp });
    }
    for (key, op) in mutations {
        let key = key.encode().map_err(KvError::InvalidMutationKey)?;
        let (mutation_type, value, expire_at_ms) = match op {
            Op::Set(value, expire_in) => {
                let at = match expire_in {
                    None => 0,
                    Some(d) => {
                        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                        let at = now_ms.saturating_add(ms);
                        i64::try_from(at)
                            .map_err(|_| KvError::InvalidMutation(format!("expireIn is too large: {ms}")))?
                    }
                };
                (proto::M_SET, value.clone(), at)
            }
            Op::Delete => (proto::M_DELETE, KvValue::Bytes(Vec::new()), 0),
            Op::Sum(n) => (proto::M_SUM, KvValue::U64(*n), 0),
            Op::Min(n) => (proto::M_MIN, KvValue::U64(*n), 0),
            Op::Max(n) => (proto::M_MAX, KvValue::U64(*n), 0),
            Op::SetVersionstampedKey(value) => (proto::M_SET_SUFFIX_VERSIONSTAMPED_KEY, value.clone(), 0),
        };
        write.mutations.push(proto::Mutation {
            key,
            value: Some(value_to_proto(&value)),
            mutation_type,
            expire_at_ms,
            ..proto::Mutation::default()
        });
    }
    let (mut total, mut total_keys) = (0usize, 0usize);
    let check_keys = write.checks.iter().map(|c| &c.key);
    for key in check_keys.chain(write.mutations.iter().map(|m| &m.key)) {
        if key.is_empty() {
            return Err(KvError::EmptyKey.into());
        }
        if key.len() > limits.max_write_key_bytes {
            return Err(KvError::KeyTooLargeForWrite { max: limits.max_write_key_bytes }.into());
        }
        total += key.len();
    }
    for ((_, op), mutation) in mutations.iter().zip(&write.mutations) {
        let size = match op {
            Op::Delete => continue,
            Op::Set(value, _) | Op::SetVersionstampedKey(value) => value_size(value),
            Op::Sum(_) | Op::Min(_) | Op::Max(_) => 8,
        };
        if size > limits.max_value_bytes {
            return Err(KvError::ValueTooLarge { max: limits.max_value_bytes }.into());
        }
        total += mutation.key.len() + size;
        total_keys += mutation.key.len();
    }
    if total > limits.max_total_mutation_bytes {
        return Err(KvError::TotalMutationSizeTooLarge { max: limits.max_total_mutation_bytes }.into());
    }
    if total_keys > limits.max_total_key_bytes {
        return Err(KvError::TotalKeySizeTooLarge { max: limits.max_total_key_bytes }.into());
    }
    Ok(write)
}

/// A remembered builder error, copied (`KvError` is not `Clone`): the kinds a builder
/// call can produce keep their variant, anything else its text.
fn copy_error(e: &KvError) -> KvError {
    match e {
        KvError::InvalidExpireIn { received } => KvError::InvalidExpireIn { received: received.clone() },
        KvError::Value(v) => KvError::Value(v.clone()),
        KvError::Key(k) => KvError::Key(k.clone()),
        other => KvError::InvalidMutation(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code: a panic is a failed test")]

    use super::*;
    use stampkv_model::key;

    #[test]
    fn messages_are_what_deno_sends() {
        let mutations = vec![
            (key!["a", 1], Op::Set(KvValue::U64(7), Some(Duration::from_millis(1000)))),
            (key!["d"], Op::Delete),
            (key!["vk"], Op::SetVersionstampedKey(KvValue::Bytes(vec![1]))),
        ];
        let write = build(&[(key!["c"], None)], &mutations, None, 5_000).unwrap();
        assert_eq!(write.checks[0], proto::Check { key: vec![2, b'c', 0], versionstamp: vec![] });
        let set = &write.mutations[0];
        assert_eq!((set.mutation_type, set.expire_at_ms), (proto::M_SET, 6_000));
        assert_eq!(
            set.value,
            Some(proto::KvValue { data: vec![7, 0, 0, 0, 0, 0, 0, 0], encoding: proto::VE_LE64 })
        );
        let delete = &write.mutations[1];
        assert_eq!(delete.value, Some(proto::KvValue { data: vec![], encoding: proto::VE_BYTES }));
        assert_eq!(write.mutations[2].mutation_type, proto::M_SET_SUFFIX_VERSIONSTAMPED_KEY);
        assert_eq!(write.mutations[2].key, vec![2, b'v', b'k', 0]);
    }

    #[test]
    fn limits_are_checked_with_denos_texts() {
        let text = |checks: &[(Key, Option<Versionstamp>)], mutations: &[(Key, Op)]| {
            build(checks, mutations, None, 0).unwrap_err().to_string()
        };
        let many_checks: Vec<_> = (0..101).map(|i| (key!["k", i], None)).collect();
        assert_eq!(text(&many_checks, &[]), "Too many checks (max 100)");
        let many: Vec<_> = (0..1001).map(|i| (key!["k", i], Op::Delete)).collect();
        assert_eq!(text(&[], &many), "Too many mutations (max 1000)");
        assert_eq!(text(&[], &[(key![], Op::Delete)]), "key cannot be empty");
        let big_key = Key::from(vec![stampkv_model::KeyPart::from(vec![1u8; 2047])]);
        assert_eq!(text(&[], &[(big_key, Op::Delete)]), "Key too large for write (max 2048 bytes)");
        let big_value = Op::Set(KvValue::Bytes(vec![0; 65537]), None);
        assert_eq!(text(&[], &[(key!["v"], big_value)]), "Value too large (max 65536 bytes)");
        let sets: Vec<_> =
            (0..13).map(|i| (key!["k", i], Op::Set(KvValue::Bytes(vec![0; 65536]), None))).collect();
        assert_eq!(text(&[], &sets), "Total mutation size too large (max 819200 bytes)");
        assert!(build(&[], &sets[..12], None, 0).is_ok());
    }
}
