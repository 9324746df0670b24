//! [`Request`]: what the host sends to a hook, decoded and type-checked.

use std::fmt;

use crate::raw::{Kind, RawValue};
use crate::value::Value;

/// The newest ABI version this SDK speaks. A plugin with `on_serving_group_change` exports the
/// markers of versions 1, 2 and 3 and answers requests of any of them (`abiVersion`); one
/// without it exports the markers of 1 and 2 only and answers up to
/// [`ABI_VERSION_WITHOUT_GROUP_HOOK`]: a v2 (or v3) host sends 2 and takes observations in the
/// response, a host that knows only v1 sends 1 and gets them as `observe` log lines.
pub const ABI_VERSION: i64 = 3;

/// The newest ABI version of a plugin without the ServingGroup hook (see [`ABI_VERSION`]).
pub const ABI_VERSION_WITHOUT_GROUP_HOOK: i64 = 2;

/// The first ABI version with the ServingGroup hook (OnServingGroupChange, owned objects).
pub const ABI_VERSION_GROUP_HOOK: i64 = 3;

/// The oldest ABI version this SDK answers.
pub const ABI_VERSION_MIN: i64 = 1;

/// The hook points; [`Hook::as_str`] gives the names used on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    /// A Pod is about to be created; the plugin may return a patch.
    OnPodCreate,
    /// A Pod became Running and Ready; the plugin observes (an error is only reported).
    OnPodReady,
    /// The host asks whether the plugin's config is valid, once, when the chain is built.
    ValidateConfig,
    /// A ServingGroup's Pods changed (ABI v3); the plugin may return the objects it owns for
    /// the group. Its request is a [`crate::GroupRequest`], not a [`Request`].
    OnServingGroupChange,
}

impl Hook {
    pub const ALL: [Hook; 4] = [
        Hook::OnPodCreate,
        Hook::OnPodReady,
        Hook::ValidateConfig,
        Hook::OnServingGroupChange,
    ];

    /// "OnPodCreate", "OnPodReady", "ValidateConfig" or "OnServingGroupChange".
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::OnPodCreate => "OnPodCreate",
            Hook::OnPodReady => "OnPodReady",
            Hook::ValidateConfig => "ValidateConfig",
            Hook::OnServingGroupChange => "OnServingGroupChange",
        }
    }

    /// The hook with this wire name.
    pub fn from_name(name: &str) -> Option<Hook> {
        Hook::ALL.iter().copied().find(|h| h.as_str() == name)
    }

    /// The name of the module export the host calls for this hook.
    pub fn export_name(self) -> &'static str {
        match self {
            Hook::OnPodCreate => "ms_on_pod_create",
            Hook::OnPodReady => "ms_on_pod_ready",
            Hook::ValidateConfig => "ms_validate_config",
            Hook::OnServingGroupChange => "ms_on_serving_group_change",
        }
    }

    /// Whether the request carries a Pod (OnPodCreate, OnPodReady).
    pub fn has_pod(self) -> bool {
        matches!(self, Hook::OnPodCreate | Hook::OnPodReady)
    }

    /// Whether the request describes a ServingGroup (OnServingGroupChange: a
    /// [`crate::GroupRequest`]).
    pub fn has_group(self) -> bool {
        matches!(self, Hook::OnServingGroupChange)
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One Pod or config hook call's context, read lazily from the request bytes it borrows (the
/// ServingGroup hook has its own, [`crate::GroupRequest`]).
///
/// [`Request::decode`] makes one pass over the request that checks its framing (see
/// [`crate::raw`]) and indexes the top-level keys; the small fields are read from it, `config`
/// is materialized into a [`Value`], and `model_serving` / `pod` stay undecoded
/// [`RawValue`]s: navigate them with [`RawValue::get`] and friends, or materialize them with
/// [`Request::pod_value`] / [`Request::model_serving_value`] when the whole object is needed.
///
/// For `OnPodCreate` and `OnPodReady` every field is present (`model_serving` and `pod` are
/// `Some` maps); for `ValidateConfig` only `hook`, `plugin_name` and `config` are meaningful,
/// the strings are empty, `is_entry` is false and `model_serving` / `pod` are `None`.
/// Keys of the request map this SDK does not know are ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct Request<'a> {
    /// The ABI version of the request (`abiVersion`): 1 to 3 (3 only for a plugin with the
    /// ServingGroup hook).
    pub abi_version: i64,
    pub hook: Hook,
    /// The plugin's name in the ModelServing's plugin list.
    pub plugin_name: &'a str,
    /// The plugin's config exactly as written in the ModelServing (`Value::Nil` when absent),
    /// decoded with every check of [`crate::msgpack::decode`].
    pub config: Value,
    /// The ModelServing object (a map), for the Pod hooks; undecoded.
    pub model_serving: Option<RawValue<'a>>,
    pub serving_group: &'a str,
    pub role_name: &'a str,
    pub role_id: &'a str,
    /// Whether the Pod is its role's entry Pod.
    pub is_entry: bool,
    /// The Pod (a map; with `status` for OnPodReady), for the Pod hooks; undecoded. Never
    /// changed by the host after the call: a plugin returns a patch instead.
    pub pod: Option<RawValue<'a>>,
}

