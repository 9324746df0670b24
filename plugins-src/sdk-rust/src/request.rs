//! [`Request`]: what the host sends to a hook, decoded and type-checked.

use std::fmt;

use crate::value::Value;

/// The ABI version this SDK speaks (`abiVersion` in every request).
pub const ABI_VERSION: i64 = 1;

/// The hook points; [`Hook::as_str`] gives the names used on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    /// A Pod is about to be created; the plugin may return a patch.
    OnPodCreate,
    /// A Pod became Running and Ready; the plugin observes (an error is only reported).
    OnPodReady,
    /// The host asks whether the plugin's config is valid, once, when the chain is built.
    ValidateConfig,
}

impl Hook {
    pub const ALL: [Hook; 3] = [Hook::OnPodCreate, Hook::OnPodReady, Hook::ValidateConfig];

    /// "OnPodCreate", "OnPodReady" or "ValidateConfig".
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::OnPodCreate => "OnPodCreate",
            Hook::OnPodReady => "OnPodReady",
            Hook::ValidateConfig => "ValidateConfig",
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
        }
    }

    /// Whether the request carries a Pod (OnPodCreate, OnPodReady).
    pub fn has_pod(self) -> bool {
        !matches!(self, Hook::ValidateConfig)
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One hook call's context.
///
/// For `OnPodCreate` and `OnPodReady` every field is present (`model_serving` and `pod` are
/// `Some` maps); for `ValidateConfig` only `hook`, `plugin_name` and `config` are meaningful,
/// the strings are empty, `is_entry` is false and `model_serving` / `pod` are `None`.
/// Keys of the request map this SDK does not know are ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub hook: Hook,
    /// The plugin's name in the ModelServing's plugin list.
    pub plugin_name: String,
    /// The plugin's config exactly as written in the ModelServing (`Value::Nil` when absent).
    pub config: Value,
    /// The ModelServing object (a map), for the Pod hooks.
    pub model_serving: Option<Value>,
    pub serving_group: String,
    pub role_name: String,
    pub role_id: String,
    /// Whether the Pod is its role's entry Pod.
    pub is_entry: bool,
    /// The Pod (a map; with `status` for OnPodReady), for the Pod hooks. Never changed by the
    /// host after the call: a plugin returns a patch instead.
    pub pod: Option<Value>,
}

static NIL: Value = Value::Nil;

impl Request {
    /// Decode and check a request; the error says what is wrong, e.g.
    /// `request: 'roleName' must be a str, got int`.
    pub fn decode(bytes: &[u8]) -> Result<Request, String> {
        let root = crate::msgpack::decode(bytes).map_err(|e| format!("request: {e}"))?;
        Request::from_value(root)
    }

