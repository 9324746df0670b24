"""demo-pod-tweaks: its config model, and what it does to a Pod (Kthena's demo plugin, except that
env vars are upserted by name instead of appended)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from modelserving.api import FailureClass, PluginConfigError, PluginFailure, parse_model_serving
from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.chain import PatchValidator, build_chain
from modelserving.plugins.builtins.demo_pod_tweaks import (
    BUILTIN,
    NAME,
    DemoPodTweaks,
    DemoPodTweaksConfig,
)
from modelserving.workload.plan import plan
from tests.unit.plugins.conftest import apply, hook_request, sample_pod


def make(config: dict[str, Any], name: str = NAME) -> DemoPodTweaks:
    instance = BUILTIN.factory(name, DemoPodTweaksConfig.model_validate(config))
    assert isinstance(instance, DemoPodTweaks)
    return instance


def run(config: dict[str, Any], pod: dict[str, Any]) -> list[Any]:
    before = copy.deepcopy(pod)
    ops = list(make(config).on_pod_create(hook_request(pod)))
    assert pod == before, "the plugin returns a patch and leaves its request alone"
    return ops


# --- the definition and its config -----------------------------------------------------------


def test_definition() -> None:
    assert BUILTIN.name == NAME == "demo-pod-tweaks"
    assert BUILTIN.config_model is DemoPodTweaksConfig
    assert BUILTIN.hooks == frozenset({"on_pod_create"})
    assert BUILTIN.wasm_module == "demo-pod-tweaks.wasm"
    assert make({}, name="tweaks-2").name == "tweaks-2"


def test_config_reads_kthena_camel_case() -> None:
    config = DemoPodTweaksConfig.model_validate(
        {
            "runtimeClassName": "nvidia",
            "annotations": {"example.com/tier": "gold"},
            "env": [
                {"name": "A", "value": "1"},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            ],
        }
    )
    assert config.runtime_class_name == "nvidia"
    assert config.annotations == {"example.com/tier": "gold"}
    assert config.env is not None
    assert [e.to_api() for e in config.env] == [
        {"name": "A", "value": "1"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    ]


@pytest.mark.parametrize(
    ("config", "loc"),
    [
        ({"runtimeClass": "nvidia"}, ("runtimeClass",)),
        ({"labels": {"a": "b"}}, ("labels",)),
        ({"env": [{"name": "A", "valueFromm": {}}]}, ("env", 0, "valueFromm")),
    ],
    ids=["misspelt field", "unsupported field", "unknown env field"],
)
def test_config_refuses_unknown_fields(config: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        DemoPodTweaksConfig.model_validate(config)
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [("extra_forbidden", loc)]


@pytest.mark.parametrize("name", ["1ABC", "A B", "A=B", "A$", "ÄRGER", "a\nb"])
def test_config_refuses_bad_env_names(name: str) -> None:
    with pytest.raises(ValidationError) as info:
        DemoPodTweaksConfig.model_validate({"env": [{"name": name, "value": "x"}]})
    assert f"'{name}' is not a valid environment variable name" in str(info.value)


def test_config_refuses_an_empty_env_name() -> None:
    with pytest.raises(ValidationError) as info:
        DemoPodTweaksConfig.model_validate({"env": [{"name": "", "value": "x"}]})
    assert info.value.errors()[0]["loc"] == ("env", 0, "name")


@pytest.mark.parametrize("name", ["A", "_X", "my.var-1", "-dash", ".dot", "lower_case9"])
def test_config_accepts_kubernetes_env_names(name: str) -> None:
    config = DemoPodTweaksConfig.model_validate({"env": [{"name": name}]})
    assert config.env is not None
    assert config.env[0].name == name


def test_config_refuses_non_string_annotation_values() -> None:
    with pytest.raises(ValidationError):
        DemoPodTweaksConfig.model_validate({"annotations": {"replicas": 3}})


def test_build_chain_reports_config_errors_with_their_paths() -> None:
    ms = _model_serving({"env": [{"name": "OK"}, {"name": "9LIVES"}], "runtimeClass": "x"})
    with pytest.raises(PluginConfigError) as info:
        build_chain(ms)
    assert {e.path: e.message for e in info.value.errors} == {
        "config.env[1].name": "'9LIVES' is not a valid environment variable name",
        "config.runtimeClass": "unknown field",
    }


# --- behaviour on a Pod ----------------------------------------------------------------------


def test_everything_on_a_pod(pod: dict[str, Any]) -> None:
    config = {
        "runtimeClassName": "nvidia",
        "annotations": {"example.com/tier": "gold"},
        "env": [{"name": "MODE", "value": "prefill"}, {"name": "KV", "value": "producer"}],
    }
    ops = run(config, pod)
    expected = sample_pod()
    expected["spec"]["runtimeClassName"] = "nvidia"
    expected["metadata"]["annotations"] = {"example.com/tier": "gold"}
    mode, kv = {"name": "MODE", "value": "prefill"}, {"name": "KV", "value": "producer"}
    expected["spec"]["containers"][0]["env"] = [{"name": "GROUP_SIZE", "value": "1"}, mode, kv]
    expected["spec"]["containers"][1]["env"] = [mode, kv]
    expected["spec"]["initContainers"][0]["env"] = [mode, kv]
    assert apply(pod, ops) == expected
    assert PatchValidator().apply(pod, ops) == expected, "the default patch policy allows it"


@pytest.mark.parametrize("config", [{}, {"runtimeClassName": ""}, {"runtimeClassName": None}])
def test_empty_config_and_empty_runtime_class_are_no_ops(
    pod: dict[str, Any], config: dict[str, Any]
) -> None:
    assert run({**config, "annotations": {}, "env": []}, pod) == []
    assert run(config, pod) == []


def test_empty_runtime_class_keeps_the_pods_own(pod: dict[str, Any]) -> None:
    pod["spec"]["runtimeClassName"] = "runc"
    ops = run({"runtimeClassName": "", "annotations": {"a": "b"}}, pod)
    assert [o["path"] for o in ops] == ["/metadata/annotations"]
    assert apply(pod, ops)["spec"]["runtimeClassName"] == "runc"


def test_runtime_class_overwrites_the_pods_own(pod: dict[str, Any]) -> None:
    pod["spec"]["runtimeClassName"] = "runc"
    assert apply(pod, run({"runtimeClassName": "kata"}, pod))["spec"]["runtimeClassName"] == "kata"


def test_annotations_merge_into_existing_ones_overwriting_same_keys(pod: dict[str, Any]) -> None:
    pod["metadata"]["annotations"] = {"keep": "me", "example.com/tier": "bronze"}
    ops = run({"annotations": {"example.com/tier": "gold", "new": "1"}}, pod)
    assert apply(pod, ops)["metadata"]["annotations"] == {
        "keep": "me",
        "example.com/tier": "gold",
        "new": "1",
    }


def test_env_is_upserted_by_name_not_appended(pod: dict[str, Any]) -> None:
    """Kthena's demo appends, giving two MODE entries; we replace the existing one in place."""
    ops = run({"env": [{"name": "MODE", "value": "decode"}]}, pod)
    result = apply(pod, ops)
    assert result["spec"]["containers"][0]["env"] == [
        {"name": "GROUP_SIZE", "value": "1"},
        {"name": "MODE", "value": "decode"},
    ]
    assert result["spec"]["initContainers"][0]["env"] == [{"name": "MODE", "value": "decode"}]


