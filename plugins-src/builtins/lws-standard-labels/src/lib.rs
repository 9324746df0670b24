//! `lws-standard-labels`: LeaderWorkerSet's well-known labels on every ModelServing Pod.
//!
//! The WebAssembly twin of the Python built-in
//! `host/modelserving/plugins/builtins/lws_standard_labels.py`; both accept the same configs
//! (none: nil or an empty map) and give byte-identical responses.
//!
//! Tools built for LeaderWorkerSet (LWS) find and place Pods by its labels. Mapped onto Kthena,
//! an LWS *group* is a ServingGroup and the *leader* is an entry Pod. Merged into
//! `metadata.labels`, overwriting same keys, in this order:
//!
//! * `leaderworkerset.sigs.k8s.io/name`: the owning LWS's name, else the ModelServing's;
//! * `leaderworkerset.sigs.k8s.io/group-index`: the ServingGroup's ordinal (`<ms>-<index>`);
//! * `leaderworkerset.sigs.k8s.io/worker-index`: `"0"` for an entry Pod, else k of the Pod's
//!   name `<group>-<roleId>-<k>` (k >= 1);
//! * `leaderworkerset.sigs.k8s.io/group-key`: the hex SHA-1 of `<lws>-<index>` with an owning
//!   LWS (Kthena's), else of `<namespace>/<servingGroup>`.
//!
//! The owning LWS is the ModelServing's first ownerReference of kind `LeaderWorkerSet` with a
//! name. A name that breaks the controller's naming, a ModelServing without a name (or, with no
//! owning LWS, without a namespace), or a name label value too long fails the hook.

use modelserving_plugin::config::Fields;
use modelserving_plugin::{export_plugin, PodPatch, RawValue, Request, Value};

pub mod sha1;

pub const NAME: &str = "lws-standard-labels";
pub const NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
pub const GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";
pub const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
pub const GROUP_KEY_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// The most characters a label value may have.
pub const MAX_LABEL_VALUE: usize = 63;

/// Where a Pod sits, as the hook request says.
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    pub serving_group: &'a str,
    pub role_id: &'a str,
    pub is_entry: bool,
}

/// The config takes no fields: nil or an empty map (nil values count as absent).
pub fn parse_config(config: &Value) -> Result<(), String> {
    Fields::config(config)?.finish()
}

/// The digits after `prefix` when `name` is `<prefix><ordinal>` (ASCII digits, no leading
/// zero unless the ordinal is 0).
pub fn ordinal<'n>(name: &'n str, prefix: &str) -> Option<&'n str> {
    let digits = name.strip_prefix(prefix)?;
    let canonical = match digits.as_bytes() {
        [] => false,
        [b'0'] => true,
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    };
    if canonical {
        Some(digits)
    } else {
        None
    }
}

/// LWS's group key: the lowercase hex SHA-1 of `<namespace>/<leader>`.
pub fn group_key(namespace: &str, serving_group: &str) -> String {
    let mut input = String::with_capacity(namespace.len() + 1 + serving_group.len());
    input.push_str(namespace);
    input.push('/');
    input.push_str(serving_group);
    sha1::hex_digest(input.as_bytes())
}

/// Kthena's group key under an owning LWS: the lowercase hex SHA-1 of `<lws>-<index>`.
pub fn owned_group_key(lws: &str, index: &str) -> String {
    let mut input = String::with_capacity(lws.len() + 1 + index.len());
    input.push_str(lws);
    input.push('-');
    input.push_str(index);
    sha1::hex_digest(input.as_bytes())
}

/// The name of the first owner of kind `LeaderWorkerSet` that has a name.
fn owning_lws(ms: RawValue<'_>) -> Option<&str> {
    let refs = ms.get("metadata")?.get("ownerReferences")?;
    if refs.kind() != modelserving_plugin::raw::Kind::Array {
        return None;
    }
    refs.iter_array().find_map(|r| {
        let kind = r.get("kind").and_then(RawValue::as_str);
        let name = r.get("name").and_then(RawValue::as_str).unwrap_or("");
        (kind == Some("LeaderWorkerSet") && !name.is_empty()).then_some(name)
    })
}

