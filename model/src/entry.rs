//! Entries returned by reads, and the conversions between stored values and user types.

use crate::{Key, KvError, KvValue, Value, Versionstamp};

/// An entry that exists.
#[derive(Debug, Clone, PartialEq)]
pub struct KvEntry<T> {
    /// The key.
    pub key: Key,
    /// The value.
    pub value: T,
    /// The versionstamp of the commit that wrote it.
    pub versionstamp: Versionstamp,
}

/// The result of a point read: `value` and `versionstamp` are `None` if the key is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct KvEntryMaybe<T> {
    /// The key read.
    pub key: Key,
    /// The value, if the key exists.
    pub value: Option<T>,
    /// The versionstamp of the commit that wrote the value, if the key exists.
    pub versionstamp: Option<Versionstamp>,
}

impl<T> KvEntryMaybe<T> {
    /// Whether the key exists.
    pub fn exists(&self) -> bool {
        self.value.is_some()
    }
}

impl<T> From<KvEntry<T>> for KvEntryMaybe<T> {
    fn from(entry: KvEntry<T>) -> Self {
        KvEntryMaybe { key: entry.key, value: Some(entry.value), versionstamp: Some(entry.versionstamp) }
    }
}

/// Types a stored value can be read as: [`KvValue`] (exactly as stored), [`Value`], and,
/// with the `serde` feature, any `DeserializeOwned` type.
pub trait FromKvValue: Sized {
    /// Converts a stored value.
    fn from_kv_value(value: KvValue) -> Result<Self, KvError>;
}

impl FromKvValue for KvValue {
    #[inline]
    fn from_kv_value(value: KvValue) -> Result<Self, KvError> {
        Ok(value)
    }
}

impl FromKvValue for Value {
    /// Fails with `Unrepresentable` for V8 content `Value` cannot hold; read it as
    /// [`KvValue`] to get the raw bytes.
    fn from_kv_value(value: KvValue) -> Result<Self, KvError> {
        Ok(value.to_value()?)
    }
}

#[cfg(feature = "serde")]
impl<T: serde::de::DeserializeOwned> FromKvValue for T {
    fn from_kv_value(value: KvValue) -> Result<Self, KvError> {
        Ok(crate::value::from_value(value.to_value()?)?)
    }
}

/// Types that can be stored: [`KvValue`] (stored as is), [`Value`] (in the encoding Deno
/// would choose), and, with the `serde` feature, any `Serialize` type.
pub trait ToKvValue {
    /// Converts to the stored form.
    fn to_kv_value(&self) -> Result<KvValue, KvError>;
}

impl ToKvValue for KvValue {
    fn to_kv_value(&self) -> Result<KvValue, KvError> {
        Ok(self.clone())
    }
}

impl ToKvValue for Value {
    fn to_kv_value(&self) -> Result<KvValue, KvError> {
        Ok(KvValue::from_value(self)?)
    }
}

#[cfg(feature = "serde")]
impl<T: serde::Serialize + ?Sized> ToKvValue for T {
    fn to_kv_value(&self) -> Result<KvValue, KvError> {
        Ok(KvValue::from_value(&crate::value::to_value(self)?)?)
    }
}
