"""rdma-network: its config model, what it does to a Pod (RDMA device, hugepages, IPC_LOCK, the
Multus networks annotation), and how the patch policy treats IPC_LOCK."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from modelserving.api import FailureClass, PluginFailure, parse_model_serving
from modelserving.api.errors import PatchRejected
from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.api.policy import BASELINE_CAPABILITIES, PatchPolicy
from modelserving.chain import PatchValidator, build_chain
from modelserving.plugins.base import HookError
from modelserving.plugins.builtins.rdma_network import (
    BUILTIN,
    NAME,
    NETWORKS_ANNOTATION,
    RdmaNetwork,
    RdmaNetworkConfig,
)
from modelserving.plugins.registry import default_registry
from modelserving.workload.plan import plan
from tests.unit.plugins.conftest import apply, hook_request, sample_pod

IPC_LOCK_POLICY = PatchPolicy(allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK"])
HUGEPAGES = {"pageSize": "2Mi", "amount": "4Gi"}


def make(config: dict[str, Any], name: str = NAME) -> RdmaNetwork:
    instance = BUILTIN.factory(name, RdmaNetworkConfig.model_validate(config))
    assert isinstance(instance, RdmaNetwork)
    return instance


def run(config: dict[str, Any], pod: dict[str, Any], is_entry: bool = True) -> list[Any]:
    before = copy.deepcopy(pod)
    ops = list(make(config).on_pod_create(hook_request(pod, is_entry)))
    assert pod == before, "the plugin returns a patch and leaves its request alone"
    return ops


def steps(ops: list[Any]) -> list[tuple[str, str]]:
    return [(op["op"], op["path"]) for op in ops]


def engine(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def refusal(config: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        RdmaNetworkConfig.model_validate(config)
    return str(info.value)


# --- the definition and its config -----------------------------------------------------------


def test_definition() -> None:
    assert BUILTIN.name == NAME == "rdma-network"
    assert default_registry().get(NAME) is BUILTIN
    assert BUILTIN.config_model is RdmaNetworkConfig
    assert BUILTIN.hooks == frozenset({"on_pod_create"})
    assert BUILTIN.wasm_module == "rdma-network.wasm"
    assert make({}, name="rdma-2").name == "rdma-2"


def test_defaults() -> None:
    config = RdmaNetworkConfig.model_validate({})
    assert config.resource_name == "rdma/rdma_shared_device_a"
    assert config.devices == 1
    assert config.container is None
    assert config.ipc_lock is True
    assert config.hugepages is None
    assert config.networks is None
    nulls = dict.fromkeys(("resourceName", "devices", "ipcLock", "hugepages", "networks"))
    assert RdmaNetworkConfig.model_validate(nulls) == config


def test_config_reads_camel_and_snake_case() -> None:
    camel = RdmaNetworkConfig.model_validate(
        {
            "resourceName": "example.com/hca_shared",
            "devices": 64,
            "container": "engine",
            "ipcLock": False,
            "hugepages": {"pageSize": "1Gi", "amount": "16Gi"},
            "networks": ["rdma-net", "infra/ib.rail-0"],
        }
    )
    snake = RdmaNetworkConfig.model_validate(
        {
            "resource_name": "example.com/hca_shared",
            "devices": 64,
            "container": "engine",
            "ipc_lock": False,
            "hugepages": {"page_size": "1Gi", "amount": "16Gi"},
            "networks": ["rdma-net", "infra/ib.rail-0"],
        }
    )
    assert camel == snake
    assert camel.hugepages is not None and camel.hugepages.page_size == "1Gi"
    assert camel.networks == ["rdma-net", "infra/ib.rail-0"]


@pytest.mark.parametrize(
    ("config", "cause"),
    [
        ({"resourceName": "rdma"}, "'rdma' is not a resource name with a prefix"),
        ({"resourceName": "RDMA.io/x"}, "is not a resource name with a prefix"),
        ({"resourceName": "rdma/"}, "is not a resource name with a prefix"),
        ({"resourceName": 1}, "should be a valid string"),
        ({"devices": 0}, "greater than or equal to 1"),
        ({"devices": 65}, "less than or equal to 64"),
        ({"devices": True}, "valid integer"),
        ({"devices": 1.0}, "valid integer"),
        ({"devices": "1"}, "valid integer"),
        ({"ipcLock": "true"}, "valid boolean"),
        ({"ipcLock": 1}, "valid boolean"),
        ({"container": 0}, "valid string"),
        ({"hugepages": "2Mi"}, "hugepages"),
        ({"hugepages": {"amount": "1Gi"}}, "hugepages.pageSize\n  Field required"),
        ({"hugepages": {"pageSize": "2Mi"}}, "hugepages.amount\n  Field required"),
        ({"hugepages": {"pageSize": "2M", "amount": "1"}}, "Input should be '2Mi' or '1Gi'"),
        ({"hugepages": {"pageSize": "1Gi", "amount": "4 Gi"}}, "'4 Gi' is not a resource"),
        ({"hugepages": {"pageSize": "1Gi", "amount": 4}}, "valid string"),
        ({"hugepages": {**HUGEPAGES, "size": "1"}}, "hugepages.size\n  Extra inputs"),
        ({"networks": []}, "at least 1 item"),
        ({"networks": "rdma-net"}, "valid list"),
        ({"networks": [None]}, "valid string"),
        ({"networks": ["a", "b", "a"]}, "item 2: 'a' is listed twice"),
        ({"networks": ["Net"]}, "the name 'Net' is not a DNS-1123 subdomain"),
        ({"networks": ["a.b/net"]}, "the namespace 'a.b' is not a DNS-1123 label"),
        ({"networks": ["a/b/c"]}, "the name 'b/c' is not a DNS-1123 subdomain"),
        ({"networks": ["net@eth1"]}, "not a DNS-1123 subdomain"),
        ({"networks": ["/net"]}, "the namespace ''"),
        ({"network": ["a"]}, "network\n  Extra inputs"),
        ({"resourceName": "a/b", "resource_name": "a/b"}, "resource_name\n  Extra inputs"),
    ],
)
def test_config_refusals(config: dict[str, Any], cause: str) -> None:
    assert cause in refusal(config)


def test_build_chain_reports_config_errors_with_their_paths() -> None:
    from modelserving.api import PluginConfigError

    ms = _model_serving({"devices": 0, "hugepages": {"pageSize": "4Ki", "amount": "1"}})
    with pytest.raises(PluginConfigError) as info:
        build_chain(ms)
    assert sorted(e.path for e in info.value.errors) == [
        "config.devices",
        "config.hugepages.pageSize",
    ]


# --- behaviour on a Pod ----------------------------------------------------------------------


def test_everything_on_a_bare_pod(pod: dict[str, Any]) -> None:
    config = {"hugepages": HUGEPAGES, "networks": ["rdma-net", "infra/ib"]}
    ops = run(config, pod)
    assert steps(ops) == [
        ("add", "/spec/containers/0/resources"),
        ("add", "/spec/containers/0/resources/limits/hugepages-2Mi"),
        ("add", "/spec/volumes"),
        ("add", "/spec/containers/0/volumeMounts"),
        ("add", "/spec/containers/0/securityContext"),
        ("add", "/metadata/annotations"),
    ]
    after = apply(pod, ops)
    container = engine(after)
    assert container["resources"] == {
        "limits": {"rdma/rdma_shared_device_a": "1", "hugepages-2Mi": "4Gi"}
    }
    assert after["spec"]["volumes"] == [
        {"name": "hugepages", "emptyDir": {"medium": "HugePages-2Mi"}}
    ]
    assert container["volumeMounts"] == [{"name": "hugepages", "mountPath": "/dev/hugepages"}]
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert after["metadata"]["annotations"] == {NETWORKS_ANNOTATION: "rdma-net,infra/ib"}
    assert after["spec"]["containers"][1] == pod["spec"]["containers"][1], "only one container"
    assert PatchValidator(IPC_LOCK_POLICY).apply(pod, ops) == after


def test_the_default_config_adds_the_device_and_ipc_lock(pod: dict[str, Any]) -> None:
    ops = run({}, pod)
    assert ops == [
        {
            "op": "add",
            "path": "/spec/containers/0/resources",
            "value": {"limits": {"rdma/rdma_shared_device_a": "1"}},
        },
        {
            "op": "add",
            "path": "/spec/containers/0/securityContext",
            "value": {"capabilities": {"add": ["IPC_LOCK"]}},
        },
    ]


def test_entry_and_worker_pods_get_the_same_patch(pod: dict[str, Any]) -> None:
    config = {"devices": 4, "hugepages": HUGEPAGES, "networks": ["a"]}
    assert run(config, pod, is_entry=True) == run(config, pod, is_entry=False)


def test_the_named_container_is_configured(pod: dict[str, Any]) -> None:
    ops = run({"container": "proxy", "devices": 2, "ipcLock": False}, pod)
    assert ops == [
        {
            "op": "add",
            "path": "/spec/containers/1/resources",
            "value": {"limits": {"rdma/rdma_shared_device_a": "2"}},
        }
    ]


@pytest.mark.parametrize(
    ("pod", "config", "message"),
    [
        ({"metadata": {"name": "p"}, "spec": {"containers": []}}, {}, "the Pod has no containers"),
        ({"metadata": {"name": "p"}, "spec": {}}, {}, "the Pod has no containers"),
        (sample_pod(), {"container": "nope"}, "the Pod has no container named 'nope'"),
        (
            {"spec": {"containers": [{"name": "c", "resources": "x"}]}},
            {},
            "pod spec.containers[0].resources is a str, not a map",
        ),
        (
            {"spec": {"containers": [{"name": "c", "securityContext": {"capabilities": []}}]}},
            {},
            "pod spec.containers[0].securityContext.capabilities is a array, not a map",
        ),
        (
            {"spec": {"containers": [{"name": "c", "volumeMounts": {}}]}, "metadata": {}},
            {"hugepages": HUGEPAGES, "ipcLock": False},
            "pod spec.containers[0].volumeMounts is a map, not an array",
        ),
        (
            {"metadata": {"annotations": "x"}, "spec": {"containers": [{"name": "c"}]}},
            {"networks": ["a"], "ipcLock": False},
            "pod metadata.annotations is a str, not a map",
        ),
    ],
)
def test_pods_it_cannot_change(pod: dict[str, Any], config: dict[str, Any], message: str) -> None:
    with pytest.raises(HookError) as info:
        run(config, pod)
    assert str(info.value) == message


# --- resources -------------------------------------------------------------------------------


def test_limits_are_set_and_requests_only_when_already_there(pod: dict[str, Any]) -> None:
    engine(pod)["resources"] = {
        "limits": {"cpu": "8", "rdma/rdma_shared_device_a": "9"},
        "requests": {"cpu": "4", "hugepages-1Gi": "1Gi"},
    }
    ops = run({"devices": 3, "hugepages": {"pageSize": "1Gi", "amount": "8Gi"}}, pod)
    resources = engine(apply(pod, ops))["resources"]
    assert resources == {
        "limits": {"cpu": "8", "rdma/rdma_shared_device_a": "3", "hugepages-1Gi": "8Gi"},
        "requests": {"cpu": "4", "hugepages-1Gi": "8Gi"},
    }
    assert ("add", "/spec/containers/0/resources/requests/hugepages-1Gi") in steps(ops)
    assert not any("requests/rdma" in op["path"] for op in ops)


def test_an_existing_request_for_the_device_follows_the_limit(pod: dict[str, Any]) -> None:
    engine(pod)["resources"] = {"requests": {"example.com/hca": "1"}}
    ops = run({"resourceName": "example.com/hca", "devices": 2, "ipcLock": False}, pod)
    assert steps(ops) == [
        ("add", "/spec/containers/0/resources/limits"),
        ("add", "/spec/containers/0/resources/requests/example.com~1hca"),
    ]
    assert engine(apply(pod, ops))["resources"] == {
        "requests": {"example.com/hca": "2"},
        "limits": {"example.com/hca": "2"},
    }
    assert PatchValidator().apply(pod, ops) == apply(pod, ops)


# --- hugepages -------------------------------------------------------------------------------


def test_an_existing_hugepages_volume_and_mount_are_kept(pod: dict[str, Any]) -> None:
    mine = {"name": "hugepages", "emptyDir": {"medium": "HugePages-1Gi"}}
    pod["spec"]["volumes"] = [{"name": "cache", "emptyDir": {}}, mine]
    engine(pod)["volumeMounts"] = [{"name": "other", "mountPath": "/dev/hugepages"}]
    ops = run({"hugepages": HUGEPAGES, "ipcLock": False}, pod)
    assert steps(ops) == [
        ("add", "/spec/containers/0/resources"),
        ("add", "/spec/containers/0/resources/limits/hugepages-2Mi"),
    ]


def test_the_volume_and_mount_are_appended_to_existing_lists(pod: dict[str, Any]) -> None:
    pod["spec"]["volumes"] = [{"name": "cache", "emptyDir": {}}]
    engine(pod)["volumeMounts"] = [{"name": "cache", "mountPath": "/cache"}]
    ops = run({"hugepages": HUGEPAGES, "ipcLock": False}, pod)
    assert steps(ops)[2:] == [
        ("add", "/spec/volumes/-"),
        ("add", "/spec/containers/0/volumeMounts/-"),
    ]
    after = PatchValidator().apply(pod, ops)
    assert [v["name"] for v in after["spec"]["volumes"]] == ["cache", "hugepages"]
    assert engine(after)["volumeMounts"][-1] == {"name": "hugepages", "mountPath": "/dev/hugepages"}


# --- IPC_LOCK --------------------------------------------------------------------------------


@pytest.mark.parametrize("listed", ["IPC_LOCK", "CAP_IPC_LOCK"])
def test_ipc_lock_already_listed_is_not_added_again(pod: dict[str, Any], listed: str) -> None:
    engine(pod)["securityContext"] = {"capabilities": {"add": ["NET_RAW", listed]}}
    assert steps(run({}, pod)) == [("add", "/spec/containers/0/resources")]


@pytest.mark.parametrize(
    ("security_context", "path", "value"),
    [
        ({"runAsUser": 1000}, "/securityContext/capabilities", {"add": ["IPC_LOCK"]}),
        ({"capabilities": None}, "/securityContext/capabilities", {"add": ["IPC_LOCK"]}),
        ({"capabilities": {"drop": ["ALL"]}}, "/securityContext/capabilities/add", ["IPC_LOCK"]),
        (
            {"capabilities": {"add": ["ipc_lock"]}},
            "/securityContext/capabilities/add/-",
            "IPC_LOCK",
        ),
        ({"capabilities": {"add": ["CHOWN"]}}, "/securityContext/capabilities/add/-", "IPC_LOCK"),
    ],
)
def test_ipc_lock_is_added_where_the_container_lacks_it(
    pod: dict[str, Any], security_context: dict[str, Any], path: str, value: Any
) -> None:
    engine(pod)["securityContext"] = security_context
    ops = run({}, pod)
    assert ops[-1] == {"op": "add", "path": "/spec/containers/0" + path, "value": value}
    after = PatchValidator(IPC_LOCK_POLICY).apply(pod, ops)
    assert "IPC_LOCK" in engine(after)["securityContext"]["capabilities"]["add"]


def test_ipc_lock_false_leaves_the_security_context_alone(pod: dict[str, Any]) -> None:
    ops = run({"ipcLock": False, "hugepages": HUGEPAGES, "networks": ["a"]}, pod)
    assert not any("securityContext" in op["path"] for op in ops)


# --- the patch policy ------------------------------------------------------------------------


def test_the_default_policy_refuses_ipc_lock_and_names_the_setting(pod: dict[str, Any]) -> None:
    ops = run({}, pod)
    with pytest.raises(PatchRejected) as info:
        PatchValidator(PatchPolicy()).apply(pod, ops)
    message = str(info.value)
    assert message.startswith("/spec/containers/0/securityContext/capabilities/add: ")
    assert "adds capability IPC_LOCK to container 'engine'" in message
    assert message.endswith("add it to patchPolicy.allowedCapabilities")


def test_allowing_ipc_lock_lets_the_patch_through(pod: dict[str, Any]) -> None:
    ops = run({"hugepages": HUGEPAGES, "networks": ["rdma-net"]}, pod)
    assert PatchValidator(IPC_LOCK_POLICY).apply(pod, ops) == apply(pod, ops)


def test_a_pod_that_already_has_ipc_lock_needs_nothing_allowed(pod: dict[str, Any]) -> None:
    """The plugin adds no capability there and mounts hugepages in a container the template
    grants IPC_LOCK: IPC_LOCK reaches nothing beyond the container, so the default policy lets
    a plugin change what that container runs."""
    engine(pod)["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    ops = run({"hugepages": HUGEPAGES}, pod)
    assert PatchValidator().apply(pod, ops) == apply(pod, ops)
    assert PatchValidator(IPC_LOCK_POLICY).apply(pod, ops) == apply(pod, ops)


WELL_FORMED_PODS = [
    sample_pod(),
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {NETWORKS_ANNOTATION: "a, b"}},
        "spec": {
            "volumes": [{"name": "hugepages", "emptyDir": {"medium": "HugePages-1Gi"}}],
            "containers": [
                {
                    "name": "engine",
                    "resources": {"limits": {"cpu": "1"}, "requests": {"hugepages-2Mi": "1Gi"}},
                    "volumeMounts": [{"name": "x", "mountPath": "/x"}],
                    "securityContext": {"capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    },
    {
        "metadata": {"name": "q", "annotations": {}},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"rdma/rdma_shared_device_a": "1"}}},
                {"name": "b"},
            ]
        },
    },
]


@pytest.mark.parametrize("pod", WELL_FORMED_PODS)
@pytest.mark.parametrize(
    "config",
    [
        {"ipcLock": False},
        {"ipcLock": False, "devices": 8, "hugepages": HUGEPAGES, "networks": ["a", "c"]},
        {"ipcLock": False, "container": "b", "hugepages": {"pageSize": "1Gi", "amount": "2Gi"}},
    ],
)
def test_without_ipc_lock_the_default_policy_accepts_every_patch(
    pod: dict[str, Any], config: dict[str, Any]
) -> None:
    names = [c["name"] for c in pod["spec"]["containers"]]
    if config.get("container", names[0]) not in names:
        config = {k: v for k, v in config.items() if k != "container"}
    ops = run(config, pod)
    assert ops
    assert PatchValidator().apply(pod, ops) == apply(pod, ops)


# --- the networks annotation -----------------------------------------------------------------


def annotated(pod: dict[str, Any], value: Any) -> dict[str, Any]:
    pod["metadata"]["annotations"] = {"a": "1", NETWORKS_ANNOTATION: value}
    return pod


@pytest.mark.parametrize(
    ("current", "networks", "expected"),
    [
        ("", ["a", "ns/b"], "a,ns/b"),
        (" \t", ["a"], "a"),
        ("x", ["a"], "x,a"),
        ("x, a ,,y\n", ["a", "b"], "x,a,y,b"),
        ("other/a", ["a"], "other/a,a"),
        ("a@eth1", ["a"], "a@eth1,a"),
    ],
)
def test_networks_are_merged_into_the_comma_form(
    pod: dict[str, Any], current: str, networks: list[str], expected: str
) -> None:
    ops = run({"networks": networks, "ipcLock": False}, annotated(pod, current))
    assert ops[-1] == {
        "op": "add",
        "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks",
        "value": expected,
    }
    assert PatchValidator().apply(pod, ops)["metadata"]["annotations"]["a"] == "1"


@pytest.mark.parametrize("current", ["a,b", " b , a ", "a,,b,c"])
def test_networks_already_listed_change_nothing(pod: dict[str, Any], current: str) -> None:
    ops = run({"networks": ["b", "a"], "ipcLock": False}, annotated(pod, current))
    assert not any("annotations" in op["path"] for op in ops)


def test_networks_create_the_annotations_or_add_the_key(pod: dict[str, Any]) -> None:
    config = {"networks": ["a"], "ipcLock": False}
    assert run(config, pod)[-1] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {NETWORKS_ANNOTATION: "a"},
    }
    pod["metadata"]["annotations"] = {"x": "y"}
    assert run(config, pod)[-1]["path"] == "/metadata/annotations/k8s.v1.cni.cncf.io~1networks"
    pod["metadata"]["annotations"] = {NETWORKS_ANNOTATION: None}
    assert run(config, pod)[-1]["value"] == "a"


@pytest.mark.parametrize("current", ['[{"name": "a"}]', '  [{"name":"a","interface":"net1"}]'])
def test_the_json_form_is_refused(pod: dict[str, Any], current: str) -> None:
    with pytest.raises(HookError) as info:
        run({"networks": ["a"]}, annotated(pod, current))
    message = str(info.value)
    assert message.startswith(f"the Pod's annotation {NETWORKS_ANNOTATION} is in Multus's JSON")
    assert "list the networks in one form" in message


def test_a_networks_annotation_that_is_not_a_string_is_refused(pod: dict[str, Any]) -> None:
    with pytest.raises(HookError) as info:
        run({"networks": ["a"]}, annotated(pod, ["a"]))
    assert str(info.value) == (
        "pod metadata.annotations.k8s.v1.cni.cncf.io/networks is a array, not a str"
    )


def test_without_networks_the_annotation_is_left_alone(pod: dict[str, Any]) -> None:
    ops = run({}, annotated(pod, '[{"name": "a"}]'))
    assert not any("annotations" in op["path"] for op in ops)


# --- in the chain ----------------------------------------------------------------------------


def _model_serving(config: dict[str, Any]) -> Any:
    return parse_model_serving(
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {
                "plugins": [{"name": NAME, "config": config}],
                "template": {
                    "roles": [
                        {
                            "name": "leader",
                            "entryTemplate": {
                                "spec": {"containers": [{"name": "engine", "image": "e:1"}]}
                            },
                            "workerReplicas": 1,
                            "workerTemplate": {
                                "spec": {"containers": [{"name": "engine", "image": "e:1"}]}
                            },
                        }
                    ]
                },
            },
        }
    )


def test_in_the_chain_the_default_policy_fails_with_forbidden_patch() -> None:
    ms = _model_serving({"networks": ["rdma-net"]})
    desired = next(iter(plan(ms)[0].pods()))
    with pytest.raises(PluginFailure) as info:
        build_chain(ms).on_pod_create(desired)
    assert info.value.failure_class == FailureClass.FORBIDDEN_PATCH
    assert info.value.plugin == NAME
    assert str(info.value.detail).endswith("add it to patchPolicy.allowedCapabilities")


def test_in_the_chain_with_ipc_lock_allowed_every_pod_is_configured() -> None:
    ms = _model_serving({"networks": ["rdma-net"], "hugepages": HUGEPAGES})
    chain = build_chain(ms, validator=PatchValidator(IPC_LOCK_POLICY))
    pods = list(plan(ms)[0].pods())
    assert len(pods) == 2  # the entry Pod and one worker
    for desired in pods:
        pod = chain.on_pod_create(desired).pod
        container = engine(pod)
        assert container["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert pod["metadata"]["annotations"][NETWORKS_ANNOTATION] == "rdma-net"
        applied = json.loads(pod["metadata"]["annotations"][PLUGINS_APPLIED_ANNOTATION])
        assert applied == [{"name": NAME, "runtime": "Native"}]
