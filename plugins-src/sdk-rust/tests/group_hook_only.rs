//! A plugin may serve the ServingGroup hook alone (ABI v3: a module needs one of the three).

use modelserving_plugin::{export_plugin, GroupRequest, Hook, Object};

fn on_serving_group_change(req: &GroupRequest) -> Result<Vec<Object>, String> {
    Ok(vec![Object::config_map(format!("{}-a", req.serving_group))])
}

export_plugin! { on_serving_group_change: on_serving_group_change }

#[test]
fn only_the_group_hook_is_exported() {
    assert_eq!(__MODELSERVING_ABI_VERSION, 3);
    for hook in [Hook::OnPodCreate, Hook::OnPodReady, Hook::ValidateConfig] {
        assert!(modelserving_call(hook, &[]).is_none(), "{hook}");
    }
    let error = modelserving_call(Hook::OnServingGroupChange, &[0xc0]).unwrap();
    let error = modelserving_plugin::Response::decode(&error)
        .unwrap()
        .error
        .unwrap();
    assert_eq!(error, "request: must be a map, got nil");
}
