"""Native and WebAssembly built-ins side by side: on many generated Pods and configs they accept
the same configs and produce byte-identical responses (so identical patches)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import encode_request
from modelserving.api.errors import PluginFailure
from modelserving.api.hook import Hook
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from tests.vectors import MODEL_SERVING, WHERE, native_response
from tests.wasm.conftest import unhurried

NAME = "demo-pod-tweaks"
DIFF = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

env_names = st.sampled_from(["A", "B", "C", "NCCL_DEBUG", "my.var", "-x", "_y", "1bad", ""])
label_keys = st.sampled_from(
    ["a", "b", "example.com/team", "prometheus.io/scrape", "x/y/z", "-bad", "UPPER", "a~b", ""]
)
env_var = st.fixed_dictionaries(
    {"name": env_names},
    optional={
        "value": st.text(max_size=6) | st.none() | st.integers(0, 3),
        "valueFrom": st.just({"fieldRef": {"fieldPath": "status.podIP"}}) | st.none(),
    },
)
configs = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "runtimeClassName": st.sampled_from(["nvidia", "", "Not_Valid", "a.b-c"]) | st.none(),
        "annotations": st.dictionaries(label_keys, st.text(max_size=4) | st.integers(0, 2))
        | st.none(),
        "env": st.lists(env_var, max_size=5) | st.none(),
        "extra": st.just(1),
    },
)
existing_env = st.lists(
    st.fixed_dictionaries({"name": env_names}, optional={"value": st.text(max_size=3)}),
    max_size=5,
)
pods = st.builds(
    lambda env, init_env, annotations, labels, has_init: {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llama-0-prefill-0-0",
            "namespace": "serving",
            **({"annotations": annotations} if annotations is not None else {}),
            **({"labels": labels} if labels is not None else {}),
        },
        "spec": {
            "containers": [{"name": "engine", "image": "x", **({"env": env} if env else {})}],
            **(
                {"initContainers": [{"name": "init", "image": "y", "env": init_env}]}
                if has_init
                else {}
            ),
        },
    },
    existing_env | st.none(),
    existing_env,
    st.dictionaries(label_keys, st.text(max_size=3), max_size=3) | st.none(),
    st.dictionaries(label_keys, st.text(max_size=3), max_size=3) | st.none(),
    st.booleans(),
)


def native(config: Any, pod: dict[str, Any] | None) -> bytes | None:
    """The native built-in's response bytes; None when it refuses the config."""
    if pod is None:
        return native_response(encode_request(Hook.VALIDATE_CONFIG, NAME, config))
    request = encode_request(Hook.ON_POD_CREATE, NAME, config, MODEL_SERVING, WHERE, pod)
    return native_response(request)


def wasm(sandbox: Sandbox, config: Any, pod: dict[str, Any] | None) -> bytes | None:
    """The WebAssembly built-in's response bytes; None when its ValidateConfig refuses."""
    return module_response(sandbox, sandbox.load(builtin_wasm(f"{NAME}.wasm")), config, pod)


def module_response(
    sandbox: Sandbox, compiled: CompiledModule, config: Any, pod: dict[str, Any] | None
) -> bytes | None:
    """A demo-pod-tweaks module's response bytes (b"" without a Pod, after ValidateConfig);
    None when its ValidateConfig refuses the config."""
    plugin = WasmPlugin(NAME, config, compiled, sandbox, unhurried(sandbox))
    try:
        plugin.validate_config()
    except PluginFailure as failure:
        # a refused config is a PluginError; anything else (a trap...) fails the comparison
        return None if failure.failure_class == "PluginError" else str(failure).encode()
    if pod is None:
        return b""
    request = encode_request(Hook.ON_POD_CREATE, NAME, config, MODEL_SERVING, WHERE, pod)
    return sandbox.call(compiled, "ms_on_pod_create", request, unhurried(sandbox)).response


@DIFF
@given(config=configs)
def test_both_accept_and_refuse_the_same_configs(sandbox: Sandbox, config: Any) -> None:
    assert (native(config, None) is None) == (wasm(sandbox, config, None) is None)


@DIFF
@given(config=configs, pod=pods)
def test_both_give_identical_patches(sandbox: Sandbox, config: Any, pod: dict[str, Any]) -> None:
    expected = native(config, pod)
    if expected is None:
        return
    assert wasm(sandbox, config, pod) == expected


def test_the_generated_cases_exercise_both_outcomes(sandbox: Sandbox) -> None:
    """A guard that the strategies above reach accepted and refused configs and real patches."""
    good = {"env": [{"name": "A", "value": "1"}], "annotations": {"a": "b"}}
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "env": []}]}}
    assert native(good, pod) == wasm(sandbox, good, pod) != b""
    assert native({"extra": 1}, None) is None
    assert wasm(sandbox, {"extra": 1}, None) is None