def test_only_runtime_class_annotations_and_env_change(pod: dict[str, Any]) -> None:
    config = {"runtimeClassName": "nvidia", "annotations": {"a": "b"}, "env": [{"name": "X"}]}
    result = apply(pod, run(config, pod))
    assert result["metadata"]["labels"] == pod["metadata"]["labels"]
    assert [c["image"] for c in result["spec"]["containers"]] == [
        c["image"] for c in pod["spec"]["containers"]
    ]
    for container in result["spec"]["containers"] + result["spec"]["initContainers"]:
        assert {"name": "X"} in container["env"]


def test_each_call_gets_its_own_values(pod: dict[str, Any]) -> None:
    plugin = make({"annotations": {"a": "b"}, "env": [{"name": "X", "value": "1"}]})
    first = list(plugin.on_pod_create(hook_request(pod)))
    first[0]["value"]["a"] = "changed"
    first[1]["value"]["value"] = "changed"
    second = list(plugin.on_pod_create(hook_request(pod)))
    assert second[0]["value"] == {"a": "b"}
    assert second[1]["value"] == {"name": "X", "value": "1"}


# --- in the chain ----------------------------------------------------------------------------


def _model_serving(config: dict[str, Any], **spec: Any) -> Any:
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
                            "name": "prefill",
                            "entryTemplate": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "engine",
                                            "image": "vllm/vllm-openai:v0.10.0",
                                            "env": [{"name": "KV_ROLE", "value": "unset"}],
                                        }
                                    ]
                                }
                            },
                            "workerReplicas": 0,
                        }
                    ]
                },
            },
        }
    )


def test_in_the_chain_like_the_prefill_decode_example() -> None:
    ms = _model_serving(
        {
            "runtimeClassName": "nvidia",
            "annotations": {"example.com/tier": "prefill"},
            "env": [{"name": "KV_ROLE", "value": "producer"}],
        }
    )
    [desired] = list(plan(ms)[0].pods())
    result = build_chain(ms).on_pod_create(desired)
    pod = result.pod
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["metadata"]["annotations"]["example.com/tier"] == "prefill"
    env = pod["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env].count("KV_ROLE") == 1
    assert env[0] == {"name": "KV_ROLE", "value": "producer"}
    assert json.loads(pod["metadata"]["annotations"][PLUGINS_APPLIED_ANNOTATION]) == [
        {"name": NAME, "runtime": "Native"}
    ]


def test_in_the_chain_controller_annotations_are_refused() -> None:
    ms = _model_serving({"annotations": {"modelserving.volcano.sh/revision": "forged"}})
    [desired] = list(plan(ms)[0].pods())
    with pytest.raises(PluginFailure) as info:
        build_chain(ms).on_pod_create(desired)
    assert info.value.failure_class == FailureClass.FORBIDDEN_PATCH
    assert info.value.plugin == NAME
    assert "modelserving.volcano.sh/revision" in info.value.detail


@pytest.mark.parametrize(
    ("config", "cause"),
    [
        ({"runtimeClassName": "Bad Name"}, "not a valid RuntimeClass name"),
        ({"annotations": {"bad key!": "x"}}, "'bad key!' is not a valid annotation key"),
    ],
)
def test_values_the_api_server_would_refuse_are_refused(config: dict[str, Any], cause: str) -> None:
    with pytest.raises(ValidationError) as info:
        DemoPodTweaksConfig.model_validate(config)
    assert cause in str(info.value)