fn too_long(what: &str, value: &str) -> Result<(), String> {
    let chars = value.chars().count();
    if chars > MAX_LABEL_VALUE {
        return Err(format!(
            "{what} name '{value}' has {chars} characters, more than the \
             {MAX_LABEL_VALUE} a label value may have"
        ));
    }
    Ok(())
}

fn string_at<'a>(object: RawValue<'a>, field: &str) -> Option<&'a str> {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(RawValue::as_str)
}

/// The ModelServing's name, its namespace ("" with an owning LWS) and the owning LWS, checked.
fn model_serving(ms: RawValue<'_>) -> Result<(&str, &str, Option<&str>), String> {
    let name = string_at(ms, "name").unwrap_or("");
    if name.is_empty() {
        return Err("the ModelServing has no metadata.name".to_owned());
    }
    let lws = owning_lws(ms);
    let namespace = string_at(ms, "namespace").unwrap_or("");
    if lws.is_none() && namespace.is_empty() {
        return Err(format!("ModelServing '{name}' has no metadata.namespace"));
    }
    match lws {
        Some(owner) => too_long("LeaderWorkerSet", owner)?,
        None => too_long("ModelServing", name)?,
    }
    Ok((name, namespace, lws))
}

fn group_index<'g>(ms_name: &str, serving_group: &'g str) -> Result<&'g str, String> {
    let prefix = format!("{ms_name}-");
    ordinal(serving_group, &prefix)
        .ok_or_else(|| format!("serving group '{serving_group}' is not named {ms_name}-<index>"))
}

fn worker_index<'p>(at: Placement<'_>, pod: RawValue<'p>) -> Result<&'p str, String> {
    if at.is_entry {
        return Ok("0");
    }
    let pod_name = match string_at(pod, "name") {
        Some(name) => name,
        None => return Err("worker Pod has no metadata.name".to_owned()),
    };
    let prefix = format!("{}-{}-", at.serving_group, at.role_id);
    match ordinal(pod_name, &prefix) {
        Some(index) if index != "0" => Ok(index),
        _ => Err(format!(
            "worker Pod '{pod_name}' is not named {prefix}<index> with an index >= 1"
        )),
    }
}