    /// Check an already decoded request map (takes it apart without copying).
    pub fn from_value(root: Value) -> Result<Request, String> {
        let mut fields = match root {
            Value::Map(m) => m,
            other => return Err(format!("request: must be a map, got {}", other.type_name())),
        };
        let mut take = |key: &str| -> Option<Value> {
            fields
                .iter()
                .position(|(k, _)| k == key)
                .map(|i| fields.swap_remove(i).1)
        };

        match take("abiVersion") {
            Some(v) if v.as_i64() == Some(ABI_VERSION) => {}
            Some(Value::Int(v)) => {
                return Err(format!(
                    "request: abiVersion {v} is not supported (this plugin speaks {ABI_VERSION})"
                ))
            }
            Some(v) => return Err(wrong("abiVersion", "int", Some(&v))),
            None => return Err("request: 'abiVersion' is missing".to_owned()),
        }
        let hook = match take("hook") {
            Some(Value::Str(s)) => match Hook::from_name(&s) {
                Some(h) => h,
                None => return Err(format!("request: unknown hook '{s}'")),
            },
            other => return Err(wrong("hook", "str", other.as_ref())),
        };
        let (plugin_name, config) = match take("plugin") {
            Some(Value::Map(p)) => {
                let mut p = Value::Map(p);
                let name = match p.get("name") {
                    Some(Value::Str(s)) => s.clone(),
                    other => return Err(wrong("plugin.name", "str", other)),
                };
                let config = match &mut p {
                    Value::Map(m) => m
                        .iter()
                        .position(|(k, _)| k == "config")
                        .map(|i| m.swap_remove(i).1)
                        .unwrap_or(Value::Nil),
                    _ => Value::Nil,
                };
                (name, config)
            }
            other => return Err(wrong("plugin", "map", other.as_ref())),
        };
        let required = hook.has_pod();
        let model_serving = map_field("modelServing", take("modelServing"), required)?;
        let serving_group = str_field("servingGroup", take("servingGroup"), required)?;
        let role_name = str_field("roleName", take("roleName"), required)?;
        let role_id = str_field("roleId", take("roleId"), required)?;
        let is_entry = match take("isEntry") {
            Some(Value::Bool(b)) => b,
            None if !required => false,
            other => return Err(wrong("isEntry", "bool", other.as_ref())),
        };
        let pod = map_field("pod", take("pod"), required)?;
        Ok(Request {
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

    /// The Pod, or `Value::Nil` when the request has none (ValidateConfig).
    pub fn pod(&self) -> &Value {
        self.pod.as_ref().unwrap_or(&NIL)
    }

    /// The ModelServing, or `Value::Nil` when the request has none (ValidateConfig).
    pub fn model_serving(&self) -> &Value {
        self.model_serving.as_ref().unwrap_or(&NIL)
    }

    /// `pod.metadata.name`, or "" when unset (a Pod may get its name from generateName).
    pub fn pod_name(&self) -> &str {
        self.pod()
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Encode back to the request bytes the host would send (useful to build test requests).
    /// Key order: abiVersion, hook, plugin {name, config}, then for the Pod hooks modelServing,
    /// servingGroup, roleName, roleId, isEntry, pod.
    pub fn to_msgpack(&self) -> Vec<u8> {
        let mut m = vec![
            ("abiVersion".to_owned(), Value::Int(ABI_VERSION)),
            ("hook".to_owned(), Value::from(self.hook.as_str())),
            (
                "plugin".to_owned(),
                Value::map([
                    ("name", Value::from(self.plugin_name.as_str())),
                    ("config", self.config.clone()),
                ]),
            ),
        ];
        if self.hook.has_pod() {
            m.push(("modelServing".to_owned(), self.model_serving().clone()));
            m.push((
                "servingGroup".to_owned(),
                Value::from(self.serving_group.as_str()),
            ));
            m.push(("roleName".to_owned(), Value::from(self.role_name.as_str())));
            m.push(("roleId".to_owned(), Value::from(self.role_id.as_str())));
            m.push(("isEntry".to_owned(), Value::Bool(self.is_entry)));
            m.push(("pod".to_owned(), self.pod().clone()));
        }
        Value::Map(m).to_msgpack()
    }
}

fn wrong(key: &str, want: &str, got: Option<&Value>) -> String {
    match got {
        None => format!("request: '{key}' is missing"),
        Some(v) => format!("request: '{key}' must be a {want}, got {}", v.type_name()),
    }
}

fn str_field(key: &str, v: Option<Value>, required: bool) -> Result<String, String> {
    match v {
        Some(Value::Str(s)) => Ok(s),
        None if !required => Ok(String::new()),
        other => Err(wrong(key, "str", other.as_ref())),
    }
}

fn map_field(key: &str, v: Option<Value>, required: bool) -> Result<Option<Value>, String> {
    match v {
        Some(m @ Value::Map(_)) => Ok(Some(m)),
        None if !required => Ok(None),
        other => Err(wrong(key, "map", other.as_ref())),
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
        let r = Request::decode(&pod_request().to_msgpack()).unwrap();
        assert_eq!(r.hook, Hook::OnPodCreate);
        assert_eq!(r.plugin_name, "p");
        assert_eq!(r.config, Value::map([("a", 1)]));
        assert_eq!(r.serving_group, "g-0");
        assert_eq!(r.role_name, "prefill");
        assert_eq!(r.role_id, "prefill-0");
        assert!(r.is_entry);
        assert_eq!(r.pod_name(), "pod-a");
        assert_eq!(r.to_msgpack(), pod_request().to_msgpack());
    }

    #[test]
    fn validate_config_needs_no_pod() {
        let v = Value::map([
            ("abiVersion", Value::Int(1)),
            ("hook", Value::from("ValidateConfig")),
            ("plugin", Value::map([("name", "p")])),
        ]);
        let r = Request::decode(&v.to_msgpack()).unwrap();
        assert_eq!(r.hook, Hook::ValidateConfig);
        assert_eq!(r.config, Value::Nil);
        assert_eq!(r.pod, None);
        assert_eq!(r.pod(), &Value::Nil);
        assert_eq!(r.pod_name(), "");
    }

    #[test]
    fn explains_what_is_wrong() {
        let cases: Vec<(Box<dyn Fn(&mut Value)>, &str)> = vec![
            (
                Box::new(|v| v.set("abiVersion", 2)),
                "abiVersion 2 is not supported",
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
