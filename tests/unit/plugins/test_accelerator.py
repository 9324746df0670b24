"""accelerator: its config model (vendor defaults, what it refuses), what it does to a Pod and how
it treats what the Pod already has, the default patch policy, and the docs page's example run
through the chain."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from modelserving.api import (
    FailureClass,
    PatchRejected,
    PluginConfigError,
    PluginFailure,
    parse_model_serving,
)
from modelserving.chain import PatchValidator, build_chain
from modelserving.plugins.base import HookError
from modelserving.plugins.builtins import BUILTINS
from modelserving.plugins.builtins.accelerator import (
    BUILTIN,
    NAME,
    Accelerator,
    AcceleratorConfig,
)
from modelserving.workload.plan import plan
from tests.unit.plugins.conftest import apply, hook_request

DOC = Path(__file__).resolve().parents[3] / "docs" / "builtins" / "accelerator.md"
NVIDIA_ENV = {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}
SHM_VOLUME = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
SHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}


def make(config: dict[str, Any], name: str = NAME) -> Accelerator:
    instance = BUILTIN.factory(name, AcceleratorConfig.model_validate(config))
    assert isinstance(instance, Accelerator)
    return instance


def run(config: dict[str, Any], pod: dict[str, Any], is_entry: bool = True) -> list[Any]:
    """The plugin's patch, checked to leave the request alone and to pass the default policy."""
    before = copy.deepcopy(pod)
    ops = list(make(config).on_pod_create(hook_request(pod, is_entry)))
    assert pod == before, "the plugin returns a patch and leaves its request alone"
    PatchValidator().apply(pod, ops)
    return ops


def paths(ops: list[Any]) -> list[str]:
    return [op["path"] for op in ops]


