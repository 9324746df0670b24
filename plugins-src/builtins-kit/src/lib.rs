//! Shared helpers of the built-in plugins: [`PodEdit`] (changes to a working copy of a Pod, each
//! recorded as its JSON Patch operation), [`is_quantity`], [`is_label_value`] and
//! [`is_dns1123_label`]; [`group_files`], what the built-ins that write a ServingGroup's files
//! share; [`json`], JSON read and written by Python's rules.
//!
//! The twin of the host's `modelserving.plugins.podedit` and of `modelserving.api.names`'
//! predicates: the same operations in the same order, the same error texts, so a built-in's
//! native and WebAssembly forms produce byte-identical patches. The rules (see the Python module
//! for the long form): `put` creates the missing maps on the way in one `add`; `put_if_absent`
//! keeps a value already there; `merge_map` creates a missing map whole; `append_unless` appends
//! unless an item matches. On top of them, the edits the built-ins share, on one container:
//! `set_amount` sets a resource's limit (and its request only when there is one); `add_volume`
//! appends a volume unless one of that name exists, then its mount unless a mount at that path
//! exists; `add_shared_memory` adds the `dshm` memory `emptyDir` at `/dev/shm`; `add_env`
//! appends an env var unless one of that name exists. A value of the wrong type on the way is an
//! error such as `pod spec.containers[0].resources is a str, not a map`.

use modelserving_plugin::{escape, Op, Request, Value};

pub mod group_files;
pub mod json;
#[cfg(feature = "testing")]
pub mod testing;

/// One step of a path: a map key or a list index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key<'a> {
    F(&'a str),
    I(usize),
}

pub use Key::{F, I};

/// The shared-memory volume's name.
pub const SHM_VOLUME: &str = "dshm";
/// Where the shared-memory volume is mounted.
pub const SHM_PATH: &str = "/dev/shm";

/// The path of a field of container `index`.
fn in_container<'a>(index: usize, rest: &[Key<'a>]) -> Vec<Key<'a>> {
    let mut path = vec![F("spec"), F("containers"), I(index)];
    path.extend_from_slice(rest);
    path
}

