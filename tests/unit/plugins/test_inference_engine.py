"""inference-engine (native): its config model, what it does to entry and worker Pods, what it
keeps of the template, its errors, and that the default patch policy accepts its patches."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from modelserving.api import FailureClass, PluginConfigError, PluginFailure, parse_model_serving
from modelserving.chain import PatchValidator, build_chain
from modelserving.plugins.base import HookError
from modelserving.plugins.builtins import BUILTINS
from modelserving.plugins.builtins.inference_engine import (
    BUILTIN,
    NAME,
    InferenceEngine,
    InferenceEngineConfig,
)
from modelserving.plugins.registry import default_registry
from modelserving.workload.plan import plan
from tests.unit.plugins.conftest import apply, hook_request, sample_pod

ENGINE = "/spec/containers/0"


def make(config: dict[str, Any], name: str = NAME) -> InferenceEngine:
    instance = BUILTIN.factory(name, InferenceEngineConfig.model_validate(config))
    assert isinstance(instance, InferenceEngine)
    return instance


def run(config: dict[str, Any], pod: dict[str, Any], is_entry: bool = True) -> list[Any]:
    before = copy.deepcopy(pod)
    ops = list(make(config).on_pod_create(hook_request(pod, is_entry)))
    assert pod == before, "the plugin returns a patch and leaves its request alone"
    return ops


def patched(config: dict[str, Any], pod: dict[str, Any], is_entry: bool = True) -> dict[str, Any]:
    """The Pod after the plugin's patch, applied under the default patch policy (which must
    accept it) and checked against a plain RFC 6902 application."""
    ops = run(config, pod, is_entry)
    after = PatchValidator().apply(pod, ops)
    assert after == apply(pod, ops)
    return after


def bare_pod(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llm-0-server-0-0", "namespace": "team-a"},
        "spec": {"containers": [{"name": "engine", "image": "vllm:1", **container}]},
    }


def field_env(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


POD_ENV = [
    field_env("POD_IP", "status.podIP"),
    field_env("POD_NAME", "metadata.name"),
    field_env("POD_NAMESPACE", "metadata.namespace"),
]
VLLM_ENV = [*POD_ENV, field_env("VLLM_HOST_IP", "status.podIP")]
DSHM = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
DSHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}


def probes(port: int, path: str = "/health", failures: int = 180) -> dict[str, Any]:
    return {
        "startupProbe": {
            "httpGet": {"path": path, "port": port},
            "periodSeconds": 10,
            "failureThreshold": failures,
        },
        "readinessProbe": {
            "httpGet": {"path": path, "port": port},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
    }


# --- the definition and its config -----------------------------------------------------------


def test_definition_and_registration() -> None:
    assert BUILTIN.name == NAME == "inference-engine"
    assert BUILTIN.config_model is InferenceEngineConfig
    assert BUILTIN.hooks == frozenset({"on_pod_create"})
    assert BUILTIN.wasm_module == "inference-engine.wasm"
    assert BUILTIN in BUILTINS
    assert default_registry().get(NAME) is BUILTIN
    assert make({"engine": "vllm"}, name="engine-2").name == "engine-2"


@pytest.mark.parametrize(("engine", "port"), [("vllm", 8000), ("sglang", 30000), ("trt-llm", 8000)])
def test_defaults_by_engine(engine: str, port: int) -> None:
    plugin = make({"engine": engine})
    assert (plugin.engine, plugin.port, plugin.health_path) == (engine, port, "/health")
    assert (plugin.startup_timeout_seconds, plugin.container, plugin.shm_size) == (1800, None, None)


def test_config_in_camel_and_snake_case_and_null_is_absent() -> None:
    plugin = make(
        {
            "engine": "sglang",
            "port": 9000,
            "health_path": "/health_generate",
            "startupTimeoutSeconds": 3600,
            "container": "engine",
            "shm_size": "16Gi",
            "healthPath": None,
        }
    )
    assert (plugin.port, plugin.health_path, plugin.startup_timeout_seconds) == (
        9000,
        "/health_generate",
        3600,
    )
    assert (plugin.container, plugin.shm_size) == ("engine", "16Gi")
    assert make({"engine": "vllm", "port": None}).port == 8000


@pytest.mark.parametrize(
    "config",
    [
        {"engine": "vllm", "port": 1, "startupTimeoutSeconds": 10},
        {"engine": "vllm", "port": 65535, "startupTimeoutSeconds": 86400},
        {"engine": "vllm", "healthPath": "/" + "é" * 255},  # 256 characters, 511 bytes
        {"engine": "vllm", "healthPath": "/"},
        {"engine": "vllm", "healthPath": "/a\u200bb"},  # a zero-width space is not whitespace
        {"engine": "vllm", "shmSize": "0"},
        {"engine": "vllm", "container": ""},
    ],
)
def test_config_accepts_the_bounds(config: dict[str, Any]) -> None:
    InferenceEngineConfig.model_validate(config)


@pytest.mark.parametrize(
    ("config", "cause"),
    [
        ({}, "Field required"),
        ({"engine": None}, "Field required"),
        ({"engine": "VLLM"}, "Input should be 'vllm', 'sglang' or 'trt-llm'"),
        ({"engine": "tensorrt-llm"}, "Input should be 'vllm'"),
        ({"engine": 1}, "Input should be 'vllm'"),
        ({"engine": "vllm", "port": 0}, "greater than or equal to 1"),
        ({"engine": "vllm", "port": 65536}, "less than or equal to 65535"),
        ({"engine": "vllm", "port": True}, "valid integer"),
        ({"engine": "vllm", "port": 8000.0}, "valid integer"),
        ({"engine": "vllm", "port": "8000"}, "valid integer"),
        ({"engine": "vllm", "healthPath": "health"}, "'health' does not start with '/'"),
        ({"engine": "vllm", "healthPath": ""}, "does not start with '/'"),
        ({"engine": "vllm", "healthPath": "/a b"}, "the path contains whitespace"),
        ({"engine": "vllm", "healthPath": "/a\tb"}, "the path contains whitespace"),
        ({"engine": "vllm", "healthPath": "/a\x1f"}, "the path contains whitespace"),
        ({"engine": "vllm", "healthPath": "/\u3000"}, "the path contains whitespace"),
        ({"engine": "vllm", "healthPath": "/" + "x" * 256}, "257 characters, more than 256"),
        ({"engine": "vllm", "healthPath": 1}, "valid string"),
        ({"engine": "vllm", "startupTimeoutSeconds": 9}, "greater than or equal to 10"),
        ({"engine": "vllm", "startupTimeoutSeconds": 86401}, "less than or equal to 86400"),
        ({"engine": "vllm", "container": 0}, "valid string"),
        ({"engine": "vllm", "shmSize": "16GB"}, "'16GB' is not a valid quantity"),
        ({"engine": "vllm", "shmSize": "-1Gi"}, "is not a valid quantity"),
        ({"engine": "vllm", "shmSize": 16}, "valid string"),
        ({"engine": "vllm", "shm": "1Gi"}, "Extra inputs are not permitted"),
    ],
)
def test_config_refuses(config: dict[str, Any], cause: str) -> None:
    with pytest.raises(ValidationError) as info:
        InferenceEngineConfig.model_validate(config)
    assert cause in str(info.value)


# --- behaviour on a Pod ----------------------------------------------------------------------


def test_a_bare_vllm_entry_pod_gets_everything_in_order() -> None:
    ops = run({"engine": "vllm"}, bare_pod())
    assert ops == [
        {"op": "add", "path": f"{ENGINE}/env", "value": [VLLM_ENV[0]]},
        {"op": "add", "path": f"{ENGINE}/env/-", "value": VLLM_ENV[1]},
        {"op": "add", "path": f"{ENGINE}/env/-", "value": VLLM_ENV[2]},
        {"op": "add", "path": f"{ENGINE}/env/-", "value": VLLM_ENV[3]},
        {"op": "add", "path": "/spec/volumes", "value": [DSHM]},
        {"op": "add", "path": f"{ENGINE}/volumeMounts", "value": [DSHM_MOUNT]},
        {
            "op": "add",
            "path": f"{ENGINE}/ports",
            "value": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        },
        {"op": "add", "path": f"{ENGINE}/startupProbe", "value": probes(8000)["startupProbe"]},
        {"op": "add", "path": f"{ENGINE}/readinessProbe", "value": probes(8000)["readinessProbe"]},
    ]
    # the key order is part of the response bytes the WebAssembly twin must match
    assert list(ops[8]["value"]) == ["httpGet", "periodSeconds", "failureThreshold"]
    assert list(ops[6]["value"][0]) == ["name", "containerPort", "protocol"]


def test_a_worker_gets_env_and_shared_memory_but_no_port_or_probes() -> None:
    pod = patched({"engine": "vllm", "shmSize": "32Gi"}, bare_pod(), is_entry=False)
    engine = pod["spec"]["containers"][0]
    assert engine["env"] == VLLM_ENV
    assert engine["volumeMounts"] == [DSHM_MOUNT]
    assert pod["spec"]["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}
    ]
    assert list(pod["spec"]["volumes"][0]["emptyDir"]) == ["medium", "sizeLimit"]
    assert not {"ports", "startupProbe", "readinessProbe", "livenessProbe"} & set(engine)


@pytest.mark.parametrize(("engine", "port"), [("sglang", 30000), ("trt-llm", 8000)])
def test_other_engines_get_no_vllm_env(engine: str, port: int) -> None:
    container = patched({"engine": engine}, bare_pod())["spec"]["containers"][0]
    assert container["env"] == POD_ENV
    assert container["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    assert {k: container[k] for k in ("startupProbe", "readinessProbe")} == probes(port)


@pytest.mark.parametrize(
    ("timeout", "failures"), [(10, 1), (11, 2), (15, 2), (1800, 180), (1801, 181), (86400, 8640)]
)
def test_the_startup_probe_covers_the_timeout(timeout: int, failures: int) -> None:
    config = {"engine": "sglang", "startupTimeoutSeconds": timeout, "port": 31000}
    config["healthPath"] = "/v1/models"
    container = patched(config, bare_pod())["spec"]["containers"][0]
    assert container["startupProbe"] == probes(31000, "/v1/models", failures)["startupProbe"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models", "port": 31000}


def test_what_the_template_says_is_kept() -> None:
    mine_probe = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    pod = bare_pod(
        env=[{"name": "POD_NAME", "value": "fixed"}, {"name": "VLLM_HOST_IP", "value": "1.2.3.4"}],
        volumeMounts=[{"name": "scratch", "mountPath": "/dev/shm"}],
        ports=[{"name": "api", "containerPort": 8000}],
        startupProbe=mine_probe,
    )
    pod["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {}}]
    ops = run({"engine": "vllm"}, pod)
    assert [(op["path"], op["value"]["name"]) for op in ops[:2]] == [
        (f"{ENGINE}/env/-", "POD_IP"),
        (f"{ENGINE}/env/-", "POD_NAMESPACE"),
    ]
    assert [op["path"] for op in ops[2:]] == [f"{ENGINE}/readinessProbe"]
    after = PatchValidator().apply(pod, ops)
    engine = after["spec"]["containers"][0]
    assert engine["startupProbe"] == mine_probe
    assert engine["env"][:2] == pod["spec"]["containers"][0]["env"]
    assert after["spec"]["volumes"] == [{"name": "dshm", "emptyDir": {}}]


def test_a_port_named_http_or_with_the_number_counts_as_there() -> None:
    by_name = bare_pod(ports=[{"name": "http", "containerPort": 30000}])
    by_number = bare_pod(ports=[{"containerPort": 30000, "protocol": "UDP"}])
    as_string = bare_pod(ports=[{"name": "web", "containerPort": "30000"}])
    assert not [op for op in run({"engine": "sglang"}, by_name) if "ports" in op["path"]]
    assert not [op for op in run({"engine": "sglang"}, by_number) if "ports" in op["path"]]
    [port_op] = [op for op in run({"engine": "sglang"}, as_string) if "ports" in op["path"]]
    assert port_op["path"] == f"{ENGINE}/ports/-"


def test_a_port_named_http_on_another_number_is_refused_on_the_entry_pod() -> None:
    """The probes use the configured port: a template's own 'http' port elsewhere would leave
    them probing nothing, and the Pod never Ready."""
    pod = bare_pod(ports=[{"name": "http", "containerPort": 8080}])
    with pytest.raises(HookError, match="port named 'http' that is not the engine's port 30000"):
        run({"engine": "sglang"}, pod)
    assert run({"engine": "sglang", "port": 8080}, pod)  # the fix the message suggests
    assert run({"engine": "sglang"}, pod, is_entry=False)  # workers get no port
    # not refused when the probes have a port to hit, or when no probe is added
    both = bare_pod(
        ports=[{"name": "web", "containerPort": 30000}, {"name": "http", "containerPort": 8080}]
    )
    assert not [op for op in run({"engine": "sglang"}, both) if "ports" in op["path"]]
    own_probes = bare_pod(
        ports=[{"name": "http", "containerPort": 8080}],
        startupProbe={"exec": {"command": ["true"]}},
        readinessProbe={"exec": {"command": ["true"]}},
    )
    assert not [op for op in run({"engine": "sglang"}, own_probes) if "ports" in op["path"]]


def test_a_null_probe_or_list_counts_as_absent() -> None:
    pod = bare_pod(readinessProbe=None, env=None, ports=None)
    pod["spec"]["volumes"] = None
    after = patched({"engine": "trt-llm"}, pod)
    assert after["spec"]["volumes"] == [DSHM]
    engine = after["spec"]["containers"][0]
    assert engine["readinessProbe"] == probes(8000)["readinessProbe"]
    assert engine["env"] == POD_ENV


def test_the_named_container_and_others_untouched() -> None:
    pod = sample_pod()  # engine (with env), proxy, and an init container
    ops = run({"engine": "vllm", "container": "proxy"}, pod)
    assert {op["path"].split("/")[3] for op in ops if "containers" in op["path"]} == {"1"}
    after = PatchValidator().apply(pod, ops)
    assert after["spec"]["containers"][0] == pod["spec"]["containers"][0]
    assert after["spec"]["initContainers"] == pod["spec"]["initContainers"]
    assert after["spec"]["containers"][1]["env"] == VLLM_ENV
    # the default container is the first, whose existing env is appended to
    first = run({"engine": "vllm"}, pod)
    assert first[0] == {"op": "add", "path": f"{ENGINE}/env/-", "value": VLLM_ENV[0]}


@pytest.mark.parametrize(
    ("pod", "config", "error"),
    [
        (bare_pod(), {"container": "sidecar"}, "the Pod has no container named 'sidecar'"),
        ({"spec": {"containers": []}}, {}, "the Pod has no containers"),
        ({"metadata": {}}, {}, "the Pod has no containers"),
        (bare_pod(env="x"), {}, "pod spec.containers[0].env is a str, not an array"),
        (
            bare_pod(volumeMounts={}),
            {},
            "pod spec.containers[0].volumeMounts is a map, not an array",
        ),
        (bare_pod(ports=1), {}, "pod spec.containers[0].ports is a int, not an array"),
        ({"spec": {"containers": ["engine"]}}, {}, "pod spec.containers[0] is a str, not a map"),
        ({"spec": {"containers": [{}], "volumes": "x"}}, {}, "pod spec.volumes is a str"),
    ],
)
def test_malformed_pods_fail_with_the_place(
    pod: dict[str, Any], config: dict[str, Any], error: str
) -> None:
    with pytest.raises(HookError) as info:
        run({"engine": "vllm", **config}, pod)
    assert str(info.value).startswith(error)


def test_a_wrong_typed_probe_is_kept_as_there() -> None:
    """put_if_absent keeps any value: a probe that is not a map is the API server's to refuse."""
    ops = run({"engine": "vllm"}, bare_pod(startupProbe="x"))
    assert f"{ENGINE}/startupProbe" not in [op["path"] for op in ops]


