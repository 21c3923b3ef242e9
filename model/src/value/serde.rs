//! Typed Rust data as [`Value`]s, with serde (feature `serde`).
//!
//! The mapping is the one JSON users expect, extended where `Value` has more to offer:
//!
//! | Rust (serde data model) | [`Value`] |
//! |---|---|
//! | `bool` | `Bool` |
//! | integers (`i8` ... `i128`, `u8` ... `u128`) | `Number` if `|n| <= 2^53` (exact in a double), `BigInt` otherwise |
//! | `f32`, `f64` | `Number` |
//! | `char`, `str`, `String` | `String` |
//! | bytes (`serialize_bytes`, e.g. `serde_bytes::ByteBuf`) | `Bytes` (a `Uint8Array`) |
//! | `()`, unit structs, `None` | `Null` (`Some(x)` is `x`) |
//! | sequences, tuples, tuple structs | `Array` |
//! | structs, maps whose keys are all strings | `Object` (in order; a repeated map key keeps its first position and its last value) |
//! | maps with other keys (numbers, tuples, ...) | `Map` |
//! | enums | externally tagged like serde_json: `"Unit"`, `{"Newtype": x}`, `{"Tuple": [..]}`, `{"Struct": {..}}` |
//!
//! Reading back accepts more than writing produces: integers are read from a `Number` that
//! is an integer in range, a `BigInt` in range, or a `KvU64` in range (anything else is an
//! error naming the value and the expected type); floats from a `Number` or a `BigInt`;
//! `undefined` reads like `null`; a `Set` reads as a sequence; a `Uint8Array` as bytes or as a
//! sequence of `u8`; object keys that are numeric strings (`"42"`) as integer map keys; a
//! `Date` as its milliseconds (`f64`). A `RegExp` cannot be read into Rust data.

use super::{Value, ValueError, MAX_EXACT_INTEGER};
use crate::KvBigInt;
use ::serde::de::{self, DeserializeOwned, IntoDeserializer, Unexpected, Visitor};
use ::serde::forward_to_deserialize_any;
use ::serde::ser::{self, Serialize};
use std::collections::HashMap;
use std::fmt::Display;

/// Converts any `Serialize` type into a [`Value`].
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, ValueError> {
    value.serialize(Serializer)
}

/// Converts a [`Value`] into any `DeserializeOwned` type.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ValueError> {
    T::deserialize(value)
}

impl ser::Error for ValueError {
    fn custom<T: Display>(message: T) -> Self {
        ValueError::Serde(message.to_string())
    }
}

impl de::Error for ValueError {
    fn custom<T: Display>(message: T) -> Self {
        ValueError::Serde(message.to_string())
    }
}

fn signed(n: i128) -> Value {
    if n.unsigned_abs() <= u128::from(MAX_EXACT_INTEGER) {
        Value::Number(n as f64)
    } else {
        Value::BigInt(KvBigInt::from(n))
    }
}

fn unsigned(n: u128) -> Value {
    if n <= u128::from(MAX_EXACT_INTEGER) {
        Value::Number(n as f64)
    } else {
        Value::BigInt(KvBigInt::from_sign_magnitude(false, &n.to_be_bytes()))
    }
}

// ---------------------------------------------------------------------------------------
// Serialization
// ---------------------------------------------------------------------------------------

/// The serde `Serializer` producing [`Value`]s (what [`to_value`] uses).
#[derive(Debug, Clone, Copy, Default)]
pub struct Serializer;

impl ser::Serializer for Serializer {
    type Ok = Value;
    type Error = ValueError;
    type SerializeSeq = SeqSerializer;
    type SerializeTuple = SeqSerializer;
    type SerializeTupleStruct = SeqSerializer;
    type SerializeTupleVariant = SeqSerializer;
    type SerializeMap = MapSerializer;
    type SerializeStruct = StructSerializer;
    type SerializeStructVariant = StructSerializer;

