//! JSON Patch (RFC 6902) operations and [`PodPatch`], which turns intentions ("set the runtime
//! class", "upsert this env") into operations.
//!
//! `PodPatch` has exactly the semantics of the host's Python `PodPatch`
//! (`host/modelserving/plugins/patch.py`): the same calls on the same Pod give the same
//! operations, byte for byte once encoded.

use std::fmt;

use crate::msgpack::{encode_into, write_map_len, write_str};
use crate::raw::{find_in_map, walk_array, walk_map, Kind, RawValue};
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
    let mut out = String::with_capacity(token.len() + 2);
    escape_into(token, &mut out);
    out
}

/// Append `escape(token)` to `out`.
pub fn escape_into(token: &str, out: &mut String) {
    let mut rest = token;
    while let Some(i) = rest.bytes().position(|c| c == b'~' || c == b'/') {
        out.push_str(&rest[..i]);
        out.push_str(if rest.as_bytes()[i] == b'~' {
            "~0"
        } else {
            "~1"
        });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

// Paths are built by hand: `format!` is many times slower in a module.

fn concat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum::<usize>() + 8);
    for p in parts {
        out.push_str(p);
    }
    out
}

/// `n` in decimal.
fn push_index(out: &mut String, n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(d as char);
    }
}

/// `{base}/{index}`.
fn element(base: &str, index: usize) -> String {
    let mut out = concat(&[base, "/"]);
    push_index(&mut out, index);
    out
}

/// Builds a patch against one Pod, reading it but never changing it.
///
/// ```
/// use modelserving_plugin::{PodPatch, Value};
/// let pod = Value::map([("metadata", Value::map([("name", "p")]))]);
/// let mut patch = PodPatch::from_value(&pod);
/// patch.set_runtime_class_name("gvisor").merge_labels([("team", "ml")]);
/// assert_eq!(patch.ops()[1].path, "/metadata/labels");
/// ```
///
/// [`PodPatch::new`] reads the little of the Pod the operations depend on, once, from the
/// undecoded Pod ([`crate::Request::pod`]): whether `metadata.annotations` and
/// `metadata.labels` are set, and the env var names of every container and initContainer
/// (with the shape problems met on the way). Nothing else of the Pod is decoded, and the patch
/// borrows nothing.
///
/// The Python original raises when the Pod has an impossible shape (say `spec.containers` is a
/// string); here the first such problem is recorded, later calls do nothing, and
/// [`PodPatch::into_ops`] (which the hook export uses) returns it as the hook's error.
#[derive(Clone, Debug)]
pub struct PodPatch {
    shape: PodShape,
    ops: Vec<Op>,
    maps_created: Vec<String>,
    /// Env var names of each env list as this builder's ops leave it, by JSON pointer, so that
    /// a second upsert_env builds on the first instead of clobbering or duplicating.
    env_names: Vec<(String, EnvNames)>,
    error: Option<String>,
}

/// What the operations need to know of a Pod; problems are kept as the messages the Python
/// original's exceptions correspond to, and reported only when an operation needs that part.
#[derive(Clone, Debug)]
struct PodShape {
    /// Whether `metadata.annotations` / `metadata.labels` are set (not absent, not nil); an
    /// error when `metadata` is there but not a map.
    metadata: Result<[bool; 2], String>,
    /// `spec.containers` and `spec.initContainers`, in this order; an error when `spec` is
    /// there but not a map.
    spec: Result<[Containers; 2], String>,
}

/// A container list: each container's env, or the error of a container that is not a map;
/// an error when the list is truthy but not an array (a falsy one counts as empty).
type Containers = Result<Vec<Result<Env, String>>, String>;

/// A container's env list.
#[derive(Clone, Debug)]
enum Env {
    /// Absent or nil: an upsert adds the whole list.
    Unset,
    /// The names; none for a falsy value.
    Names(EnvNames),
    /// Not something Python could read names from (the message's tail).
    Bad(String),
}

