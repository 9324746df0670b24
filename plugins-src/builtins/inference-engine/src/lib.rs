//! `inference-engine`: what an inference engine's Pods need besides its image and command.
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/inference_engine.py`; both accept the same configs and
//! produce byte-identical patches and errors.
//!
//! On every Pod (entry and worker), in the configured container (default: the first):
//!
//! 1. env from the downward API, each appended unless the container has a var of that name:
//!    `POD_IP`, `POD_NAME`, `POD_NAMESPACE`, and for vLLM `VLLM_HOST_IP`;
//! 2. the shared-memory volume `dshm` (unless a volume of that name exists) and its mount at
//!    `/dev/shm` (unless a mount there exists).
//!
//! On the entry Pod only:
//!
//! 3. the port `http` unless a port has that number or that name;
//! 4. a `startupProbe` and a `readinessProbe` on the health path, each only when there is none.
//!
//! Config (camelCase, unknown fields refused, nil = absent): `engine` (required: `vllm`,
//! `sglang` or `trt-llm`), `port` (1..=65535; 8000, or 30000 for sglang), `healthPath`
//! (starts with `/`, no whitespace, at most 256 characters; `/health`), `startupTimeoutSeconds`
//! (10..=86400; 1800), `container` (a name), `shmSize` (a quantity).

use builtins_kit::{int_field, is_quantity, str_field, Key, PodEdit, F};
use modelserving_plugin::config::Fields;
use modelserving_plugin::{export_plugin, Op, Request, Value};

pub const NAME: &str = "inference-engine";
pub const DEFAULT_HEALTH_PATH: &str = "/health";
pub const MAX_HEALTH_PATH: usize = 256;
const PORT_NAME: &str = "http";
const STARTUP_PERIOD_SECONDS: i64 = 10;
const READINESS_PERIOD_SECONDS: i64 = 5;
const READINESS_FAILURE_THRESHOLD: i64 = 3;

/// The engines the plugin knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Vllm,
    Sglang,
    TrtLlm,
}

impl Engine {
    fn parse(name: &str) -> Option<Engine> {
        match name {
            "vllm" => Some(Engine::Vllm),
            "sglang" => Some(Engine::Sglang),
            "trt-llm" => Some(Engine::TrtLlm),
            _ => None,
        }
    }

    /// The port the engine's server listens on by default.
    pub fn default_port(self) -> i64 {
        match self {
            Engine::Sglang => 30000,
            Engine::Vllm | Engine::TrtLlm => 8000,
        }
    }
}

/// The validated config, defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub engine: Engine,
    pub port: i64,
    pub health_path: String,
    pub startup_timeout_seconds: i64,
    pub container: Option<String>,
    pub shm_size: Option<String>,
}

/// Python's `str.isspace`: Unicode White_Space plus the separators U+001C..U+001F.
pub fn is_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Why `path` cannot be the probes' path (`None` when it can); the host's texts.
pub fn health_path_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some(format!("'{path}' does not start with '/'"));
    }
    if path.chars().any(is_whitespace) {
        return Some("the path contains whitespace".to_owned());
    }
    let chars = path.chars().count();
    if chars > MAX_HEALTH_PATH {
        return Some(format!(
            "the path has {chars} characters, more than {MAX_HEALTH_PATH}"
        ));
    }
    None
}

/// An optional int field within `low..=high`.
fn int_in(f: &mut Fields<'_>, name: &str, low: i64, high: i64) -> Result<Option<i64>, String> {
    match f.int(name)? {
        Some(v) if v < low || v > high => Err(format!(
            "{}: must be between {low} and {high}, got {v}",
            f.loc_of(name)
        )),
        other => Ok(other),
    }
}

impl Config {
    /// Validate a plugin config (nil counts as an empty config, which lacks `engine`).
    pub fn parse(config: &Value) -> Result<Config, String> {
        let mut f = Fields::config(config)?;
        let engine = f.str("engine")?;
        let engine = f.required("engine", engine)?;
        let engine = Engine::parse(engine).ok_or_else(|| {
            format!(
                "{}: must be 'vllm', 'sglang' or 'trt-llm', got '{engine}'",
                f.loc_of("engine")
            )
        })?;
        let port = int_in(&mut f, "port", 1, 65535)?;
        let health_path = f.str("healthPath")?.unwrap_or(DEFAULT_HEALTH_PATH);
        if let Some(problem) = health_path_problem(health_path) {
            return Err(format!("{}: {problem}", f.loc_of("healthPath")));
        }
        let startup = int_in(&mut f, "startupTimeoutSeconds", 10, 86400)?;
        let container = f.str("container")?;
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
            engine,
            port: port.unwrap_or_else(|| engine.default_port()),
            health_path: health_path.to_owned(),
            startup_timeout_seconds: startup.unwrap_or(1800),
            container: container.map(str::to_owned),
            shm_size: shm_size.map(str::to_owned),
        })
    }
}

/// `path` under the container's path.
fn at<'a>(container: &[Key<'a>], field: &'a str) -> Vec<Key<'a>> {
    let mut path = container.to_vec();
    path.push(F(field));
    path
}

/// An env var from the downward API.
fn field_env(name: &str, field_path: &str) -> Value {
    Value::map([
        ("name", Value::from(name)),
        (
            "valueFrom",
            Value::map([("fieldRef", Value::map([("fieldPath", field_path)]))]),
        ),
    ])
}

fn add_env(config: &Config, edit: &mut PodEdit, container: usize) -> Result<(), String> {
    let mut wanted = vec![
        ("POD_IP", "status.podIP"),
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ];
    if config.engine == Engine::Vllm {
        wanted.push(("VLLM_HOST_IP", "status.podIP"));
    }
    for (name, field_path) in wanted {
        edit.add_env(container, field_env(name, field_path))?;
    }
    Ok(())
}

/// The `http` port, unless the engine's port or the name is taken. A port named `http` on
/// another number, with the engine's port not declared at all, is refused when a probe is still
/// to be added: it would probe a port nothing declares, and the name cannot be used twice.
fn add_port(config: &Config, edit: &mut PodEdit, container: &[Key<'_>]) -> Result<(), String> {
    let items = edit
        .get(&at(container, "ports"))
        .and_then(Value::as_array)
        .unwrap_or(&[]);
    let declared = items
        .iter()
        .any(|p| int_field(p, "containerPort") == Some(config.port));
    let named = items
        .iter()
        .any(|p| str_field(p, "name") == Some(PORT_NAME));
    let adds_probe = ["startupProbe", "readinessProbe"]
        .iter()
        .any(|probe| edit.get(&at(container, probe)).is_none());
    if named && !declared && adds_probe {
        return Err(format!(
            "the container has a port named '{PORT_NAME}' that is not the engine's port {} \
             (the probes would miss the server); set the plugin's port to it, or rename that \
             port",
            config.port
        ));
    }
    let port = Value::map([
        ("name", Value::from(PORT_NAME)),
        ("containerPort", Value::Int(config.port)),
        ("protocol", Value::from("TCP")),
    ]);
    edit.append_unless(&at(container, "ports"), port, |p| {
        int_field(p, "containerPort") == Some(config.port)
            || str_field(p, "name") == Some(PORT_NAME)
    })?;
    Ok(())
}

fn probe(config: &Config, period: i64, failures: i64) -> Value {
    Value::map([
        (
            "httpGet",
            Value::map([
                ("path", Value::from(config.health_path.as_str())),
                ("port", Value::Int(config.port)),
            ]),
        ),
        ("periodSeconds", Value::Int(period)),
        ("failureThreshold", Value::Int(failures)),
    ])
}

fn add_probes(config: &Config, edit: &mut PodEdit, container: &[Key<'_>]) -> Result<(), String> {
    let startup_failures =
        (config.startup_timeout_seconds + STARTUP_PERIOD_SECONDS - 1) / STARTUP_PERIOD_SECONDS;
    edit.put_if_absent(
        &at(container, "startupProbe"),
        probe(config, STARTUP_PERIOD_SECONDS, startup_failures),
    )?;
    edit.put_if_absent(
        &at(container, "readinessProbe"),
        probe(
            config,
            READINESS_PERIOD_SECONDS,
            READINESS_FAILURE_THRESHOLD,
        ),
    )?;
    Ok(())
}

/// The patch for one Pod under `config`.
pub fn patch_pod(config: &Config, edit: &mut PodEdit, is_entry: bool) -> Result<(), String> {
    let index = edit.container(config.container.as_deref())?;
    add_env(config, edit, index)?;
    edit.add_shared_memory(index, config.shm_size.as_deref())?;
    let container = [F("spec"), F("containers"), Key::I(index)];
    if is_entry {
        add_port(config, edit, &container)?;
        add_probes(config, edit, &container)?;
    }
    Ok(())
}

pub fn on_pod_create(req: &Request) -> Result<Vec<Op>, String> {
    let config = Config::parse(&req.config)?;
    let mut edit = PodEdit::of_request(req)?;
    patch_pod(&config, &mut edit, req.is_entry)?;
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
    use modelserving_plugin::{Hook, Response};

    fn parse(config: Value) -> Result<Config, String> {
        Config::parse(&config)
    }

    fn config(engine: &str) -> Config {
        parse(Value::map([("engine", engine)])).unwrap()
    }

    #[test]
    fn defaults_by_engine() {
        let c = config("vllm");
        assert_eq!(
            c,
            Config {
                engine: Engine::Vllm,
                port: 8000,
                health_path: "/health".to_owned(),
                startup_timeout_seconds: 1800,
                container: None,
                shm_size: None,
            }
        );
        assert_eq!(config("sglang").port, 30000);
        assert_eq!(config("trt-llm").port, 8000);
        let c = parse(Value::map([
            ("engine", Value::from("sglang")),
            ("port", Value::Int(9000)),
            ("health_path", Value::from("/v1/models")),
            ("startupTimeoutSeconds", Value::Int(10)),
            ("container", Value::from("engine")),
            ("shm_size", Value::from("16Gi")),
            ("other", Value::Nil),
        ]))
        .unwrap();
        assert_eq!(
            (c.port, c.health_path.as_str(), c.startup_timeout_seconds),
            (9000, "/v1/models", 10)
        );
        assert_eq!(
            (c.container.as_deref(), c.shm_size.as_deref()),
            (Some("engine"), Some("16Gi"))
        );
        let long = format!("/{}", "é".repeat(MAX_HEALTH_PATH - 1));
        assert!(parse(Value::map([
            ("engine", "vllm"),
            ("healthPath", long.as_str())
        ]))
        .is_ok());
        for (port, timeout) in [(1, 10), (65535, 86400)] {
            let c = parse(Value::map([
                ("engine", Value::from("vllm")),
                ("port", Value::Int(port)),
                ("startupTimeoutSeconds", Value::Int(timeout)),
            ]))
            .unwrap();
            assert_eq!((c.port, c.startup_timeout_seconds), (port, timeout));
        }
    }

    #[test]
    fn refuses_what_the_python_model_refuses() {
        let with = |k: &str, v: Value| Value::map([("engine", Value::from("vllm")), (k, v)]);
        for (config, why) in [
            (Value::Nil, "config.engine: is required"),
            (
                Value::map([("engine", Value::Nil)]),
                "config.engine: is required",
            ),
            (Value::array([1]), "config: must be a map, got array"),
            (Value::map([("engine", "VLLM")]), "got 'VLLM'"),
            (
                Value::map([("engine", 1)]),
                "config.engine: must be a str, got int",
            ),
            (
                with("port", Value::Int(0)),
                "config.port: must be between 1 and 65535, got 0",
            ),
            (
                with("port", Value::Int(65536)),
                "config.port: must be between",
            ),
            (
                with("port", Value::Bool(true)),
                "config.port: must be an int, got bool",
            ),
            (
                with("port", Value::Float(8000.0)),
                "config.port: must be an int, got float",
            ),
            (
                with("port", Value::from("8000")),
                "config.port: must be an int, got str",
            ),
            (
                with("port", Value::UInt(u64::MAX)),
                "config.port: must be an int",
            ),
            (
                with("healthPath", Value::from("health")),
                "does not start with '/'",
            ),
            (
                with("healthPath", Value::from("")),
                "does not start with '/'",
            ),
            (
                with("healthPath", Value::from("/a b")),
                "contains whitespace",
            ),
            (
                with("healthPath", Value::from("/a\u{1f}")),
                "contains whitespace",
            ),
            (
                with("healthPath", Value::from("/a\u{3000}")),
                "contains whitespace",
            ),
            (
                with("healthPath", Value::from(format!("/{}", "x".repeat(256)))),
                "the path has 257 characters, more than 256",
            ),
            (
                with("healthPath", Value::Int(1)),
                "config.healthPath: must be a str",
            ),
            (
                with("startupTimeoutSeconds", Value::Int(9)),
                "between 10 and 86400, got 9",
            ),
            (
                with("startupTimeoutSeconds", Value::Int(86401)),
                "got 86401",
            ),
            (
                with("container", Value::Int(1)),
                "config.container: must be a str",
            ),
            (
                with("shmSize", Value::from("1GiB")),
                "'1GiB' is not a valid quantity",
            ),
            (
                with("shmSize", Value::from("-1Gi")),
                "is not a valid quantity",
            ),
            (
                with("shmSize", Value::Int(1)),
                "config.shmSize: must be a str",
            ),
            (with("extra", Value::Int(1)), "config.extra: unknown field"),
            (
                Value::map([("engine", "vllm"), ("shmSize", "1Gi"), ("shm_size", "2Gi")]),
                "config.shm_size: unknown field",
            ),
        ] {
            let err = parse(config.clone()).unwrap_err();
            assert!(err.contains(why), "{config}: {err:?} lacks {why:?}");
        }
    }

    #[test]
    fn whitespace_is_pythons_isspace() {
        for c in [
            '\t', '\n', '\u{b}', '\u{c}', '\r', '\u{1c}', '\u{1f}', ' ', '\u{85}', '\u{a0}',
        ] {
            assert!(is_whitespace(c), "{c:?}");
        }
        for c in [
            '\u{1680}', '\u{2000}', '\u{200a}', '\u{2028}', '\u{2029}', '\u{202f}',
        ] {
            assert!(is_whitespace(c), "{c:?}");
        }
        for c in ['\u{205f}', '\u{3000}'] {
            assert!(is_whitespace(c), "{c:?}");
        }
        for c in [
            '\u{0}', '\u{1b}', '\u{7f}', '\u{200b}', '\u{180e}', '\u{feff}', 'x', '/',
        ] {
            assert!(!is_whitespace(c), "{c:?}");
        }
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

    fn ops(config: &Config, pod: Value, is_entry: bool) -> Result<Vec<(String, String)>, String> {
        let mut edit = PodEdit::new(pod);
        patch_pod(config, &mut edit, is_entry)?;
        Ok(edit
            .into_ops()
            .iter()
            .map(|o| (o.op.as_str().to_owned(), o.path.clone()))
            .collect())
    }

    fn adds(paths: &[&str]) -> Vec<(String, String)> {
        paths
            .iter()
            .map(|p| ("add".to_owned(), (*p).to_owned()))
            .collect()
    }

    #[test]
    fn a_bare_entry_pod_gets_everything() {
        let c = config("vllm");
        let mut edit = PodEdit::new(pod(Value::map([("name", "engine")])));
        patch_pod(&c, &mut edit, true).unwrap();
        let got: Vec<(String, String)> = edit
            .ops()
            .iter()
            .map(|o| (o.op.as_str().to_owned(), o.path.clone()))
            .collect();
        assert_eq!(
            got,
            adds(&[
                "/spec/containers/0/env",
                "/spec/containers/0/env/-",
                "/spec/containers/0/env/-",
                "/spec/containers/0/env/-",
                "/spec/volumes",
                "/spec/containers/0/volumeMounts",
                "/spec/containers/0/ports",
                "/spec/containers/0/startupProbe",
                "/spec/containers/0/readinessProbe",
            ])
        );
        let pod = edit.pod();
        let c0 = &pod
            .get("spec")
            .unwrap()
            .get("containers")
            .unwrap()
            .as_array()
            .unwrap()[0];
        assert_eq!(
            c0.get("startupProbe").unwrap(),
            &Value::map([
                (
                    "httpGet",
                    Value::map([("path", Value::from("/health")), ("port", Value::Int(8000))])
                ),
                ("periodSeconds", Value::Int(10)),
                ("failureThreshold", Value::Int(180)),
            ])
        );
        assert_eq!(
            c0.get("env").unwrap().as_array().unwrap()[3],
            field_env("VLLM_HOST_IP", "status.podIP")
        );
        assert_eq!(
            pod.get("spec").unwrap().get("volumes").unwrap(),
            &Value::array([Value::map([
                ("name", Value::from("dshm")),
                ("emptyDir", Value::map([("medium", "Memory")]))
            ])])
        );
    }

    #[test]
    fn a_worker_gets_env_and_shared_memory_only() {
        let c = parse(Value::map([("engine", "sglang"), ("shmSize", "8Gi")])).unwrap();
        assert_eq!(
            ops(&c, pod(Value::map([("name", "engine")])), false).unwrap(),
            adds(&[
                "/spec/containers/0/env",
                "/spec/containers/0/env/-",
                "/spec/containers/0/env/-",
                "/spec/volumes",
                "/spec/containers/0/volumeMounts",
            ])
        );
    }

    #[test]
    fn what_the_user_wrote_is_kept() {
        let c = parse(Value::map([
            ("engine", Value::from("trt-llm")),
            ("startupTimeoutSeconds", Value::Int(15)),
        ]))
        .unwrap();
        let container = Value::map([
            ("name", Value::from("engine")),
            (
                "env",
                Value::array([Value::map([("name", "POD_NAME"), ("value", "x")])]),
            ),
            (
                "volumeMounts",
                Value::array([Value::map([("name", "mine"), ("mountPath", "/dev/shm")])]),
            ),
            (
                "ports",
                Value::array([Value::map([
                    ("name", Value::from("api")),
                    ("containerPort", Value::Int(8000)),
                ])]),
            ),
            ("readinessProbe", Value::map([("exec", Value::Nil)])),
        ]);
        let mut edit = PodEdit::new(pod(container));
        patch_pod(&c, &mut edit, true).unwrap();
        let got: Vec<&str> = edit.ops().iter().map(|o| o.path.as_str()).collect();
        assert_eq!(
            got,
            [
                "/spec/containers/0/env/-",
                "/spec/containers/0/env/-",
                "/spec/volumes",
                "/spec/containers/0/startupProbe",
            ]
        );
        let startup = edit.ops()[3].value.clone().unwrap();
        assert_eq!(startup.get("failureThreshold"), Some(&Value::Int(2)));
        // a port named http with another number is an error: the probes would miss it
        let named = Value::map([
            ("name", Value::from("engine")),
            (
                "ports",
                Value::array([Value::map([
                    ("name", Value::from("http")),
                    ("containerPort", Value::Int(1)),
                ])]),
            ),
        ]);
        let err = ops(&c, pod(named.clone()), true).unwrap_err();
        assert!(
            err.starts_with(
                "the container has a port named 'http' that is not the engine's port 8000"
            ),
            "{err}"
        );
        // workers get no port, so no check
        assert!(ops(&c, pod(named), false).is_ok());
    }

    #[test]
    fn errors_name_the_cause() {
        let mut c = config("vllm");
        c.container = Some("sidecar".to_owned());
        assert_eq!(
            ops(&c, pod(Value::map([("name", "engine")])), true).unwrap_err(),
            "the Pod has no container named 'sidecar'"
        );
        let c = config("vllm");
        assert_eq!(
            ops(&c, pod(Value::map([("env", "x")])), true).unwrap_err(),
            "pod spec.containers[0].env is a str, not an array"
        );
        assert_eq!(
            ops(&c, Value::map([("spec", Value::Map(vec![]))]), true).unwrap_err(),
            "the Pod has no containers"
        );
    }

    #[test]
    fn exports_through_the_abi_glue() {
        let request = |hook: &str, config: Value, is_entry: bool| {
            let place = builtins_kit::testing::Place {
                is_entry,
                ..Default::default()
            };
            let pod = pod(Value::map([("name", "engine")]));
            builtins_kit::testing::request(hook, NAME, config, &place, pod)
        };
        let cfg = Value::map([("engine", "vllm")]);
        let ok = modelserving_call(
            Hook::ValidateConfig,
            &request("ValidateConfig", cfg.clone(), false),
        )
        .unwrap();
        assert!(ok.is_empty());
        let bad = modelserving_call(
            Hook::ValidateConfig,
            &request("ValidateConfig", Value::Nil, false),
        )
        .unwrap();
        assert_eq!(
            Response::decode(&bad).unwrap().error.as_deref(),
            Some("config.engine: is required")
        );
        for (is_entry, n) in [(true, 9), (false, 6)] {
            let r = modelserving_call(
                Hook::OnPodCreate,
                &request("OnPodCreate", cfg.clone(), is_entry),
            )
            .unwrap();
            assert_eq!(Response::decode(&r).unwrap().patch.len(), n);
        }
        assert!(modelserving_call(Hook::OnPodReady, &[]).is_none());
    }
}
