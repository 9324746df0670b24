//! [`Value`]: the JSON-shaped data a plugin receives and returns (the msgpack subset the ABI uses).

use std::fmt;

/// A JSON-shaped value as it travels over the ABI.
///
/// Maps keep their keys in order (a `Vec` of pairs), exactly like the Python dicts on the host
/// side, so a value decoded and re-encoded gives the same bytes. Keys are always strings.
///
/// Integers are `Int` when they fit an `i64` and `UInt` only above `i64::MAX` (the decoder
/// normalises this way); equality compares integers by numeric value, whichever variant holds
/// them. Map equality is order-sensitive.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// msgpack nil / JSON null / Python None.
    #[default]
    Nil,
    Bool(bool),
    Int(i64),
    /// Only for integers above `i64::MAX`.
    UInt(u64),
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    /// Entries in insertion order; keys unique after decoding.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// A map from `(key, value)` pairs, in the given order (duplicates are kept as given; use
    /// [`Value::set`] to insert-or-replace).
    pub fn map<K: Into<String>, V: Into<Value>>(
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Value {
        Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// An array from anything that converts into values.
    pub fn array<V: Into<Value>>(items: impl IntoIterator<Item = V>) -> Value {
        Value::Array(items.into_iter().map(Into::into).collect())
    }

    /// The type's name as used in error messages ("nil", "bool", "int", "float", "str",
    /// "array", "map").
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }

    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::UInt(u) => Some(*u),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The value of `key` when `self` is a map holding it (like Python's `dict.get`); `None`
    /// for a missing key or when `self` is not a map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// `self[key] = value` with Python dict semantics: replaces the value of an existing key in
    /// place, otherwise appends. Turns a non-map into an empty map first.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        if !matches!(self, Value::Map(_)) {
            *self = Value::Map(Vec::new());
        }
        if let Value::Map(m) = self {
            match m.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => m.push((key, value)),
            }
        }
    }

    /// Python truthiness: nil, false, 0, 0.0, "", [] and {} are false, everything else true.
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::UInt(u) => *u != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Map(m) => !m.is_empty(),
        }
    }

    /// The msgpack bytes of this value, identical to Python's
    /// `msgpack.packb(value, use_bin_type=True)`.
    pub fn to_msgpack(&self) -> Vec<u8> {
        crate::msgpack::encode(self)
    }

    /// Decode one complete msgpack value (see [`crate::msgpack::decode`]).
    pub fn from_msgpack(bytes: &[u8]) -> Result<Value, crate::msgpack::DecodeError> {
        crate::msgpack::decode(bytes)
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Nil, Value::Nil) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::UInt(a), Value::UInt(b)) => a == b,
            (Value::Int(a), Value::UInt(b)) | (Value::UInt(b), Value::Int(a)) => {
                u64::try_from(*a) == Ok(*b)
            }
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => a == b,
            (Value::Map(a), Value::Map(b)) => a == b,
            _ => false,
        }
    }
}

/// Compact JSON-like rendering, for messages and debugging (not a JSON serialiser: floats use
/// Rust's formatting).
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::UInt(u) => write!(f, "{u}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Array(a) => {
                f.write_str("[")?;
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Map(m) => {
                f.write_str("{")?;
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

macro_rules! from_signed {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(i: $t) -> Self {
                Value::Int(i64::from(i))
            }
        }
    )*};
}
from_signed!(i8, i16, i32, i64, u8, u16, u32);

impl From<u64> for Value {
    fn from(u: u64) -> Self {
        match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(u),
        }
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Str(s.clone())
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Self {
        Value::Array(a)
    }
}

impl From<Vec<(String, Value)>> for Value {
    fn from(m: Vec<(String, Value)>) -> Self {
        Value::Map(m)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(o: Option<T>) -> Self {
        o.map_or(Value::Nil, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_equality_is_numeric() {
        assert_eq!(Value::Int(5), Value::UInt(5));
        assert_ne!(Value::Int(-1), Value::UInt(u64::MAX));
        assert_ne!(Value::Int(1), Value::Float(1.0));
        assert_eq!(Value::from(u64::MAX), Value::UInt(u64::MAX));
        assert_eq!(Value::from(7u64), Value::Int(7));
    }

    #[test]
    fn truthiness_follows_python() {
        for v in [
            Value::Nil,
            Value::Bool(false),
            Value::Int(0),
            Value::Float(-0.0),
            Value::from(""),
            Value::Array(vec![]),
            Value::Map(vec![]),
        ] {
            assert!(!v.is_truthy(), "{v}");
        }
        for v in [
            Value::Bool(true),
            Value::Int(-1),
            Value::from("x"),
            Value::array([1]),
        ] {
            assert!(v.is_truthy(), "{v}");
        }
    }

    #[test]
    fn set_replaces_in_place() {
        let mut m = Value::map([("a", 1), ("b", 2)]);
        m.set("a", 3);
        m.set("c", 4);
        assert_eq!(m, Value::map([("a", 3), ("b", 2), ("c", 4)]));
        assert_eq!(m.get("b"), Some(&Value::Int(2)));
        assert_eq!(m.get("z"), None);
        assert_eq!(Value::Int(1).get("a"), None);
    }

    #[test]
    fn display_is_json_like() {
        let v = Value::map([("a", Value::array([Value::Nil, Value::from("x\"y")]))]);
        assert_eq!(v.to_string(), r#"{"a": [null, "x\"y"]}"#);
    }
}