def engine(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


# --- the definition and its config -----------------------------------------------------------


def test_definition() -> None:
    assert BUILTIN.name == NAME == "accelerator"
    assert BUILTIN.config_model is AcceleratorConfig
    assert BUILTIN.hooks == frozenset({"on_pod_create"})
    assert BUILTIN.wasm_module == "accelerator.wasm"
    assert BUILTIN in BUILTINS
    assert make({"vendor": "amd"}, name="gpus-2").name == "gpus-2"


@pytest.mark.parametrize(
    ("vendor", "resource", "env"),
    [
        ("nvidia", "nvidia.com/gpu", [NVIDIA_ENV]),
        ("amd", "amd.com/gpu", []),
        ("ascend", "huawei.com/Ascend910", []),
    ],
)
def test_vendor_defaults(
    pod: dict[str, Any], vendor: str, resource: str, env: list[dict[str, str]]
) -> None:
    result = apply(pod, run({"vendor": vendor}, pod))
    assert engine(result)["resources"] == {"limits": {resource: "1"}}
    assert result["spec"]["tolerations"] == [
        {"key": resource, "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert engine(result)["env"] == engine(pod)["env"] + env
    assert "runtimeClassName" not in result["spec"]
    assert "nodeSelector" not in result["spec"]
    assert "volumes" not in result["spec"]


def test_config_reads_camel_and_snake_case() -> None:
    camel = AcceleratorConfig.model_validate(
        {
            "vendor": "ascend",
            "devices": 4,
            "resourceName": "huawei.com/Ascend310P",
            "runtimeClassName": "ascend",
            "nodeSelector": {"accelerator": "ascend-310p"},
            "shmSize": "8Gi",
            "tolerations": [{"key": "k", "effect": "NoExecute", "tolerationSeconds": 60}],
        }
    )
    snake = AcceleratorConfig.model_validate(
        {
            "vendor": "ascend",
            "devices": 4,
            "resource_name": "huawei.com/Ascend310P",
            "runtime_class_name": "ascend",
            "node_selector": {"accelerator": "ascend-310p"},
            "shm_size": "8Gi",
            "tolerations": [{"key": "k", "effect": "NoExecute", "toleration_seconds": 60}],
        }
    )
    assert camel == snake
    assert camel.tolerations is not None
    assert camel.tolerations[0].to_api() == {
        "key": "k",
        "effect": "NoExecute",
        "tolerationSeconds": 60,
    }


def test_null_is_absent_so_the_defaults_apply(pod: dict[str, Any]) -> None:
    config = {"vendor": "nvidia", "devices": None, "tolerations": None, "env": None}
    ops = run(config, pod)
    assert ops == run({"vendor": "nvidia"}, pod)
    assert len(ops) == 3


@pytest.mark.parametrize(
    ("config", "cause"),
    [
        ({}, "vendor\n  Field required"),
        ({"vendor": "intel"}, "Input should be 'nvidia', 'ascend' or 'amd'"),
        ({"vendor": "NVIDIA"}, "Input should be 'nvidia', 'ascend' or 'amd'"),
        ({"vendor": "amd", "devices": 0}, "greater than or equal to 1"),
        ({"vendor": "amd", "devices": 129}, "less than or equal to 128"),
        ({"vendor": "amd", "devices": True}, "valid integer"),
        ({"vendor": "amd", "devices": 8.0}, "valid integer"),
        ({"vendor": "amd", "devices": "8"}, "valid integer"),
        ({"vendor": "amd", "resourceName": "gpu"}, "not a resource name with a prefix"),
        ({"vendor": "amd", "resourceName": "AMD.com/gpu"}, "not a resource name with a prefix"),
        ({"vendor": "amd", "resourceName": "amd.com/"}, "not a resource name with a prefix"),
        ({"vendor": "amd", "container": 1}, "valid string"),
        ({"vendor": "amd", "runtimeClassName": ""}, "not a valid RuntimeClass name"),
        ({"vendor": "amd", "runtimeClassName": "Kata"}, "not a valid RuntimeClass name"),
        ({"vendor": "amd", "nodeSelector": {"a b": "x"}}, "not a valid label key"),
        ({"vendor": "amd", "nodeSelector": {"a": "-x"}}, "not a valid label value"),
        ({"vendor": "amd", "nodeSelector": {"a": 1}}, "valid string"),
        ({"vendor": "amd", "nodeSelector": []}, "valid dictionary"),
        ({"vendor": "amd", "tolerations": {}}, "valid list"),
        ({"vendor": "amd", "tolerations": [{}]}, "without a key must have operator Exists"),
        (
            {"vendor": "amd", "tolerations": [{"operator": "Equal", "value": "x"}]},
            "without a key must have operator Exists",
        ),
        ({"vendor": "amd", "tolerations": [{"key": "k", "operator": "In"}]}, "'Exists' or"),
        ({"vendor": "amd", "tolerations": [{"key": "k", "effect": "Never"}]}, "'NoSchedule',"),
        ({"vendor": "amd", "tolerations": [{"key": "-k"}]}, "not a valid toleration key"),
        ({"vendor": "amd", "tolerations": [{"key": "k", "value": "a b"}]}, "toleration value"),
        (
            {"vendor": "amd", "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
            "must have no value",
        ),
        (
            {"vendor": "amd", "tolerations": [{"key": "k", "tolerationSeconds": 5}]},
            "only allowed with effect NoExecute",
        ),
        (
            {
                "vendor": "amd",
                "tolerations": [{"key": "k", "effect": "NoExecute", "tolerationSeconds": -1}],
            },
            "greater than or equal to 0",
        ),
        (
            {
                "vendor": "amd",
                "tolerations": [{"key": "k", "effect": "NoExecute", "tolerationSeconds": 2**63}],
            },
            "less than or equal to 9223372036854775807",
        ),
        ({"vendor": "amd", "tolerations": [{"key": "k", "taint": "x"}]}, "Extra inputs"),
        ({"vendor": "amd", "env": [{"name": "A"}]}, "env.0.value\n  Field required"),
        ({"vendor": "amd", "env": [{"value": "1"}]}, "env.0.name\n  Field required"),
        ({"vendor": "amd", "env": [{"name": "9A", "value": "1"}]}, "environment variable name"),
        ({"vendor": "amd", "env": [{"name": "", "value": "1"}]}, "environment variable name"),
        (
            {"vendor": "amd", "env": [{"name": "A", "valueFrom": {}, "value": "1"}]},
            "Extra inputs",
        ),
        ({"vendor": "amd", "shmSize": "16GB"}, "not a valid quantity"),
        ({"vendor": "amd", "shmSize": "-1Gi"}, "not a valid quantity"),
        ({"vendor": "amd", "shmSize": 16}, "valid string"),
        ({"vendor": "amd", "gpus": 8}, "Extra inputs"),
    ],
)
def test_config_refuses(config: dict[str, Any], cause: str) -> None:
    with pytest.raises(ValidationError) as info:
        AcceleratorConfig.model_validate(config)
    assert cause in str(info.value)


@pytest.mark.parametrize(
    "toleration",
    [
        {"operator": "Exists"},
        {"key": "k", "operator": "Exists", "value": ""},
        {"key": "example.com/k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
        {"key": "k", "effect": "NoExecute", "tolerationSeconds": 0},
    ],
)
def test_config_accepts_tolerations_the_api_server_accepts(toleration: dict[str, Any]) -> None:
    config = AcceleratorConfig.model_validate({"vendor": "amd", "tolerations": [toleration]})
    assert config.tolerations is not None
    assert config.tolerations[0].to_api() == toleration


def test_build_chain_reports_config_errors_with_their_paths() -> None:
    ms = _model_serving({"vendor": "nvidia", "devices": 0, "shm": "1Gi"})
    with pytest.raises(PluginConfigError) as info:
        build_chain(ms)
    assert {e.path for e in info.value.errors} == {"config.devices", "config.shm"}


# --- what it does to a Pod -------------------------------------------------------------------


FULL = {
    "vendor": "nvidia",
    "devices": 8,
    "runtimeClassName": "nvidia",
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "shmSize": "16Gi",
}


def test_everything_on_a_bare_pod_in_order(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][0].pop("env")
    ops = run(FULL, pod)
    assert ops == [
        {
            "op": "add",
            "path": "/spec/containers/0/resources",
            "value": {"limits": {"nvidia.com/gpu": "8"}},
        },
        {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"},
        {
            "op": "add",
            "path": "/spec/nodeSelector",
            "value": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        },
        {
            "op": "add",
            "path": "/spec/tolerations",
            "value": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        {"op": "add", "path": "/spec/containers/0/env", "value": [NVIDIA_ENV]},
        {"op": "add", "path": "/spec/volumes", "value": [SHM_VOLUME]},
        {"op": "add", "path": "/spec/containers/0/volumeMounts", "value": [SHM_MOUNT]},
    ]
    result = apply(pod, ops)
    assert result["spec"]["containers"][1] == pod["spec"]["containers"][1]
    assert result["spec"]["initContainers"] == pod["spec"]["initContainers"]
    assert result["metadata"] == pod["metadata"]


def test_entry_and_worker_pods_get_the_same_patch(pod: dict[str, Any]) -> None:
    assert run(FULL, pod, is_entry=True) == run(FULL, pod, is_entry=False)


def test_the_limit_replaces_and_other_resources_stay(pod: dict[str, Any]) -> None:
    engine(pod)["resources"] = {"limits": {"nvidia.com/gpu": "1", "memory": "64Gi"}}
    ops = run({"vendor": "nvidia", "devices": 4, "tolerations": [], "env": []}, pod)
    assert ops == [
        {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "4"}
    ]
    assert engine(apply(pod, ops))["resources"] == {
        "limits": {"nvidia.com/gpu": "4", "memory": "64Gi"}
    }


def test_the_request_is_set_only_when_the_container_requests_the_resource(
    pod: dict[str, Any],
) -> None:
    config = {"vendor": "amd", "devices": 2, "tolerations": []}
    engine(pod)["resources"] = {"requests": {"cpu": "4"}}
    result = apply(pod, run(config, pod))
    assert engine(result)["resources"] == {"requests": {"cpu": "4"}, "limits": {"amd.com/gpu": "2"}}
    engine(pod)["resources"] = {"requests": {"amd.com/gpu": "1", "cpu": "4"}}
    result = apply(pod, run(config, pod))
    assert engine(result)["resources"] == {
        "requests": {"amd.com/gpu": "2", "cpu": "4"},
        "limits": {"amd.com/gpu": "2"},
    }
    engine(pod)["resources"] = {"requests": {"amd.com/gpu": None}}  # null counts as absent
    assert paths(run(config, pod)) == ["/spec/containers/0/resources/limits"]


def test_a_resource_name_override_for_mig(pod: dict[str, Any]) -> None:
    config = {"vendor": "nvidia", "resourceName": "nvidia.com/mig-1g.10gb"}
    result = apply(pod, run(config, pod))
    assert engine(result)["resources"] == {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    assert result["spec"]["tolerations"][0]["key"] == "nvidia.com/mig-1g.10gb"


def test_the_runtime_class_replaces_the_pods_own(pod: dict[str, Any]) -> None:
    """Which the default patch policy refuses (protectedFields: existingRuntimeClassName)."""
    pod["spec"]["runtimeClassName"] = "runc"
    ops = list(make(FULL).on_pod_create(hook_request(pod)))
    assert apply(pod, ops)["spec"]["runtimeClassName"] == "nvidia"
    with pytest.raises(PatchRejected, match="existingRuntimeClassName"):
        PatchValidator().apply(pod, ops)


def test_the_node_selector_merges_overwriting_same_keys(pod: dict[str, Any]) -> None:
    pod["spec"]["nodeSelector"] = {"zone": "a", "pool": "cpu"}
    config = {"vendor": "amd", "nodeSelector": {"pool": "gpu", "amd.com/gpu.family": "MI300"}}
    ops = run(config, pod)
    assert [p for p in paths(ops) if "nodeSelector" in p] == [
        "/spec/nodeSelector/pool",
        "/spec/nodeSelector/amd.com~1gpu.family",
    ]
    assert apply(pod, ops)["spec"]["nodeSelector"] == {
        "zone": "a",
        "pool": "gpu",
        "amd.com/gpu.family": "MI300",
    }


def test_tolerations_already_there_are_not_repeated(pod: dict[str, Any]) -> None:
    mine = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    pod["spec"]["tolerations"] = [{**mine, "tolerationSeconds": 5}]
    result = apply(pod, run({"vendor": "nvidia"}, pod))
    assert result["spec"]["tolerations"] == pod["spec"]["tolerations"]


@pytest.mark.parametrize(
    "existing",
    [
        {"key": "nvidia.com/gpu", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoSchedule"},
    ],
)
def test_a_toleration_differing_in_one_field_is_appended(
    pod: dict[str, Any], existing: dict[str, Any]
) -> None:
    pod["spec"]["tolerations"] = [existing]
    ops = run({"vendor": "nvidia"}, pod)
    assert "/spec/tolerations/-" in paths(ops)
    assert len(apply(pod, ops)["spec"]["tolerations"]) == 2


def test_configured_tolerations_replace_the_default_and_repeat_once(pod: dict[str, Any]) -> None:
    t = {
        "key": "example.com/dedicated",
        "operator": "Equal",
        "value": "llm",
        "effect": "NoSchedule",
    }
    result = apply(pod, run({"vendor": "amd", "tolerations": [t, t]}, pod))
    assert result["spec"]["tolerations"] == [t]
    assert "tolerations" not in apply(pod, run({"vendor": "amd", "tolerations": []}, pod))["spec"]


def test_env_the_pod_has_wins(pod: dict[str, Any]) -> None:
    engine(pod)["env"].append({"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"})
    config = {"vendor": "nvidia", "env": [*[NVIDIA_ENV], {"name": "NCCL_DEBUG", "value": "WARN"}]}
    result = apply(pod, run(config, pod))
    assert engine(result)["env"] == [*engine(pod)["env"], {"name": "NCCL_DEBUG", "value": "WARN"}]
    assert (
        engine(apply(pod, run({"vendor": "nvidia", "env": []}, pod)))["env"] == engine(pod)["env"]
    )


def test_the_users_shm_volume_and_mount_are_kept(pod: dict[str, Any]) -> None:
    pod["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    engine(pod)["volumeMounts"] = [{"name": "model", "mountPath": "/models"}]
    ops = run({"vendor": "amd", "shmSize": "16Gi"}, pod)
    assert "/spec/volumes/-" not in paths(ops)
    result = apply(pod, ops)
    assert result["spec"]["volumes"] == pod["spec"]["volumes"]
    assert engine(result)["volumeMounts"] == [*engine(pod)["volumeMounts"], SHM_MOUNT]
    engine(pod)["volumeMounts"] = [{"name": "mine", "mountPath": "/dev/shm"}]
    pod["spec"]["volumes"] = [{"name": "mine", "emptyDir": {}}]
    result = apply(pod, run({"vendor": "amd", "shmSize": "16Gi"}, pod))
    assert engine(result)["volumeMounts"] == engine(pod)["volumeMounts"]
    assert result["spec"]["volumes"] == [{"name": "mine", "emptyDir": {}}, SHM_VOLUME]


def test_a_named_container_is_configured(pod: dict[str, Any]) -> None:
    ops = run({"vendor": "nvidia", "container": "proxy", "shmSize": "16Gi"}, pod)
    assert {p.split("/")[3] for p in paths(ops) if p.startswith("/spec/containers/")} == {"1"}
    result = apply(pod, ops)
    assert result["spec"]["containers"][1]["env"] == [NVIDIA_ENV]
    assert result["spec"]["containers"][0] == pod["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("config", "change", "message"),
    [
        ({"container": "gone"}, None, "the Pod has no container named 'gone'"),
        ({}, ("containers", []), "the Pod has no containers"),
        ({}, ("resources", "x"), "pod spec.containers[0].resources is a str, not a map"),
        (
            {},
            ("resources", {"limits": [1]}),
            "pod spec.containers[0].resources.limits is a array, not a map",
        ),
        ({}, ("tolerations", {}), "pod spec.tolerations is a map, not an array"),
        ({"nodeSelector": {"a": "b"}}, ("nodeSelector", "x"), "pod spec.nodeSelector is a str"),
        ({}, ("env", {"A": "1"}), "pod spec.containers[0].env is a map, not an array"),
    ],
)
def test_pod_shapes_it_cannot_patch_are_hook_errors(
    pod: dict[str, Any], config: dict[str, Any], change: tuple[str, Any] | None, message: str
) -> None:
    if change is not None:
        field, value = change
        target = (
            pod["spec"] if field in ("containers", "tolerations", "nodeSelector") else engine(pod)
        )
        target[field] = value
    with pytest.raises(HookError) as info:
        make({"vendor": "nvidia", **config}).on_pod_create(hook_request(pod))
    assert str(info.value).startswith(message)


def test_the_default_policy_accepts_every_patch_of_a_well_formed_pod(pod: dict[str, Any]) -> None:
    """Pods with and without everything the plugin touches; ``run`` applies each patch with the
    default PatchValidator, which raises on a refused operation."""
    full = copy.deepcopy(pod)
    engine(full)["resources"] = {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1"},
    }
    engine(full)["volumeMounts"] = [{"name": "m", "mountPath": "/m"}]
    full["spec"].update(
        runtimeClassName="nvidia",  # the template's own may not be replaced (protectedFields)
        nodeSelector={"nvidia.com/gpu.product": "x", "zone": "a"},
        tolerations=[{"key": "other", "operator": "Exists"}],
        volumes=[{"name": "m", "emptyDir": {}}],
    )
    config = {
        **FULL,
        "env": [NVIDIA_ENV, {"name": "MODE", "value": "x"}, {"name": "B", "value": "1"}],
    }
    for p in (pod, full):
        for is_entry in (True, False):
            assert run(config, p, is_entry)


# --- in the chain ----------------------------------------------------------------------------


def _model_serving(config: Any, **spec: Any) -> Any:
    return parse_model_serving(
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {
                "plugins": [{"name": NAME, "config": config, **spec}],
                "template": {
                    "roles": [
                        {
                            "name": "server",
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


def test_in_the_chain_the_scope_limits_it_to_workers() -> None:
    ms = _model_serving({"vendor": "ascend", "devices": 8}, scope={"target": "Worker"})
    chain = build_chain(ms)
    pods = {d.place.is_entry: chain.on_pod_create(d).pod for d in plan(ms)[0].pods()}
    assert "resources" not in engine(pods[True])
    assert engine(pods[False])["resources"] == {"limits": {"huawei.com/Ascend910": "8"}}


def test_in_the_chain_a_missing_container_fails_the_pod() -> None:
    ms = _model_serving({"vendor": "amd", "container": "sidecar"})
    desired = next(iter(plan(ms)[0].pods()))
    with pytest.raises(PluginFailure) as info:
        build_chain(ms).on_pod_create(desired)
    assert info.value.failure_class == FailureClass.PLUGIN_ERROR
    assert info.value.plugin == NAME
    assert info.value.detail == "the Pod has no container named 'sidecar'"


def _doc_yaml() -> list[Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    return [yaml.safe_load(b) for b in blocks]


def test_the_docs_example_does_what_the_page_says() -> None:
    [ms_doc, result_doc] = [b for b in _doc_yaml() if isinstance(b, dict) and "spec" in b]
    ms = parse_model_serving(ms_doc)
    chain = build_chain(ms)
    pods = [chain.on_pod_create(d).pod for d in plan(ms)[0].pods()]
    assert sorted(d.place.is_entry for d in plan(ms)[0].pods()) == [False, True]
    want = result_doc["spec"]
    for pod in pods:
        container = engine(pod)
        for field in ("resources", "volumeMounts"):
            assert container[field] == want["containers"][0][field], field
        controller_env = ["GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX"]
        assert [e["name"] for e in container["env"][:3]] == controller_env
        assert container["env"][3:] == want["containers"][0]["env"]
        assert pod["spec"]["tolerations"] == want["tolerations"]
        assert pod["spec"]["volumes"] == want["volumes"]
