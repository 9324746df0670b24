//! A plugin without the ServingGroup hook stays a v2 plugin: its exports answer ABI versions 1
//! and 2 only (a host sends no other, since the module exports no v3 marker) and it has no
//! group hook to call.

use modelserving_plugin::{export_plugin, Hook, Op, Request, Response, Value};

fn on_pod_create(req: &Request) -> Result<Vec<Op>, String> {
    Ok(vec![Op::add(
        "/metadata/labels/abi",
        req.abi_version.to_string(),
    )])
}

export_plugin! { on_pod_create: on_pod_create }

fn request(hook: &str, version: i64) -> Vec<u8> {
    Value::map([
        ("abiVersion", Value::Int(version)),
        ("hook", Value::from(hook)),
        ("plugin", Value::map([("name", Value::from("p"))])),
        ("modelServing", Value::map([("kind", "ModelServing")])),
        ("servingGroup", Value::from("g-0")),
        ("roleName", Value::from("r")),
        ("roleId", Value::from("r-0")),
        ("isEntry", Value::Bool(false)),
        (
            "pod",
            Value::map([("metadata", Value::map([("name", "x")]))]),
        ),
    ])
    .to_msgpack()
}

#[test]
fn answers_versions_1_and_2_only() {
    assert_eq!(__MODELSERVING_ABI_VERSION, 2);
    for version in [1, 2] {
        let r = modelserving_call(Hook::OnPodCreate, &request("OnPodCreate", version)).unwrap();
        assert_eq!(Response::decode(&r).unwrap().patch.len(), 1);
    }
    let r = modelserving_call(Hook::OnPodCreate, &request("OnPodCreate", 3)).unwrap();
    assert_eq!(
        Response::decode(&r).unwrap().error.as_deref(),
        Some("request: abiVersion 3 is not supported (this plugin speaks 1 to 2)")
    );
    assert!(modelserving_call(
        Hook::OnServingGroupChange,
        &request("OnServingGroupChange", 3)
    )
    .is_none());
    // Request::decode (tests, other tools) takes any version the SDK speaks.
    assert_eq!(
        Request::decode(&request("OnPodCreate", 3))
            .unwrap()
            .abi_version,
        3
    );
}
