//! JSON Patch (RFC 6902) operations and [`PodPatch`], which turns intentions ("set the runtime
//! class", "upsert this env") into operations.
//!
//! `PodPatch` has exactly the semantics of the host's Python `PodPatch`
//! (`host/modelserving/plugins/patch.py`): the same calls on the same Pod give the same
//! operations, byte for byte once encoded.

use std::fmt;

use crate::msgpack::{encode_into, write_map_len, write_str};
use crate::value::Value;

/// The operation name of an [`Op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Add,
    Remove,
    Replace,
    Test,
}

impl OpKind {
    /// "add", "remove", "replace" or "test".
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Add => "add",
            OpKind::Remove => "remove",
            OpKind::Replace => "replace",
            OpKind::Test => "test",
        }
    }
}

/// One RFC 6902 operation; `value` is `Some` for add, replace and test, `None` for remove.
///
/// Encoded as a map with keys in the order `op`, `path`, `value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub op: OpKind,
    /// A JSON Pointer (RFC 6901); build tokens with [`escape`].
    pub path: String,
    pub value: Option<Value>,
}

impl Op {
    /// Create the member or replace it.
    pub fn add(path: impl Into<String>, value: impl Into<Value>) -> Op {
        Op {
            op: OpKind::Add,
            path: path.into(),
            value: Some(value.into()),
        }
    }

    /// Replace an existing member.
    pub fn replace(path: impl Into<String>, value: impl Into<Value>) -> Op {
        Op {
            op: OpKind::Replace,
            path: path.into(),
            value: Some(value.into()),
        }
    }

    /// Remove an existing member.
    pub fn remove(path: impl Into<String>) -> Op {
        Op {
            op: OpKind::Remove,
            path: path.into(),
            value: None,
        }
    }

    /// Fail the whole patch unless the member equals `value`.
    pub fn test(path: impl Into<String>, value: impl Into<Value>) -> Op {
        Op {
            op: OpKind::Test,
            path: path.into(),
            value: Some(value.into()),
        }
    }

    /// The operation as a map `{"op", "path", "value"?}`.
    pub fn to_value(&self) -> Value {
        let mut m = vec![
            ("op".to_owned(), Value::from(self.op.as_str())),
            ("path".to_owned(), Value::from(self.path.as_str())),
        ];
        if let Some(v) = &self.value {
            m.push(("value".to_owned(), v.clone()));
        }
        Value::Map(m)
    }

