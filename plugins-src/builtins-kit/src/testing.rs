//! Requests as the host encodes them, and the shared ABI vectors replayed, for the built-ins'
//! native tests of their exported glue (feature `testing`, which the built-ins enable for their
//! tests only, so no module carries it).

use modelserving_plugin::Value;

/// Where a Pod hook's Pod sits, and the ModelServing it comes from.
#[derive(Clone, Debug)]
pub struct Place<'a> {
    pub model_serving: Value,
    pub serving_group: &'a str,
    pub role_name: &'a str,
    pub role_id: &'a str,
    pub is_entry: bool,
}

impl Default for Place<'_> {
    fn default() -> Self {
        Place {
            model_serving: Value::map([("kind", "ModelServing")]),
            serving_group: "g",
            role_name: "r",
            role_id: "r-0",
            is_entry: false,
        }
    }
}

/// The msgpack request of `hook` (`"OnPodCreate"`, `"OnPodReady"` or `"ValidateConfig"`)
/// to `plugin` with `config`; a Pod hook also carries `place` and `pod`, in the host's key
/// order.
pub fn request(hook: &str, plugin: &str, config: Value, place: &Place<'_>, pod: Value) -> Vec<u8> {
    let mut m = vec![
        ("abiVersion".to_owned(), Value::Int(1)),
        ("hook".to_owned(), Value::from(hook)),
        (
            "plugin".to_owned(),
            Value::map([("name", Value::from(plugin)), ("config", config)]),
        ),
    ];
    if hook != "ValidateConfig" {
        m.extend([
            ("modelServing".to_owned(), place.model_serving.clone()),
            ("servingGroup".to_owned(), Value::from(place.serving_group)),
            ("roleName".to_owned(), Value::from(place.role_name)),
            ("roleId".to_owned(), Value::from(place.role_id)),
            ("isEntry".to_owned(), Value::Bool(place.is_entry)),
            ("pod".to_owned(), pod),
        ]);
    }
    Value::Map(m).to_msgpack()
}

/// One Pod of a ServingGroup as the group hook's request lists it (ABI v3, 15.3).
#[derive(Clone, Debug, Default)]
pub struct Member<'a> {
    pub name: &'a str,
    pub role_name: &'a str,
    pub role_id: &'a str,
    pub is_entry: bool,
    pub node: &'a str,
    pub host_ip: &'a str,
    pub pod_ip: &'a str,
    pub phase: &'a str,
    pub ready: bool,
    pub annotations: Vec<(&'a str, &'a str)>,
}

/// The msgpack OnServingGroupChange request (ABI v3) to `plugin` with `config`, for the
/// ServingGroup `serving_group` of `model_serving`, in the host's key order.
pub fn group_request(
    plugin: &str,
    config: Value,
    model_serving: Value,
    serving_group: &str,
    expected_pods: i64,
    pods: &[Member<'_>],
) -> Vec<u8> {
    let pods = pods.iter().map(|p| {
        Value::map([
            ("name", Value::from(p.name)),
            ("roleName", Value::from(p.role_name)),
            ("roleId", Value::from(p.role_id)),
            ("isEntry", Value::Bool(p.is_entry)),
            ("node", Value::from(p.node)),
            ("hostIP", Value::from(p.host_ip)),
            ("podIP", Value::from(p.pod_ip)),
            ("phase", Value::from(p.phase)),
            ("ready", Value::Bool(p.ready)),
            ("annotations", Value::map(p.annotations.iter().copied())),
        ])
    });
    Value::map([
        ("abiVersion", Value::Int(3)),
        ("hook", Value::from("OnServingGroupChange")),
        (
            "plugin",
            Value::map([("name", Value::from(plugin)), ("config", config)]),
        ),
        ("modelServing", model_serving),
        ("servingGroup", Value::from(serving_group)),
        ("expectedPods", Value::Int(expected_pods)),
        ("pods", Value::array(pods)),
    ])
    .to_msgpack()
}

/// Replays the shared ABI vectors (`abi/vectors/*.json` at the top of the repository, or the
/// directory in `MODELSERVING_ABI_VECTORS`) of `plugin` through `call` (the plugin's
/// `modelserving_call`): each response must be the expected bytes, or an error response where
/// the host expects the failure class PluginError. Panics listing every vector that fails, or
/// when no vector is for `plugin` (a test that replays nothing must not pass).
pub fn replay_vectors(
    plugin: &str,
    call: impl Fn(modelserving_plugin::Hook, &[u8]) -> Option<Vec<u8>>,
) -> usize {
    use modelserving_plugin::{Hook, Response};
    use std::path::{Path, PathBuf};

    let dir = match std::env::var_os("MODELSERVING_ABI_VECTORS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../abi/vectors"),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().map_or(false, |x| x == "json"))
        .collect();
    files.sort();
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("a vector file");
        let vector =
            crate::json::parse(&text).unwrap_or_else(|| panic!("{}: not JSON", path.display()));
        let field = |v: &crate::json::Json, key: &str| -> String {
            v.get(key)
                .and_then(crate::json::Json::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        if field(&vector, "plugin") != plugin {
            continue;
        }
        let label = path.file_name().unwrap().to_string_lossy().into_owned();
        let hook = match Hook::from_name(&field(&vector, "hook")) {
            Some(h) => h,
            None => {
                failures.push(format!("{label}: unknown hook"));
                continue;
            }
        };
        let request = base64(&field(&vector, "request"));
        let expect = vector
            .get("expect")
            .cloned()
            .unwrap_or(crate::json::Json::Null);
        let got = call(hook, &request);
        checked += 1;
        match (expect.get("response"), got) {
            (_, None) => failures.push(format!("{label}: the plugin does not export {hook}")),
            (Some(want), Some(got)) => {
                let want = base64(want.as_str().unwrap_or_default());
                if got != want {
                    failures.push(format!(
                        "{label}: response differs\n  want {:?}\n  got  {:?}",
                        Response::decode(&want),
                        Response::decode(&got)
                    ));
                }
            }
            (None, Some(got)) => {
                let class = field(&expect, "failure");
                let error = Response::decode(&got).ok().and_then(|r| r.error);
                if class != "PluginError" || error.map_or(true, |e| e.is_empty()) {
                    failures.push(format!("{label}: expected {class}, got {got:?}"));
                }
            }
        }
    }
    assert!(
        checked > 0,
        "no vector in {} is for {plugin}",
        dir.display()
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} vector(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    checked
}

/// Standard base64 (RFC 4648, padded or not); panics on other characters (test data).
pub fn base64(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("invalid base64 character {:?}", c as char),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}
