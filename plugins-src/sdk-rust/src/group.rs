//! The ServingGroup hook (ABI v3, `../abi/README.md` section 15): [`GroupRequest`], what an
//! `on_serving_group_change` function is given (the group, how many Pods it should have and the
//! facts of those it has, [`GroupPod`]), and [`Object`], what it returns: the ConfigMaps the
//! plugin owns in the group, which the host creates, updates and deletes for it.
//!
//! ```ignore
//! use modelserving_plugin::{GroupRequest, Object};
//!
//! fn on_serving_group_change(req: &GroupRequest) -> Result<Object, String> {
//!     let mut ips = String::new();
//!     for pod in req.pods.iter().filter(|p| !p.pod_ip.is_empty()) {
//!         ips.push_str(pod.pod_ip);
//!         ips.push('\n');
//!     }
//!     let name = format!("{}-ips", req.serving_group); // must start with "<servingGroup>-"
//!     Ok(Object::config_map(name).with_data("ips", ips))
//! }
//! ```

use crate::msgpack::{write_array_len, write_int, write_map_len, write_str};
use crate::raw::{Kind, RawValue};
use crate::request::{
    abi_version, invalid_utf8, plugin_fields, wrong, Hook, ABI_VERSION, ABI_VERSION_GROUP_HOOK,
    ABI_VERSION_MIN,
};
use crate::value::Value;

/// One existing, not terminating Pod of the ServingGroup in the plugin's scope (15.3). The
/// strings are borrowed from the request; the empty string means "not known yet".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupPod<'a> {
    pub name: &'a str,
    pub role_name: &'a str,
    pub role_id: &'a str,
    /// Whether the Pod is its role replica's entry Pod.
    pub is_entry: bool,
    /// `spec.nodeName` ("" until scheduled).
    pub node: &'a str,
    /// `status.hostIP` ("" until known).
    pub host_ip: &'a str,
    /// `status.podIP` ("" until known).
    pub pod_ip: &'a str,
    /// `status.phase` (`Pending`, `Running`, ...; "" until the kubelet reports one).
    pub phase: &'a str,
    /// Running and its `Ready` condition is `True`.
    pub ready: bool,
    /// The Pod's annotations, in the request's order.
    pub annotations: Vec<(&'a str, &'a str)>,
}

impl<'a> GroupPod<'a> {
    /// The value of annotation `key`, if the Pod has it.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.annotations
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// The Pod's entry in a request, keys in the order of the ABI's table (15.3).
    pub fn to_value(&self) -> Value {
        let annotations: Vec<(String, Value)> = self
            .annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect();
        Value::map([
            ("name", Value::from(self.name)),
            ("roleName", Value::from(self.role_name)),
            ("roleId", Value::from(self.role_id)),
            ("isEntry", Value::Bool(self.is_entry)),
            ("node", Value::from(self.node)),
            ("hostIP", Value::from(self.host_ip)),
            ("podIP", Value::from(self.pod_ip)),
            ("phase", Value::from(self.phase)),
            ("ready", Value::Bool(self.ready)),
            ("annotations", Value::Map(annotations)),
        ])
    }
}

/// One OnServingGroupChange call's context, decoded from the request bytes it borrows.
///
/// The host sends it when the group's input changed (a Pod created, deleted, scheduled, given
/// an IP, changed phase, readiness or an annotation; the config, the ModelServing's generation
/// or the group's size changed), at most once a second per group. `pods` holds the group's
/// existing Pods in the plugin's scope, ordered by role (spec order), role replica, the entry
/// first and then the workers; `expected_pods` is how many it has when complete.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupRequest<'a> {
    /// The ABI version of the request (`abiVersion`): 3.
    pub abi_version: i64,
    /// The plugin's name in the ModelServing's plugin list.
    pub plugin_name: &'a str,
    /// The plugin's config exactly as written (`Value::Nil` when absent).
    pub config: Value,
    /// The ModelServing (a map), undecoded.
    pub model_serving: RawValue<'a>,
    /// The ServingGroup, e.g. `llama-0`: every owned object's name must start with it and `-`.
    pub serving_group: &'a str,
    /// How many Pods in the plugin's scope the group has when complete.
    pub expected_pods: i64,
    pub pods: Vec<GroupPod<'a>>,
}