impl<'a> Request<'a> {
    /// Check and index a request of any ABI version this SDK speaks, borrowing `bytes`; the
    /// error says what is wrong, e.g. `request: 'roleName' must be a str, got int`.
    pub fn decode(bytes: &'a [u8]) -> Result<Request<'a>, String> {
        Request::decode_up_to::<ABI_VERSION>(bytes)
    }

    /// [`Request::decode`] for a plugin that answers ABI versions 1 to `MAX` (what the exports
    /// of `export_plugin!` run: a request of a version beyond the module's markers is an error).
    pub fn decode_up_to<const MAX: i64>(bytes: &'a [u8]) -> Result<Request<'a>, String> {
        let mut fields: [Option<RawValue<'a>>; FIELDS.len()] = [None; FIELDS.len()];
        let root = crate::raw::check_root(bytes, |key, value| {
            let key = key.str_bytes().unwrap_or_default();
            if let Some(i) = field_index(key) {
                // Request maps never repeat a key; if one did, the first would count.
                if fields[i].is_none() {
                    fields[i] = Some(value);
                }
            }
        })
        .map_err(|e| format!("request: {e}"))?;
        if root.kind() != Kind::Map {
            return Err(format!("request: must be a map, got {}", root.type_name()));
        }
        let [abi, hook, plugin, model_serving, serving_group, role_name, role_id, is_entry, pod] =
            fields;
        let text = |v: RawValue<'a>| -> Result<&'a str, String> {
            v.as_str().ok_or_else(|| invalid_utf8(bytes, v))
        };

        let abi_version = abi_version(abi, ABI_VERSION_MIN, MAX)?;
        let hook = match hook {
            Some(v) if v.kind() == Kind::Str => {
                let name = text(v)?;
                match Hook::from_name(name) {
                    Some(Hook::OnServingGroupChange) => {
                        return Err(format!(
                            "request: hook {name} is not a Pod or config hook (its request is a GroupRequest)"
                        ))
                    }
                    Some(h) => h,
                    None => return Err(format!("request: unknown hook '{name}'")),
                }
            }
            other => return Err(wrong("hook", "str", other)),
        };
        let (plugin_name, config) = plugin_fields(bytes, plugin)?;
        let required = hook.has_pod();
        let str_field = |key: &str, v: Option<RawValue<'a>>| -> Result<&'a str, String> {
            match v {
                Some(v) if v.kind() == Kind::Str => text(v),
                None if !required => Ok(""),
                other => Err(wrong(key, "str", other)),
            }
        };
        let map_field =
            |key: &str, v: Option<RawValue<'a>>| -> Result<Option<RawValue<'a>>, String> {
                match v {
                    Some(m) if m.kind() == Kind::Map => Ok(Some(m)),
                    None if !required => Ok(None),
                    other => Err(wrong(key, "map", other)),
                }
            };
        let model_serving = map_field("modelServing", model_serving)?;
        let serving_group = str_field("servingGroup", serving_group)?;
        let role_name = str_field("roleName", role_name)?;
        let role_id = str_field("roleId", role_id)?;
        let is_entry = match is_entry {
            Some(v) if v.kind() == Kind::Bool => v.as_bool() == Some(true),
            None if !required => false,
            other => return Err(wrong("isEntry", "bool", other)),
        };
        let pod = map_field("pod", pod)?;
        Ok(Request {
            abi_version,
            hook,
            plugin_name,
            config,
            model_serving,
            serving_group,
            role_name,
            role_id,
            is_entry,
            pod,
        })
    }

    /// The Pod, undecoded, or nil when the request has none (ValidateConfig).
    pub fn pod(&self) -> RawValue<'a> {
        self.pod.unwrap_or(RawValue::NIL)
    }

    /// The ModelServing, undecoded, or nil when the request has none (ValidateConfig).
    pub fn model_serving(&self) -> RawValue<'a> {
        self.model_serving.unwrap_or(RawValue::NIL)
    }

    /// The whole Pod as an owned [`Value`] (`Value::Nil` when none): decodes every byte of it,
    /// with every check of [`crate::msgpack::decode`]. Prefer navigating [`Request::pod`].
    pub fn pod_value(&self) -> Result<Value, String> {
        self.pod()
            .to_value()
            .map_err(|e| format!("request: pod: {e}"))
    }

    /// The whole ModelServing as an owned [`Value`] (`Value::Nil` when none); see
    /// [`Request::pod_value`].
    pub fn model_serving_value(&self) -> Result<Value, String> {
        self.model_serving()
            .to_value()
            .map_err(|e| format!("request: modelServing: {e}"))
    }

    /// `pod.metadata.name`, or "" when unset (a Pod may get its name from generateName).
    pub fn pod_name(&self) -> &'a str {
        self.pod()
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(RawValue::as_str)
            .unwrap_or("")
    }