/// The JSON Pointer of `path`.
pub fn pointer(path: &[Key<'_>]) -> String {
    let mut out = String::new();
    for key in path {
        out.push('/');
        match key {
            F(name) => out.push_str(&escape(name)),
            I(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

/// `path` as error messages show it: `spec.containers[0].resources`.
pub fn dotted(path: &[Key<'_>]) -> String {
    let mut out = String::new();
    for key in path {
        match key {
            I(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
            F(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
        }
    }
    out
}

/// `item[key]` when `item` is a map and the value a string.
pub fn str_field<'v>(item: &'v Value, key: &str) -> Option<&'v str> {
    item.get(key).and_then(Value::as_str)
}

/// `item[key]` when `item` is a map and the value an integer.
pub fn int_field(item: &Value, key: &str) -> Option<i64> {
    match item.get(key) {
        Some(Value::Int(i)) => Some(*i),
        _ => None,
    }
}

/// Edits a working copy of one Pod; [`PodEdit::into_ops`] is the patch that leads to it.
#[derive(Clone, Debug)]
pub struct PodEdit {
    pod: Value,
    ops: Vec<Op>,
}

fn member<'v>(node: &'v Value, key: Key<'_>) -> Option<&'v Value> {
    let found = match (node, key) {
        (Value::Array(items), I(i)) => items.get(i),
        (Value::Map(_), F(name)) => node.get(name),
        _ => None,
    };
    found.filter(|v| !v.is_nil())
}

fn member_mut<'v>(node: &'v mut Value, key: Key<'_>) -> Option<&'v mut Value> {
    match (node, key) {
        (Value::Array(items), I(i)) => items.get_mut(i),
        (Value::Map(entries), F(name)) => entries
            .iter_mut()
            .find(|(k, _)| k == name)
            .map(|e| &mut e.1),
        _ => None,
    }
}

impl PodEdit {
    pub fn new(pod: Value) -> PodEdit {
        PodEdit {
            pod,
            ops: Vec::new(),
        }
    }

    /// An edit of the request's Pod (decoded whole).
    pub fn of_request(req: &Request) -> Result<PodEdit, String> {
        Ok(PodEdit::new(req.pod_value()?))
    }

    /// The Pod as the operations so far leave it.
    pub fn pod(&self) -> &Value {
        &self.pod
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }

    /// The value at `path`; `None` when it or anything on the way is missing, nil or of
    /// another type.
    pub fn get(&self, path: &[Key<'_>]) -> Option<&Value> {
        let mut node = &self.pod;
        for key in path {
            node = member(node, *key)?;
        }
        Some(node)
    }

    /// The index in `spec.containers` of the container `name`, or of the first one.
    pub fn container(&self, name: Option<&str>) -> Result<usize, String> {
        let containers = match self.get(&[F("spec"), F("containers")]) {
            Some(Value::Array(items)) if !items.is_empty() => items,
            _ => return Err("the Pod has no containers".to_owned()),
        };
        let name = match name {
            None => return Ok(0),
            Some(name) => name,
        };
        containers
            .iter()
            .position(|c| str_field(c, "name") == Some(name))
            .ok_or_else(|| format!("the Pod has no container named '{name}'"))
    }

    /// Checks that the member `path[depth]` of the node there can be indexed by
    /// `path[depth + 1]`; whether it exists (not missing, not nil).
    fn check_child(&self, path: &[Key<'_>], depth: usize) -> Result<bool, String> {
        let parent = self.get(&path[..depth]).unwrap_or(&Value::Nil);
        let child = match path[depth] {
            I(i) => match parent {
                Value::Array(items) if i < items.len() => &items[i],
                _ => return Err(format!("pod {} has no item {i}", dotted(&path[..depth]))),
            },
            F(name) => match parent.get(name) {
                Some(v) => v,
                None => return Ok(false),
            },
        };
        if child.is_nil() {
            return Ok(false);
        }
        let (ok, noun) = match path[depth + 1] {
            I(_) => (matches!(child, Value::Array(_)), "an array"),
            F(_) => (matches!(child, Value::Map(_)), "a map"),
        };
        if !ok {
            return Err(format!(
                "pod {} is a {}, not {noun}",
                dotted(&path[..=depth]),
                child.type_name()
            ));
        }
        Ok(true)
    }

    /// Set `path` to `value`, creating the missing maps on the way in the same `add`.
    pub fn put(&mut self, path: &[Key<'_>], value: Value) -> Result<(), String> {
        for depth in 0..path.len().saturating_sub(1) {
            if !self.check_child(path, depth)? {
                let mut value = value;
                for key in path[depth + 1..].iter().rev() {
                    match key {
                        F(name) => value = Value::map([(*name, value)]),
                        I(i) => {
                            return Err(format!("pod {} has no item {i}", dotted(&path[..=depth])))
                        }
                    }
                }
                return self.set(&path[..=depth], value);
            }
        }
        self.set(path, value)
    }

    /// `put` when `path` holds nothing (absent or nil); whether it did.
    pub fn put_if_absent(&mut self, path: &[Key<'_>], value: Value) -> Result<bool, String> {
        if self.get(path).is_some() {
            return Ok(false);
        }
        self.put(path, value)?;
        Ok(true)
    }

    /// Set each key of `values` in the map at `path` (the whole map in one `add` when there is
    /// none). A repeated key keeps its first position and takes the last value, as in a Python
    /// dict.
    pub fn merge_map(
        &mut self,
        path: &[Key<'_>],
        values: &[(String, Value)],
    ) -> Result<(), String> {
        if values.is_empty() {
            return Ok(());
        }
        let mut merged = Value::Map(Vec::new());
        for (k, v) in values {
            merged.set(k.as_str(), v.clone());
        }
        match self.get(path) {
            None => return self.put(path, merged),
            Some(Value::Map(_)) => {}
            Some(other) => {
                return Err(format!(
                    "pod {} is a {}, not a map",
                    dotted(path),
                    other.type_name()
                ))
            }
        }
        if let Value::Map(entries) = merged {
            for (k, v) in entries {
                let mut key_path = path.to_vec();
                key_path.push(F(&k));
                self.put(&key_path, v)?;
            }
        }
        Ok(())
    }

    /// The list at `path` (`None` when missing or nil; an error for another type).
    fn list_len(&self, path: &[Key<'_>]) -> Result<Option<usize>, String> {
        match self.get(path) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items.len())),
            Some(other) => Err(format!(
                "pod {} is a {}, not an array",
                dotted(path),
                other.type_name()
            )),
        }
    }

    fn list_mut(&mut self, path: &[Key<'_>]) -> &mut Vec<Value> {
        let mut node = &mut self.pod;
        for key in path {
            node = member_mut(node, *key).expect("checked by list_len");
        }
        match node {
            Value::Array(items) => items,
            _ => unreachable!("checked by list_len"),
        }
    }

    /// Append `item` to the list at `path` (created when missing) unless an item there
    /// `matches`; whether it appended.
    pub fn append_unless(
        &mut self,
        path: &[Key<'_>],
        item: Value,
        matches: impl Fn(&Value) -> bool,
    ) -> Result<bool, String> {
        if self.list_len(path)?.is_none() {
            self.put(path, Value::Array(vec![item]))?;
            return Ok(true);
        }
        if self.list_mut(path).iter().any(|existing| matches(existing)) {
            return Ok(false);
        }
        let mut at = pointer(path);
        at.push_str("/-");
        self.ops.push(Op::add(at, item.clone()));
        self.list_mut(path).push(item);
        Ok(true)
    }

    /// `resources.limits[resource] = amount` in the container, and the request too when the
    /// container already has one for `resource`.
    pub fn set_amount(
        &mut self,
        container: usize,
        resource: &str,
        amount: &str,
    ) -> Result<(), String> {
        let limit = in_container(container, &[F("resources"), F("limits"), F(resource)]);
        self.put(&limit, Value::from(amount))?;
        let request = in_container(container, &[F("resources"), F("requests"), F(resource)]);
        if self.get(&request).is_some() {
            self.put(&request, Value::from(amount))?;
        }
        Ok(())
    }

    /// Append `volume` to `spec.volumes` unless a volume of its name exists, then its mount at
    /// `mount_path` to the container unless a mount at that path exists.
    pub fn add_volume(
        &mut self,
        container: usize,
        volume: Value,
        mount_path: &str,
    ) -> Result<(), String> {
        let name = match str_field(&volume, "name") {
            Some(name) => name.to_owned(),
            None => return Err("add_volume: the volume has no name".to_owned()),
        };
        self.append_unless(&[F("spec"), F("volumes")], volume, |v| {
            str_field(v, "name") == Some(name.as_str())
        })?;
        let mount = Value::map([("name", name.as_str()), ("mountPath", mount_path)]);
        self.append_unless(&in_container(container, &[F("volumeMounts")]), mount, |m| {
            str_field(m, "mountPath") == Some(mount_path)
        })?;
        Ok(())
    }

    /// The memory `emptyDir` `dshm` (`sizeLimit` when `size` is given) mounted at `/dev/shm`,
    /// through `add_volume`.
    pub fn add_shared_memory(
        &mut self,
        container: usize,
        size: Option<&str>,
    ) -> Result<(), String> {
        let mut empty_dir = Value::map([("medium", "Memory")]);
        if let Some(size) = size {
            empty_dir.set("sizeLimit", size);
        }
        let volume = Value::map([("name", Value::from(SHM_VOLUME)), ("emptyDir", empty_dir)]);
        self.add_volume(container, volume, SHM_PATH)
    }

    /// Append `var` to the container's `env` unless a var of its name is there (what the user
    /// wrote wins).
    pub fn add_env(&mut self, container: usize, var: Value) -> Result<(), String> {
        let name = match str_field(&var, "name") {
            Some(name) => name.to_owned(),
            None => return Err("add_env: the env var has no name".to_owned()),
        };
        self.append_unless(&in_container(container, &[F("env")]), var, |e| {
            str_field(e, "name") == Some(name.as_str())
        })?;
        Ok(())
    }

    /// `add` `value` at `path`, whose parent exists and is a map.
    fn set(&mut self, path: &[Key<'_>], value: Value) -> Result<(), String> {
        let (last, parent_path) = match path.split_last() {
            Some((F(name), parent)) => (*name, parent),
            Some((I(_), _)) => {
                return Err(format!("pod {}: put cannot set a list item", dotted(path)))
            }
            None => return Err("put needs a path".to_owned()),
        };
        self.ops.push(Op::add(pointer(path), value.clone()));
        let mut node = &mut self.pod;
        for key in parent_path {
            node = member_mut(node, *key).expect("checked by put");
        }
        node.set(last, value);
        Ok(())
    }
}

/// A label value: empty, or at most 63 letters, digits, `-`, `_` and `.`, starting and ending
/// with a letter or digit. The same rule as the host's `is_label_value`.
pub fn is_label_value(value: &str) -> bool {
    let b = value.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (None, _) => true,
        (Some(first), Some(last)) => {
            b.len() <= 63
                && alnum(first)
                && alnum(last)
                && b.iter()
                    .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A DNS-1123 label: at most 63 lower-case letters, digits and `-`, starting and ending with a
/// letter or digit. The same rule as the host's `is_dns1123_label`.
pub fn is_dns1123_label(value: &str) -> bool {
    let b = value.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            b.len() <= 63 && alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

/// A non-negative Kubernetes resource quantity (`16Gi`, `500m`, `1.5`, `2e3`): a decimal
/// number, then an optional binary (Ki..Ei) or decimal (n, u, m, k..E) suffix or exponent; at
/// most 64 characters. The same rule as the host's `is_quantity`.
pub fn is_quantity(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() > 64 {
        return false;
    }
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int = digits(0);
    let mut i = int;
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        frac = digits(i + 1);
        i += 1 + frac;
    }
    if int == 0 && frac == 0 {
        return false;
    }
    let rest = &value[i..];
    match rest {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T"
        | "P" | "E" => true,
        _ => {
            let r = rest.as_bytes();
            if r[0] != b'e' && r[0] != b'E' {
                return false;
            }
            let mut j = 1;
            if matches!(r.get(j), Some(b'+') | Some(b'-')) {
                j += 1;
            }
            j < r.len() && r[j..].iter().all(u8::is_ascii_digit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        Value::map([
            ("metadata", Value::map([("name", "p")])),
            (
                "spec",
                Value::map([(
                    "containers",
                    Value::array([
                        Value::map([("name", "engine")]),
                        Value::map([
                            ("name", Value::from("sidecar")),
                            ("resources", Value::from("x")),
                        ]),
                    ]),
                )]),
            ),
        ])
    }

    fn paths(edit: &PodEdit) -> Vec<(String, String)> {
        edit.ops()
            .iter()
            .map(|o| (o.op.as_str().to_owned(), o.path.clone()))
            .collect()
    }

    #[test]
    fn put_creates_missing_maps_in_one_add() {
        let mut e = PodEdit::new(pod());
        let limits = [
            F("spec"),
            F("containers"),
            I(0),
            F("resources"),
            F("limits"),
        ];
        let mut gpu = limits.to_vec();
        gpu.push(F("nvidia.com/gpu"));
        e.put(&gpu, Value::from("8")).unwrap();
        let mut mem = limits.to_vec();
        mem.push(F("memory"));
        e.put(&mem, Value::from("1Gi")).unwrap();
        assert_eq!(
            paths(&e),
            [
                ("add".into(), "/spec/containers/0/resources".into()),
                (
                    "add".into(),
                    "/spec/containers/0/resources/limits/memory".into()
                )
            ]
        );
        assert_eq!(
            e.ops()[0].value.clone().unwrap(),
            Value::map([("limits", Value::map([("nvidia.com/gpu", "8")]))])
        );
        assert_eq!(e.get(&gpu), Some(&Value::from("8")));
    }

    #[test]
    fn wrong_types_on_the_way_are_errors() {
        let mut e = PodEdit::new(pod());
        let err = e
            .put(
                &[
                    F("spec"),
                    F("containers"),
                    I(1),
                    F("resources"),
                    F("limits"),
                ],
                Value::Nil,
            )
            .unwrap_err();
        assert_eq!(err, "pod spec.containers[1].resources is a str, not a map");
        let err = e
            .put(&[F("spec"), F("containers"), I(5), F("x")], Value::Nil)
            .unwrap_err();
        assert_eq!(err, "pod spec.containers has no item 5");
        let err = e
            .append_unless(&[F("metadata"), F("name")], Value::Nil, |_| false)
            .unwrap_err();
        assert_eq!(err, "pod metadata.name is a str, not an array");
        assert!(e.ops().is_empty());
    }

    #[test]
    fn containers_by_name() {
        let e = PodEdit::new(pod());
        assert_eq!(e.container(None), Ok(0));
        assert_eq!(e.container(Some("sidecar")), Ok(1));
        assert_eq!(
            e.container(Some("x")),
            Err("the Pod has no container named 'x'".to_owned())
        );
        assert_eq!(
            PodEdit::new(Value::Map(vec![])).container(None),
            Err("the Pod has no containers".to_owned())
        );
    }

    #[test]
    fn lists_append_unless() {
        let mut e = PodEdit::new(pod());
        let tol = [F("spec"), F("tolerations")];
        let same = |v: &Value| str_field(v, "key") == Some("a");
        assert!(e
            .append_unless(&tol, Value::map([("key", "a")]), same)
            .unwrap());
        assert!(!e
            .append_unless(&tol, Value::map([("key", "a")]), same)
            .unwrap());
        assert!(e
            .append_unless(&tol, Value::map([("key", "b")]), |_| false)
            .unwrap());
        assert_eq!(
            paths(&e),
            [
                ("add".into(), "/spec/tolerations".into()),
                ("add".into(), "/spec/tolerations/-".into()),
            ]
        );
        assert_eq!(
            e.get(&tol),
            Some(&Value::array([
                Value::map([("key", "a")]),
                Value::map([("key", "b")])
            ]))
        );
    }

    /// `pod()` with `engine` replaced by `engine`, and `spec` extended by `spec`.
    fn pod_with(engine: Value, spec: Vec<(&str, Value)>) -> Value {
        let mut p = pod();
        if let Some(Value::Map(entries)) = member_mut(&mut p, F("spec")) {
            if let Value::Array(containers) = &mut entries[0].1 {
                containers[0] = engine;
            }
            for (k, v) in spec {
                entries.push((k.to_owned(), v));
            }
        }
        p
    }

    fn values(edit: &PodEdit) -> Vec<(String, Value)> {
        edit.ops()
            .iter()
            .map(|o| (o.path.clone(), o.value.clone().unwrap_or(Value::Nil)))
            .collect()
    }

    fn at(path: &str, value: impl Into<Value>) -> (String, Value) {
        (path.to_owned(), value.into())
    }

    #[test]
    fn set_amount_updates_the_request_only_when_present() {
        let engine = Value::map([
            ("name", Value::from("engine")),
            (
                "resources",
                Value::map([(
                    "requests",
                    Value::map([("a.com/x", Value::from("1")), ("c.com/z", Value::Nil)]),
                )]),
            ),
        ]);
        let mut e = PodEdit::new(pod_with(engine, vec![]));
        e.set_amount(0, "a.com/x", "2").unwrap();
        e.set_amount(0, "b.com/y", "3").unwrap();
        e.set_amount(0, "c.com/z", "4").unwrap();
        assert_eq!(
            values(&e),
            [
                at(
                    "/spec/containers/0/resources/limits",
                    Value::map([("a.com/x", "2")])
                ),
                at("/spec/containers/0/resources/requests/a.com~1x", "2"),
                at("/spec/containers/0/resources/limits/b.com~1y", "3"),
                at("/spec/containers/0/resources/limits/c.com~1z", "4"),
            ]
        );
        assert_eq!(
            e.set_amount(1, "a.com/x", "1").unwrap_err(),
            "pod spec.containers[1].resources is a str, not a map"
        );
    }

    fn volume(name: &str) -> Value {
        Value::map([
            ("name", Value::from(name)),
            ("emptyDir", Value::Map(vec![])),
        ])
    }

    #[test]
    fn add_volume_to_a_bare_pod_once() {
        let mut e = PodEdit::new(pod());
        e.add_volume(0, volume("v"), "/v").unwrap();
        e.add_volume(0, volume("v"), "/v").unwrap();
        assert_eq!(
            values(&e),
            [
                at("/spec/volumes", Value::array([volume("v")])),
                at(
                    "/spec/containers/0/volumeMounts",
                    Value::array([Value::map([("name", "v"), ("mountPath", "/v")])])
                ),
            ]
        );
    }

    #[test]
    fn add_volume_existing_volume_name_kept() {
        let mine = Value::map([
            ("name", Value::from("v")),
            ("hostPath", Value::map([("path", "/x")])),
        ]);
        let p = pod_with(
            Value::map([("name", "engine")]),
            vec![("volumes", Value::array([mine.clone()]))],
        );
        let mut e = PodEdit::new(p);
        e.add_volume(0, volume("v"), "/v").unwrap();
        assert_eq!(
            values(&e),
            [at(
                "/spec/containers/0/volumeMounts",
                Value::array([Value::map([("name", "v"), ("mountPath", "/v")])])
            )]
        );
        assert_eq!(
            e.get(&[F("spec"), F("volumes")]),
            Some(&Value::array([mine]))
        );
    }

    #[test]
    fn add_volume_existing_mount_path_kept() {
        let engine = Value::map([
            ("name", Value::from("engine")),
            (
                "volumeMounts",
                Value::array([Value::map([("name", "mine"), ("mountPath", "/v")])]),
            ),
        ]);
        let p = pod_with(engine, vec![("volumes", Value::array([volume("other")]))]);
        let mut e = PodEdit::new(p);
        e.add_volume(0, volume("v"), "/v").unwrap();
        assert_eq!(values(&e), [at("/spec/volumes/-", volume("v"))]);
    }

    #[test]
    fn add_volume_errors() {
        let p = pod_with(
            Value::map([("name", "engine")]),
            vec![("volumes", Value::from("x"))],
        );
        let mut e = PodEdit::new(p);
        assert_eq!(
            e.add_volume(0, volume("v"), "/v").unwrap_err(),
            "pod spec.volumes is a str, not an array"
        );
        assert_eq!(
            e.add_volume(0, Value::map([("emptyDir", Value::Map(vec![]))]), "/v")
                .unwrap_err(),
            "add_volume: the volume has no name"
        );
        assert!(e.ops().is_empty());
    }

    #[test]
    fn add_shared_memory_with_and_without_a_size() {
        let mount = Value::array([Value::map([("name", SHM_VOLUME), ("mountPath", SHM_PATH)])]);
        for (size, empty_dir) in [
            (None, Value::map([("medium", "Memory")])),
            (
                Some("1Gi"),
                Value::map([("medium", "Memory"), ("sizeLimit", "1Gi")]),
            ),
        ] {
            let mut e = PodEdit::new(pod());
            e.add_shared_memory(0, size).unwrap();
            let shm = Value::map([("name", Value::from("dshm")), ("emptyDir", empty_dir)]);
            assert_eq!(
                values(&e),
                [
                    at("/spec/volumes", Value::array([shm])),
                    at("/spec/containers/0/volumeMounts", mount.clone()),
                ]
            );
        }
        assert_eq!((SHM_VOLUME, SHM_PATH), ("dshm", "/dev/shm"));
    }

    #[test]
    fn add_env_name_present() {
        let engine = Value::map([
            ("name", Value::from("engine")),
            (
                "env",
                Value::array([Value::map([("name", "A"), ("value", "mine")])]),
            ),
        ]);
        let mut e = PodEdit::new(pod_with(engine, vec![]));
        e.add_env(0, Value::map([("name", "A"), ("value", "x")]))
            .unwrap();
        e.add_env(0, Value::map([("name", "B"), ("value", "1")]))
            .unwrap();
        e.add_env(1, Value::map([("name", "A"), ("value", "x")]))
            .unwrap();
        assert_eq!(
            values(&e),
            [
                at(
                    "/spec/containers/0/env/-",
                    Value::map([("name", "B"), ("value", "1")])
                ),
                at(
                    "/spec/containers/1/env",
                    Value::array([Value::map([("name", "A"), ("value", "x")])])
                ),
            ]
        );
        assert_eq!(
            e.add_env(0, Value::map([("value", "x")])).unwrap_err(),
            "add_env: the env var has no name"
        );
        let bad = pod_with(Value::map([("name", "engine"), ("env", "x")]), vec![]);
        assert_eq!(
            PodEdit::new(bad)
                .add_env(0, Value::map([("name", "A")]))
                .unwrap_err(),
            "pod spec.containers[0].env is a str, not an array"
        );
    }

    #[test]
    fn merge_map_and_put_if_absent() {
        let mut e = PodEdit::new(pod());
        let ann = [F("metadata"), F("annotations")];
        e.merge_map(
            &ann,
            &[
                ("a/b".into(), Value::from("1")),
                ("c".into(), Value::from("2")),
            ],
        )
        .unwrap();
        e.merge_map(&ann, &[("c".into(), Value::from("3"))])
            .unwrap();
        let probe = [F("spec"), F("containers"), I(0), F("readinessProbe")];
        assert!(e.put_if_absent(&probe, Value::map([("x", 1)])).unwrap());
        assert!(!e.put_if_absent(&probe, Value::map([("x", 2)])).unwrap());
        assert_eq!(
            paths(&e),
            [
                ("add".into(), "/metadata/annotations".into()),
                ("add".into(), "/metadata/annotations/c".into()),
                ("add".into(), "/spec/containers/0/readinessProbe".into()),
            ]
        );
        assert_eq!(pointer(&[F("a/b~c"), I(3)]), "/a~1b~0c/3");
    }

    #[test]
    fn quantities() {
        for ok in [
            "1", "16Gi", "500m", "1.5", ".5", "5.", "2e3", "1E-2", "0", "10Ki",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in [
            "", ".", "-1", "+1", "1GiB", "1 Gi", "e3", "1e", "1e+", "Gi", "1.2.3",
        ] {
            assert!(!is_quantity(bad), "{bad}");
        }
        assert!(!is_quantity(&"1".repeat(65)));
    }

    #[test]
    fn dns1123_labels() {
        for ok in ["a", "0", "a-b", &"a".repeat(63)] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a.b", "a_b", "é", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "A-b_c.9", &"x".repeat(63)] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "a/b", &"x".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }
}