/// The request keys of the ServingGroup hook, in the order of [`group_field_index`].
const GROUP_FIELDS: usize = 7;

fn group_field_index(key: &[u8]) -> Option<usize> {
    Some(match key {
        b"abiVersion" => 0,
        b"hook" => 1,
        b"plugin" => 2,
        b"modelServing" => 3,
        b"servingGroup" => 4,
        b"expectedPods" => 5,
        b"pods" => 6,
        _ => return None,
    })
}

impl<'a> GroupRequest<'a> {
    /// Check and decode an OnServingGroupChange request, borrowing `bytes`; the error says
    /// what is wrong, e.g. `request: 'pods[1].podIP' must be a str, got int`.
    pub fn decode(bytes: &'a [u8]) -> Result<GroupRequest<'a>, String> {
        GroupRequest::decode_up_to::<ABI_VERSION>(bytes)
    }

    /// [`GroupRequest::decode`] for a plugin that answers ABI versions up to `MAX`.
    pub fn decode_up_to<const MAX: i64>(bytes: &'a [u8]) -> Result<GroupRequest<'a>, String> {
        let mut fields: [Option<RawValue<'a>>; GROUP_FIELDS] = [None; GROUP_FIELDS];
        let root = crate::raw::check_root(bytes, |key, value| {
            if let Some(i) = group_field_index(key.str_bytes().unwrap_or_default()) {
                if fields[i].is_none() {
                    fields[i] = Some(value);
                }
            }
        })
        .map_err(|e| format!("request: {e}"))?;
        if root.kind() != Kind::Map {
            return Err(format!("request: must be a map, got {}", root.type_name()));
        }
        let [abi, hook, plugin, model_serving, serving_group, expected_pods, pods] = fields;
        let abi_version = abi_version(abi, ABI_VERSION_MIN, MAX)?;
        let text = |key: &str, v: Option<RawValue<'a>>| -> Result<&'a str, String> {
            match v {
                Some(v) if v.kind() == Kind::Str => {
                    v.as_str().ok_or_else(|| invalid_utf8(bytes, v))
                }
                other => Err(wrong(key, "str", other)),
            }
        };
        let name = text("hook", hook)?;
        match Hook::from_name(name) {
            Some(Hook::OnServingGroupChange) => {}
            Some(other) => {
                return Err(format!(
                    "request for hook {other} sent to {}",
                    Hook::OnServingGroupChange.export_name()
                ))
            }
            None => return Err(format!("request: unknown hook '{name}'")),
        }
        if abi_version < ABI_VERSION_GROUP_HOOK {
            return Err(format!(
                "request: OnServingGroupChange is a hook of ABI v{ABI_VERSION_GROUP_HOOK}, but the request says abiVersion {abi_version}"
            ));
        }
        let (plugin_name, config) = plugin_fields(bytes, plugin)?;
        let model_serving = match model_serving {
            Some(m) if m.kind() == Kind::Map => m,
            other => return Err(wrong("modelServing", "map", other)),
        };
        let serving_group = text("servingGroup", serving_group)?;
        let expected_pods = match expected_pods {
            Some(v) if v.kind() == Kind::Int => match v.as_i64() {
                Some(n) => n,
                None => return Err("request: 'expectedPods' is out of range".to_owned()),
            },
            other => return Err(wrong("expectedPods", "int", other)),
        };
        let pods = match pods {
            Some(p) if p.kind() == Kind::Array => p
                .iter_array()
                .enumerate()
                .map(|(i, pod)| group_pod(bytes, i, pod))
                .collect::<Result<Vec<_>, String>>()?,
            other => return Err(wrong("pods", "array", other)),
        };
        Ok(GroupRequest {
            abi_version,
            plugin_name,
            config,
            model_serving,
            serving_group,
            expected_pods,
            pods,
        })
    }

    /// The ModelServing's namespace (`metadata.namespace`; `default` when it has none), where
    /// the host creates the owned objects.
    pub fn namespace(&self) -> &'a str {
        match self
            .model_serving
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(RawValue::as_str)
        {
            Some(ns) if !ns.is_empty() => ns,
            _ => "default",
        }
    }

    /// The whole ModelServing as an owned [`Value`].
    pub fn model_serving_value(&self) -> Result<Value, String> {
        self.model_serving
            .to_value()
            .map_err(|e| format!("request: modelServing: {e}"))
    }

    /// Encode back to the request bytes the host would send (to build test requests), in the
    /// host's key order (15.3).
    pub fn to_msgpack(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.model_serving.as_bytes().len());
        write_map_len(7, &mut out);
        write_str("abiVersion", &mut out);
        write_int(self.abi_version, &mut out);
        write_str("hook", &mut out);
        write_str(Hook::OnServingGroupChange.as_str(), &mut out);
        write_str("plugin", &mut out);
        write_map_len(2, &mut out);
        write_str("name", &mut out);
        write_str(self.plugin_name, &mut out);
        write_str("config", &mut out);
        crate::msgpack::encode_into(&self.config, &mut out);
        write_str("modelServing", &mut out);
        out.extend_from_slice(self.model_serving.as_bytes());
        write_str("servingGroup", &mut out);
        write_str(self.serving_group, &mut out);
        write_str("expectedPods", &mut out);
        write_int(self.expected_pods, &mut out);
        write_str("pods", &mut out);
        write_array_len(self.pods.len(), &mut out);
        for pod in &self.pods {
            crate::msgpack::encode_into(&pod.to_value(), &mut out);
        }
        out
    }
}

/// The keys of a Pod's entry, in the order of [`pod_field_index`].
const POD_FIELDS: [&str; 10] = [
    "name",
    "roleName",
    "roleId",
    "isEntry",
    "node",
    "hostIP",
    "podIP",
    "phase",
    "ready",
    "annotations",
];

fn pod_field_index(key: &[u8]) -> Option<usize> {
    POD_FIELDS.iter().position(|f| f.as_bytes() == key)
}

/// Entry `i` of `pods`, every key checked for its type.
fn group_pod<'a>(bytes: &'a [u8], i: usize, pod: RawValue<'a>) -> Result<GroupPod<'a>, String> {
    // Locations are only formatted for errors.
    let at = |key: &str| format!("pods[{i}].{key}");
    if pod.kind() != Kind::Map {
        return Err(wrong(&format!("pods[{i}]"), "map", Some(pod)));
    }
    let mut fields: [Option<RawValue<'a>>; POD_FIELDS.len()] = [None; POD_FIELDS.len()];
    for (key, value) in pod.iter_map() {
        if let Some(k) = pod_field_index(key.str_bytes().unwrap_or_default()) {
            if fields[k].is_none() {
                fields[k] = Some(value);
            }
        }
    }
    let [name, role_name, role_id, is_entry, node, host_ip, pod_ip, phase, ready, annotations] =
        fields;
    let text = |key: &str, v: Option<RawValue<'a>>| -> Result<&'a str, String> {
        match v {
            Some(v) if v.kind() == Kind::Str => v.as_str().ok_or_else(|| invalid_utf8(bytes, v)),
            other => Err(wrong(&at(key), "str", other)),
        }
    };
    let flag = |key: &str, v: Option<RawValue<'a>>| -> Result<bool, String> {
        match v {
            Some(v) if v.kind() == Kind::Bool => Ok(v.as_bool() == Some(true)),
            other => Err(wrong(&at(key), "bool", other)),
        }
    };
    let annotations = match annotations {
        Some(m) if m.kind() == Kind::Map => {
            let mut out = Vec::with_capacity(m.len());
            for (key, value) in m.iter_map() {
                let key = match key.kind() {
                    Kind::Str => key.as_str().ok_or_else(|| invalid_utf8(bytes, key))?,
                    _ => {
                        return Err(format!(
                            "request: '{}' has a key that is not a str",
                            at("annotations")
                        ))
                    }
                };
                let value = match value.kind() {
                    Kind::Str => value.as_str().ok_or_else(|| invalid_utf8(bytes, value))?,
                    _ => {
                        let loc = at(&format!("annotations.{key}"));
                        return Err(wrong(&loc, "str", Some(value)));
                    }
                };
                out.push((key, value));
            }
            out
        }
        other => return Err(wrong(&at("annotations"), "map", other)),
    };
    Ok(GroupPod {
        name: text("name", name)?,
        role_name: text("roleName", role_name)?,
        role_id: text("roleId", role_id)?,
        is_entry: flag("isEntry", is_entry)?,
        node: text("node", node)?,
        host_ip: text("hostIP", host_ip)?,
        pod_ip: text("podIP", pod_ip)?,
        phase: text("phase", phase)?,
        ready: flag("ready", ready)?,
        annotations,
    })
}

/// One object the plugin owns in the ServingGroup (15.4): a ConfigMap unless the operator
/// allows other kinds. The host checks it (the name must start with `<servingGroup>-`, at most
/// 16 objects, the operator's object policy), then adds the namespace, its labels, annotation
/// and owner reference, and applies it.
///
/// Encoded as `{apiVersion, kind, metadata: {name, namespace?, labels?, annotations?}, data}`;
/// the `Option`s are left out when `None`. Map keys are kept unique by the setters (a key set
/// twice keeps its first position and takes the last value, as in a Python dict).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Object {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// Must be the ModelServing's when given.
    pub namespace: Option<String>,
    pub labels: Option<Vec<(String, String)>>,
    pub annotations: Option<Vec<(String, String)>>,
    pub data: Vec<(String, String)>,
}