    /// Encode back to the request bytes the host would send (useful to build test requests).
    /// Key order: abiVersion, hook, plugin {name, config}, then for the Pod hooks modelServing,
    /// servingGroup, roleName, roleId, isEntry, pod. The Pod and the ModelServing are copied
    /// as they are.
    pub fn to_msgpack(&self) -> Vec<u8> {
        use crate::msgpack::{encode_into, write_int, write_map_len, write_str};
        let mut out = Vec::with_capacity(
            128 + self.pod().as_bytes().len() + self.model_serving().as_bytes().len(),
        );
        let pod_hook = self.hook.has_pod();
        write_map_len(if pod_hook { 9 } else { 3 }, &mut out);
        write_str("abiVersion", &mut out);
        write_int(self.abi_version, &mut out);
        write_str("hook", &mut out);
        write_str(self.hook.as_str(), &mut out);
        write_str("plugin", &mut out);
        write_map_len(2, &mut out);
        write_str("name", &mut out);
        write_str(self.plugin_name, &mut out);
        write_str("config", &mut out);
        encode_into(&self.config, &mut out);
        if pod_hook {
            write_str("modelServing", &mut out);
            out.extend_from_slice(self.model_serving().as_bytes());
            for (key, value) in [
                ("servingGroup", self.serving_group),
                ("roleName", self.role_name),
                ("roleId", self.role_id),
            ] {
                write_str(key, &mut out);
                write_str(value, &mut out);
            }
            write_str("isEntry", &mut out);
            out.push(if self.is_entry { 0xc3 } else { 0xc2 });
            write_str("pod", &mut out);
            out.extend_from_slice(self.pod().as_bytes());
        }
        out
    }
}

/// The request keys this SDK reads, in the order `Request::decode` destructures them (and
/// [`field_index`] numbers them).
const FIELDS: [&str; 9] = [
    "abiVersion",
    "hook",
    "plugin",
    "modelServing",
    "servingGroup",
    "roleName",
    "roleId",
    "isEntry",
    "pod",
];