/// The names of an env list, in order. They are only ever compared with the names of new
/// vars, so they are kept as the bytes the request has (no UTF-8 check), one after another in
/// one buffer (no allocation per name).
#[derive(Clone, Debug, Default)]
struct EnvNames {
    bytes: Vec<u8>,
    /// Each name's range in `bytes`; `None` for an entry without a string name (it equals no
    /// name).
    names: Vec<Option<(usize, usize)>>,
}

impl EnvNames {
    fn with_capacity(names: usize) -> EnvNames {
        EnvNames {
            bytes: Vec::with_capacity(names * 16),
            names: Vec::with_capacity(names),
        }
    }

    fn push(&mut self, name: Option<&[u8]>) {
        self.names.push(name.map(|n| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(n);
            (start, self.bytes.len())
        }));
    }

    fn is(&self, i: usize, name: &[u8]) -> bool {
        match self.names[i] {
            Some((start, end)) => self.bytes.get(start..end) == Some(name),
            None => false,
        }
    }

    /// The first index from `from` on whose name is `name`.
    fn position(&self, name: &[u8], from: usize) -> Option<usize> {
        (from..self.names.len()).find(|&i| self.is(i, name))
    }

    fn remove(&mut self, i: usize) {
        self.names.remove(i); // its bytes stay, unreferenced
    }
}

const META_FIELDS: [&str; 2] = ["annotations", "labels"];
const CONTAINER_KINDS: [&str; 2] = ["containers", "initContainers"];

impl PodShape {
    /// One pass over the Pod: what is not needed is stepped over, never decoded.
    fn read(pod: RawValue<'_>) -> PodShape {
        let (mut metadata, mut spec) = (None, None);
        walk_map(pod, |k, v| match k {
            b"metadata" if metadata.is_none() => {
                metadata = Some(read_metadata(v));
                None
            }
            b"spec" if spec.is_none() => {
                let (shape, len) = read_spec(v);
                spec = Some(shape);
                len
            }
            _ => None,
        });
        PodShape {
            metadata: metadata.unwrap_or(Ok([false; 2])),
            spec: spec.unwrap_or_else(|| Ok([Ok(Vec::new()), Ok(Vec::new())])),
        }
    }
}

fn read_metadata(metadata: RawValue<'_>) -> Result<[bool; 2], String> {
    if metadata.kind() != Kind::Map {
        return Err(format!(
            "pod metadata is a {}, not a map",
            metadata.type_name()
        ));
    }
    let mut set = [None; 2];
    for (k, v) in metadata.iter_map() {
        if let Some(i) = META_FIELDS
            .iter()
            .position(|f| k.str_bytes() == Some(f.as_bytes()))
        {
            set[i] = set[i].or(Some(!v.is_nil()));
        }
    }
    Ok(set.map(|s| s == Some(true)))
}

/// The containers of `spec`, and the encoded length of `spec` when this walked it.
fn read_spec(spec: RawValue<'_>) -> (Result<[Containers; 2], String>, Option<usize>) {
    if spec.kind() != Kind::Map {
        let e = format!("pod spec is a {}, not a map", spec.type_name());
        return (Err(e), None);
    }
    let mut lists = [None, None];
    let len = walk_map(spec, |k, v| {
        let i = CONTAINER_KINDS.iter().position(|f| k == f.as_bytes())?;
        if lists[i].is_some() {
            return None;
        }
        let (list, len) = read_containers(CONTAINER_KINDS[i], v);
        lists[i] = Some(list);
        len
    });
    let [containers, init] = lists;
    let empty = || Ok(Vec::new());
    (
        Ok([containers.unwrap_or_else(empty), init.unwrap_or_else(empty)]),
        Some(len),
    )
}

