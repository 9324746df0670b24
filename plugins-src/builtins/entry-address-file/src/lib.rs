//! `entry-address-file`: the address of its role replica's entry Pod, as files in every Pod.
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/entry_address_file.py` (its docstring is the
//! specification); both accept the same configs and give byte-identical responses: the same
//! patch for OnPodCreate, the same ConfigMap for OnServingGroupChange.
//!
//! * **OnServingGroupChange** writes the ConfigMap `<servingGroup>-<configMapSuffix>` with two
//!   keys per role replica that has a Pod in the request: `<roleId>`, the entry Pod's IP once
//!   it has one (2 to 45 of `0-9 a-f A-F . :`), else its DNS name
//!   `<servingGroup>-<roleId>-0.<namespace>`; and `<roleId>.json`, `{"dns":...,"ip":...}` as
//!   Python's `json.dumps` writes it (compact, ASCII).
//! * **OnPodCreate** mounts that ConfigMap (an optional volume named `configMapSuffix`) at
//!   `mountPath`, the Pod's `<roleId>` key as the file `address` and `<roleId>.json` as
//!   `address.json`.
//!
//! Config (camelCase, unknown fields refused, nil = absent): `mountPath` (default
//! `/etc/modelserving/entry`), `configMapSuffix` (`entry-address`), `container` (the first
//! one).

use builtins_kit::group_files::{is_ip, GroupFileConfig};
use builtins_kit::json;
use builtins_kit::PodEdit;
use modelserving_plugin::config::Fields;
use modelserving_plugin::{export_plugin, GroupRequest, Object, Op, Request, Value};

pub const NAME: &str = "entry-address-file";
pub const DEFAULT_MOUNT_PATH: &str = "/etc/modelserving/entry";
pub const DEFAULT_SUFFIX: &str = "entry-address";
pub const ADDRESS_FILE: &str = "address";
pub const JSON_FILE: &str = "address.json";

/// The validated config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub files: GroupFileConfig,
}

impl Config {
    /// Validate a plugin config (nil = empty config).
    pub fn parse(config: &Value) -> Result<Config, String> {
        let mut f = Fields::config(config)?;
        let files = GroupFileConfig::read(&mut f, DEFAULT_MOUNT_PATH, DEFAULT_SUFFIX)?;
        f.finish()?;
        Ok(Config { files })
    }
}

/// `key` + `.json`.
fn json_key(role_id: &str) -> String {
    let mut key = String::with_capacity(role_id.len() + 5);
    key.push_str(role_id);
    key.push_str(".json");
    key
}

/// The ConfigMap `name` with two keys per role replica that has a Pod in the request, in the
/// order the replicas first appear.
pub fn entry_addresses(req: &GroupRequest<'_>, name: String) -> Object {
    let namespace = req.namespace();
    // (roleId, the entry Pod's IP or ""), as Python's dict: first position, last value.
    let mut ips: Vec<(&str, &str)> = Vec::new();
    for pod in &req.pods {
        let at = match ips.iter().position(|(id, _)| *id == pod.role_id) {
            Some(at) => at,
            None => {
                ips.push((pod.role_id, ""));
                ips.len() - 1
            }
        };
        if pod.is_entry && is_ip(pod.pod_ip) {
            ips[at].1 = pod.pod_ip;
        }
    }
    let mut object = Object::config_map(name);
    for (role_id, ip) in ips {
        let mut dns = String::with_capacity(req.serving_group.len() + role_id.len() + 16);
        dns.push_str(req.serving_group);
        dns.push('-');
        dns.push_str(role_id);
        dns.push_str("-0.");
        dns.push_str(namespace);
        let mut file = String::with_capacity(dns.len() + ip.len() + 16);
        file.push_str("{\"dns\":");
        json::write_str(&dns, &mut file);
        file.push_str(",\"ip\":");
        json::write_str(ip, &mut file);
        file.push('}');
        object.set_data(role_id, if ip.is_empty() { dns } else { ip.to_owned() });
        object.set_data(json_key(role_id), file);
    }
    object
}

/// The changes to one Pod under `config`, recorded in `edit`.
pub fn edit_pod(
    config: &Config,
    serving_group: &str,
    role_id: &str,
    edit: &mut PodEdit,
) -> Result<(), String> {
    let files = &config.files;
    let container = edit.container(files.container.as_deref())?;
    let json_key = json_key(role_id);
    edit.add_config_map_files(
        container,
        &files.config_map_suffix,
        &files.config_map_name(serving_group),
        &[(role_id, ADDRESS_FILE), (&json_key, JSON_FILE)],
        &files.mount_path,
    )
}

pub fn on_pod_create(req: &Request) -> Result<Vec<Op>, String> {
    let config = Config::parse(&req.config)?;
    let mut edit = PodEdit::of_request(req)?;
    edit_pod(&config, req.serving_group, req.role_id, &mut edit)?;
    Ok(edit.into_ops())
}

pub fn on_serving_group_change(req: &GroupRequest) -> Result<Object, String> {
    let config = Config::parse(&req.config)?;
    let name = config.files.config_map_name(req.serving_group);
    Ok(entry_addresses(req, name))
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

    #[test]
    fn config() {
        let c = Config::parse(&Value::Nil).unwrap();
        assert_eq!(c.files.mount_path, DEFAULT_MOUNT_PATH);
        assert_eq!(c.files.config_map_name("g-0"), "g-0-entry-address");
        for (config, why) in [
            (
                Value::map([("mountPath", "x")]),
                "config.mountPath: 'x' is not an absolute path",
            ),
            (
                Value::map([("configMapSuffix", "a_b")]),
                "config.configMapSuffix: 'a_b' is not a name suffix",
            ),
            (
                Value::map([("container", 1)]),
                "config.container: must be a str, got int",
            ),
            (
                Value::map([("fileName", "a")]),
                "config.fileName: unknown field",
            ),
        ] {
            let err = Config::parse(&config).unwrap_err();
            assert!(err.contains(why), "{config}: {err:?} lacks {why:?}");
        }
    }

    fn member<'a>(role_id: &'a str, is_entry: bool, pod_ip: &'a str) -> Member<'a> {
        Member {
            name: "p",
            role_name: "r",
            role_id,
            is_entry,
            pod_ip,
            ..Member::default()
        }
    }

    fn data(model_serving: Value, pods: &[Member<'_>]) -> Vec<(String, String)> {
        let bytes = group_request(NAME, Value::Nil, model_serving, "g-0", 4, pods);
        let req = GroupRequest::decode(&bytes).unwrap();
        entry_addresses(&req, "g-0-x".to_owned()).data
    }

    fn kv(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn serving(namespace: Option<&str>) -> Value {
        let mut metadata = Value::map([("name", "m")]);
        if let Some(ns) = namespace {
            metadata.set("namespace", ns);
        }
        Value::map([("metadata", metadata)])
    }

    #[test]
    fn the_entry_ip_once_known_else_its_dns_name() {
        let pods = [
            member("r-1", false, "10.0.0.9"),
            member("r-0", true, "10.0.0.1"),
            member("r-1", true, ""),
            member("r-0", false, "10.0.0.2"),
        ];
        assert_eq!(
            data(serving(Some("team")), &pods),
            kv(&[
                ("r-1", "g-0-r-1-0.team"),
                ("r-1.json", r#"{"dns":"g-0-r-1-0.team","ip":""}"#),
                ("r-0", "10.0.0.1"),
                ("r-0.json", r#"{"dns":"g-0-r-0-0.team","ip":"10.0.0.1"}"#),
            ])
        );
        // No namespace (or an empty one) is the default namespace; an IP that is not one is
        // none; no Pods, no keys.
        let pods = [member("r-0", true, "pending")];
        assert_eq!(
            data(serving(None), &pods),
            kv(&[
                ("r-0", "g-0-r-0-0.default"),
                ("r-0.json", r#"{"dns":"g-0-r-0-0.default","ip":""}"#),
            ])
        );
        assert_eq!(data(serving(Some("")), &pods)[0].1, "g-0-r-0-0.default");
        assert!(data(serving(None), &[]).is_empty());
    }

    #[test]
    fn keys_follow_python_dict_semantics_and_json_is_ascii() {
        // A role id "a.json" and a role id "a": the second's JSON key replaces the first's
        // value in place, as `data[key] = ...` does in Python.
        let pods = [
            member("a.json", true, "10.0.0.1"),
            member("a", true, "10.0.0.2"),
        ];
        assert_eq!(
            data(serving(Some("n")), &pods),
            kv(&[
                ("a.json", r#"{"dns":"g-0-a-0.n","ip":"10.0.0.2"}"#),
                ("a.json.json", r#"{"dns":"g-0-a.json-0.n","ip":"10.0.0.1"}"#),
                ("a", "10.0.0.2"),
            ])
        );
        let pods = [member("é\"", false, "")];
        assert_eq!(
            data(serving(Some("n")), &pods)[1].1,
            r#"{"dns":"g-0-\u00e9\"-0.n","ip":""}"#
        );
    }

    #[test]
    fn mounts_the_replicas_keys() {
        let pod = Value::map([(
            "spec",
            Value::map([(
                "containers",
                Value::array([Value::map([("name", "a")]), Value::map([("name", "b")])]),
            )]),
        )]);
        let config = Config::parse(&Value::map([("container", "b")])).unwrap();
        let mut edit = PodEdit::new(pod);
        edit_pod(&config, "g-0", "r-1", &mut edit).unwrap();
        let ops: Vec<(&str, &Value)> = edit
            .ops()
            .iter()
            .map(|o| (o.path.as_str(), o.value.as_ref().unwrap()))
            .collect();
        let items = Value::array([
            Value::map([("key", "r-1"), ("path", ADDRESS_FILE)]),
            Value::map([("key", "r-1.json"), ("path", JSON_FILE)]),
        ]);
        let source = Value::map([
            ("name", Value::from("g-0-entry-address")),
            ("optional", Value::Bool(true)),
            ("items", items),
        ]);
        let volume = Value::map([
            ("name", Value::from("entry-address")),
            ("configMap", source),
        ]);
        let mount = Value::map([("name", "entry-address"), ("mountPath", DEFAULT_MOUNT_PATH)]);
        assert_eq!(
            ops,
            [
                ("/spec/volumes", &Value::array([volume])),
                ("/spec/containers/1/volumeMounts", &Value::array([mount])),
            ]
        );
    }

    #[test]
    fn exports_through_the_abi_glue() {
        assert_eq!(__MODELSERVING_ABI_VERSION, 3);
        let pod = Value::map([("spec", Value::map([("containers", Value::Array(vec![]))]))]);
        let bytes = request("OnPodCreate", NAME, Value::Nil, &Place::default(), pod);
        let r = Response::decode(&modelserving_call(Hook::OnPodCreate, &bytes).unwrap()).unwrap();
        assert_eq!(r.error.as_deref(), Some("the Pod has no containers"));
        let bytes = group_request(
            NAME,
            Value::Nil,
            serving(Some("n")),
            "g-0",
            1,
            &[member("r-0", true, "")],
        );
        let r = modelserving_call(Hook::OnServingGroupChange, &bytes).unwrap();
        let objects = Response::decode(&r).unwrap().objects;
        assert_eq!(objects.len(), 1);
        assert_eq!(
            objects[0].get("data").unwrap().get("r-0"),
            Some(&Value::from("g-0-r-0-0.n"))
        );
        let bytes = request(
            "ValidateConfig",
            NAME,
            Value::map([("x", 1)]),
            &Place::default(),
            Value::Nil,
        );
        let r =
            Response::decode(&modelserving_call(Hook::ValidateConfig, &bytes).unwrap()).unwrap();
        assert_eq!(r.error.as_deref(), Some("config.x: unknown field"));
    }
}