    /// Append the msgpack encoding (same bytes as `to_value().to_msgpack()`, without copying).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        write_map_len(if self.value.is_some() { 3 } else { 2 }, out);
        write_str("op", out);
        write_str(self.op.as_str(), out);
        write_str("path", out);
        write_str(&self.path, out);
        if let Some(v) = &self.value {
            write_str("value", out);
            encode_into(v, out);
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

/// One JSON Pointer reference token (RFC 6901): `~` -> `~0`, `/` -> `~1`.
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Builds a patch against one Pod, reading it but never changing it.
///
/// ```
/// use modelserving_plugin::{PodPatch, Value};
/// let pod = Value::map([("metadata", Value::map([("name", "p")]))]);
/// let mut patch = PodPatch::new(&pod);
/// patch.set_runtime_class_name("gvisor").merge_labels([("team", "ml")]);
/// assert_eq!(patch.ops()[1].path, "/metadata/labels");
/// ```
///
/// The Python original raises when the Pod has an impossible shape (say `spec.containers` is a
/// string); here the first such problem is recorded, later calls do nothing, and
/// [`PodPatch::into_ops`] (which the hook export uses) returns it as the hook's error.
#[derive(Clone, Debug)]
pub struct PodPatch<'a> {
    pod: &'a Value,
    ops: Vec<Op>,
    maps_created: Vec<String>,
    /// Env var names of each env list as this builder's ops leave it, by JSON pointer, so that
    /// a second upsert_env builds on the first instead of clobbering or duplicating. `None`
    /// stands for a name that is not a string (it never equals one).
    env_names: Vec<(String, Vec<Option<String>>)>,
    error: Option<String>,
}

impl<'a> PodPatch<'a> {
    pub fn new(pod: &'a Value) -> PodPatch<'a> {
        PodPatch {
            pod,
            ops: Vec::new(),
            maps_created: Vec::new(),
            env_names: Vec::new(),
            error: None,
        }
    }

    /// The operations so far.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The problem with the Pod's shape met so far, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The operations, or the error when the Pod's shape made a call impossible.
    pub fn into_ops(self) -> Result<Vec<Op>, String> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.ops),
        }
    }

    fn fail(&mut self, message: String) -> &mut Self {
        if self.error.is_none() {
            self.error = Some(message);
        }
        self
    }

    /// Append any operation.
    pub fn push(&mut self, op: Op) -> &mut Self {
        if self.error.is_none() {
            self.ops.push(op);
        }
        self
    }

    /// An `add`: creates the member or replaces it (RFC 6902).
    pub fn add(&mut self, path: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        self.push(Op::add(path, value))
    }

    pub fn set_runtime_class_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.add("/spec/runtimeClassName", Value::Str(name.into()))
    }

    /// Add or overwrite annotations (same keys get the new value).
    pub fn merge_annotations<K, V>(&mut self, values: impl IntoIterator<Item = (K, V)>) -> &mut Self
    where
        K: Into<String>,
        V: Into<Value>,
    {
        self.merge_map("annotations", values)
    }

    /// Add or overwrite labels (same keys get the new value).
    pub fn merge_labels<K, V>(&mut self, values: impl IntoIterator<Item = (K, V)>) -> &mut Self
    where
        K: Into<String>,
        V: Into<Value>,
    {
        self.merge_map("labels", values)
    }

    fn merge_map<K, V>(
        &mut self,
        field: &str,
        values: impl IntoIterator<Item = (K, V)>,
    ) -> &mut Self
    where
        K: Into<String>,
        V: Into<Value>,
    {
        // A Python mapping: a repeated key keeps its first position and takes the last value.
        let mut values_map = Value::Map(Vec::new());
        for (k, v) in values {
            values_map.set(k, v);
        }
        let values = match values_map {
            Value::Map(m) => m,
            _ => Vec::new(),
        };
        if values.is_empty() || self.error.is_some() {
            return self;
        }
        let pod: &'a Value = self.pod;
        let metadata = match pod.get("metadata") {
            None => None,
            Some(m @ Value::Map(_)) => Some(m),
            Some(other) => {
                return self.fail(format!(
                    "pod metadata is a {}, not a map",
                    other.type_name()
                ))
            }
        };
        let existing = metadata.and_then(|m| m.get(field)).filter(|v| !v.is_nil());
        if existing.is_none() && !self.maps_created.iter().any(|f| f == field) {
            self.maps_created.push(field.to_owned());
            return self.add(format!("/metadata/{field}"), Value::Map(values));
        }
        for (key, value) in values {
            self.add(format!("/metadata/{field}/{}", escape(&key)), value);
        }
        self
    }

    /// Set env vars in every container and initContainer, replacing same-named entries.
    ///
    /// Each item of `env` is a core/v1 EnvVar map with a string `name`. The first entry of a
    /// name is replaced in place, any later entries of that name are removed (the kubelet would
    /// let the last one win), and a new name is appended (`.../env/-`); later entries of `env`
    /// win over earlier ones. A container without `env` gets the whole list in one `add`.
    pub fn upsert_env<'e>(&mut self, env: impl IntoIterator<Item = &'e Value>) -> &mut Self {
        // (name, var); a missing or non-string name is only an error once a container needs it,
        // as in Python.
        let mut wanted: Vec<(Option<String>, &'e Value)> = Vec::new();
        for var in env {
            if var.as_map().is_none() {
                return self.fail(format!("an env var is a {}, not a map", var.type_name()));
            }
            wanted.push((
                var.get("name").and_then(Value::as_str).map(str::to_owned),
                var,
            ));
        }
        if wanted.is_empty() || self.error.is_some() {
            return self;
        }
        let pod: &'a Value = self.pod;
        let spec = match pod.get("spec") {
            None => None,
            Some(s @ Value::Map(_)) => Some(s),
            Some(other) => {
                return self.fail(format!("pod spec is a {}, not a map", other.type_name()))
            }
        };
        for kind in ["containers", "initContainers"] {
            let containers: &[Value] = match spec.and_then(|s| s.get(kind)) {
                Some(Value::Array(items)) => items,
                Some(v) if v.is_truthy() => {
                    return self.fail(format!(
                        "pod spec.{kind} is a {}, not an array",
                        v.type_name()
                    ))
                }
                _ => &[],
            };
            for (i, container) in containers.iter().enumerate() {
                if container.as_map().is_none() {
                    return self.fail(format!(
                        "pod spec.{kind}[{i}] is a {}, not a map",
                        container.type_name()
                    ));
                }
                if wanted.iter().any(|(n, _)| n.is_none()) {
                    return self.fail("an env var has no string 'name'".to_owned());
                }
                let base = format!("/spec/{kind}/{i}/env");
                let current = container.get("env").filter(|v| !v.is_nil());
                let known = self.env_names.iter().position(|(b, _)| *b == base);
                if current.is_none() && known.is_none() {
                    let mut merged: Vec<(&str, &Value)> = Vec::new();
                    for (name, var) in &wanted {
                        let name = name.as_deref().unwrap_or_default();
                        match merged.iter().position(|(n, _)| *n == name) {
                            Some(j) => merged[j] = (name, *var),
                            None => merged.push((name, *var)),
                        }
                    }
                    let names = merged.iter().map(|(n, _)| Some((*n).to_owned())).collect();
                    let list = Value::Array(merged.iter().map(|(_, v)| (*v).clone()).collect());
                    self.add(base.clone(), list);
                    self.env_names.push((base, names));
                    continue;
                }
                let slot = match known {
                    Some(j) => j,
                    None => {
                        let names = match env_names_of(current) {
                            Ok(names) => names,
                            Err(what) => {
                                return self.fail(format!("pod spec.{kind}[{i}].env {what}"))
                            }
                        };
                        self.env_names.push((base.clone(), names));
                        self.env_names.len() - 1
                    }
                };
                for (name, var) in &wanted {
                    self.upsert_one(&base, slot, name.as_deref().unwrap_or_default(), var);
                }
            }
        }
        self
    }

    /// One env var into the list at `base` whose names (as our ops leave it) are
    /// `self.env_names[slot]`.
    fn upsert_one(&mut self, base: &str, slot: usize, name: &str, var: &Value) {
        let names = &mut self.env_names[slot].1;
        let first = match names.iter().position(|n| n.as_deref() == Some(name)) {
            Some(first) => first,
            None => {
                names.push(Some(name.to_owned()));
                self.ops.push(Op::add(format!("{base}/-"), var.clone()));
                return;
            }
        };
        let later: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|&(j, n)| j != first && n.as_deref() == Some(name))
            .map(|(j, _)| j)
            .collect();
        self.ops
            .push(Op::replace(format!("{base}/{first}"), var.clone()));
        for &j in later.iter().rev() {
            self.ops.push(Op::remove(format!("{base}/{j}")));
            names.remove(j);
        }
    }
}