/// A container list as `upsert_env` sees it, and its encoded length when this walked it.
fn read_containers(kind: &str, list: RawValue<'_>) -> (Containers, Option<usize>) {
    if list.kind() != Kind::Array {
        if list.is_truthy() {
            let e = format!("pod spec.{kind} is a {}, not an array", list.type_name());
            return (Err(e), None);
        }
        return (Ok(Vec::new()), None);
    }
    let mut out = Vec::with_capacity(list.len());
    let len = walk_array(list, |i, container| {
        if container.kind() != Kind::Map {
            out.push(Err(format!(
                "pod spec.{kind}[{i}] is a {}, not a map",
                container.type_name()
            )));
            return None;
        }
        let mut env = None;
        let len = walk_map(container, |k, v| {
            if k != b"env" || env.is_some() {
                return None;
            }
            let (names, len) = env_names_of(v);
            env = Some(match names {
                _ if v.is_nil() => Env::Unset,
                Ok(names) => Env::Names(names),
                Err(what) => Env::Bad(format!("pod spec.{kind}[{i}].env {what}")),
            });
            len
        });
        out.push(Ok(env.unwrap_or(Env::Unset)));
        Some(len)
    });
    (Ok(out), Some(len))
}

/// The names of an existing env list, as Python's `[e.get("name") for e in current or []]`
/// sees them: a falsy value counts as empty, anything else must be a list of maps. Also the
/// list's encoded length when this walked it.
fn env_names_of(env: RawValue<'_>) -> (Result<EnvNames, String>, Option<usize>) {
    if env.kind() != Kind::Array {
        if env.is_truthy() {
            return (Err(format!("is a {}, not an array", env.type_name())), None);
        }
        return (Ok(EnvNames::default()), None);
    }
    let mut names = EnvNames::with_capacity(env.len());
    let mut error = None;
    let len = walk_array(env, |j, e| {
        if error.is_some() {
            return None; // step over the rest
        }
        if e.kind() != Kind::Map {
            error = Some(format!("[{j}] is a {}, not a map", e.type_name()));
            return None;
        }
        let (name, len) = find_in_map(e, b"name");
        names.push(name.and_then(RawValue::str_bytes));
        Some(len)
    });
    let names = match error {
        Some(e) => Err(e),
        None => Ok(names),
    };
    (names, Some(len))
}

impl PodPatch {
    /// A patch for `pod` (usually [`crate::Request::pod`]), reading what the operations need.
    /// A pod that is not a map counts as an empty one, as in Python.
    pub fn new(pod: RawValue<'_>) -> PodPatch {
        PodPatch {
            shape: PodShape::read(pod),
            ops: Vec::new(),
            maps_created: Vec::new(),
            env_names: Vec::new(),
            error: None,
        }
    }