/// `entries[key] = value` with Python dict semantics.
fn set_entry(entries: &mut Vec<(String, String)>, key: String, value: String) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key, value)),
    }
}

fn write_string_map(entries: &[(String, String)], out: &mut Vec<u8>) {
    write_map_len(entries.len(), out);
    for (k, v) in entries {
        write_str(k, out);
        write_str(v, out);
    }
}

impl Object {
    /// A ConfigMap (`v1`) named `name`, with no data yet.
    pub fn config_map(name: impl Into<String>) -> Object {
        Object {
            api_version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            name: name.into(),
            ..Object::default()
        }
    }

    /// Set the data key `key` (a file, when the ConfigMap is mounted).
    pub fn set_data(&mut self, key: impl Into<String>, value: impl Into<String>) {
        set_entry(&mut self.data, key.into(), value.into());
    }

    /// [`Object::set_data`], by value.
    pub fn with_data(mut self, key: impl Into<String>, value: impl Into<String>) -> Object {
        self.set_data(key, value);
        self
    }

    pub fn set_label(&mut self, key: impl Into<String>, value: impl Into<String>) {
        set_entry(
            self.labels.get_or_insert_with(Vec::new),
            key.into(),
            value.into(),
        );
    }

    pub fn set_annotation(&mut self, key: impl Into<String>, value: impl Into<String>) {
        set_entry(
            self.annotations.get_or_insert_with(Vec::new),
            key.into(),
            value.into(),
        );
    }