def test_each_call_gets_fresh_values() -> None:
    plugin = make({"engine": "vllm"})
    first = list(plugin.on_pod_create(hook_request(bare_pod())))
    first[7]["value"]["httpGet"]["path"] = "/changed"
    first[0]["value"][0]["name"] = "CHANGED"
    second = list(plugin.on_pod_create(hook_request(bare_pod())))
    assert second[7]["value"]["httpGet"]["path"] == "/health"
    assert second[0]["value"][0]["name"] == "POD_IP"


# --- in the chain ----------------------------------------------------------------------------


def multi_node(config: Any, workers: int = 1) -> Any:
    """A vLLM role on Ray: the entry runs the head and serves HTTP, the workers join it."""
    head = "ray start --head --port=6379 && vllm serve m --tensor-parallel-size 8"
    join = "ray start --address=$(ENTRY_ADDRESS):6379 --block"
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
                                "spec": {
                                    "containers": [
                                        {"name": "engine", "image": "vllm:1", "command": [head]}
                                    ]
                                }
                            },
                            "workerReplicas": workers,
                            "workerTemplate": {
                                "spec": {
                                    "containers": [
                                        {"name": "engine", "image": "vllm:1", "command": [join]}
                                    ]
                                }
                            },
                        }
                    ]
                },
            },
        }
    )