    /// A patch for a Pod held as a [`Value`] (tests, or a Pod a plugin built itself).
    pub fn from_value(pod: &Value) -> PodPatch {
        let bytes = pod.to_msgpack();
        match RawValue::new(&bytes) {
            Ok(raw) => PodPatch::new(raw),
            Err(e) => {
                let mut patch = PodPatch::new(RawValue::NIL);
                patch.error = Some(format!("pod: {e}"));
                patch
            }
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
        let existing = match &self.shape.metadata {
            Ok(set) => set[if field == "labels" { 1 } else { 0 }],
            Err(e) => {
                let e = e.clone();
                return self.fail(e);
            }
        };
        if !existing && !self.maps_created.iter().any(|f| f == field) {
            self.maps_created.push(field.to_owned());
            return self.add(concat(&["/metadata/", field]), Value::Map(values));
        }
        for (key, value) in values {
            let mut path = concat(&["/metadata/", field, "/"]);
            escape_into(&key, &mut path);
            self.add(path, value);
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
        // The shape is read while operations are added: take it out meanwhile.
        let mut spec = std::mem::replace(&mut self.shape.spec, Err(String::new()));
        if let Err(e) = self.upsert_env_in(&mut spec, &wanted) {
            self.fail(e);
        }
        self.shape.spec = spec;
        self
    }

    fn upsert_env_in(
        &mut self,
        spec: &mut Result<[Containers; 2], String>,
        wanted: &[(Option<String>, &Value)],
    ) -> Result<(), String> {
        let lists = spec.as_mut().map_err(|e| e.clone())?;
        for (kind, containers) in CONTAINER_KINDS.iter().zip(lists.iter_mut()) {
            let containers = containers.as_mut().map_err(|e| e.clone())?;
            for (i, container) in containers.iter_mut().enumerate() {
                let current = container.as_mut().map_err(|e| e.clone())?;
                if wanted.iter().any(|(n, _)| n.is_none()) {
                    return Err("an env var has no string 'name'".to_owned());
                }
                let mut base = concat(&["/spec/", kind, "/"]);
                push_index(&mut base, i);
                base.push_str("/env");
                let known = self.env_names.iter().position(|(b, _)| *b == base);
                if matches!(current, Env::Unset) && known.is_none() {
                    let mut merged: Vec<(&str, &Value)> = Vec::with_capacity(wanted.len());
                    for (name, var) in wanted {
                        let name = name.as_deref().unwrap_or_default();
                        match merged.iter().position(|(n, _)| *n == name) {
                            Some(j) => merged[j] = (name, *var),
                            None => merged.push((name, *var)),
                        }
                    }
                    let mut names = EnvNames::with_capacity(merged.len());
                    merged
                        .iter()
                        .for_each(|(n, _)| names.push(Some(n.as_bytes())));
                    let list = Value::Array(merged.iter().map(|(_, v)| (*v).clone()).collect());
                    self.add(base.clone(), list);
                    self.env_names.push((base, names));
                    continue;
                }
                let slot = match known {
                    Some(j) => j,
                    None => {
                        let names = match current {
                            // Only needed once: afterwards env_names has this list.
                            Env::Names(names) => std::mem::take(names),
                            Env::Bad(e) => return Err(e.clone()),
                            Env::Unset => EnvNames::default(), // never: handled above
                        };
                        self.env_names.push((base.clone(), names));
                        self.env_names.len() - 1
                    }
                };
                for (name, var) in wanted {
                    self.upsert_one(&base, slot, name.as_deref().unwrap_or_default(), var);
                }
            }
        }
        Ok(())
    }

    /// One env var into the list at `base` whose names (as our ops leave it) are
    /// `self.env_names[slot]`.
    fn upsert_one(&mut self, base: &str, slot: usize, name: &str, var: &Value) {
        let names = &mut self.env_names[slot].1;
        let name = name.as_bytes();
        let first = match names.position(name, 0) {
            Some(first) => first,
            None => {
                names.push(Some(name));
                self.ops.push(Op::add(concat(&[base, "/-"]), var.clone()));
                return;
            }
        };
        let mut later = Vec::new();
        while let Some(j) = names.position(name, later.last().map_or(first, |&j| j) + 1) {
            later.push(j);
        }
        self.ops
            .push(Op::replace(element(base, first), var.clone()));
        for &j in later.iter().rev() {
            self.ops.push(Op::remove(element(base, j)));
            names.remove(j);
        }
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
        let mut patch = PodPatch::from_value(&p);
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
        let mut patch = PodPatch::from_value(&p);
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
        let mut patch = PodPatch::from_value(&p);
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
        let mut patch = PodPatch::from_value(&p);
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
            let mut patch = PodPatch::from_value(&p);
            patch.upsert_env([&a]);
            assert!(patch.into_ops().is_err(), "{p}");
        }
        let p = Value::map([("metadata", Value::Nil)]);
        let mut patch = PodPatch::from_value(&p);
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
            let mut patch = PodPatch::from_value(&p);
            patch.upsert_env([&a]);
            assert!(patch.into_ops().is_ok(), "{p}");
        }
    }

