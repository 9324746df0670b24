//! Strict config reading with the conventions of the host's config models
//! (`modelserving.api._base.ApiModel`), so a Wasm plugin accepts and refuses the same configs as
//! a native one:
//!
//! * a config object is a map; the top-level config may also be nil (an empty config);
//! * an explicit nil for a field means the field is absent;
//! * types are strict: no coercion (a number where a string is expected is an error);
//! * unknown fields are refused ([`Fields::finish`]);
//! * a field is read under its camelCase name, and also accepted under the snake_case name
//!   the Python model field has (pydantic's `populate_by_name`); when both spellings are given
//!   the camelCase one is used and the snake_case one is refused as unknown.
//!
//! ```
//! use modelserving_plugin::{config::Fields, Value};
//! let config = Value::map([("team", Value::from("ml")), ("replicas", Value::Nil)]);
//! let mut f = Fields::config(&config).unwrap();
//! assert_eq!(f.str("team").unwrap(), Some("ml"));
//! assert_eq!(f.int("replicas").unwrap(), None);
//! f.finish().unwrap();
//! ```
//!
//! Errors read `<location>: <problem>`, e.g. `config.env.0.name: must be a str, got int`.

use crate::value::Value;

/// The fields of one config object being read; see the module documentation.
#[derive(Debug)]
pub struct Fields<'a> {
    loc: String,
    /// Entries with a non-nil value, and whether they were read.
    entries: Vec<(&'a str, &'a Value, bool)>,
}

impl<'a> Fields<'a> {
    /// The top-level plugin config (location `config`): nil counts as an empty map.
    pub fn config(config: &'a Value) -> Result<Fields<'a>, String> {
        if config.is_nil() {
            return Ok(Fields {
                loc: "config".to_owned(),
                entries: Vec::new(),
            });
        }
        Fields::new(config, "config")
    }

    /// A config object at `loc` (e.g. `config.env.0`), which must be a map.
    pub fn new(value: &'a Value, loc: impl Into<String>) -> Result<Fields<'a>, String> {
        let loc = loc.into();
        match value {
            Value::Map(m) => Ok(Fields {
                entries: m
                    .iter()
                    .filter(|(_, v)| !v.is_nil())
                    .map(|(k, v)| (k.as_str(), v, false))
                    .collect(),
                loc,
            }),
            other => Err(format!("{loc}: must be a map, got {}", other.type_name())),
        }
    }

    /// Where this object is, for messages.
    pub fn loc(&self) -> &str {
        &self.loc
    }

    /// The location of field `name` (e.g. `config.runtimeClassName`).
    pub fn loc_of(&self, name: &str) -> String {
        // Not format!: this runs on the success path too, and formatting is slow in a module.
        let mut loc = String::with_capacity(self.loc.len() + 1 + name.len());
        loc.push_str(&self.loc);
        loc.push('.');
        loc.push_str(name);
        loc
    }

    /// The location of item `index` of field `name` (e.g. `config.env.0`).
    pub fn loc_of_item(&self, name: &str, index: usize) -> String {
        let mut loc = self.loc_of(name);
        loc.push('.');
        let mut digits = [0u8; 20];
        let (mut i, mut n) = (digits.len(), index);
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        digits[i..].iter().for_each(|&d| loc.push(d as char));
        loc
    }

    /// The (non-nil) value of field `name` (camelCase; the snake_case spelling is accepted
    /// too), marked as read.
    pub fn get(&mut self, name: &str) -> Option<&'a Value> {
        let pos = self
            .entries
            .iter()
            .position(|(k, _, _)| *k == name)
            .or_else(|| {
                if !name.bytes().any(|c| c.is_ascii_uppercase()) {
                    return None; // the snake_case spelling is the same
                }
                self.entries
                    .iter()
                    .position(|(k, _, _)| is_snake_case_of(k, name))
            });
        pos.map(|i| {
            self.entries[i].2 = true;
            self.entries[i].1
        })
    }

    fn typed<T>(
        &mut self,
        name: &str,
        want: &str,
        pick: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match pick(v) {
                Some(t) => Ok(Some(t)),
                None => Err(format!(
                    "{}: must be {want}, got {}",
                    self.loc_of(name),
                    v.type_name()
                )),
            },
        }
    }