def test_in_the_chain_a_multi_node_vllm_role() -> None:
    ms = multi_node({"engine": "vllm", "shmSize": "16Gi"}, workers=2)
    chain = build_chain(ms)
    pods = [
        (desired.place.is_entry, chain.on_pod_create(desired).pod) for desired in plan(ms)[0].pods()
    ]
    assert [is_entry for is_entry, _ in pods] == [True, False, False]
    for is_entry, pod in pods:
        engine = pod["spec"]["containers"][0]
        names = [e["name"] for e in engine["env"]]
        assert names[-4:] == ["POD_IP", "POD_NAME", "POD_NAMESPACE", "VLLM_HOST_IP"]
        assert "ENTRY_ADDRESS" in names
        assert engine["volumeMounts"] == [DSHM_MOUNT]
        assert pod["spec"]["volumes"][-1]["emptyDir"]["sizeLimit"] == "16Gi"
        assert ("ports" in engine, "startupProbe" in engine, "readinessProbe" in engine) == (
            is_entry,
            is_entry,
            is_entry,
        )


def test_build_chain_refuses_a_bad_config() -> None:
    with pytest.raises(PluginConfigError) as info:
        build_chain(multi_node({"engine": "vllm", "healthPath": "health"}))
    [error] = info.value.errors
    assert error.path == "config.healthPath"
    assert "'health' does not start with '/'" in error.message
    with pytest.raises(PluginConfigError):
        build_chain(multi_node(None))


def test_in_the_chain_a_hook_error_fails_the_pod() -> None:
    ms = multi_node({"engine": "vllm", "container": "missing"})
    desired = next(iter(plan(ms)[0].pods()))
    with pytest.raises(PluginFailure) as info:
        build_chain(ms).on_pod_create(desired)
    assert info.value.failure_class == FailureClass.PLUGIN_ERROR
    assert info.value.plugin == NAME
    assert "the Pod has no container named 'missing'" in str(info.value)