    /// Append the object's msgpack encoding to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        write_map_len(4, out);
        write_str("apiVersion", out);
        write_str(&self.api_version, out);
        write_str("kind", out);
        write_str(&self.kind, out);
        write_str("metadata", out);
        let n = 1
            + usize::from(self.namespace.is_some())
            + usize::from(self.labels.is_some())
            + usize::from(self.annotations.is_some());
        write_map_len(n, out);
        write_str("name", out);
        write_str(&self.name, out);
        if let Some(ns) = &self.namespace {
            write_str("namespace", out);
            write_str(ns, out);
        }
        if let Some(labels) = &self.labels {
            write_str("labels", out);
            write_string_map(labels, out);
        }
        if let Some(annotations) = &self.annotations {
            write_str("annotations", out);
            write_string_map(annotations, out);
        }
        write_str("data", out);
        write_string_map(&self.data, out);
    }

    /// The object as a [`Value`] (tests).
    pub fn to_value(&self) -> Value {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        crate::msgpack::decode(&out).unwrap_or(Value::Nil)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::{objects_response, Response};

    fn pod(name: &str, role_id: &str, entry: bool, ip: &str) -> Value {
        Value::map([
            ("name", Value::from(name)),
            ("roleName", Value::from("prefill")),
            ("roleId", Value::from(role_id)),
            ("isEntry", Value::Bool(entry)),
            ("node", Value::from("node-a")),
            ("hostIP", Value::from("10.0.0.1")),
            ("podIP", Value::from(ip)),
            (
                "phase",
                Value::from(if ip.is_empty() { "Pending" } else { "Running" }),
            ),
            ("ready", Value::Bool(!ip.is_empty())),
            (
                "annotations",
                Value::map([("a/b", "1"), ("c", "{\"x\": 2}")]),
            ),
        ])
    }

    fn group_request(pods: Vec<Value>) -> Value {
        Value::map([
            ("abiVersion", Value::Int(3)),
            ("hook", Value::from("OnServingGroupChange")),
            (
                "plugin",
                Value::map([
                    ("name", Value::from("p")),
                    ("config", Value::map([("k", 1)])),
                ]),
            ),
            (
                "modelServing",
                Value::map([(
                    "metadata",
                    Value::map([("name", "llama"), ("namespace", "serving")]),
                )]),
            ),
            ("servingGroup", Value::from("llama-0")),
            ("expectedPods", Value::Int(2)),
            ("pods", Value::Array(pods)),
        ])
    }

    fn with(change: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut v = group_request(vec![pod(
            "llama-0-prefill-0-0",
            "prefill-0",
            true,
            "10.1.0.1",
        )]);
        change(&mut v);
        v.to_msgpack()
    }

    #[test]
    fn decodes_the_request_as_the_host_encodes_it() {
        let bytes = group_request(vec![
            pod("llama-0-prefill-0-0", "prefill-0", true, "10.1.0.1"),
            pod("llama-0-prefill-0-1", "prefill-0", false, ""),
        ])
        .to_msgpack();
        let r = GroupRequest::decode(&bytes).unwrap();
        assert_eq!(r.abi_version, 3);
        assert_eq!(r.plugin_name, "p");
        assert_eq!(r.config, Value::map([("k", 1)]));
        assert_eq!(r.serving_group, "llama-0");
        assert_eq!(r.expected_pods, 2);
        assert_eq!(r.namespace(), "serving");
        assert_eq!(r.pods.len(), 2);
        let first = &r.pods[0];
        assert_eq!(
            (first.name, first.role_name, first.role_id, first.is_entry),
            ("llama-0-prefill-0-0", "prefill", "prefill-0", true)
        );
        assert_eq!(
            (
                first.node,
                first.host_ip,
                first.pod_ip,
                first.phase,
                first.ready
            ),
            ("node-a", "10.0.0.1", "10.1.0.1", "Running", true)
        );
        assert_eq!(first.annotations, vec![("a/b", "1"), ("c", "{\"x\": 2}")]);
        assert_eq!(first.annotation("c"), Some("{\"x\": 2}"));
        assert_eq!(first.annotation("x"), None);
        assert_eq!((r.pods[1].pod_ip, r.pods[1].ready), ("", false));
        // Encoding it back gives the same bytes (the host's key order).
        assert_eq!(r.to_msgpack(), bytes);
        assert_eq!(
            r.model_serving_value()
                .unwrap()
                .get("metadata")
                .unwrap()
                .get("name"),
            Some(&Value::from("llama"))
        );
    }

    #[test]
    fn the_namespace_defaults_as_on_the_host() {
        for (metadata, want) in [
            (Value::map([("name", "a")]), "default"),
            (Value::map([("name", "a"), ("namespace", "")]), "default"),
            (
                Value::map([("name", Value::from("a")), ("namespace", Value::Nil)]),
                "default",
            ),
            (Value::map([("name", "a"), ("namespace", "team")]), "team"),
        ] {
            let bytes = with(|v| v.set("modelServing", Value::map([("metadata", metadata)])));
            assert_eq!(GroupRequest::decode(&bytes).unwrap().namespace(), want);
        }
    }

    #[test]
    fn explains_what_is_wrong() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                with(|v| v.set("abiVersion", 2)),
                "OnServingGroupChange is a hook of ABI v3, but the request says abiVersion 2",
            ),
            (
                with(|v| v.set("abiVersion", 4)),
                "abiVersion 4 is not supported (this plugin speaks 1 to 3)",
            ),
            (
                with(|v| v.set("hook", "OnPodCreate")),
                "request for hook OnPodCreate sent to ms_on_serving_group_change",
            ),
            (with(|v| v.set("hook", "OnGroup")), "unknown hook 'OnGroup'"),
            (
                with(|v| v.set("servingGroup", 1)),
                "'servingGroup' must be a str, got int",
            ),
            (
                with(|v| v.set("expectedPods", "2")),
                "'expectedPods' must be a int, got str",
            ),
            (
                with(|v| v.set("expectedPods", Value::UInt(u64::MAX))),
                "'expectedPods' is out of range",
            ),
            (
                with(|v| v.set("pods", Value::Nil)),
                "'pods' must be a array, got nil",
            ),
            (
                with(|v| v.set("modelServing", "x")),
                "'modelServing' must be a map, got str",
            ),
            (
                with(|v| v.set("plugin", Value::map([("config", 1)]))),
                "'plugin.name' is missing",
            ),
            (
                with(|v| v.set("pods", Value::array([1]))),
                "'pods[0]' must be a map, got int",
            ),
        ];
        for (bytes, want) in cases {
            let err = GroupRequest::decode(&bytes).unwrap_err();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        for (key, value, want) in [
            (
                "podIP",
                Value::Int(1),
                "'pods[0].podIP' must be a str, got int",
            ),
            (
                "ready",
                Value::from("yes"),
                "'pods[0].ready' must be a bool, got str",
            ),
            (
                "annotations",
                Value::Nil,
                "'pods[0].annotations' must be a map, got nil",
            ),
            (
                "annotations",
                Value::map([("a", 1)]),
                "'pods[0].annotations.a' must be a str, got int",
            ),
        ] {
            let bytes = with(|v| {
                if let Some(Value::Array(pods)) = v.get("pods").cloned().as_mut() {
                    pods[0].set(key, value);
                    v.set("pods", Value::Array(pods.clone()));
                }
            });
            let err = GroupRequest::decode(&bytes).unwrap_err();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        let missing = with(|v| {
            let mut p = pod("a", "r-0", true, "");
            if let Value::Map(m) = &mut p {
                m.retain(|(k, _)| k != "hostIP");
            }
            v.set("pods", Value::array([p]));
        });
        let err = GroupRequest::decode(&missing).unwrap_err();
        assert!(err.contains("'pods[0].hostIP' is missing"), "{err}");
        // A Pod hook's decoder refuses the group hook's requests, and the other way round.
        let group = with(|_| {});
        let err = crate::Request::decode(&group).unwrap_err();
        assert!(
            err.contains("OnServingGroupChange is not a Pod or config hook"),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let bytes = with(|v| {
            v.set("future", Value::array([1, 2]));
            let mut p = pod("a", "r-0", true, "");
            p.set("restarts", 3);
            v.set("pods", Value::array([p]));
        });
        let r = GroupRequest::decode(&bytes).unwrap();
        assert_eq!(r.pods[0].name, "a");
    }

    #[test]
    fn objects_are_encoded_as_the_host_reads_them() {
        // msgpack.packb({"objects": [{"apiVersion": "v1", "kind": "ConfigMap",
        //   "metadata": {"name": "g-0-x"}, "data": {"a": "1"}}]}, use_bin_type=True).hex()
        let want = "81a76f626a656374739184aa61706956657273696f6ea27631a46b696e64a9436f6e6669674d6170a86d6574616461746181a46e616d65a5672d302d78a46461746181a161a131";
        let object = Object::config_map("g-0-x").with_data("a", "1");
        let got: String = objects_response(&[object.clone()])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, want);
        assert!(objects_response(&[]).is_empty());
        let r = Response::decode(&objects_response(&[object.clone()])).unwrap();
        assert_eq!(r.objects, vec![object.to_value()]);
    }

    #[test]
    fn setters_keep_keys_unique_and_options_out_when_unset() {
        let mut o = Object::config_map("g-0-x");
        o.set_data("b", "1");
        o.set_data("a", "2");
        o.set_data("b", "3");
        assert_eq!(
            o.data,
            vec![
                ("b".to_owned(), "3".to_owned()),
                ("a".to_owned(), "2".to_owned())
            ]
        );
        assert_eq!(
            o.to_value().get("metadata"),
            Some(&Value::map([("name", "g-0-x")]))
        );
        o.namespace = Some("serving".to_owned());
        o.set_label("team", "ml");
        o.set_annotation("example.com/x", "1");
        o.set_label("team", "ops");
        assert_eq!(
            o.to_value().get("metadata"),
            Some(&Value::map([
                ("name", Value::from("g-0-x")),
                ("namespace", Value::from("serving")),
                ("labels", Value::map([("team", "ops")])),
                ("annotations", Value::map([("example.com/x", "1")])),
            ]))
        );
        let keys: Vec<String> = match o.to_value() {
            Value::Map(m) => m.into_iter().map(|(k, _)| k).collect(),
            _ => vec![],
        };
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "data"]);
    }
}