    /// An optional string field.
    pub fn str(&mut self, name: &str) -> Result<Option<&'a str>, String> {
        self.typed(name, "a str", Value::as_str)
    }

    /// An optional bool field.
    pub fn bool(&mut self, name: &str) -> Result<Option<bool>, String> {
        self.typed(name, "a bool", Value::as_bool)
    }

    /// An optional integer field that fits an i64.
    pub fn int(&mut self, name: &str) -> Result<Option<i64>, String> {
        self.typed(name, "an int", Value::as_i64)
    }

    /// An optional number field (an int or a float, as a float).
    pub fn number(&mut self, name: &str) -> Result<Option<f64>, String> {
        self.typed(name, "a number", |v| match v {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            Value::UInt(u) => Some(*u as f64),
            _ => None,
        })
    }

    /// An optional array field.
    pub fn array(&mut self, name: &str) -> Result<Option<&'a [Value]>, String> {
        self.typed(name, "an array", Value::as_array)
    }

    /// An optional map field with any values.
    pub fn map(&mut self, name: &str) -> Result<Option<&'a [(String, Value)]>, String> {
        self.typed(name, "a map", Value::as_map)
    }

    /// An optional map of strings to strings (a nil value inside is an error, as in pydantic).
    pub fn string_map(&mut self, name: &str) -> Result<Option<Vec<(&'a str, &'a str)>>, String> {
        let loc = self.loc_of(name);
        match self.map(name)? {
            None => Ok(None),
            Some(m) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::Str(s) => Ok((k.as_str(), s.as_str())),
                    other => Err(format!(
                        "{loc}.{k}: must be a str, got {}",
                        other.type_name()
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }

    /// A required field: `Err("<loc>: is required")` when absent or nil.
    pub fn required<T>(&self, name: &str, value: Option<T>) -> Result<T, String> {
        value.ok_or_else(|| format!("{}: is required", self.loc_of(name)))
    }

    /// Refuse the fields not read: `Err("<loc>.<key>: unknown field")` for the first one.
    pub fn finish(self) -> Result<(), String> {
        match self.entries.iter().find(|(_, _, read)| !read) {
            Some((k, _, _)) => Err(format!("{}.{k}: unknown field", self.loc)),
            None => Ok(()),
        }
    }
}

/// Whether `key == snake_case(camel)`, without building it.
fn is_snake_case_of(key: &str, camel: &str) -> bool {
    let mut key = key.bytes();
    for c in camel.bytes() {
        if c.is_ascii_uppercase() {
            if key.next() != Some(b'_') || key.next() != Some(c.to_ascii_lowercase()) {
                return false;
            }
        } else if key.next() != Some(c) {
            return false;
        }
    }
    key.next().is_none()
}

/// `runtimeClassName` -> `runtime_class_name` (the inverse of pydantic's `to_camel` for plain
/// field names).
pub fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nil_config_is_empty_and_nil_fields_are_absent() {
        let mut f = Fields::config(&Value::Nil).unwrap();
        assert_eq!(f.str("a").unwrap(), None);
        f.finish().unwrap();
        let v = Value::map([("a", Value::Nil)]);
        let mut f = Fields::config(&v).unwrap();
        assert_eq!(f.str("a").unwrap(), None);
        f.finish().unwrap();
        assert_eq!(
            Fields::new(&Value::Nil, "config.env.0").unwrap_err(),
            "config.env.0: must be a map, got nil"
        );
        assert_eq!(
            Fields::config(&Value::array([1])).unwrap_err(),
            "config: must be a map, got array"
        );
    }

    #[test]
    fn strict_types_and_unknown_fields() {
        let v = Value::map([("name", Value::Int(1)), ("other", Value::Bool(true))]);
        let mut f = Fields::config(&v).unwrap();
        assert_eq!(
            f.str("name").unwrap_err(),
            "config.name: must be a str, got int"
        );
        assert_eq!(f.finish().unwrap_err(), "config.other: unknown field");
        let v = Value::map([(
            "m",
            Value::map([("a", Value::from("b")), ("c", Value::Nil)]),
        )]);
        let mut f = Fields::config(&v).unwrap();
        assert_eq!(
            f.string_map("m").unwrap_err(),
            "config.m.c: must be a str, got nil"
        );
    }

    #[test]
    fn snake_case_spelling_is_accepted_once() {
        let v = Value::map([("value_from", Value::map([("a", 1)]))]);
        let mut f = Fields::config(&v).unwrap();
        assert!(f.map("valueFrom").unwrap().is_some());
        f.finish().unwrap();
        for v in [
            Value::map([("value_from", "x"), ("valueFrom", "y")]),
            Value::map([("valueFrom", "y"), ("value_from", "x")]),
        ] {
            let mut f = Fields::config(&v).unwrap();
            assert_eq!(f.str("valueFrom").unwrap(), Some("y"));
            assert_eq!(f.finish().unwrap_err(), "config.value_from: unknown field");
        }
        // A nil camelCase value leaves the snake_case one in charge.
        let v = Value::map([("valueFrom", Value::Nil), ("value_from", Value::from("x"))]);
        let mut f = Fields::config(&v).unwrap();
        assert_eq!(f.str("valueFrom").unwrap(), Some("x"));
        f.finish().unwrap();
        assert_eq!(snake_case("runtimeClassName"), "runtime_class_name");
        assert_eq!(snake_case("env"), "env");
        for (key, camel, same) in [
            ("runtime_class_name", "runtimeClassName", true),
            ("runtime_class_nam", "runtimeClassName", false),
            ("runtime_class_namex", "runtimeClassName", false),
            ("runtimeClassName", "runtimeClassName", false),
            ("runtime_Class_name", "runtimeClassName", false),
            ("env", "env", true),
            ("", "", true),
        ] {
            assert_eq!(is_snake_case_of(key, camel), same, "{key} {camel}");
            assert_eq!(snake_case(camel) == key, same, "{key} {camel}");
        }
        let v = Value::map([("a", 1)]);
        let mut f = Fields::new(&v, "config.x").unwrap();
        assert_eq!(f.loc_of_item("env", 0), "config.x.env.0");
        assert_eq!(f.loc_of_item("env", 1207), "config.x.env.1207");
        assert!(f.get("a").is_some());
    }
}
