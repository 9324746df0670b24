//! `export_plugin!` with the ServingGroup hook (ABI v3): the hook's glue (decode, call, encode
//! the objects), and the Pod hooks of such a plugin answering requests of version 3 too.

use modelserving_plugin::{
    export_plugin, GroupRequest, Hook, Object, Observation, Op, Request, Response, Value,
};

fn on_pod_create(req: &Request) -> Result<Vec<Op>, String> {
    Ok(vec![Op::add(
        "/metadata/labels/abi",
        req.abi_version.to_string(),
    )])
}

fn on_pod_ready(_req: &Request) -> Result<Vec<Observation>, String> {
    Ok(vec![Observation::new("pod_ready_seconds", 2.5)])
}

fn on_serving_group_change(req: &GroupRequest) -> Result<Option<Object>, String> {
    if req.serving_group.ends_with("-9") {
        return Err(format!("no objects for {}", req.serving_group));
    }
    if req.pods.is_empty() {
        return Ok(None);
    }
    let ips: Vec<&str> = req.pods.iter().map(|p| p.pod_ip).collect();
    let mut object = Object::config_map(format!("{}-ips", req.serving_group));
    object.set_data("ips", ips.join(","));
    object.set_data("expected", req.expected_pods.to_string());
    Ok(Some(object))
}

export_plugin! {
    on_pod_create: on_pod_create,
    on_serving_group_change: on_serving_group_change,
    on_pod_ready: on_pod_ready,
}

fn pod_request(hook: &str, version: i64) -> Vec<u8> {
    Value::map([
        ("abiVersion", Value::Int(version)),
        ("hook", Value::from(hook)),
        (
            "plugin",
            Value::map([("name", Value::from("p")), ("config", Value::Nil)]),
        ),
        ("modelServing", Value::map([("kind", "ModelServing")])),
        ("servingGroup", Value::from("g-0")),
        ("roleName", Value::from("r")),
        ("roleId", Value::from("r-0")),
        ("isEntry", Value::Bool(true)),
        (
            "pod",
            Value::map([("metadata", Value::map([("name", "g-0-r-0-0")]))]),
        ),
    ])
    .to_msgpack()
}

fn group_request(group: &str, ips: &[&str]) -> Vec<u8> {
    let pods = ips.iter().enumerate().map(|(i, ip)| {
        Value::map([
            ("name", Value::from(format!("{group}-r-0-{i}"))),
            ("roleName", Value::from("r")),
            ("roleId", Value::from("r-0")),
            ("isEntry", Value::Bool(i == 0)),
            ("node", Value::from("")),
            ("hostIP", Value::from("")),
            ("podIP", Value::from(*ip)),
            ("phase", Value::from("Pending")),
            ("ready", Value::Bool(false)),
            ("annotations", Value::Map(vec![])),
        ])
    });
    Value::map([
        ("abiVersion", Value::Int(3)),
        ("hook", Value::from("OnServingGroupChange")),
        (
            "plugin",
            Value::map([("name", Value::from("p")), ("config", Value::Nil)]),
        ),
        ("modelServing", Value::map([("kind", "ModelServing")])),
        ("servingGroup", Value::from(group)),
        ("expectedPods", Value::Int(3)),
        ("pods", Value::array(pods)),
    ])
    .to_msgpack()
}

#[test]
fn the_plugin_speaks_abi_v3() {
    assert_eq!(__MODELSERVING_ABI_VERSION, 3);
    assert_eq!(modelserving_plugin::ABI_VERSION, 3);
}

#[test]
fn the_group_hook_returns_its_objects() {
    let response = modelserving_call(
        Hook::OnServingGroupChange,
        &group_request("g-0", &["10.0.0.1", ""]),
    )
    .unwrap();
    let object = Object::config_map("g-0-ips")
        .with_data("ips", "10.0.0.1,")
        .with_data("expected", "3");
    // Exactly {"objects": [object]}: msgpack.packb of the same map gives these bytes.
    let want = Value::map([("objects", Value::array([object.to_value()]))]).to_msgpack();
    assert_eq!(response, want);
    assert_eq!(
        Response::decode(&response).unwrap().objects,
        vec![object.to_value()]
    );
}

#[test]
fn no_objects_is_the_empty_response_and_an_error_an_error_response() {
    let none = modelserving_call(Hook::OnServingGroupChange, &group_request("g-0", &[])).unwrap();
    assert!(none.is_empty());
    let failed = modelserving_call(
        Hook::OnServingGroupChange,
        &group_request("g-9", &["1.2.3.4"]),
    )
    .unwrap();
    assert_eq!(
        Response::decode(&failed).unwrap().error.as_deref(),
        Some("no objects for g-9")
    );
}

#[test]
fn a_pod_request_sent_to_the_group_hook_is_an_error() {
    let response =
        modelserving_call(Hook::OnServingGroupChange, &pod_request("OnPodCreate", 3)).unwrap();
    assert_eq!(
        Response::decode(&response).unwrap().error.as_deref(),
        Some("request for hook OnPodCreate sent to ms_on_serving_group_change")
    );
    let response = modelserving_call(Hook::OnPodCreate, &group_request("g-0", &[])).unwrap();
    let error = Response::decode(&response).unwrap().error.unwrap();
    assert!(
        error.contains("OnServingGroupChange is not a Pod or config hook"),
        "{error}"
    );
}

#[test]
fn its_pod_hooks_answer_every_version_to_3() {
    for version in 1..=3 {
        let response =
            modelserving_call(Hook::OnPodCreate, &pod_request("OnPodCreate", version)).unwrap();
        let patch = Response::decode(&response).unwrap().patch;
        assert_eq!(
            patch,
            vec![Op::add("/metadata/labels/abi", version.to_string()).to_value()]
        );
    }
    let refused = modelserving_call(Hook::OnPodCreate, &pod_request("OnPodCreate", 4)).unwrap();
    assert_eq!(
        Response::decode(&refused).unwrap().error.as_deref(),
        Some("request: abiVersion 4 is not supported (this plugin speaks 1 to 3)")
    );
}

#[test]
fn observations_go_in_a_v3_response_as_in_a_v2_one() {
    let _ = modelserving_plugin::log::take_logs();
    for version in [2, 3] {
        let response =
            modelserving_call(Hook::OnPodReady, &pod_request("OnPodReady", version)).unwrap();
        let observations = Response::decode(&response).unwrap().observations;
        assert_eq!(observations, vec![("pod_ready_seconds".to_owned(), 2.5)]);
    }
    assert!(modelserving_plugin::log::take_logs().is_empty());
    // A v1 request (a host that knows only v1) gets them as observe lines, as from a v2 plugin.
    let response = modelserving_call(Hook::OnPodReady, &pod_request("OnPodReady", 1)).unwrap();
    assert!(response.is_empty());
    let lines: Vec<String> = modelserving_plugin::log::take_logs()
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    assert_eq!(lines, ["observe pod_ready_seconds 2.500"]);
    assert!(modelserving_call(Hook::ValidateConfig, &[]).is_none());
}
