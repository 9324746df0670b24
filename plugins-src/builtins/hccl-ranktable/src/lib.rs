//! `hccl-ranktable`: each ServingGroup's HCCL rank table (Ascend NPUs), written by the
//! ServingGroup hook into an owned ConfigMap and mounted in the group's Pods.
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/hccl_ranktable.py` (its docstring is the specification);
//! both accept the same configs and give byte-identical responses: the same patch for
//! OnPodCreate, the same ConfigMap for OnServingGroupChange.
//!
//! * **OnPodCreate** mounts the optional ConfigMap `<servingGroup>-<configMapSuffix>` (volume
//!   `configMapSuffix`) so that its key `fileName` is `<mountPath>/<fileName>`, and sets
//!   `RANK_TABLE_FILE` to that path unless the container sets it.
//! * **OnServingGroupChange** writes that ConfigMap: the rank table (format 1.0) of the known
//!   Pods in the request's order, as compact JSON, `completed` when all `expectedPods` are
//!   known. A Pod is known once it has a Pod IP and a valid device annotation, read as strict
//!   JSON by Python's rules ([`builtins_kit::json`]): a map whose `devices` is a non-empty array
//!   of `{"device_id": "<1 to 4 digits>", "device_ip": "<IP>"}` (no id twice, by number),
//!   with an optional `server_id` (an IP; else the Pod's host IP, which must then be one); at
//!   most 65,536 bytes.
//!
//! Config (camelCase, unknown fields refused, nil = absent): `mountPath` (default
//! `/user/serverid/devindex/config`), `fileName` (`hccl.json`), `configMapSuffix`
//! (`ranktable`), `container` (the first one), `deviceAnnotation`
//! (`ascend.kubectl.kubernetes.io/ascend-910-configuration`).

use builtins_kit::group_files::{
    checked_str, config_map, file_name_problem, is_ip, GroupFileConfig,
};
use builtins_kit::json::{self, Json};
use builtins_kit::PodEdit;
use modelserving_plugin::config::Fields;
use modelserving_plugin::names::is_qualified_name;
use modelserving_plugin::{export_plugin, GroupPod, GroupRequest, Object, Op, Request, Value};

pub const NAME: &str = "hccl-ranktable";
pub const DEFAULT_MOUNT_PATH: &str = "/user/serverid/devindex/config";
pub const DEFAULT_FILE_NAME: &str = "hccl.json";
pub const DEFAULT_SUFFIX: &str = "ranktable";
pub const DEFAULT_ANNOTATION: &str = "ascend.kubectl.kubernetes.io/ascend-910-configuration";
pub const RANK_TABLE_ENV: &str = "RANK_TABLE_FILE";
pub const MAX_ANNOTATION_BYTES: usize = 65_536;
pub const TABLE_VERSION: &str = "1.0";

/// The validated config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub files: GroupFileConfig,
    pub file_name: String,
    pub device_annotation: String,
}

fn annotation_problem(key: &str) -> Option<String> {
    if is_qualified_name(key) {
        return None;
    }
    Some(format!("'{key}' is not an annotation key"))
}

impl Config {
    /// Validate a plugin config (nil = empty config).
    pub fn parse(config: &Value) -> Result<Config, String> {
        let mut f = Fields::config(config)?;
        let files = GroupFileConfig::read(&mut f, DEFAULT_MOUNT_PATH, DEFAULT_SUFFIX)?;
        let file_name = checked_str(&mut f, "fileName", DEFAULT_FILE_NAME, file_name_problem)?;
        let device_annotation = checked_str(
            &mut f,
            "deviceAnnotation",
            DEFAULT_ANNOTATION,
            annotation_problem,
        )?;
        f.finish()?;
        Ok(Config {
            files,
            file_name,
            device_annotation,
        })
    }
}

/// The devices of a device annotation: its `server_id` (when it has one) and the
/// `(device_id, device_ip)` pairs ordered by device id (numerically); `None` when it is not a
/// valid device annotation (the rules of the module documentation, Python's `parse_devices`).
pub fn parse_devices(text: &str) -> Option<(Option<String>, Vec<(String, String)>)> {
    if text.len() > MAX_ANNOTATION_BYTES {
        return None;
    }
    let value = json::parse(text)?;
    if !matches!(value, Json::Object(_)) {
        return None;
    }
    let server = match value.get("server_id") {
        None | Some(Json::Null) => None,
        Some(v) => Some(v.as_str().filter(|s| is_ip(s))?.to_owned()),
    };
    let devices = match value.get("devices") {
        Some(Json::Array(items)) if !items.is_empty() => items,
        _ => return None,
    };
    let mut found: Vec<(u32, &str, &str)> = Vec::with_capacity(devices.len());
    for device in devices {
        if !matches!(device, Json::Object(_)) {
            return None;
        }
        let id = device.get("device_id").and_then(Json::as_str)?;
        let ip = device.get("device_ip").and_then(Json::as_str)?;
        if !is_device_id(id) || !is_ip(ip) {
            return None;
        }
        let number = id.bytes().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        if found.iter().any(|(n, _, _)| *n == number) {
            return None;
        }
        found.push((number, id, ip));
    }
    found.sort_by_key(|(n, _, _)| *n);
    let devices = found
        .into_iter()
        .map(|(_, id, ip)| (id.to_owned(), ip.to_owned()))
        .collect();
    Some((server, devices))
}

/// 1 to 4 ASCII digits.
fn is_device_id(id: &str) -> bool {
    (1..=4).contains(&id.len()) && id.bytes().all(|c| c.is_ascii_digit())
}

/// `(server_id, devices)` of a known Pod; `None` while it is not known.
fn known(pod: &GroupPod<'_>, annotation: &str) -> Option<(String, Vec<(String, String)>)> {
    if !is_ip(pod.pod_ip) {
        return None;
    }
    let (server, devices) = parse_devices(pod.annotation(annotation).unwrap_or(""))?;
    let server = match server {
        Some(server) => server,
        None if is_ip(pod.host_ip) => pod.host_ip.to_owned(),
        None => return None,
    };
    Some((server, devices))
}

/// The rank table of the request's Pods, as the compact JSON Python's `json.dumps(table,
/// separators=(",", ":"))` writes: `{"status", "version", "server_count", "server_list":
/// [{"server_id", "container_ip", "device": [{"device_id", "device_ip", "rank_id"}]}]}`.
pub fn rank_table(req: &GroupRequest<'_>, annotation: &str) -> String {
    let mut list = String::new();
    let (mut servers, mut rank) = (0usize, 0usize);
    for pod in &req.pods {
        let (server_id, devices) = match known(pod, annotation) {
            Some(k) => k,
            None => continue,
        };
        if servers > 0 {
            list.push(',');
        }
        servers += 1;
        list.push_str("{\"server_id\":");
        json::write_str(&server_id, &mut list);
        list.push_str(",\"container_ip\":");
        json::write_str(pod.pod_ip, &mut list);
        list.push_str(",\"device\":[");
        for (i, (id, ip)) in devices.iter().enumerate() {
            if i > 0 {
                list.push(',');
            }
            list.push_str("{\"device_id\":");
            json::write_str(id, &mut list);
            list.push_str(",\"device_ip\":");
            json::write_str(ip, &mut list);
            list.push_str(",\"rank_id\":");
            json::write_decimal_str(rank, &mut list);
            list.push('}');
            rank += 1;
        }
        list.push_str("]}");
    }
    let expected = req.expected_pods;
    let complete = servers as i64 == expected && req.pods.len() as i64 == expected;
    let mut table = String::with_capacity(list.len() + 96);
    table.push_str("{\"status\":");
    json::write_str(
        if complete {
            "completed"
        } else {
            "initializing"
        },
        &mut table,
    );
    table.push_str(",\"version\":");
    json::write_str(TABLE_VERSION, &mut table);
    table.push_str(",\"server_count\":");
    json::write_decimal_str(servers, &mut table);
    table.push_str(",\"server_list\":[");
    table.push_str(&list);
    table.push_str("]}");
    table
}

/// The changes to one Pod of `serving_group` under `config`, recorded in `edit`.
pub fn edit_pod(config: &Config, serving_group: &str, edit: &mut PodEdit) -> Result<(), String> {
    let files = &config.files;
    let container = edit.container(files.container.as_deref())?;
    let file = config.file_name.as_str();
    edit.add_config_map_files(
        container,
        &files.config_map_suffix,
        &files.config_map_name(serving_group),
        &[(file, file)],
        &files.mount_path,
    )?;
    let mut path = files.mount_path.trim_end_matches('/').to_owned();
    path.push('/');
    path.push_str(file);
    edit.add_env(
        container,
        Value::map([
            ("name", Value::from(RANK_TABLE_ENV)),
            ("value", Value::from(path)),
        ]),
    )
}

pub fn on_pod_create(req: &Request) -> Result<Vec<Op>, String> {
    let config = Config::parse(&req.config)?;
    let mut edit = PodEdit::of_request(req)?;
    edit_pod(&config, req.serving_group, &mut edit)?;
    Ok(edit.into_ops())
}

pub fn on_serving_group_change(req: &GroupRequest) -> Result<Object, String> {
    let config = Config::parse(&req.config)?;
    let table = rank_table(req, &config.device_annotation);
    let name = config.files.config_map_name(req.serving_group);
    Ok(config_map(name, [(config.file_name, table)]))
}

pub fn validate_config(req: &Request) -> Result<(), String> {
    Config::parse(&req.config).map(|_| ())
}

export_plugin! {
    on_pod_create: on_pod_create,
    on_serving_group_change: on_serving_group_change,
    validate_config: validate_config,
}

#[cfg(test)]
mod tests {
    use super::*;
    use builtins_kit::testing::{group_request, request, Member, Place};
    use modelserving_plugin::{Hook, Response};

    fn parse(config: Value) -> Result<Config, String> {
        Config::parse(&config)
    }

    #[test]
    fn defaults_and_full_config() {
        let c = parse(Value::Nil).unwrap();
        assert_eq!(
            (
                c.files.mount_path.as_str(),
                c.files.config_map_suffix.as_str(),
                c.files.container.as_deref(),
                c.file_name.as_str(),
                c.device_annotation.as_str()
            ),
            (
                DEFAULT_MOUNT_PATH,
                DEFAULT_SUFFIX,
                None,
                DEFAULT_FILE_NAME,
                DEFAULT_ANNOTATION
            )
        );
        let c = parse(Value::map([
            ("mount_path", "/a"),
            ("fileName", "t.json"),
            ("configMapSuffix", "hccl"),
            ("container", "engine"),
            ("device_annotation", "example.com/npus"),
        ]))
        .unwrap();
        assert_eq!(c.files.mount_path, "/a");
        assert_eq!(c.file_name, "t.json");
        assert_eq!(c.files.config_map_name("g-0"), "g-0-hccl");
        assert_eq!(c.files.container.as_deref(), Some("engine"));
        assert_eq!(c.device_annotation, "example.com/npus");
    }

    #[test]
    fn refuses_what_the_python_model_refuses() {
        for (config, why) in [
            (Value::from(1), "config: must be a map, got int"),
            (
                Value::map([("mountPath", "etc")]),
                "config.mountPath: 'etc' is not an absolute path without ':'",
            ),
            (Value::map([("mountPath", "/a:b")]), "not an absolute path"),
            (
                Value::map([("mountPath", 1)]),
                "config.mountPath: must be a str, got int",
            ),
            (
                Value::map([("fileName", "a/b")]),
                "config.fileName: 'a/b' is not a file name (letters, digits, '-', '_' and '.')",
            ),
            (Value::map([("fileName", "..")]), "is not a file name"),
            (Value::map([("fileName", "")]), "is not a file name"),
            (
                Value::map([("configMapSuffix", "Rank")]),
                "config.configMapSuffix: 'Rank' is not a name suffix",
            ),
            (
                Value::map([("configMapSuffix", "a".repeat(41))]),
                "is not a name suffix",
            ),
            (
                Value::map([("container", true)]),
                "config.container: must be a str, got bool",
            ),
            (
                Value::map([("deviceAnnotation", "-x")]),
                "config.deviceAnnotation: '-x' is not an annotation key",
            ),
            (
                Value::map([("fileName", "a"), ("file_name", "b")]),
                "config.file_name: unknown field",
            ),
            (
                Value::map([("devices", "x")]),
                "config.devices: unknown field",
            ),
        ] {
            let err = parse(config.clone()).unwrap_err();
            assert!(err.contains(why), "{config}: {err:?} lacks {why:?}");
        }
    }

    fn devices(text: &str) -> Option<(Option<String>, Vec<(String, String)>)> {
        parse_devices(text)
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn device_annotations_by_the_python_rules() {
        let one =
            r#"{"devices": [{"device_id": "0", "device_ip": "1.2.3.4", "x": 1}], "y": [1e999]}"#;
        assert_eq!(devices(one), Some((None, pairs(&[("0", "1.2.3.4")]))));
        // Ordered by number, the text kept; server_id null is no server_id.
        let sorted = r#"{"server_id": null, "devices": [{"device_id": "10", "device_ip": "::1"},
            {"device_id": "007", "device_ip": "1.1.1.1"}, {"device_id": "9", "device_ip": "2.2.2.2"}]}"#;
        assert_eq!(
            devices(sorted),
            Some((
                None,
                pairs(&[("007", "1.1.1.1"), ("9", "2.2.2.2"), ("10", "::1")])
            ))
        );
        let server =
            r#"{"server_id": "10.0.0.9", "devices": [{"device_id": "1", "device_ip": "1.1.1.1"}]}"#;
        assert_eq!(devices(server).unwrap().0.as_deref(), Some("10.0.0.9"));
        let escaped = r#"{"devices": [{"device_id": "\u0031", "device_ip": "1.1.1.1"}]}"#;
        assert_eq!(devices(escaped).unwrap().1, pairs(&[("1", "1.1.1.1")]));
        for bad in [
            "",
            "[]",
            "{}",
            r#"{"devices": []}"#,
            r#"{"devices": {}}"#,
            r#"{"devices": [1]}"#,
            r#"{"devices": [{"device_id": "0"}]}"#,
            r#"{"devices": [{"device_id": 0, "device_ip": "1.1.1.1"}]}"#,
            r#"{"devices": [{"device_id": "12345", "device_ip": "1.1.1.1"}]}"#,
            r#"{"devices": [{"device_id": "", "device_ip": "1.1.1.1"}]}"#,
            r#"{"devices": [{"device_id": "-1", "device_ip": "1.1.1.1"}]}"#,
            r#"{"devices": [{"device_id": "١", "device_ip": "1.1.1.1"}]}"#,
            r#"{"devices": [{"device_id": "0", "device_ip": "1.1.1.1/8"}]}"#,
            r#"{"devices": [{"device_id": "0", "device_ip": "1"}]}"#,
            r#"{"devices": [{"device_id": "0", "device_ip": "1.1.1.1"}, {"device_id": "00", "device_ip": "1.1.1.2"}]}"#,
            r#"{"server_id": 5, "devices": [{"device_id": "0", "device_ip": "1.1.1.1"}]}"#,
            r#"{"server_id": "node-a", "devices": [{"device_id": "0", "device_ip": "1.1.1.1"}]}"#,
            r#"{"devices": [{"device_id": "0", "device_ip": "1.1.1.1"}], "devices": []}"#,
            r#"{"devices": [{"device_id": "0", "device_ip": "1.1.1.1"}], "x": NaN}"#,
            r#"{"devices": [{"device_id": "0", "device_ip": "1.1.1.1"}]} x"#,
            r#"{"devices": [{"device_id": "\ud800", "device_ip": "1.1.1.1"}]}"#,
        ] {
            assert_eq!(devices(bad), None, "{bad}");
        }
        // The size limit counts UTF-8 bytes.
        let padded = |n: usize| {
            let base = r#"{"devices": [{"device_id": "0", "device_ip": "1.1.1.1"}], "p": ""}"#;
            let pad = "é".repeat((n - base.len()) / 2) + &"x".repeat((n - base.len()) % 2);
            base.replace(r#""p": """#, &format!(r#""p": "{pad}""#))
        };
        assert_eq!(padded(MAX_ANNOTATION_BYTES).len(), MAX_ANNOTATION_BYTES);
        assert!(devices(&padded(MAX_ANNOTATION_BYTES)).is_some());
        assert!(devices(&padded(MAX_ANNOTATION_BYTES + 1)).is_none());
    }

    const NPUS: &str = r#"{"devices": [{"device_id": "1", "device_ip": "192.168.0.2"}, {"device_id": "0", "device_ip": "192.168.0.1"}]}"#;

    fn member<'a>(name: &'a str, pod_ip: &'a str, annotation: Option<&'a str>) -> Member<'a> {
        Member {
            name,
            role_name: "r",
            role_id: "r-0",
            host_ip: "10.0.0.1",
            pod_ip,
            annotations: annotation
                .map(|a| vec![(DEFAULT_ANNOTATION, a)])
                .unwrap_or_default(),
            ..Member::default()
        }
    }

    fn table(expected: i64, pods: &[Member<'_>]) -> String {
        let bytes = group_request(
            NAME,
            Value::Nil,
            Value::map([("kind", "ModelServing")]),
            "g-0",
            expected,
            pods,
        );
        let req = GroupRequest::decode(&bytes).unwrap();
        rank_table(&req, DEFAULT_ANNOTATION)
    }

    #[test]
    fn the_rank_table() {
        // json.dumps of the table, as hccl_ranktable.rank_table writes it.
        let one_server = r#"{"server_id":"10.0.0.1","container_ip":"10.1.0.1","device":[{"device_id":"0","device_ip":"192.168.0.1","rank_id":"0"},{"device_id":"1","device_ip":"192.168.0.2","rank_id":"1"}]}"#;
        let complete = format!(
            r#"{{"status":"completed","version":"1.0","server_count":"1","server_list":[{one_server}]}}"#
        );
        assert_eq!(table(1, &[member("a", "10.1.0.1", Some(NPUS))]), complete);
        // Not complete: a Pod without IP, one without devices, or more Pods than expected.
        let two = table(
            2,
            &[
                member("a", "10.1.0.1", Some(NPUS)),
                member("b", "", Some(NPUS)),
            ],
        );
        assert!(
            two.starts_with(r#"{"status":"initializing","version":"1.0","server_count":"1""#),
            "{two}"
        );
        let none = table(
            2,
            &[
                member("a", "10.1.0.1", None),
                member("b", "10.1.0.2", Some("{}")),
            ],
        );
        assert_eq!(
            none,
            r#"{"status":"initializing","version":"1.0","server_count":"0","server_list":[]}"#
        );
        let extra = table(
            1,
            &[member("a", "10.1.0.1", Some(NPUS)), member("b", "", None)],
        );
        assert!(extra.contains("initializing"), "{extra}");
        // Ranks count on across servers; no host IP and no server_id: not known.
        let mut no_host = member("c", "10.1.0.3", Some(NPUS));
        no_host.host_ip = "";
        let t = table(
            3,
            &[
                member("a", "10.1.0.1", Some(NPUS)),
                member("b", "10.1.0.2", Some(NPUS)),
                no_host,
            ],
        );
        assert!(
            t.contains(r#""server_count":"2""#) && t.contains(r#""rank_id":"3""#),
            "{t}"
        );
        assert!(!t.contains("10.1.0.3"), "{t}");
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

    fn run(config: Value, pod: Value) -> Result<Vec<(String, String, Value)>, String> {
        let config = parse(config).unwrap();
        let mut edit = PodEdit::new(pod);
        edit_pod(&config, "g-0", &mut edit)?;
        Ok(edit
            .ops()
            .iter()
            .map(|o| {
                (
                    o.op.as_str().to_owned(),
                    o.path.clone(),
                    o.value.clone().unwrap_or(Value::Nil),
                )
            })
            .collect())
    }

    #[test]
    fn mounts_the_table_and_points_the_env_at_it() {
        let ops = run(
            Value::map([("mountPath", "/etc/hccl//")]),
            pod(Value::map([("name", "c")])),
        )
        .unwrap();
        let paths: Vec<&str> = ops.iter().map(|(_, p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/spec/volumes",
                "/spec/containers/0/volumeMounts",
                "/spec/containers/0/env"
            ]
        );
        assert_eq!(
            ops[2].2,
            Value::array([Value::map([
                ("name", RANK_TABLE_ENV),
                ("value", "/etc/hccl/hccl.json")
            ])])
        );
        assert_eq!(
            ops[1].2,
            Value::array([Value::map([
                ("name", "ranktable"),
                ("mountPath", "/etc/hccl//")
            ])])
        );
        // The root as mount path; the user's RANK_TABLE_FILE is kept.
        let mine = Value::map([
            ("name", Value::from("c")),
            (
                "env",
                Value::array([Value::map([("name", RANK_TABLE_ENV), ("value", "/mine")])]),
            ),
        ]);
        let ops = run(Value::map([("mountPath", "/")]), pod(mine)).unwrap();
        assert_eq!(ops.len(), 2);
        let ops = run(
            Value::map([("mountPath", "/")]),
            pod(Value::map([("name", "c")])),
        )
        .unwrap();
        assert_eq!(
            ops[2].2,
            Value::array([Value::map([
                ("name", RANK_TABLE_ENV),
                ("value", "/hccl.json")
            ])])
        );
        assert_eq!(
            run(
                Value::map([("container", "x")]),
                pod(Value::map([("name", "c")]))
            )
            .unwrap_err(),
            "the Pod has no container named 'x'"
        );
    }

    #[test]
    fn exports_through_the_abi_glue() {
        assert_eq!(__MODELSERVING_ABI_VERSION, 3);
        let pod = pod(Value::map([("name", "c")]));
        let call = |hook: Hook, config: Value| {
            let bytes = request(hook.as_str(), NAME, config, &Place::default(), pod.clone());
            Response::decode(&modelserving_call(hook, &bytes).unwrap()).unwrap()
        };
        assert_eq!(call(Hook::ValidateConfig, Value::Nil), Response::default());
        assert_eq!(
            call(Hook::ValidateConfig, Value::map([("fileName", "/")]))
                .error
                .as_deref(),
            Some("config.fileName: '/' is not a file name (letters, digits, '-', '_' and '.')")
        );
        assert_eq!(call(Hook::OnPodCreate, Value::Nil).patch.len(), 3);
        assert!(modelserving_call(Hook::OnPodReady, &[]).is_none());
        let bytes = group_request(
            NAME,
            Value::Nil,
            Value::map([("kind", "ModelServing")]),
            "g-0",
            1,
            &[member("a", "10.1.0.1", Some(NPUS))],
        );
        let r = Response::decode(&modelserving_call(Hook::OnServingGroupChange, &bytes).unwrap())
            .unwrap();
        assert_eq!(r.objects.len(), 1);
        assert_eq!(
            r.objects[0].get("metadata"),
            Some(&Value::map([("name", "g-0-ranktable")]))
        );
        let bad = group_request(
            NAME,
            Value::map([("x", 1)]),
            Value::map([("kind", "ModelServing")]),
            "g-0",
            1,
            &[],
        );
        let r = Response::decode(&modelserving_call(Hook::OnServingGroupChange, &bad).unwrap())
            .unwrap();
        assert_eq!(r.error.as_deref(), Some("config.x: unknown field"));
    }
}
