//! `rdma-network`: what a Pod needs to use RDMA (InfiniBand / RoCE) for multi-node inference:
//! the RDMA device, locked memory, hugepages and a secondary network, on one container of every
//! Pod (entry and worker alike).
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/rdma_network.py`; both accept the same configs and give
//! byte-identical responses (patches and hook errors).
//!
//! Config (camelCase, unknown fields refused, nil = absent):
//!
//! * `resourceName`: the device plugin's resource, a qualified name with a prefix (default
//!   `rdma/rdma_shared_device_a`);
//! * `devices`: how many, 1 to 64 (default 1);
//! * `container`: the container to configure, by name (default the first);
//! * `ipcLock`: add the `IPC_LOCK` capability (default true);
//! * `hugepages`: `{pageSize: 2Mi | 1Gi, amount: <quantity>}`;
//! * `networks`: Multus NetworkAttachmentDefinitions, `name` or `namespace/name`, at least one,
//!   each once.
//!
//! The changes, in this order: the device limit (and request, when the container requests the
//! resource already); the hugepages limit (same rule), a `hugepages` emptyDir volume and its
//! mount at `/dev/hugepages` (unless a volume of that name, or a mount at that path, exists);
//! `IPC_LOCK` appended to `securityContext.capabilities.add` unless there (as `IPC_LOCK` or
//! `CAP_IPC_LOCK`); the networks merged into the `k8s.v1.cni.cncf.io/networks` annotation in
//! its comma form (an annotation in Multus's JSON form is an error).

use builtins_kit::{is_dns1123_label, is_quantity, Key, PodEdit, F, I};
use modelserving_plugin::config::Fields;
use modelserving_plugin::names::{is_dns1123_subdomain, is_qualified_name};
use modelserving_plugin::{export_plugin, Op, Request, Value};

pub const NAME: &str = "rdma-network";
pub const DEFAULT_RESOURCE: &str = "rdma/rdma_shared_device_a";
pub const MAX_DEVICES: i64 = 64;
pub const IPC_LOCK: &str = "IPC_LOCK";
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
const HUGEPAGES_VOLUME: &str = "hugepages";
const HUGEPAGES_MOUNT: &str = "/dev/hugepages";

/// Hugepages for the container: the page size (`2Mi` or `1Gi`) and the amount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hugepages {
    pub page_size: String,
    pub amount: String,
}

/// The validated config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub resource_name: String,
    pub devices: i64,
    pub container: Option<String>,
    pub ipc_lock: bool,
    pub hugepages: Option<Hugepages>,
    pub networks: Option<Vec<String>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            resource_name: DEFAULT_RESOURCE.to_owned(),
            devices: 1,
            container: None,
            ipc_lock: true,
            hugepages: None,
            networks: None,
        }
    }
}

/// Why `item` cannot name a NetworkAttachmentDefinition (`None` when it can): `name` or
/// `namespace/name`, the namespace a DNS-1123 label, the name a DNS-1123 subdomain.
pub fn network_problem(item: &str) -> Option<String> {
    let name = match item.split_once('/') {
        Some((namespace, name)) => {
            if !is_dns1123_label(namespace) {
                return Some(format!(
                    "'{item}': the namespace '{namespace}' is not a DNS-1123 label"
                ));
            }
            name
        }
        None => item,
    };
    if !is_dns1123_subdomain(name) {
        return Some(format!(
            "'{item}': the name '{name}' is not a DNS-1123 subdomain"
        ));
    }
    None
}

impl Config {
    /// Validate a plugin config (nil = empty config).
    pub fn parse(config: &Value) -> Result<Config, String> {
        let mut f = Fields::config(config)?;
        let mut out = Config::default();
        if let Some(name) = f.str("resourceName")? {
            if !name.contains('/') || !is_qualified_name(name) {
                return Err(format!(
                    "{}: '{name}' is not a resource name with a prefix (e.g. {DEFAULT_RESOURCE})",
                    f.loc_of("resourceName")
                ));
            }
            out.resource_name = name.to_owned();
        }
        if let Some(devices) = f.int("devices")? {
            if !(1..=MAX_DEVICES).contains(&devices) {
                return Err(format!(
                    "{}: must be from 1 to {MAX_DEVICES}, got {devices}",
                    f.loc_of("devices")
                ));
            }
            out.devices = devices;
        }
        out.container = f.str("container")?.map(str::to_owned);
        if let Some(ipc_lock) = f.bool("ipcLock")? {
            out.ipc_lock = ipc_lock;
        }
        if let Some(value) = f.get("hugepages") {
            out.hugepages = Some(hugepages(value, f.loc_of("hugepages"))?);
        }
        if let Some(items) = f.array("networks")? {
            out.networks = Some(networks(items, &f)?);
        }
        f.finish()?;
        Ok(out)
    }
}

fn hugepages(value: &Value, loc: String) -> Result<Hugepages, String> {
    let mut f = Fields::new(value, loc)?;
    let page_size = f.str("pageSize")?;
    let page_size = f.required("pageSize", page_size)?;
    if page_size != "2Mi" && page_size != "1Gi" {
        return Err(format!(
            "{}: must be '2Mi' or '1Gi', got '{page_size}'",
            f.loc_of("pageSize")
        ));
    }
    let amount = f.str("amount")?;
    let amount = f.required("amount", amount)?;
    if !is_quantity(amount) {
        return Err(format!(
            "{}: '{amount}' is not a resource quantity (e.g. 4Gi)",
            f.loc_of("amount")
        ));
    }
    f.finish()?;
    Ok(Hugepages {
        page_size: page_size.to_owned(),
        amount: amount.to_owned(),
    })
}

fn networks(items: &[Value], f: &Fields<'_>) -> Result<Vec<String>, String> {
    if items.is_empty() {
        return Err(format!(
            "{}: must have at least 1 item",
            f.loc_of("networks")
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let loc = f.loc_of_item("networks", i);
        let item = match item {
            Value::Str(s) => s,
            other => return Err(format!("{loc}: must be a str, got {}", other.type_name())),
        };
        if let Some(problem) = network_problem(item) {
            return Err(format!("{loc}: {problem}"));
        }
        if out.contains(item) {
            return Err(format!("{loc}: '{item}' is listed twice"));
        }
        out.push(item.clone());
    }
    Ok(out)
}

/// The path of a container's field.
fn container_path<'a>(container: usize, rest: &[Key<'a>]) -> Vec<Key<'a>> {
    let mut path = vec![F("spec"), F("containers"), I(container)];
    path.extend_from_slice(rest);
    path
}

fn add_hugepages(
    edit: &mut PodEdit,
    container: usize,
    hugepages: &Hugepages,
) -> Result<(), String> {
    let mut resource = String::from("hugepages-");
    resource.push_str(&hugepages.page_size);
    edit.set_amount(container, &resource, &hugepages.amount)?;
    let mut medium = String::from("HugePages-");
    medium.push_str(&hugepages.page_size);
    let volume = Value::map([
        ("name", Value::from(HUGEPAGES_VOLUME)),
        ("emptyDir", Value::map([("medium", medium)])),
    ]);
    edit.add_volume(container, volume, HUGEPAGES_MOUNT)
}

fn add_ipc_lock(edit: &mut PodEdit, container: usize) -> Result<(), String> {
    let path = container_path(
        container,
        &[F("securityContext"), F("capabilities"), F("add")],
    );
    edit.append_unless(&path, Value::from(IPC_LOCK), |cap| {
        matches!(cap.as_str(), Some("IPC_LOCK") | Some("CAP_IPC_LOCK"))
    })?;
    Ok(())
}

/// Stripped around the entries of the networks annotation (ASCII whitespace).
fn blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// The annotation's new value (`None` when it stays as it is): its entries, then the networks it
/// lacks, joined by ",". An error for an annotation in Multus's JSON form.
pub fn merged_networks(
    current: Option<&str>,
    networks: &[String],
) -> Result<Option<String>, String> {
    let current = current.unwrap_or("");
    if current.trim_matches(blank).starts_with('[') {
        let mut msg = String::from("the Pod's annotation ");
        msg.push_str(NETWORKS_ANNOTATION);
        msg.push_str(
            " is in Multus's JSON form, but this plugin adds networks in the comma form: list \
             the networks in one form (all in the Pod's JSON list and none in the plugin's \
             config, or all as names)",
        );
        return Err(msg);
    }
    let entries: Vec<&str> = current
        .split(',')
        .map(|e| e.trim_matches(blank))
        .filter(|e| !e.is_empty())
        .collect();
    let missing: Vec<&str> = networks
        .iter()
        .map(String::as_str)
        .filter(|n| !entries.contains(n))
        .collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let mut all = entries;
    all.extend(missing);
    Ok(Some(all.join(",")))
}

fn add_networks(edit: &mut PodEdit, networks: &[String]) -> Result<(), String> {
    let annotations = [F("metadata"), F("annotations")];
    let current = match edit.get(&[F("metadata"), F("annotations"), F(NETWORKS_ANNOTATION)]) {
        None => None,
        Some(Value::Str(s)) => Some(s.as_str()),
        Some(other) => {
            return Err(format!(
                "pod metadata.annotations.{NETWORKS_ANNOTATION} is a {}, not a str",
                other.type_name()
            ))
        }
    };
    if let Some(value) = merged_networks(current, networks)? {
        edit.merge_map(
            &annotations,
            &[(NETWORKS_ANNOTATION.to_owned(), Value::from(value))],
        )?;
    }
    Ok(())
}

/// The changes to one Pod under `config`, recorded in `edit`.
pub fn edit_pod(config: &Config, edit: &mut PodEdit) -> Result<(), String> {
    let container = edit.container(config.container.as_deref())?;
    edit.set_amount(
        container,
        &config.resource_name,
        &config.devices.to_string(),
    )?;
    if let Some(hugepages) = &config.hugepages {
        add_hugepages(edit, container, hugepages)?;
    }
    if config.ipc_lock {
        add_ipc_lock(edit, container)?;
    }
    if let Some(networks) = &config.networks {
        add_networks(edit, networks)?;
    }
    Ok(())
}

pub fn on_pod_create(req: &Request) -> Result<Vec<Op>, String> {
    let config = Config::parse(&req.config)?;
    let mut edit = PodEdit::of_request(req)?;
    edit_pod(&config, &mut edit)?;
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

    fn nets(items: &[&str]) -> Value {
        Value::array(items.iter().map(|s| Value::from(*s)))
    }

    #[test]
    fn defaults_and_full_config() {
        assert_eq!(parse(Value::Nil).unwrap(), Config::default());
        assert_eq!(
            parse(Value::map([
                ("devices", Value::Nil),
                ("hugepages", Value::Nil)
            ]))
            .unwrap(),
            Config::default()
        );
        let c = parse(Value::map([
            ("resource_name", Value::from("example.com/hca")),
            ("devices", Value::Int(64)),
            ("container", Value::from("engine")),
            ("ipc_lock", Value::Bool(false)),
            (
                "hugepages",
                Value::map([("page_size", "1Gi"), ("amount", "4Gi")]),
            ),
            ("networks", nets(&["rdma-net", "infra/ib0.a"])),
        ]))
        .unwrap();
        assert_eq!(
            c,
            Config {
                resource_name: "example.com/hca".to_owned(),
                devices: 64,
                container: Some("engine".to_owned()),
                ipc_lock: false,
                hugepages: Some(Hugepages {
                    page_size: "1Gi".to_owned(),
                    amount: "4Gi".to_owned()
                }),
                networks: Some(vec!["rdma-net".to_owned(), "infra/ib0.a".to_owned()]),
            }
        );
    }

    #[test]
    fn refuses_what_the_python_model_refuses() {
        for (config, why) in [
            (Value::from("x"), "config: must be a map, got str"),
            (
                Value::map([("resourceName", "rdma")]),
                "config.resourceName: 'rdma' is not a resource name with a prefix",
            ),
            (
                Value::map([("resourceName", "Rdma.io/x")]),
                "is not a resource name",
            ),
            (Value::map([("resourceName", 1)]), "must be a str, got int"),
            (
                Value::map([("devices", 0)]),
                "config.devices: must be from 1 to 64, got 0",
            ),
            (Value::map([("devices", 65)]), "got 65"),
            (
                Value::map([("devices", true)]),
                "config.devices: must be an int, got bool",
            ),
            (Value::map([("devices", 1.0)]), "must be an int, got float"),
            (
                Value::map([("container", 1)]),
                "config.container: must be a str",
            ),
            (
                Value::map([("ipcLock", "yes")]),
                "config.ipcLock: must be a bool",
            ),
            (
                Value::map([
                    ("ipcLock", Value::Bool(true)),
                    ("ipc_lock", Value::Bool(true)),
                ]),
                "config.ipc_lock: unknown field",
            ),
            (
                Value::map([("hugepages", "2Mi")]),
                "config.hugepages: must be a map, got str",
            ),
            (
                Value::map([("hugepages", Value::map([("amount", "1Gi")]))]),
                "config.hugepages.pageSize: is required",
            ),
            (
                Value::map([("hugepages", Value::map([("pageSize", "2Mi")]))]),
                "config.hugepages.amount: is required",
            ),
            (
                Value::map([(
                    "hugepages",
                    Value::map([("pageSize", "2M"), ("amount", "1")]),
                )]),
                "config.hugepages.pageSize: must be '2Mi' or '1Gi', got '2M'",
            ),
            (
                Value::map([(
                    "hugepages",
                    Value::map([("pageSize", "1Gi"), ("amount", "4 Gi")]),
                )]),
                "config.hugepages.amount: '4 Gi' is not a resource quantity",
            ),
            (
                Value::map([(
                    "hugepages",
                    Value::map([("pageSize", "1Gi"), ("amount", "4Gi"), ("size", "1")]),
                )]),
                "config.hugepages.size: unknown field",
            ),
            (
                Value::map([("networks", "a")]),
                "config.networks: must be an array",
            ),
            (
                Value::map([("networks", nets(&[]))]),
                "config.networks: must have at least 1 item",
            ),
            (
                Value::map([("networks", Value::array([Value::Nil]))]),
                "config.networks.0: must be a str, got nil",
            ),
            (
                Value::map([("networks", nets(&["a", "b", "a"]))]),
                "config.networks.2: 'a' is listed twice",
            ),
            (
                Value::map([("networks", nets(&["A"]))]),
                "'A': the name 'A' is not a DNS-1123 subdomain",
            ),
            (
                Value::map([("networks", nets(&["a.b/c"]))]),
                "'a.b/c': the namespace 'a.b' is not a DNS-1123 label",
            ),
            (
                Value::map([("networks", nets(&["a/b/c"]))]),
                "'a/b/c': the name 'b/c' is not a DNS-1123 subdomain",
            ),
            (
                Value::map([("networks", nets(&["/a"]))]),
                "the namespace ''",
            ),
            (Value::map([("networks", nets(&["a/"]))]), "the name ''"),
            (
                Value::map([("network", nets(&["a"]))]),
                "config.network: unknown field",
            ),
        ] {
            let err = parse(config.clone()).unwrap_err();
            assert!(err.contains(why), "{config}: {err:?} lacks {why:?}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(network_problem("ns/a.b"), None);
        assert!(network_problem("Ns/a").is_some());
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

    fn run(config: Value, pod: Value) -> Result<Vec<(String, String)>, String> {
        let config = parse(config).unwrap();
        let mut edit = PodEdit::new(pod);
        edit_pod(&config, &mut edit)?;
        Ok(edit
            .ops()
            .iter()
            .map(|o| (o.op.as_str().to_owned(), o.path.clone()))
            .collect())
    }

    fn s(op: &str, path: &str) -> (String, String) {
        (op.to_owned(), path.to_owned())
    }

    #[test]
    fn a_bare_pod_gets_everything_in_order() {
        let config = Value::map([
            (
                "hugepages",
                Value::map([("pageSize", "2Mi"), ("amount", "4Gi")]),
            ),
            ("networks", nets(&["a", "ns/b"])),
        ]);
        assert_eq!(
            run(config, pod(Value::map([("name", "engine")]))).unwrap(),
            [
                s("add", "/spec/containers/0/resources"),
                s("add", "/spec/containers/0/resources/limits/hugepages-2Mi"),
                s("add", "/spec/volumes"),
                s("add", "/spec/containers/0/volumeMounts"),
                s("add", "/spec/containers/0/securityContext"),
                s("add", "/metadata/annotations"),
            ]
        );
    }

    #[test]
    fn what_the_pod_has_is_kept_or_extended() {
        let container = Value::map([
            ("name", Value::from("engine")),
            (
                "resources",
                Value::map([(
                    "requests",
                    Value::map([("rdma/rdma_shared_device_a", "2"), ("hugepages-1Gi", "1Gi")]),
                )]),
            ),
            (
                "volumeMounts",
                Value::array([Value::map([
                    ("name", "mine"),
                    ("mountPath", "/dev/hugepages"),
                ])]),
            ),
            (
                "securityContext",
                Value::map([(
                    "capabilities",
                    Value::map([("add", Value::array([Value::from("CAP_IPC_LOCK")]))]),
                )]),
            ),
        ]);
        let mut p = pod(container);
        p.set(
            "metadata",
            Value::map([(
                "annotations",
                Value::map([(NETWORKS_ANNOTATION, " a ,, b")]),
            )]),
        );
        let config = Value::map([
            ("devices", Value::Int(2)),
            (
                "hugepages",
                Value::map([("pageSize", "1Gi"), ("amount", "8Gi")]),
            ),
            ("networks", nets(&["b", "c"])),
        ]);
        assert_eq!(
            run(config, p).unwrap(),
            [
                s("add", "/spec/containers/0/resources/limits"),
                s(
                    "add",
                    "/spec/containers/0/resources/requests/rdma~1rdma_shared_device_a"
                ),
                s("add", "/spec/containers/0/resources/limits/hugepages-1Gi"),
                s("add", "/spec/containers/0/resources/requests/hugepages-1Gi"),
                s("add", "/spec/volumes"),
                s("add", "/metadata/annotations/k8s.v1.cni.cncf.io~1networks"),
            ]
        );
    }

    #[test]
    fn the_networks_annotation() {
        let n = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            merged_networks(None, &n(&["a", "b"])),
            Ok(Some("a,b".into()))
        );
        assert_eq!(merged_networks(Some(" "), &n(&["a"])), Ok(Some("a".into())));
        assert_eq!(merged_networks(Some("a, b"), &n(&["b", "a"])), Ok(None));
        assert_eq!(
            merged_networks(Some("x,\n a\t"), &n(&["b", "a"])),
            Ok(Some("x,a,b".into()))
        );
        let err = merged_networks(Some(" [{\"name\": \"a\"}]"), &n(&["a"])).unwrap_err();
        assert!(err.contains("Multus's JSON form"), "{err}");
        let mut p = pod(Value::map([("name", "c")]));
        p.set(
            "metadata",
            Value::map([("annotations", Value::map([(NETWORKS_ANNOTATION, 1)]))]),
        );
        let config = Value::map([("networks", nets(&["a"])), ("ipcLock", Value::Bool(false))]);
        assert_eq!(
            run(config, p).unwrap_err(),
            "pod metadata.annotations.k8s.v1.cni.cncf.io/networks is a int, not a str"
        );
    }

    #[test]
    fn pod_errors() {
        let config = Value::map([("container", "x")]);
        assert_eq!(
            run(config, pod(Value::map([("name", "c")]))).unwrap_err(),
            "the Pod has no container named 'x'"
        );
        let bad = pod(Value::map([("name", "c"), ("resources", "x")]));
        assert_eq!(
            run(Value::Nil, bad).unwrap_err(),
            "pod spec.containers[0].resources is a str, not a map"
        );
    }

    #[test]
    fn exports_through_the_abi_glue() {
        let request = |hook: &str, config: Value| {
            let pod = pod(Value::map([("name", "c")]));
            builtins_kit::testing::request(hook, NAME, config, &Default::default(), pod)
        };
        let ok = modelserving_call(Hook::ValidateConfig, &request("ValidateConfig", Value::Nil))
            .unwrap();
        assert!(ok.is_empty());
        let bad = modelserving_call(
            Hook::ValidateConfig,
            &request("ValidateConfig", Value::map([("devices", 0)])),
        )
        .unwrap();
        assert_eq!(
            Response::decode(&bad).unwrap().error.as_deref(),
            Some("config.devices: must be from 1 to 64, got 0")
        );
        let r = modelserving_call(Hook::OnPodCreate, &request("OnPodCreate", Value::Nil)).unwrap();
        assert_eq!(Response::decode(&r).unwrap().patch.len(), 2);
        assert!(modelserving_call(Hook::OnPodReady, &[]).is_none());
    }
}