/// The four labels, in order, for `pod` of ModelServing `ms` placed at `at`.
pub fn lws_labels(
    ms: RawValue<'_>,
    at: Placement<'_>,
    pod: RawValue<'_>,
) -> Result<[(&'static str, String); 4], String> {
    let (ms_name, namespace, lws) = model_serving(ms)?;
    let group = group_index(ms_name, at.serving_group)?;
    let worker = worker_index(at, pod)?;
    let key = match lws {
        Some(owner) => owned_group_key(owner, group),
        None => group_key(namespace, at.serving_group),
    };
    Ok([
        (NAME_LABEL, lws.unwrap_or(ms_name).to_owned()),
        (GROUP_INDEX_LABEL, group.to_owned()),
        (WORKER_INDEX_LABEL, worker.to_owned()),
        (GROUP_KEY_LABEL, key),
    ])
}

pub fn on_pod_create(req: &Request) -> Result<PodPatch, String> {
    parse_config(&req.config)?;
    let at = Placement {
        serving_group: req.serving_group,
        role_id: req.role_id,
        is_entry: req.is_entry,
    };
    let labels = lws_labels(req.model_serving(), at, req.pod())?;
    let mut patch = PodPatch::new(req.pod());
    patch.merge_labels(labels);
    Ok(patch)
}

pub fn validate_config(req: &Request) -> Result<(), String> {
    parse_config(&req.config)
}

export_plugin! {
    on_pod_create: on_pod_create,
    validate_config: validate_config,
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelserving_plugin::{Hook, Response};

    const ENTRY: Placement = Placement {
        serving_group: "llm-3",
        role_id: "prefill-1",
        is_entry: true,
    };
    const WORKER: Placement = Placement {
        is_entry: false,
        ..ENTRY
    };

    fn ms(name: Value, namespace: Value) -> Vec<u8> {
        Value::map([(
            "metadata",
            Value::map([("name", name), ("namespace", namespace)]),
        )])
        .to_msgpack()
    }

    fn pod(name: &str) -> Vec<u8> {
        Value::map([("metadata", Value::map([("name", name)]))]).to_msgpack()
    }

    fn labels(ms_bytes: &[u8], at: Placement, pod_bytes: &[u8]) -> Result<Vec<String>, String> {
        let ms = RawValue::new(ms_bytes).unwrap();
        let pod = RawValue::new(pod_bytes).unwrap();
        lws_labels(ms, at, pod).map(|l| l.iter().map(|(_, v)| v.clone()).collect())
    }

    fn llm() -> Vec<u8> {
        ms(Value::from("llm"), Value::from("team-a"))
    }

    #[test]
    fn config_takes_no_fields() {
        assert_eq!(parse_config(&Value::Nil), Ok(()));
        assert_eq!(parse_config(&Value::Map(vec![])), Ok(()));
        assert_eq!(parse_config(&Value::map([("x", Value::Nil)])), Ok(()));
        assert_eq!(
            parse_config(&Value::map([("x", 1)])),
            Err("config.x: unknown field".to_owned())
        );
        assert_eq!(
            parse_config(&Value::Array(vec![])),
            Err("config: must be a map, got array".to_owned())
        );
    }

    #[test]
    fn ordinals_are_canonical_ascii_numbers() {
        assert_eq!(ordinal("llm-0", "llm-"), Some("0"));
        assert_eq!(ordinal("llm-120", "llm-"), Some("120"));
        for bad in [
            "llm-", "llm-01", "llm-00", "llm-1a", "llm--1", "llm-+1", "llm-١", "lm-1",
        ] {
            assert_eq!(ordinal(bad, "llm-"), None, "{bad}");
        }
    }

    #[test]
    fn labels_of_an_entry_and_a_worker() {
        let key = group_key("team-a", "llm-3");
        assert_eq!(
            labels(&llm(), ENTRY, &pod("whatever")).unwrap(),
            ["llm", "3", "0", key.as_str()]
        );
        assert_eq!(
            labels(&llm(), WORKER, &pod("llm-3-prefill-1-12")).unwrap(),
            ["llm", "3", "12", key.as_str()]
        );
    }

    #[test]
    fn names_that_break_the_naming_are_refused() {
        let cases: [(Vec<u8>, Placement, Vec<u8>, &str); 9] = [
            (
                ms(Value::Nil, Value::from("a")),
                ENTRY,
                pod("p"),
                "the ModelServing has no metadata.name",
            ),
            (
                ms(Value::from(""), Value::from("a")),
                ENTRY,
                pod("p"),
                "the ModelServing has no metadata.name",
            ),
            (
                ms(Value::from("llm"), Value::Nil),
                ENTRY,
                pod("p"),
                "ModelServing 'llm' has no metadata.namespace",
            ),
            (
                ms(Value::from("llm"), Value::Int(3)),
                ENTRY,
                pod("p"),
                "ModelServing 'llm' has no metadata.namespace",
            ),
            (
                ms(Value::from("é".repeat(64)), Value::from("a")),
                ENTRY,
                pod("p"),
                "has 64 characters, more than the 63 a label value may have",
            ),
            (
                llm(),
                Placement {
                    serving_group: "llm-03",
                    ..ENTRY
                },
                pod("p"),
                "serving group 'llm-03' is not named llm-<index>",
            ),
            (
                llm(),
                WORKER,
                pod("llm-3-prefill-1-0"),
                "worker Pod 'llm-3-prefill-1-0' is not named llm-3-prefill-1-<index> with an \
                 index >= 1",
            ),
            (
                llm(),
                WORKER,
                pod("llm-3-decode-0-1"),
                "worker Pod 'llm-3-decode-0-1' is not named llm-3-prefill-1-<index>",
            ),
            (
                llm(),
                WORKER,
                Value::map([("metadata", Value::Map(vec![]))]).to_msgpack(),
                "worker Pod has no metadata.name",
            ),
        ];
        for (ms_bytes, at, pod_bytes, why) in cases {
            let err = labels(&ms_bytes, at, &pod_bytes).unwrap_err();
            assert!(err.contains(why), "{err:?} lacks {why:?}");
        }
        let exactly_63 = ms(Value::from("a".repeat(63)), Value::from("ns"));
        let at = Placement {
            serving_group: &format!("{}-0", "a".repeat(63)),
            ..ENTRY
        };
        assert!(labels(&exactly_63, at, &pod("p")).is_ok());
    }

    fn request(hook: &str, config: Value, is_entry: bool, pod: Value) -> Vec<u8> {
        let place = builtins_kit::testing::Place {
            model_serving: Value::map([(
                "metadata",
                Value::map([("name", "llm"), ("namespace", "team-a")]),
            )]),
            serving_group: "llm-3",
            role_name: "prefill",
            role_id: "prefill-1",
            is_entry,
        };
        builtins_kit::testing::request(hook, NAME, config, &place, pod)
    }

    #[test]
    fn exports_through_the_abi_glue() {
        let call = |hook: Hook, bytes: &[u8]| {
            let out = modelserving_call(hook, bytes).unwrap();
            Response::decode(&out).unwrap()
        };
        let valid = modelserving_call(
            Hook::ValidateConfig,
            &request("ValidateConfig", Value::Nil, true, Value::Nil),
        )
        .unwrap();
        assert!(valid.is_empty());
        let refused = call(
            Hook::ValidateConfig,
            &request("ValidateConfig", Value::map([("a", 1)]), true, Value::Nil),
        );
        assert_eq!(refused.error.as_deref(), Some("config.a: unknown field"));

        // a Pod without labels gets the whole map; one with labels gets one op per key
        let bare = Value::map([("metadata", Value::map([("name", "llm-3-prefill-1-2")]))]);
        let r = call(
            Hook::OnPodCreate,
            &request("OnPodCreate", Value::Nil, false, bare),
        );
        assert_eq!(r.error, None);
        assert_eq!(r.patch.len(), 1);
        assert_eq!(
            r.patch[0].get("path").and_then(Value::as_str),
            Some("/metadata/labels")
        );
        let added = r.patch[0].get("value").and_then(Value::as_map).unwrap();
        let keys: Vec<&str> = added.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                NAME_LABEL,
                GROUP_INDEX_LABEL,
                WORKER_INDEX_LABEL,
                GROUP_KEY_LABEL
            ]
        );
        assert_eq!(added[2].1, Value::from("2"));
        let labelled = Value::map([(
            "metadata",
            Value::map([
                ("name", Value::from("llm-3-prefill-1-0")),
                ("labels", Value::map([(NAME_LABEL, "old")])),
            ]),
        )]);
        let r = call(
            Hook::OnPodCreate,
            &request("OnPodCreate", Value::Map(vec![]), true, labelled),
        );
        let field = |i: usize, name: &str| r.patch[i].get(name).cloned().unwrap_or(Value::Nil);
        let paths: Vec<Value> = (0..r.patch.len()).map(|i| field(i, "path")).collect();
        assert_eq!(
            paths,
            [
                "/metadata/labels/leaderworkerset.sigs.k8s.io~1name",
                "/metadata/labels/leaderworkerset.sigs.k8s.io~1group-index",
                "/metadata/labels/leaderworkerset.sigs.k8s.io~1worker-index",
                "/metadata/labels/leaderworkerset.sigs.k8s.io~1group-key",
            ]
            .map(Value::from)
        );
        assert_eq!(field(0, "value"), Value::from("llm"));
        assert_eq!(field(2, "value"), Value::from("0"));

        let bad = call(
            Hook::OnPodCreate,
            &request("OnPodCreate", Value::Nil, false, Value::Map(vec![])),
        );
        assert_eq!(
            bad.error.as_deref(),
            Some("worker Pod has no metadata.name")
        );
        let bad_config = call(
            Hook::OnPodCreate,
            &request(
                "OnPodCreate",
                Value::map([("a", 1)]),
                true,
                Value::Map(vec![]),
            ),
        );
        assert_eq!(bad_config.error.as_deref(), Some("config.a: unknown field"));
    }
}