/// The index in [`FIELDS`] of a request key.
fn field_index(key: &[u8]) -> Option<usize> {
    Some(match key {
        b"abiVersion" => 0,
        b"hook" => 1,
        b"plugin" => 2,
        b"modelServing" => 3,
        b"servingGroup" => 4,
        b"roleName" => 5,
        b"roleId" => 6,
        b"isEntry" => 7,
        b"pod" => 8,
        _ => return None,
    })
}

/// `abiVersion`, checked to be an integer from `min` to `max`.
pub(crate) fn abi_version(v: Option<RawValue<'_>>, min: i64, max: i64) -> Result<i64, String> {
    match v {
        Some(v) if matches!(v.as_i64(), Some(n) if (min..=max).contains(&n)) => {
            Ok(v.as_i64().unwrap_or(min))
        }
        Some(v) if v.kind() == Kind::Int => {
            // Only integers are formatted (a RawValue's Display would pull in the float
            // formatting code).
            let v = match v.as_i64() {
                Some(i) => i.to_string(),
                None => v.as_u64().unwrap_or_default().to_string(),
            };
            Err(format!(
                "request: abiVersion {v} is not supported (this plugin speaks {min} to {max})"
            ))
        }
        other => Err(wrong("abiVersion", "int", other)),
    }
}

/// The plugin's name and config (`plugin: {name, config}`), the config decoded whole.
pub(crate) fn plugin_fields<'a>(
    bytes: &'a [u8],
    plugin: Option<RawValue<'a>>,
) -> Result<(&'a str, Value), String> {
    match plugin {
        Some(p) if p.kind() == Kind::Map => {
            let name = match p.get("name") {
                Some(v) if v.kind() == Kind::Str => {
                    v.as_str().ok_or_else(|| invalid_utf8(bytes, v))?
                }
                other => return Err(wrong("plugin.name", "str", other)),
            };
            let config = match p.get("config") {
                // Nested in the request and the plugin map: the nesting limit counts from
                // the request, as when the whole request was decoded.
                Some(c) => crate::msgpack::decode_nested(c.as_bytes(), 2).map_err(|mut e| {
                    e.offset += offset_of(bytes, c);
                    format!("request: {e}")
                })?,
                None => Value::Nil,
            };
            Ok((name, config))
        }
        other => Err(wrong("plugin", "map", other)),
    }
}

/// Where `v` starts in `bytes` (it is a sub-slice of them).
pub(crate) fn offset_of(bytes: &[u8], v: RawValue<'_>) -> usize {
    (v.as_bytes().as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize)
}

pub(crate) fn invalid_utf8(bytes: &[u8], v: RawValue<'_>) -> String {
    format!(
        "request: {}",
        crate::msgpack::DecodeError {
            offset: offset_of(bytes, v),
            message: "string is not valid UTF-8".to_owned(),
        }
    )
}

