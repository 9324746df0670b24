//! `accelerator`: everything a Pod needs to run on N devices of one vendor (NVIDIA, Ascend, AMD).
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/accelerator.py`; both accept the same configs and give
//! byte-identical responses.
//!
//! Config (camelCase, unknown fields refused, nil = absent):
//!
//! * `vendor` (required): `nvidia` | `ascend` | `amd`;
//! * `devices`: devices per Pod, 1..=128 (default 1);
//! * `resourceName`: the extended resource, a qualified name with a prefix; by vendor
//!   `nvidia.com/gpu`, `huawei.com/Ascend910`, `amd.com/gpu`;
//! * `container`: the container to configure, by name (default the first);
//! * `runtimeClassName`: sets `spec.runtimeClassName` (a DNS-1123 subdomain);
//! * `nodeSelector`: merged into `spec.nodeSelector`, same keys overwritten;
//! * `tolerations`: appended unless an equal one is there (absent: tolerate the taint named
//!   after the resource; `[]`: none);
//! * `env`: `{name, value}` appended unless the name exists (absent: the vendor's default;
//!   `[]`: none);
//! * `shmSize`: a shared-memory `emptyDir` of that size, mounted at `/dev/shm`.
//!
//! The changes, in order: the device limit (and the request when the container already requests
//! the resource), the runtime class, the node selector, the tolerations, the env, the
//! shared-memory volume and its mount. Entry and worker Pods are treated the same.

use builtins_kit::{is_label_value, is_quantity, str_field, PodEdit, F};
use modelserving_plugin::config::Fields;
use modelserving_plugin::names::{is_dns1123_subdomain, is_env_var_name, is_qualified_name};
use modelserving_plugin::{export_plugin, Op, Request, Value};

pub const NAME: &str = "accelerator";
pub const MAX_DEVICES: i64 = 128;
/// The fields that make two tolerations the same one.
const TOLERATION_MATCH: [&str; 4] = ["key", "operator", "value", "effect"];

/// The validated config, with the vendor's defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub resource_name: String,
    pub devices: i64,
    pub container: Option<String>,
    pub runtime_class_name: Option<String>,
    pub node_selector: Vec<(String, Value)>,
    /// Each a map in the order key, operator, value, effect, tolerationSeconds (set ones only).
    pub tolerations: Vec<Value>,
    /// Each a map `{name, value}`.
    pub env: Vec<Value>,
    pub shm_size: Option<String>,
}

fn env_var(name: &str, value: &str) -> Value {
    Value::map([("name", name), ("value", value)])
}

/// The vendor's resource name and default env; an error for an unknown vendor.
fn vendor_defaults(vendor: &str) -> Option<(&'static str, Vec<Value>)> {
    match vendor {
        "nvidia" => Some((
            "nvidia.com/gpu",
            vec![env_var("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")],
        )),
        "ascend" => Some(("huawei.com/Ascend910", Vec::new())),
        "amd" => Some(("amd.com/gpu", Vec::new())),
        _ => None,
    }
}

impl Config {
    /// Validate a plugin config (nil = empty config, which lacks the vendor).
    pub fn parse(config: &Value) -> Result<Config, String> {
        let mut f = Fields::config(config)?;
        let vendor = f.str("vendor")?;
        let vendor = f.required("vendor", vendor)?;
        let (default_resource, default_env) = match vendor_defaults(vendor) {
            Some(d) => d,
            None => {
                return Err(format!(
                    "{}: must be 'nvidia', 'ascend' or 'amd', not '{vendor}'",
                    f.loc_of("vendor")
                ))
            }
        };
        let devices = f.int("devices")?.unwrap_or(1);
        if !(1..=MAX_DEVICES).contains(&devices) {
            return Err(format!(
                "{}: must be from 1 to {MAX_DEVICES}, not {devices}",
                f.loc_of("devices")
            ));
        }
        let resource_name = f.str("resourceName")?;
        if let Some(name) = resource_name {
            if !name.contains('/') || !is_qualified_name(name) {
                return Err(format!(
                    "{}: '{name}' is not a resource name with a prefix (such as nvidia.com/gpu)",
                    f.loc_of("resourceName")
                ));
            }
        }
        let resource_name = resource_name.unwrap_or(default_resource).to_owned();
        let container = f.str("container")?.map(str::to_owned);
        let runtime_class_name = f.str("runtimeClassName")?;
        if let Some(name) = runtime_class_name {
            if !is_dns1123_subdomain(name) {
                return Err(format!(
                    "{}: '{name}' is not a valid RuntimeClass name (a DNS-1123 subdomain)",
                    f.loc_of("runtimeClassName")
                ));
            }
        }
        let node_selector = node_selector(&mut f)?;
        let tolerations = match f.array("tolerations")? {
            None => vec![Value::map([
                ("key", resource_name.as_str()),
                ("operator", "Exists"),
                ("effect", "NoSchedule"),
            ])],
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| toleration(item, f.loc_of_item("tolerations", i)))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let env = match f.array("env")? {
            None => default_env,
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| config_env_var(item, f.loc_of_item("env", i)))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let shm_size = f.str("shmSize")?;
        if let Some(size) = shm_size {
            if !is_quantity(size) {
                return Err(format!(
                    "{}: '{size}' is not a valid quantity (such as 16Gi)",
                    f.loc_of("shmSize")
                ));
            }
        }
        f.finish()?;
        Ok(Config {
            resource_name,
            devices,
            container,
            runtime_class_name: runtime_class_name.map(str::to_owned),
            node_selector,
            tolerations,
            env,
            shm_size: shm_size.map(str::to_owned),
        })
    }
}

/// `nodeSelector`: label keys to label values.
fn node_selector(f: &mut Fields<'_>) -> Result<Vec<(String, Value)>, String> {
    let loc = f.loc_of("nodeSelector");
    let mut out = Vec::new();
    for (key, value) in f.string_map("nodeSelector")?.unwrap_or_default() {
        if !is_qualified_name(key) {
            return Err(format!("{loc}: '{key}' is not a valid label key"));
        }
        if !is_label_value(value) {
            return Err(format!(
                "{loc}: '{value}' is not a valid label value (key '{key}')"
            ));
        }
        out.push((key.to_owned(), Value::from(value)));
    }
    Ok(out)
}

/// One core/v1 Toleration, checked as the API server would, in `to_api()` form.
fn toleration(item: &Value, loc: String) -> Result<Value, String> {
    let mut f = Fields::new(item, loc)?;
    let key = f.str("key")?;
    if let Some(key) = key {
        if !is_qualified_name(key) {
            return Err(format!(
                "{}: '{key}' is not a valid toleration key (a qualified name)",
                f.loc_of("key")
            ));
        }
    }
    let operator = one_of(&mut f, "operator", &["Exists", "Equal"])?;
    let value = f.str("value")?;
    if let Some(value) = value {
        if !is_label_value(value) {
            return Err(format!(
                "{}: '{value}' is not a valid toleration value (a label value)",
                f.loc_of("value")
            ));
        }
    }
    let effect = one_of(
        &mut f,
        "effect",
        &["NoSchedule", "PreferNoSchedule", "NoExecute"],
    )?;
    let seconds = f.int("tolerationSeconds")?;
    if let Some(s) = seconds {
        if s < 0 {
            return Err(format!(
                "{}: must be >= 0, not {s}",
                f.loc_of("tolerationSeconds")
            ));
        }
    }
    let loc = f.loc().to_owned();
    f.finish()?;
    if key.is_none() && operator != Some("Exists") {
        return Err(format!(
            "{loc}: a toleration without a key must have operator Exists"
        ));
    }
    if operator == Some("Exists") && value.map_or(false, |v| !v.is_empty()) {
        return Err(format!(
            "{loc}: a toleration with operator Exists must have no value"
        ));
    }
    if seconds.is_some() && effect != Some("NoExecute") {
        return Err(format!(
            "{loc}: tolerationSeconds is only allowed with effect NoExecute"
        ));
    }
    let mut out = Vec::new();
    for (name, v) in [
        ("key", key),
        ("operator", operator),
        ("value", value),
        ("effect", effect),
    ] {
        if let Some(v) = v {
            out.push((name.to_owned(), Value::from(v)));
        }
    }
    if let Some(s) = seconds {
        out.push(("tolerationSeconds".to_owned(), Value::Int(s)));
    }
    Ok(Value::Map(out))
}

/// An optional string field that must be one of `allowed`.
fn one_of<'a>(f: &mut Fields<'a>, name: &str, allowed: &[&str]) -> Result<Option<&'a str>, String> {
    let value = f.str(name)?;
    match value {
        Some(v) if !allowed.contains(&v) => Err(format!(
            "{}: must be one of {}, not '{v}'",
            f.loc_of(name),
            allowed.join(", ")
        )),
        _ => Ok(value),
    }
}

/// One `{name, value}` env var of the config.
fn config_env_var(item: &Value, loc: String) -> Result<Value, String> {
    let mut f = Fields::new(item, loc)?;
    let name = f.str("name")?;
    let name = f.required("name", name)?;
    if !is_env_var_name(name) {
        return Err(format!(
            "{}: '{name}' is not a valid environment variable name",
            f.loc_of("name")
        ));
    }
    let value = f.str("value")?;
    let value = f.required("value", value)?;
    f.finish()?;
    Ok(env_var(name, value))
}

/// Whether an existing toleration has the same key, operator, value and effect (absent ==
/// absent; a field of another type counts as absent).
fn same_toleration(existing: &Value, new: &Value) -> bool {
    TOLERATION_MATCH
        .iter()
        .all(|k| str_field(existing, k) == str_field(new, k))
}

/// The patch for one Pod under `config`.
pub fn patch_pod(config: &Config, edit: &mut PodEdit) -> Result<(), String> {
    let container = edit.container(config.container.as_deref())?;
    edit.set_amount(
        container,
        &config.resource_name,
        &config.devices.to_string(),
    )?;
    if let Some(name) = &config.runtime_class_name {
        edit.put(&[F("spec"), F("runtimeClassName")], Value::from(name))?;
    }
    edit.merge_map(&[F("spec"), F("nodeSelector")], &config.node_selector)?;
    for toleration in &config.tolerations {
        edit.append_unless(&[F("spec"), F("tolerations")], toleration.clone(), |t| {
            same_toleration(t, toleration)
        })?;
    }
    for var in &config.env {
        edit.add_env(container, var.clone())?;
    }
    if let Some(size) = &config.shm_size {
        edit.add_shared_memory(container, Some(size))?;
    }
    Ok(())
}

pub fn on_pod_create(req: &Request) -> Result<Vec<Op>, String> {
    let config = Config::parse(&req.config)?;
    let mut edit = PodEdit::of_request(req)?;
    patch_pod(&config, &mut edit)?;
    Ok(edit.into_ops())
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
    use builtins_kit::{SHM_PATH, SHM_VOLUME};

    fn parse(config: Value) -> Result<Config, String> {
        Config::parse(&config)
    }

    fn pod(container: Value) -> Value {
        Value::map([
            ("metadata", Value::map([("name", "p")])),
            (
                "spec",
                Value::map([("containers", Value::array([container]))]),
            ),
        ])
    }

    fn ops(config: Value, pod: Value) -> Result<Vec<(String, String, Value)>, String> {
        let config = parse(config).unwrap();
        let mut edit = PodEdit::new(pod);
        patch_pod(&config, &mut edit)?;
        Ok(edit
            .into_ops()
            .into_iter()
            .map(|o| {
                (
                    o.op.as_str().to_owned(),
                    o.path,
                    o.value.unwrap_or(Value::Nil),
                )
            })
            .collect())
    }

    #[test]
    fn vendor_defaults_fill_in() {
        let c = parse(Value::map([("vendor", "nvidia")])).unwrap();
        assert_eq!(c.resource_name, "nvidia.com/gpu");
        assert_eq!(c.devices, 1);
        assert_eq!(
            c.tolerations,
            vec![Value::map([
                ("key", "nvidia.com/gpu"),
                ("operator", "Exists"),
                ("effect", "NoSchedule")
            ])]
        );
        assert_eq!(
            c.env,
            vec![env_var("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")]
        );
        let c = parse(Value::map([("vendor", "ascend")])).unwrap();
        assert_eq!(c.resource_name, "huawei.com/Ascend910");
        assert!(c.env.is_empty());
        let c = parse(Value::map([
            ("vendor", Value::from("amd")),
            ("resource_name", Value::from("example.com/dev")),
            ("tolerations", Value::Array(vec![])),
            ("env", Value::Nil),
        ]))
        .unwrap();
        assert_eq!(c.resource_name, "example.com/dev");
        assert!(c.tolerations.is_empty() && c.env.is_empty());
    }

    #[test]
    fn tolerations_are_emitted_in_field_order() {
        let c = parse(Value::map([
            ("vendor", Value::from("amd")),
            (
                "tolerations",
                Value::array([Value::map([
                    ("toleration_seconds", Value::Int(30)),
                    ("effect", Value::from("NoExecute")),
                    ("value", Value::from("v")),
                    ("operator", Value::Nil),
                    ("key", Value::from("k")),
                ])]),
            ),
        ]))
        .unwrap();
        assert_eq!(
            c.tolerations,
            vec![Value::map([
                ("key", Value::from("k")),
                ("value", Value::from("v")),
                ("effect", Value::from("NoExecute")),
                ("tolerationSeconds", Value::Int(30)),
            ])]
        );
    }

    #[test]
    fn refuses_what_the_python_model_refuses() {
        let with_vendor =
            |k: &str, v: Value| Value::map([("vendor", Value::from("nvidia")), (k, v)]);
        let tol = |t: Value| with_vendor("tolerations", Value::array([t]));
        for (config, why) in [
            (Value::Nil, "config.vendor: is required"),
            (Value::map([("vendor", "intel")]), "config.vendor: must be"),
            (Value::map([("vendor", 1)]), "config.vendor: must be a str"),
            (
                with_vendor("devices", Value::Int(0)),
                "config.devices: must be from 1",
            ),
            (
                with_vendor("devices", Value::Int(129)),
                "config.devices: must be from 1",
            ),
            (
                with_vendor("devices", Value::Bool(true)),
                "config.devices: must be an int",
            ),
            (
                with_vendor("devices", Value::Float(1.0)),
                "config.devices: must be an int",
            ),
            (
                with_vendor("resourceName", Value::from("gpu")),
                "with a prefix",
            ),
            (
                with_vendor("resourceName", Value::from("A.com/gpu")),
                "with a prefix",
            ),
            (
                with_vendor("container", Value::Int(1)),
                "config.container: must be a str",
            ),
            (
                with_vendor("runtimeClassName", Value::from("")),
                "RuntimeClass",
            ),
            (
                with_vendor("nodeSelector", Value::map([("-a", "b")])),
                "not a valid label key",
            ),
            (
                with_vendor("nodeSelector", Value::map([("a", "b c")])),
                "not a valid label value",
            ),
            (
                tol(Value::Map(vec![])),
                "without a key must have operator Exists",
            ),
            (
                tol(Value::map([("key", "a"), ("operator", "In")])),
                "operator: must be one of",
            ),
            (
                tol(Value::map([("key", "a"), ("effect", "Never")])),
                "effect: must be one of",
            ),
            (
                tol(Value::map([("key", "a/")])),
                "not a valid toleration key",
            ),
            (
                tol(Value::map([("key", "a"), ("value", "b c")])),
                "not a valid toleration value",
            ),
            (
                tol(Value::map([
                    ("key", "a"),
                    ("operator", "Exists"),
                    ("value", "b"),
                ])),
                "must have no value",
            ),
            (
                tol(Value::map([
                    ("key", Value::from("a")),
                    ("tolerationSeconds", Value::Int(3)),
                ])),
                "only allowed with effect NoExecute",
            ),
            (
                tol(Value::map([
                    ("key", Value::from("a")),
                    ("effect", Value::from("NoExecute")),
                    ("tolerationSeconds", Value::Int(-1)),
                ])),
                "must be >= 0",
            ),
            (
                tol(Value::map([
                    ("key", Value::from("a")),
                    ("effect", Value::from("NoExecute")),
                    ("tolerationSeconds", Value::UInt(u64::MAX)),
                ])),
                "must be an int",
            ),
            (
                tol(Value::map([("key", "a"), ("x", "y")])),
                "config.tolerations.0.x: unknown field",
            ),
            (tol(Value::Nil), "config.tolerations.0: must be a map"),
            (
                with_vendor("env", Value::array([Value::map([("name", "A")])])),
                "value: is required",
            ),
            (
                with_vendor("env", Value::array([Value::map([("value", "A")])])),
                "name: is required",
            ),
            (
                with_vendor(
                    "env",
                    Value::array([Value::map([("name", "1A"), ("value", "x")])]),
                ),
                "not a valid environment variable name",
            ),
            (
                with_vendor("shmSize", Value::from("16GB")),
                "not a valid quantity",
            ),
            (
                with_vendor("shm_size", Value::Int(1)),
                "config.shmSize: must be a str",
            ),
            (
                with_vendor("other", Value::Int(1)),
                "config.other: unknown field",
            ),
        ] {
            let err = parse(config.clone()).unwrap_err();
            assert!(err.contains(why), "{config}: {err:?} lacks {why:?}");
        }
    }

    #[test]
    fn patches_a_bare_pod_in_order() {
        let config = Value::map([
            ("vendor", Value::from("nvidia")),
            ("devices", Value::Int(8)),
            ("runtimeClassName", Value::from("nvidia")),
            ("nodeSelector", Value::map([("a", "b")])),
            ("shmSize", Value::from("16Gi")),
        ]);
        let got = ops(config, pod(Value::map([("name", "c")]))).unwrap();
        let paths: Vec<&str> = got.iter().map(|o| o.1.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/spec/containers/0/resources",
                "/spec/runtimeClassName",
                "/spec/nodeSelector",
                "/spec/tolerations",
                "/spec/containers/0/env",
                "/spec/volumes",
                "/spec/containers/0/volumeMounts",
            ]
        );
        assert_eq!(
            got[0].2,
            Value::map([("limits", Value::map([("nvidia.com/gpu", "8")]))])
        );
    }

    #[test]
    fn keeps_what_the_pod_has_and_sets_requests_only_when_present() {
        let container = Value::map([
            ("name", Value::from("c")),
            (
                "resources",
                Value::map([("requests", Value::map([("amd.com/gpu", "1")]))]),
            ),
            (
                "env",
                Value::array([Value::map([("name", "A"), ("value", "mine")])]),
            ),
            (
                "volumeMounts",
                Value::array([Value::map([("name", "x"), ("mountPath", SHM_PATH)])]),
            ),
        ]);
        let mut p = pod(container);
        if let Value::Map(spec) = &mut p {
            let spec = &mut spec[1].1;
            spec.set(
                "tolerations",
                Value::array([Value::map([("key", "k"), ("operator", "Exists")])]),
            );
            spec.set(
                "volumes",
                Value::array([Value::map([("name", SHM_VOLUME)])]),
            );
        }
        let config = Value::map([
            ("vendor", Value::from("amd")),
            ("devices", Value::Int(2)),
            (
                "tolerations",
                Value::array([
                    Value::map([("key", "k"), ("operator", "Exists")]),
                    Value::map([
                        ("key", "k"),
                        ("operator", "Exists"),
                        ("effect", "NoSchedule"),
                    ]),
                ]),
            ),
            (
                "env",
                Value::array([
                    Value::map([("name", "A"), ("value", "theirs")]),
                    Value::map([("name", "B"), ("value", "1")]),
                ]),
            ),
            ("shmSize", Value::from("1Gi")),
        ]);
        let got = ops(config, p).unwrap();
        let paths: Vec<&str> = got.iter().map(|o| o.1.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/spec/containers/0/resources/limits",
                "/spec/containers/0/resources/requests/amd.com~1gpu",
                "/spec/tolerations/-",
                "/spec/containers/0/env/-",
            ]
        );
        assert_eq!(got[1].2, Value::from("2"));
    }

    #[test]
    fn errors_name_the_place() {
        let c = Value::map([("vendor", "nvidia")]);
        assert_eq!(
            ops(
                c.clone(),
                pod(Value::map([("name", "c"), ("resources", "x")]))
            )
            .unwrap_err(),
            "pod spec.containers[0].resources is a str, not a map"
        );
        let named = Value::map([("vendor", "nvidia"), ("container", "d")]);
        assert_eq!(
            ops(named, pod(Value::map([("name", "c")]))).unwrap_err(),
            "the Pod has no container named 'd'"
        );
        assert_eq!(
            ops(c, Value::map([("spec", Value::Map(vec![]))])).unwrap_err(),
            "the Pod has no containers"
        );
    }

    #[test]
    fn exports_through_the_abi_glue() {
        use modelserving_plugin::{Hook, Response};
        let request = |hook: &str, config: Value| {
            let pod = pod(Value::map([("name", "c")]));
            builtins_kit::testing::request(hook, NAME, config, &Default::default(), pod)
        };
        let ok = modelserving_call(
            Hook::ValidateConfig,
            &request("ValidateConfig", Value::map([("vendor", "amd")])),
        )
        .unwrap();
        assert!(ok.is_empty());
        let bad = modelserving_call(Hook::ValidateConfig, &request("ValidateConfig", Value::Nil))
            .unwrap();
        assert_eq!(
            Response::decode(&bad).unwrap().error.as_deref(),
            Some("config.vendor: is required")
        );
        let cfg = Value::map([
            ("vendor", Value::from("amd")),
            ("tolerations", Value::Array(vec![])),
        ]);
        let r = modelserving_call(Hook::OnPodCreate, &request("OnPodCreate", cfg)).unwrap();
        assert_eq!(Response::decode(&r).unwrap().patch.len(), 1);
    }
}