    #[test]
    fn reads_the_pod_from_undecoded_bytes() {
        // The parts PodPatch skips may hold anything framed right: they are never decoded.
        let mut pod = pod(Value::map([
            (
                "initContainers",
                Value::array([Value::map([("name", "i")])]),
            ),
            (
                "containers",
                Value::array([
                    Value::map([
                        ("args", Value::Array(vec![Value::from("x".repeat(300)); 40])),
                        (
                            "env",
                            Value::array([env("B", "0"), Value::map([("value", "no name")])]),
                        ),
                        (
                            "resources",
                            Value::map([("limits", Value::map([("gpu", 8)]))]),
                        ),
                    ]),
                    Value::map([("name", Value::from("d")), ("env", Value::Nil)]),
                ]),
            ),
            ("nodeSelector", Value::map([("k", "v")])),
        ]));
        pod.set("status", Value::map([("phase", "Running")]));
        let mut bytes = pod.to_msgpack();
        // A string that is not UTF-8 in a part nobody reads: ["\xc3("] as the last value.
        let end = bytes.len();
        bytes[0] += 1;
        bytes.extend_from_slice(&[0xa1, b'z', 0x91, 0xa2, 0xc3, 0x28]);
        let raw = RawValue::new(&bytes).unwrap();
        assert_eq!(raw.as_bytes().len(), end + 6);
        let (a, b) = (env("A", "1"), env("B", "2"));
        let mut patch = PodPatch::new(raw);
        patch
            .merge_annotations([("x", "1")])
            .merge_labels([("y", "2")])
            .upsert_env([&a, &b]);
        assert_eq!(
            paths(&patch.into_ops().unwrap()),
            [
                "add /metadata/annotations",
                "add /metadata/labels",
                "add /spec/containers/0/env/-",
                "replace /spec/containers/0/env/0",
                "add /spec/containers/1/env",
                "add /spec/initContainers/0/env",
            ]
        );
        // Not a map at all: an empty Pod, as in Python.
        let mut patch = PodPatch::new(RawValue::NIL);
        patch.upsert_env([&a]).merge_labels([("y", "2")]);
        assert_eq!(paths(&patch.into_ops().unwrap()), ["add /metadata/labels"]);
    }

    #[test]
    fn env_names_are_compared_as_bytes() {
        // [{"name": "A\xc3("}, {"name": 5}, {"name": "A"}]: names stay bytes (UTF-8 unchecked);
        // a name that is not a string equals no name.
        let list = [
            vec![
                0x93, 0x81, 0xa4, b'n', b'a', b'm', b'e', 0xa3, b'A', 0xc3, 0x28,
            ],
            vec![0x81, 0xa4, b'n', b'a', b'm', b'e', 0x05],
            vec![0x81, 0xa4, b'n', b'a', b'm', b'e', 0xa1, b'A'],
        ]
        .concat();
        let (names, len) = env_names_of(RawValue::new(&list).unwrap());
        assert_eq!(len, Some(list.len()));
        let names = names.unwrap();
        assert_eq!(names.names.len(), 3);
        assert_eq!(names.position(b"A", 0), Some(2));
        // Only the same bytes match; a new var's name is a str, so never these.
        assert_eq!(names.position(b"A\xc3(", 0), Some(0));
        assert_eq!(names.position("Aé".as_bytes(), 0), None);
        assert!(!names.is(1, b""));
        let mut names = names;
        names.push(Some(b"B"));
        names.remove(0);
        assert_eq!(names.position(b"A", 0), Some(1));
        assert_eq!(names.position(b"B", 0), Some(2));
        assert_eq!(names.position(b"B", 3), None);
    }

    #[test]
    fn paths_are_built_like_format() {
        assert_eq!(
            element("/spec/containers/0/env", 0),
            "/spec/containers/0/env/0"
        );
        assert_eq!(element("/a", 1234567), "/a/1234567");
        let mut s = String::new();
        push_index(&mut s, usize::MAX);
        assert_eq!(s, usize::MAX.to_string());
        assert_eq!(escape(""), "");
        assert_eq!(escape("/~/"), "~1~0~1");
        assert_eq!(escape("é/x"), "é~1x");
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