pub(crate) fn wrong(key: &str, want: &str, got: Option<RawValue<'_>>) -> String {
    match got {
        None => format!("request: '{key}' is missing"),
        Some(v) => format!("request: '{key}' must be a {want}, got {}", v.type_name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_request() -> Value {
        Value::map([
            ("abiVersion", Value::Int(1)),
            ("hook", Value::from("OnPodCreate")),
            (
                "plugin",
                Value::map([
                    ("name", Value::from("p")),
                    ("config", Value::map([("a", 1)])),
                ]),
            ),
            ("modelServing", Value::map([("kind", "ModelServing")])),
            ("servingGroup", Value::from("g-0")),
            ("roleName", Value::from("prefill")),
            ("roleId", Value::from("prefill-0")),
            ("isEntry", Value::Bool(true)),
            (
                "pod",
                Value::map([("metadata", Value::map([("name", "pod-a")]))]),
            ),
        ])
    }

    #[test]
    fn decodes_a_pod_hook_request() {
        let bytes = pod_request().to_msgpack();
        let r = Request::decode(&bytes).unwrap();
        assert_eq!(r.hook, Hook::OnPodCreate);
        assert_eq!(r.plugin_name, "p");
        assert_eq!(r.config, Value::map([("a", 1)]));
        assert_eq!(r.serving_group, "g-0");
        assert_eq!(r.role_name, "prefill");
        assert_eq!(r.role_id, "prefill-0");
        assert!(r.is_entry);
        assert_eq!(r.pod_name(), "pod-a");
        assert_eq!(r.to_msgpack(), bytes);
        assert_eq!(
            r.pod_value().unwrap(),
            pod_request().get("pod").unwrap().clone()
        );
        assert_eq!(
            r.model_serving_value().unwrap(),
            Value::map([("kind", "ModelServing")])
        );
        assert_eq!(
            r.model_serving().get("kind").unwrap().as_str(),
            Some("ModelServing")
        );
        // The Pod is borrowed from the request bytes, never copied.
        let pod = r.pod().as_bytes();
        let at = pod.as_ptr() as usize - bytes.as_ptr() as usize;
        assert_eq!(&bytes[at..at + pod.len()], pod);
        assert_eq!(at + pod.len(), bytes.len());
    }

    #[test]
    fn unknown_keys_are_ignored_and_repeated_keys_take_the_first_value() {
        let mut v = pod_request();
        if let Value::Map(m) = &mut v {
            m.push(("roleName".to_owned(), Value::Int(5)));
            m.push((
                "future".to_owned(),
                Value::map([("x", Value::array([1, 2]))]),
            ));
        }
        let bytes = v.to_msgpack();
        let r = Request::decode(&bytes).unwrap();
        assert_eq!(r.role_name, "prefill");
    }

    #[test]
    fn framing_is_checked_everywhere_the_rest_where_read() {
        let with = |key: &str, raw: &[u8]| {
            let mut v = pod_request();
            if let Value::Map(m) = &mut v {
                m.retain(|(k, _)| k != key);
            }
            let mut bytes = v.to_msgpack();
            bytes[0] += 1; // one more entry
            crate::msgpack::write_str(key, &mut bytes);
            bytes.extend_from_slice(raw);
            Request::decode(&bytes).map(|_| ())
        };
        assert_eq!(with("x", &[0xc0]), Ok(()));
        // bin, ext, bad lengths anywhere (even under a key nobody reads) are refused up front ...
        assert!(with("x", &[0x91, 0xc4, 0x01, 0x00])
            .unwrap_err()
            .contains("bin"));
        assert!(with("x", &[0x81, 0xa1, b'a', 0xd4, 0, 0])
            .unwrap_err()
            .contains("ext"));
        assert!(with("x", &[0x92, 0xc0]).unwrap_err().contains("truncated"));
        assert!(with("x", &[0xda, 0xff, 0xff, b'a'])
            .unwrap_err()
            .contains("truncated"));
        assert!(with("x", &[0xc1]).unwrap_err().contains("never used"));
        let err = with("x", &[]).unwrap_err();
        assert!(err.contains("truncated"), "{err}");
        // ... UTF-8, key types and depth only where they are read.
        let deep = [vec![0x91u8; 200], vec![0x90]].concat();
        assert_eq!(with("x", &deep), Ok(()));
        assert_eq!(with("x", &[0xa2, 0xc3, 0x28]), Ok(()));
        assert_eq!(with("x", &[0x81, 0x01, 0xc0]), Ok(()));
        let err = with("roleName", &[0xa2, 0xc3, 0x28]).unwrap_err();
        assert!(err.contains("string is not valid UTF-8"), "{err}");
        // The config is decoded whole, with every check.
        let plugin = |config: &[u8]| {
            let mut p = vec![0x82, 0xa4, b'n', b'a', b'm', b'e', 0xa1, b'p'];
            p.extend_from_slice(&[0xa6, b'c', b'o', b'n', b'f', b'i', b'g']);
            p.extend_from_slice(config);
            let mut v = pod_request();
            if let Value::Map(m) = &mut v {
                m.retain(|(k, _)| k != "plugin");
            }
            let mut bytes = v.to_msgpack();
            bytes[0] += 1;
            crate::msgpack::write_str("plugin", &mut bytes);
            bytes.extend_from_slice(&p);
            Request::decode(&bytes).map(|r| r.config)
        };
        assert_eq!(
            plugin(&[0x81, 0xa1, b'a', 0x01]),
            Ok(Value::map([("a", 1)]))
        );
        let err = plugin(&[0xa2, 0xc3, 0x28]).unwrap_err();
        assert!(err.contains("UTF-8"), "{err}");
        assert!(plugin(&[0x81, 0x01, 0xc0])
            .unwrap_err()
            .contains("not a string"));
        // The nesting limit counts from the request: 2 levels above the config.
        let deep = |levels: usize| [vec![0x91u8; levels - 1], vec![0x90]].concat();
        assert!(plugin(&deep(crate::msgpack::MAX_DEPTH - 2)).is_ok());
        let err = plugin(&deep(crate::msgpack::MAX_DEPTH - 1)).unwrap_err();
        assert!(err.contains("nested more than 128"), "{err}");
        // A top-level key that is not a string is refused.
        let mut bytes = pod_request().to_msgpack();
        bytes[0] += 1;
        bytes.extend_from_slice(&[0x01, 0xc0]);
        assert!(Request::decode(&bytes)
            .unwrap_err()
            .contains("not a string"));
        let mut bytes = pod_request().to_msgpack();
        bytes.push(0xc0);
        assert!(Request::decode(&bytes)
            .unwrap_err()
            .contains("1 trailing bytes"));
    }

    #[test]
    fn field_index_numbers_fields() {
        for (i, f) in FIELDS.iter().enumerate() {
            assert_eq!(field_index(f.as_bytes()), Some(i));
        }
        assert_eq!(field_index(b"podx"), None);
    }

    #[test]
    fn validate_config_needs_no_pod() {
        let v = Value::map([
            ("abiVersion", Value::Int(1)),
            ("hook", Value::from("ValidateConfig")),
            ("plugin", Value::map([("name", "p")])),
        ]);
        let bytes = v.to_msgpack();
        let r = Request::decode(&bytes).unwrap();
        assert_eq!(r.hook, Hook::ValidateConfig);
        assert_eq!(r.config, Value::Nil);
        assert_eq!(r.pod, None);
        assert!(r.pod().is_nil());
        assert_eq!(r.pod_value().unwrap(), Value::Nil);
        assert_eq!(r.pod_name(), "");
    }

    #[test]
    fn explains_what_is_wrong() {
        let cases: Vec<(Box<dyn Fn(&mut Value)>, &str)> = vec![
            (
                Box::new(|v| v.set("abiVersion", 4)),
                "abiVersion 4 is not supported (this plugin speaks 1 to 3)",
            ),
            (
                Box::new(|v| v.set("hook", "OnPodDelete")),
                "unknown hook 'OnPodDelete'",
            ),
            (
                Box::new(|v| v.set("hook", 1)),
                "'hook' must be a str, got int",
            ),
            (
                Box::new(|v| v.set("plugin", Value::map([("config", 1)]))),
                "'plugin.name' is missing",
            ),
            (
                Box::new(|v| v.set("roleName", 3)),
                "'roleName' must be a str, got int",
            ),
            (
                Box::new(|v| v.set("isEntry", "yes")),
                "'isEntry' must be a bool, got str",
            ),
            (
                Box::new(|v| v.set("pod", Value::Nil)),
                "'pod' must be a map, got nil",
            ),
            (
                Box::new(|v| {
                    if let Value::Map(m) = v {
                        m.retain(|(k, _)| k != "modelServing")
                    }
                }),
                "'modelServing' is missing",
            ),
        ];
        for (change, want) in cases {
            let mut v = pod_request();
            change(&mut v);
            let err = Request::decode(&v.to_msgpack()).unwrap_err();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        assert!(Request::decode(&[0x90])
            .unwrap_err()
            .contains("must be a map, got array"));
        assert!(Request::decode(&[0xc4, 0]).unwrap_err().contains("bin"));
    }
}