/// The names of an existing env list, as Python's `[e.get("name") for e in current or []]`
/// sees them: a falsy value counts as empty, anything else must be a list of maps.
fn env_names_of(current: Option<&Value>) -> Result<Vec<Option<String>>, String> {
    match current {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(j, e)| match e {
                Value::Map(_) => Ok(e.get("name").and_then(Value::as_str).map(str::to_owned)),
                other => Err(format!("[{j}] is a {}, not a map", other.type_name())),
            })
            .collect(),
        Some(v) if v.is_truthy() => Err(format!("is a {}, not an array", v.type_name())),
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, value: &str) -> Value {
        Value::map([("name", name), ("value", value)])
    }

    fn pod(spec: Value) -> Value {
        Value::map([("metadata", Value::map([("name", "p")])), ("spec", spec)])
    }

    fn paths(ops: &[Op]) -> Vec<String> {
        ops.iter()
            .map(|o| format!("{} {}", o.op.as_str(), o.path))
            .collect()
    }

    #[test]
    fn escape_follows_rfc6901() {
        assert_eq!(escape("a/b~c"), "a~1b~0c");
        assert_eq!(escape("~1"), "~01");
    }

    #[test]
    fn merge_creates_the_map_once_then_adds_keys() {
        let p = pod(Value::map([(
            "containers",
            Value::array([Value::map([("name", "c")])]),
        )]));
        let mut patch = PodPatch::new(&p);
        patch
            .merge_annotations([("a/b", "1")])
            .merge_annotations([("c", "2")]);
        patch.merge_annotations(Vec::<(String, String)>::new());
        assert_eq!(
            patch.ops()[0],
            Op::add("/metadata/annotations", Value::map([("a/b", "1")]))
        );
        assert_eq!(patch.ops()[1], Op::add("/metadata/annotations/c", "2"));
        assert_eq!(patch.ops().len(), 2);
    }

    #[test]
    fn merge_into_existing_map_adds_escaped_keys() {
        let p = Value::map([(
            "metadata",
            Value::map([
                ("labels", Value::map([("x", "y")])),
                ("annotations", Value::Nil),
            ]),
        )]);
        let mut patch = PodPatch::new(&p);
        patch.merge_labels([("k/e~y", "v"), ("z", "1"), ("k/e~y", "w")]);
        patch.merge_annotations([("a", "b")]);
        assert_eq!(
            patch.into_ops().unwrap(),
            vec![
                Op::add("/metadata/labels/k~1e~0y", "w"),
                Op::add("/metadata/labels/z", "1"),
                Op::add("/metadata/annotations", Value::map([("a", "b")])),
            ]
        );
    }

    #[test]
    fn upsert_env_adds_whole_list_when_absent() {
        let p = pod(Value::map([
            ("containers", Value::array([Value::map([("name", "a")])])),
            (
                "initContainers",
                Value::array([Value::map([
                    ("name", Value::from("i")),
                    ("env", Value::Array(vec![])),
                ])]),
            ),
        ]));
        let (a1, b, a2) = (env("A", "1"), env("B", "2"), env("A", "3"));
        let mut patch = PodPatch::new(&p);
        patch.upsert_env([&a1, &b, &a2]);
        assert_eq!(
            patch.ops(),
            &[
                Op::add(
                    "/spec/containers/0/env",
                    Value::array([a2.clone(), b.clone()])
                ),
                Op::add("/spec/initContainers/0/env/-", a1.clone()),
                Op::add("/spec/initContainers/0/env/-", b.clone()),
                Op::replace("/spec/initContainers/0/env/0", a2.clone()),
            ]
        );
        // A second call builds on the first.
        let c = env("C", "4");
        patch.upsert_env([&b, &c]);
        assert_eq!(
            paths(&patch.ops()[4..]),
            [
                "replace /spec/containers/0/env/1",
                "add /spec/containers/0/env/-",
                "replace /spec/initContainers/0/env/1",
                "add /spec/initContainers/0/env/-",
            ]
        );
    }

    #[test]
    fn upsert_env_replaces_first_and_removes_later_duplicates() {
        let existing = Value::array([
            env("A", "0"),
            env("X", "0"),
            env("A", "1"),
            Value::map([("value", "no name")]),
            env("A", "2"),
        ]);
        let p = pod(Value::map([(
            "containers",
            Value::array([Value::map([("name", Value::from("c")), ("env", existing)])]),
        )]));
        let a = env("A", "new");
        let mut patch = PodPatch::new(&p);
        patch.upsert_env([&a, &a]);
        assert_eq!(
            paths(patch.ops()),
            [
                "replace /spec/containers/0/env/0",
                "remove /spec/containers/0/env/4",
                "remove /spec/containers/0/env/2",
                "replace /spec/containers/0/env/0",
            ]
        );
        assert_eq!(patch.ops()[1].value, None);
    }

    #[test]
    fn impossible_pod_shapes_are_errors() {
        let a = env("A", "1");
        for p in [
            pod(Value::from("spec")),
            pod(Value::map([("containers", "abc")])),
            pod(Value::map([("containers", Value::array([Value::Nil]))])),
            pod(Value::map([(
                "containers",
                Value::array([Value::map([("env", Value::array([Value::Int(1)]))])]),
            )])),
            pod(Value::map([(
                "containers",
                Value::array([Value::map([("env", 1)])]),
            )])),
        ] {
            let mut patch = PodPatch::new(&p);
            patch.upsert_env([&a]);
            assert!(patch.into_ops().is_err(), "{p}");
        }
        let p = Value::map([("metadata", Value::Nil)]);
        let mut patch = PodPatch::new(&p);
        patch.merge_labels([("a", "b")]).set_runtime_class_name("x");
        assert!(patch.ops().is_empty());
        assert!(patch.into_ops().unwrap_err().contains("metadata is a nil"));
        // Falsy shapes count as empty, as in Python.
        for p in [
            pod(Value::map([
                ("containers", Value::Nil),
                ("initContainers", Value::from("")),
            ])),
            pod(Value::map([(
                "containers",
                Value::array([Value::map([("env", false)])]),
            )])),
            Value::map([("kind", "Pod")]),
        ] {
            let mut patch = PodPatch::new(&p);
            patch.upsert_env([&a]);
            assert!(patch.into_ops().is_ok(), "{p}");
        }
    }

    #[test]
    fn op_encoding_matches_its_value() {
        for op in [
            Op::add("/a", Value::array([1, 2])),
            Op::remove("/b"),
            Op::test("/c", Value::Nil),
        ] {
            let mut direct = Vec::new();
            op.encode_into(&mut direct);
            assert_eq!(direct, op.to_value().to_msgpack());
        }
    }
}
