//! `demo-pod-tweaks`: Kthena's demo plugin: runtime class, annotations and env on every Pod.
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/demo_pod_tweaks.py`; both accept the same configs and
//! produce byte-identical patches.
//!
//! Config (camelCase, unknown fields refused, nil = absent):
//!
//! * `runtimeClassName`: set `spec.runtimeClassName` when non-empty (a DNS-1123 subdomain);
//! * `annotations`: merged into the Pod's annotations, overwriting same keys (keys must be
//!   qualified names);
//! * `env`: core/v1 EnvVars (`name`, `value`, `valueFrom`) upserted into every container and
//!   initContainer by name (Kthena appends, which duplicates names; this replaces a same-named
//!   entry in place).

use modelserving_plugin::config::Fields;
use modelserving_plugin::names::{is_dns1123_subdomain, is_env_var_name, is_qualified_name};
use modelserving_plugin::{export_plugin, PodPatch, RawValue, Request, Value};

pub const NAME: &str = "demo-pod-tweaks";

/// The validated config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub runtime_class_name: Option<String>,
    pub annotations: Vec<(String, String)>,
    /// Each EnvVar as a map with keys `name`, `value` (when set), `valueFrom` (when set), as
    /// the Python model's `to_api()` gives it.
    pub env: Vec<Value>,
}

impl Config {
    /// Validate a plugin config (nil = empty config).
    pub fn parse(config: &Value) -> Result<Config, String> {
        let mut f = Fields::config(config)?;
        let runtime_class_name = f.str("runtimeClassName")?;
        if let Some(name) = runtime_class_name {
            if !name.is_empty() && !is_dns1123_subdomain(name) {
                return Err(format!(
                    "{}: '{name}' is not a valid RuntimeClass name (a DNS-1123 subdomain)",
                    f.loc_of("runtimeClassName")
                ));
            }
        }
        let annotations = f.string_map("annotations")?.unwrap_or_default();
        if let Some((key, _)) = annotations.iter().find(|(k, _)| !is_qualified_name(k)) {
            return Err(format!(
                "{}: '{key}' is not a valid annotation key",
                f.loc_of("annotations")
            ));
        }
        let env = f
            .array("env")?
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, item)| env_var(item, f.loc_of_item("env", i)))
            .collect::<Result<Vec<_>, _>>()?;
        f.finish()?;
        Ok(Config {
            runtime_class_name: runtime_class_name.map(str::to_owned),
            annotations: annotations
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            env,
        })
    }
}

/// One core/v1 EnvVar, checked and re-emitted in `to_api()` form.
fn env_var(item: &Value, loc: String) -> Result<Value, String> {
    let mut f = Fields::new(item, loc)?;
    let name = f.str("name")?;
    let name = f.required("name", name)?;
    if name.is_empty() {
        return Err(format!("{}: must not be empty", f.loc_of("name")));
    }
    if !is_env_var_name(name) {
        return Err(format!(
            "{}: '{name}' is not a valid environment variable name",
            f.loc_of("name")
        ));
    }
    let value = f.str("value")?;
    let value_from = f.map("valueFrom")?;
    f.finish()?;
    let mut out = vec![("name".to_owned(), Value::from(name))];
    if let Some(v) = value {
        out.push(("value".to_owned(), Value::from(v)));
    }
    if let Some(m) = value_from {
        out.push(("valueFrom".to_owned(), Value::Map(m.to_vec())));
    }
    Ok(Value::Map(out))
}

/// The patch for one Pod under `config` (reads only the Pod's annotations and env names).
pub fn patch_pod(config: &Config, pod: RawValue<'_>) -> PodPatch {
    let mut patch = PodPatch::new(pod);
    if let Some(name) = config
        .runtime_class_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        patch.set_runtime_class_name(name);
    }
    patch.merge_annotations(
        config
            .annotations
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    patch.upsert_env(&config.env);
    patch
}

pub fn on_pod_create(req: &Request) -> Result<PodPatch, String> {
    let config = Config::parse(&req.config)?;
    Ok(patch_pod(&config, req.pod()))
}

pub fn validate_config(req: &Request) -> Result<(), String> {
    Config::parse(&req.config).map(|_| ())
}

export_plugin! {
    on_pod_create: on_pod_create,
    validate_config: validate_config,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(config: Value) -> Result<Config, String> {
        Config::parse(&config)
    }

    #[test]
    fn accepts_what_the_python_model_accepts() {
        assert_eq!(parse(Value::Nil).unwrap(), Config::default());
        assert_eq!(
            parse(Value::map([("runtimeClassName", "")]))
                .unwrap()
                .runtime_class_name
                .as_deref(),
            Some("")
        );
        let c = parse(Value::map([
            ("runtime_class_name", Value::from("gvisor")),
            ("annotations", Value::map([("example.com/a", "1")])),
            (
                "env",
                Value::array([Value::map([
                    ("value_from", Value::map([("x", Value::Nil)])),
                    ("name", Value::from("A")),
                    ("value", Value::Nil),
                    ("bogus", Value::Nil),
                ])]),
            ),
            ("other", Value::Nil),
        ]))
        .unwrap();
        assert_eq!(c.runtime_class_name.as_deref(), Some("gvisor"));
        assert_eq!(
            c.annotations,
            vec![("example.com/a".to_owned(), "1".to_owned())]
        );
        assert_eq!(
            c.env,
            vec![Value::map([
                ("name", Value::from("A")),
                ("valueFrom", Value::map([("x", Value::Nil)]))
            ])]
        );
    }

    #[test]
    fn refuses_what_the_python_model_refuses() {
        for (config, why) in [
            (Value::Array(vec![]), "config: must be a map"),
            (
                Value::map([("runtimeClassName", 5)]),
                "config.runtimeClassName: must be a str",
            ),
            (
                Value::map([("runtimeClassName", "Bad_Name")]),
                "not a valid RuntimeClass name",
            ),
            (
                Value::map([("runtimeClassName", "a"), ("runtime_class_name", "b")]),
                "config.runtime_class_name: unknown field",
            ),
            (
                Value::map([("annotations", Value::map([("a", Value::Nil)]))]),
                "config.annotations.a: must be a str, got nil",
            ),
            (
                Value::map([("annotations", Value::map([("A.com/b", "x")]))]),
                "'A.com/b' is not a valid annotation key",
            ),
            (
                Value::map([("annotations", Value::Array(vec![]))]),
                "config.annotations: must be a map",
            ),
            (
                Value::map([("env", Value::Map(vec![]))]),
                "config.env: must be an array",
            ),
            (
                Value::map([("env", Value::array([Value::Nil]))]),
                "config.env.0: must be a map, got nil",
            ),
            (
                Value::map([("env", Value::array([Value::map([("value", "x")])]))]),
                "config.env.0.name: is required",
            ),
            (
                Value::map([("env", Value::array([Value::map([("name", "")])]))]),
                "config.env.0.name: must not be empty",
            ),
            (
                Value::map([("env", Value::array([Value::map([("name", "1A")])]))]),
                "not a valid environment variable name",
            ),
            (
                Value::map([(
                    "env",
                    Value::array([Value::map([
                        ("name", Value::from("A")),
                        ("value", Value::Int(1)),
                    ])]),
                )]),
                "config.env.0.value: must be a str",
            ),
            (
                Value::map([(
                    "env",
                    Value::array([Value::map([("name", "A"), ("valueFrom", "x")])]),
                )]),
                "config.env.0.valueFrom: must be a map",
            ),
            (
                Value::map([(
                    "env",
                    Value::array([Value::map([
                        ("name", Value::from("A")),
                        ("extra", Value::Int(1)),
                    ])]),
                )]),
                "config.env.0.extra: unknown field",
            ),
            (
                Value::map([("runtimeclassname", "a")]),
                "config.runtimeclassname: unknown field",
            ),
        ] {
            let err = parse(config.clone()).unwrap_err();
            assert!(err.contains(why), "{config}: {err:?} lacks {why:?}");
        }
    }

    #[test]
    fn patches_like_the_python_plugin() {
        let config = parse(Value::map([
            ("runtimeClassName", Value::from("kata")),
            ("annotations", Value::map([("a", "1")])),
            (
                "env",
                Value::array([Value::map([("name", "A"), ("value", "1")])]),
            ),
        ]))
        .unwrap();
        let pod = Value::map([(
            "spec",
            Value::map([("containers", Value::array([Value::map([("name", "c")])]))]),
        )]);
        let bytes = pod.to_msgpack();
        let pod = RawValue::new(&bytes).unwrap();
        let ops = patch_pod(&config, pod).into_ops().unwrap();
        let paths: Vec<&str> = ops.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/spec/runtimeClassName",
                "/metadata/annotations",
                "/spec/containers/0/env"
            ]
        );
        assert!(patch_pod(&Config::default(), pod)
            .into_ops()
            .unwrap()
            .is_empty());
    }

    #[test]
    fn exports_through_the_abi_glue() {
        let request = |hook: &str, config: Value| {
            let mut m = vec![
                ("abiVersion".to_owned(), Value::Int(1)),
                ("hook".to_owned(), Value::from(hook)),
                (
                    "plugin".to_owned(),
                    Value::map([("name", Value::from(NAME)), ("config", config)]),
                ),
            ];
            if hook != "ValidateConfig" {
                for (k, v) in [
                    ("modelServing", Value::map([("kind", "ModelServing")])),
                    ("servingGroup", Value::from("g")),
                    ("roleName", Value::from("r")),
                    ("roleId", Value::from("r-0")),
                    ("isEntry", Value::Bool(false)),
                    (
                        "pod",
                        Value::map([("spec", Value::map([("containers", Value::Array(vec![]))]))]),
                    ),
                ] {
                    m.push((k.to_owned(), v));
                }
            }
            Value::Map(m).to_msgpack()
        };
        use modelserving_plugin::{Hook, Response};
        let ok = modelserving_call(Hook::ValidateConfig, &request("ValidateConfig", Value::Nil))
            .unwrap();
        assert!(ok.is_empty());
        let bad = modelserving_call(
            Hook::ValidateConfig,
            &request("ValidateConfig", Value::from("x")),
        )
        .unwrap();
        assert_eq!(
            Response::decode(&bad).unwrap().error.as_deref(),
            Some("config: must be a map, got str")
        );
        let cfg = Value::map([("runtimeClassName", "kata")]);
        let r = modelserving_call(Hook::OnPodCreate, &request("OnPodCreate", cfg.clone())).unwrap();
        assert_eq!(Response::decode(&r).unwrap().patch.len(), 1);
        let wrong = modelserving_call(Hook::OnPodCreate, &request("ValidateConfig", cfg)).unwrap();
        assert!(Response::decode(&wrong)
            .unwrap()
            .error
            .unwrap()
            .contains("sent to ms_on_pod_create"));
        assert!(modelserving_call(Hook::OnPodReady, &[]).is_none());
    }
}