    fn serialize_bool(self, v: bool) -> Result<Value, ValueError> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, ValueError> {
        Ok(signed(v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<Value, ValueError> {
        Ok(signed(v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<Value, ValueError> {
        Ok(signed(v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<Value, ValueError> {
        Ok(signed(v.into()))
    }
    fn serialize_i128(self, v: i128) -> Result<Value, ValueError> {
        Ok(signed(v))
    }
    fn serialize_u8(self, v: u8) -> Result<Value, ValueError> {
        Ok(unsigned(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, ValueError> {
        Ok(unsigned(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, ValueError> {
        Ok(unsigned(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, ValueError> {
        Ok(unsigned(v.into()))
    }
    fn serialize_u128(self, v: u128) -> Result<Value, ValueError> {
        Ok(unsigned(v))
    }
    fn serialize_f32(self, v: f32) -> Result<Value, ValueError> {
        Ok(Value::Number(v.into()))
    }
    fn serialize_f64(self, v: f64) -> Result<Value, ValueError> {
        Ok(Value::Number(v))
    }
    fn serialize_char(self, v: char) -> Result<Value, ValueError> {
        Ok(Value::String(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Value, ValueError> {
        Ok(Value::String(v.to_owned()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, ValueError> {
        Ok(Value::Bytes(v.to_vec()))
    }
    fn serialize_none(self) -> Result<Value, ValueError> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, ValueError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, ValueError> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Value, ValueError> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Value, ValueError> {
        Ok(Value::String(variant.to_owned()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Value, ValueError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, ValueError> {
        Ok(Value::Object(vec![(variant.to_owned(), value.serialize(self)?)]))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqSerializer, ValueError> {
        Ok(SeqSerializer { items: Vec::with_capacity(len.unwrap_or(0).min(4096)), variant: None })
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqSerializer, ValueError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<SeqSerializer, ValueError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<SeqSerializer, ValueError> {
        Ok(SeqSerializer { items: Vec::with_capacity(len.min(4096)), variant: Some(variant) })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<MapSerializer, ValueError> {
        Ok(MapSerializer { entries: Vec::new(), next_key: None })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<StructSerializer, ValueError> {
        Ok(StructSerializer { properties: Vec::with_capacity(len.min(4096)), variant: None })
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<StructSerializer, ValueError> {
        Ok(StructSerializer { properties: Vec::with_capacity(len.min(4096)), variant: Some(variant) })
    }
}

/// Wraps `value` as `{variant: value}` for enum variants.
fn tagged(variant: Option<&'static str>, value: Value) -> Value {
    match variant {
        Some(variant) => Value::Object(vec![(variant.to_owned(), value)]),
        None => value,
    }
}

/// Builds arrays (sequences, tuples, tuple structs and tuple variants).
#[doc(hidden)]
pub struct SeqSerializer {
    items: Vec<Value>,
    variant: Option<&'static str>,
}

impl ser::SerializeSeq for SeqSerializer {
    type Ok = Value;
    type Error = ValueError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ValueError> {
        self.items.push(value.serialize(Serializer)?);
        Ok(())
    }
    fn end(self) -> Result<Value, ValueError> {
        Ok(tagged(self.variant, Value::Array(self.items)))
    }
}

impl ser::SerializeTuple for SeqSerializer {
    type Ok = Value;
    type Error = ValueError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ValueError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Value, ValueError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for SeqSerializer {
    type Ok = Value;
    type Error = ValueError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ValueError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Value, ValueError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleVariant for SeqSerializer {
    type Ok = Value;
    type Error = ValueError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ValueError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Value, ValueError> {
        ser::SerializeSeq::end(self)
    }
}

/// Builds objects (maps with string keys) or Maps (any other keys).
#[doc(hidden)]
pub struct MapSerializer {
    entries: Vec<(Value, Value)>,
    next_key: Option<Value>,
}

impl ser::SerializeMap for MapSerializer {
    type Ok = Value;
    type Error = ValueError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), ValueError> {
        self.next_key = Some(key.serialize(Serializer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ValueError> {
        let Some(key) = self.next_key.take() else {
            return Err(ValueError::Serde("serialize_value called before serialize_key".into()));
        };
        self.entries.push((key, value.serialize(Serializer)?));
        Ok(())
    }
    fn end(self) -> Result<Value, ValueError> {
        let mut string_keyed: Vec<(String, Value)> = Vec::with_capacity(self.entries.len());
        let mut entries = self.entries.into_iter();
        while let Some((key, value)) = entries.next() {
            match key {
                Value::String(key) => string_keyed.push((key, value)),
                key => {
                    // Not every key is a string: a Map, with every entry in order.
                    let mut map: Vec<(Value, Value)> =
                        string_keyed.into_iter().map(|(key, value)| (Value::String(key), value)).collect();
                    map.push((key, value));
                    map.extend(entries);
                    return Ok(Value::Map(map));
                }
            }
        }
        let mut properties: Vec<(String, Value)> = Vec::with_capacity(string_keyed.len());
        let mut positions: HashMap<String, usize> = HashMap::new();
        for (key, value) in string_keyed {
            match positions.get(&key).and_then(|&at| properties.get_mut(at)) {
                Some(property) => property.1 = value,
                None => {
                    positions.insert(key.clone(), properties.len());
                    properties.push((key, value));
                }
            }
        }
        Ok(Value::Object(properties))
    }
}

/// Builds objects from structs and struct variants.
#[doc(hidden)]
pub struct StructSerializer {
    properties: Vec<(String, Value)>,
    variant: Option<&'static str>,
}

impl ser::SerializeStruct for StructSerializer {
    type Ok = Value;
    type Error = ValueError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), ValueError> {
        self.properties.push((key.to_owned(), value.serialize(Serializer)?));
        Ok(())
    }
    fn end(self) -> Result<Value, ValueError> {
        Ok(tagged(self.variant, Value::Object(self.properties)))
    }
}

impl ser::SerializeStructVariant for StructSerializer {
    type Ok = Value;
    type Error = ValueError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), ValueError> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<Value, ValueError> {
        ser::SerializeStruct::end(self)
    }
}

// ---------------------------------------------------------------------------------------
// Deserialization
// ---------------------------------------------------------------------------------------

fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Undefined => Unexpected::Other("undefined"),
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => Unexpected::Float(*n),
        Value::BigInt(_) => Unexpected::Other("bigint"),
        Value::String(s) => Unexpected::Str(s),
        Value::Bytes(b) => Unexpected::Bytes(b),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
        Value::Map(_) => Unexpected::Other("Map"),
        Value::Set(_) => Unexpected::Other("Set"),
        Value::Date(_) => Unexpected::Other("Date"),
        Value::RegExp { .. } => Unexpected::Other("RegExp"),
        Value::U64(n) => Unexpected::Unsigned(*n),
    }
}

fn invalid_type(value: &Value, expected: &dyn de::Expected) -> ValueError {
    de::Error::invalid_type(unexpected(value), expected)
}

fn bigint_to_u128(n: &KvBigInt) -> Option<u128> {
    if n.is_negative() {
        return None;
    }
    let magnitude = n.magnitude_be();
    let mut bytes = [0u8; 16];
    bytes.get_mut(16usize.checked_sub(magnitude.len())?..)?.copy_from_slice(magnitude);
    Some(u128::from_be_bytes(bytes))
}

/// An integer of type `T` from a `Number`, `BigInt` or `KvU64`, with range checks.
fn integer<T>(value: &Value, type_name: &'static str) -> Result<T, ValueError>
where
    T: TryFrom<i128> + TryFrom<u128>,
{
    let out_of_range =
        |shown: String| ValueError::Serde(format!("invalid value: {shown} is out of range for {type_name}"));
    match value {
        Value::Number(n) => {
            if !n.is_finite() || n.fract() != 0.0 {
                return Err(ValueError::Serde(format!(
                    "invalid value: {n} is not an integer, expected {type_name}"
                )));
            }
            // Integral doubles in this range convert exactly.
            if *n >= -(2f64.powi(127)) && *n < 2f64.powi(127) {
                T::try_from(*n as i128).map_err(|_| out_of_range(format!("{n}")))
            } else if *n >= 0.0 && *n < 2f64.powi(128) {
                T::try_from(*n as u128).map_err(|_| out_of_range(format!("{n}")))
            } else {
                Err(out_of_range(format!("{n}")))
            }
        }
        Value::BigInt(n) => match (n.to_i128(), bigint_to_u128(n)) {
            (Some(v), _) => T::try_from(v).map_err(|_| out_of_range(format!("{n}n"))),
            (None, Some(v)) => T::try_from(v).map_err(|_| out_of_range(format!("{n}n"))),
            (None, None) => Err(out_of_range(format!("{n}n"))),
        },
        Value::U64(n) => T::try_from(u128::from(*n)).map_err(|_| out_of_range(format!("KvU64 {n}"))),
        other => Err(invalid_type(other, &type_name)),
    }
}

fn float(value: &Value) -> Result<f64, ValueError> {
    match value {
        Value::Number(n) => Ok(*n),
        Value::BigInt(n) => match (n.to_i128(), bigint_to_u128(n)) {
            (Some(v), _) => Ok(v as f64),
            (None, Some(v)) => Ok(v as f64),
            (None, None) => Err(ValueError::Serde(format!("invalid value: {n}n is out of range for f64"))),
        },
        Value::U64(n) => Ok(*n as f64),
        Value::Date(ms) => Ok(*ms),
        other => Err(invalid_type(other, &"a number")),
    }
}

macro_rules! deserialize_integer {
    ($($method:ident $visit:ident $ty:ty;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
            visitor.$visit(integer::<$ty>(&self, stringify!($ty))?)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Value {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::Undefined | Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(n) => {
                let integral = n.is_finite() && n.fract() == 0.0 && n.abs() <= MAX_EXACT_INTEGER as f64;
                if integral && !(n == 0.0 && n.is_sign_negative()) {
                    if n >= 0.0 {
                        visitor.visit_u64(n as u64)
                    } else {
                        visitor.visit_i64(n as i64)
                    }
                } else {
                    visitor.visit_f64(n)
                }
            }
            Value::BigInt(n) => {
                if let Some(v) = n.to_i128() {
                    if let Ok(v) = u64::try_from(v) {
                        visitor.visit_u64(v)
                    } else if let Ok(v) = i64::try_from(v) {
                        visitor.visit_i64(v)
                    } else {
                        visitor.visit_i128(v)
                    }
                } else if let Some(v) = bigint_to_u128(&n) {
                    visitor.visit_u128(v)
                } else {
                    Err(ValueError::Serde(format!("invalid value: {n}n does not fit in 128 bits")))
                }
            }
            Value::String(s) => visitor.visit_string(s),
            Value::Bytes(b) => visitor.visit_byte_buf(b),
            Value::Array(items) | Value::Set(items) => visit_seq(items, visitor),
            Value::Object(properties) => visitor.visit_map(EntryAccess::new(properties)),
            Value::Map(entries) => visitor.visit_map(EntryAccess::new(entries)),
            Value::Date(ms) => visitor.visit_f64(ms),
            value @ Value::RegExp { .. } => Err(invalid_type(&value, &"a value other than a RegExp")),
            Value::U64(n) => visitor.visit_u64(n),
        }
    }

    deserialize_integer! {
        deserialize_i8 visit_i8 i8;
        deserialize_i16 visit_i16 i16;
        deserialize_i32 visit_i32 i32;
        deserialize_i64 visit_i64 i64;
        deserialize_i128 visit_i128 i128;
        deserialize_u8 visit_u8 u8;
        deserialize_u16 visit_u16 u16;
        deserialize_u32 visit_u32 u32;
        deserialize_u64 visit_u64 u64;
        deserialize_u128 visit_u128 u128;
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_f32(float(&self)? as f32)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_f64(float(&self)?)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::Bool(b) => visitor.visit_bool(b),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        self.deserialize_string(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::String(s) => visitor.visit_string(s),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        self.deserialize_byte_buf(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::Bytes(b) => visitor.visit_byte_buf(b),
            Value::String(s) => visitor.visit_string(s),
            Value::Array(items) => visit_seq(items, visitor),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::Undefined | Value::Null => visitor.visit_none(),
            other => visitor.visit_some(other),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::Undefined | Value::Null => visitor.visit_unit(),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::Array(items) | Value::Set(items) => visit_seq(items, visitor),
            Value::Bytes(bytes) => {
                visit_seq(bytes.into_iter().map(|b| Value::Number(b.into())).collect(), visitor)
            }
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, ValueError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::Object(properties) => visitor.visit_map(EntryAccess::new(properties)),
            Value::Map(entries) => visitor.visit_map(EntryAccess::new(entries)),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        match self {
            Value::String(variant) => visitor.visit_enum(EnumAccess { variant, value: None }),
            Value::Object(properties) => match <[(String, Value); 1]>::try_from(properties) {
                Ok([(variant, value)]) => visitor.visit_enum(EnumAccess { variant, value: Some(value) }),
                Err(properties) => Err(invalid_type(
                    &Value::Object(properties),
                    &"a string or an object with one property (an enum)",
                )),
            },
            other => Err(invalid_type(&other, &"a string or an object with one property (an enum)")),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self {
            Value::String(s) => visitor.visit_string(s),
            Value::Number(n) if n.fract() == 0.0 && (0.0..=MAX_EXACT_INTEGER as f64).contains(&n) => {
                visitor.visit_u64(n as u64)
            }
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_unit()
    }
}

impl<'de> IntoDeserializer<'de, ValueError> for Value {
    type Deserializer = Value;
    fn into_deserializer(self) -> Value {
        self
    }
}

fn visit_seq<'de, V: Visitor<'de>>(items: Vec<Value>, visitor: V) -> Result<V::Value, ValueError> {
    let len = items.len();
    let mut access = SeqAccess { items: items.into_iter() };
    let result = visitor.visit_seq(&mut access)?;
    if access.items.len() != 0 {
        return Err(de::Error::invalid_length(len, &"fewer elements"));
    }
    Ok(result)
}

struct SeqAccess {
    items: std::vec::IntoIter<Value>,
}

impl<'de> de::SeqAccess<'de> for SeqAccess {
    type Error = ValueError;
    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ValueError> {
        self.items.next().map(|item| seed.deserialize(item)).transpose()
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// How the key of an [`EntryAccess`] entry is deserialized.
trait EntryKey {
    /// The deserializer for one key.
    type Deserializer: for<'de> de::Deserializer<'de, Error = ValueError>;
    fn into_deserializer(self) -> Self::Deserializer;
}

/// An object's property names, read with [`KeyDeserializer`].
impl EntryKey for String {
    type Deserializer = KeyDeserializer;
    fn into_deserializer(self) -> KeyDeserializer {
        KeyDeserializer(self)
    }
}

/// A `Map`'s keys, which are any values.
impl EntryKey for Value {
    type Deserializer = Value;
    fn into_deserializer(self) -> Value {
        self
    }
}

/// The entries of an object (`K = String`) or of a `Map` (`K = Value`).
struct EntryAccess<K> {
    entries: std::vec::IntoIter<(K, Value)>,
    /// The value of the entry whose key was just read.
    value: Option<Value>,
}

impl<K> EntryAccess<K> {
    fn new(entries: Vec<(K, Value)>) -> Self {
        EntryAccess { entries: entries.into_iter(), value: None }
    }
}

impl<'de, K: EntryKey> de::MapAccess<'de> for EntryAccess<K> {
    type Error = ValueError;
    fn next_key_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, ValueError> {
        match self.entries.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(key.into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ValueError> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(ValueError::Serde("next_value called before next_key".into())),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// An object key: a string that also reads as an integer or a boolean when the target
/// type asks for one (`HashMap<u32, _>` from `{"1": ..}`), like serde_json's map keys.
struct KeyDeserializer(String);

macro_rules! deserialize_key_integer {
    ($($method:ident $visit:ident $ty:ty;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
            match self.0.parse::<$ty>() {
                Ok(n) => visitor.$visit(n),
                Err(_) => Err(de::Error::invalid_type(Unexpected::Str(&self.0), &stringify!($ty))),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for KeyDeserializer {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_string(self.0)
    }

    deserialize_key_integer! {
        deserialize_i8 visit_i8 i8;
        deserialize_i16 visit_i16 i16;
        deserialize_i32 visit_i32 i32;
        deserialize_i64 visit_i64 i64;
        deserialize_i128 visit_i128 i128;
        deserialize_u8 visit_u8 u8;
        deserialize_u16 visit_u16 u16;
        deserialize_u32 visit_u32 u32;
        deserialize_u64 visit_u64 u64;
        deserialize_u128 visit_u128 u128;
        deserialize_f32 visit_f32 f32;
        deserialize_f64 visit_f64 f64;
        deserialize_bool visit_bool bool;
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        Value::String(self.0).deserialize_enum(name, variants, visitor)
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

/// An enum variant: its name and, unless it is a unit variant, its content.
struct EnumAccess {
    variant: String,
    value: Option<Value>,
}

impl<'de> de::EnumAccess<'de> for EnumAccess {
    type Error = ValueError;
    type Variant = VariantAccess;
    fn variant_seed<V: de::DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, VariantAccess), ValueError> {
        let variant = seed.deserialize(Value::String(self.variant))?;
        Ok((variant, VariantAccess { value: self.value }))
    }
}

struct VariantAccess {
    value: Option<Value>,
}

impl<'de> de::VariantAccess<'de> for VariantAccess {
    type Error = ValueError;

    fn unit_variant(self) -> Result<(), ValueError> {
        match self.value {
            None | Some(Value::Null) | Some(Value::Undefined) => Ok(()),
            Some(other) => Err(invalid_type(&other, &"a unit variant")),
        }
    }

    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, ValueError> {
        match self.value {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"a newtype variant")),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, ValueError> {
        match self.value {
            Some(Value::Array(items)) => visit_seq(items, visitor),
            Some(other) => Err(invalid_type(&other, &"a tuple variant")),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"a tuple variant")),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        match self.value {
            Some(value @ (Value::Object(_) | Value::Map(_))) => {
                de::Deserializer::deserialize_map(value, visitor)
            }
            Some(other) => Err(invalid_type(&other, &"a struct variant")),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &"a struct variant")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn integers_choose_number_or_bigint() {
        assert_eq!(to_value(&42u8).unwrap(), Value::Number(42.0));
        assert_eq!(to_value(&(1i64 << 53)).unwrap(), Value::Number(9007199254740992.0));
        assert_eq!(to_value(&-(1i64 << 53)).unwrap(), Value::Number(-9007199254740992.0));
        assert_eq!(to_value(&((1u64 << 53) + 1)).unwrap(), Value::BigInt(KvBigInt::from((1u64 << 53) + 1)));
        assert_eq!(
            to_value(&u128::MAX).unwrap(),
            Value::BigInt(KvBigInt::from_sign_magnitude(false, &[0xff; 16]))
        );
        assert_eq!(from_value::<u128>(to_value(&u128::MAX).unwrap()).unwrap(), u128::MAX);
        assert_eq!(from_value::<i128>(to_value(&i128::MIN).unwrap()).unwrap(), i128::MIN);
    }

    #[test]
    fn integer_range_errors() {
        let err = from_value::<u8>(Value::Number(300.0)).unwrap_err();
        assert_eq!(err.to_string(), "invalid value: 300 is out of range for u8");
        let err = from_value::<i32>(Value::Number(1.5)).unwrap_err();
        assert_eq!(err.to_string(), "invalid value: 1.5 is not an integer, expected i32");
        let err = from_value::<u64>(Value::BigInt(KvBigInt::from(-1))).unwrap_err();
        assert_eq!(err.to_string(), "invalid value: -1n is out of range for u64");
        assert!(from_value::<i64>(Value::String("1".into())).is_err());
        assert_eq!(from_value::<u64>(Value::U64(7)).unwrap(), 7);
        assert_eq!(from_value::<i64>(Value::Number(1e15)).unwrap(), 1_000_000_000_000_000);
    }

    #[test]
    fn maps_with_string_keys_are_objects() {
        let map: BTreeMap<&str, i32> = [("b", 1), ("a", 2)].into_iter().collect();
        assert_eq!(
            to_value(&map).unwrap(),
            Value::Object(vec![("a".into(), Value::Number(2.0)), ("b".into(), Value::Number(1.0))])
        );
        let numeric: BTreeMap<u32, bool> = [(1, true)].into_iter().collect();
        assert_eq!(to_value(&numeric).unwrap(), Value::Map(vec![(Value::Number(1.0), Value::Bool(true))]));
        assert_eq!(from_value::<BTreeMap<u32, bool>>(to_value(&numeric).unwrap()).unwrap(), numeric);
        // Numeric string keys read as integers.
        let object = Value::Object(vec![("7".into(), Value::Bool(false))]);
        assert_eq!(from_value::<BTreeMap<u32, bool>>(object).unwrap(), [(7, false)].into_iter().collect());
    }
}
