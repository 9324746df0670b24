"""The Go guest SDK's modules in the sandbox, in both flavours: standard Go
(examples/wasm/go-<name>.wasm) and TinyGo (examples/wasm/tinygo-<name>.wasm), both built by
`make wasm-go` from plugins-src/examples-go/. The Go port of demo-pod-tweaks replays the ABI
vectors through the host and answers byte for byte as the Rust built-in and the native original
do, under the default limits; what each flavour's runtime needs from the host (_initialize,
WASI) and from the limits; and its size against a ConfigMap's. The SDK speaks ABI v2: the
ready-timer example's observations reach the host in the response, and as observe lines under
v1."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings

from modelserving.api.hook import Hook, HookRequest
from modelserving.api.observation import Observation
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.exports import HOOK_EXPORTS, module_hooks, plugin_sandbox
from modelserving.plugins.modules import CONFIG_MAP_MAX_BYTES, ModuleTooLarge, check_module_size
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import CallFailure, Sandbox
from modelserving.sandbox.cache import CompiledModule
from tests import vectors
from tests.vectors import MODEL_SERVING
from tests.wasm.conftest import roomy, unhurried
from tests.wasm.test_differential import configs, module_response, native, pods
from tests.wasm.test_vectors import FILES, load, wasm_outcome

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "wasm"
NAME = "demo-pod-tweaks"
# The toolchains a Go example is compiled with: the module's file name starts with it.
FLAVOURS = ("go", "tinygo")
GO_EXAMPLES = ["demo-pod-tweaks", "team-label-extism", "ready-timer", "entry-address"]


class ModuleBytes(bytes):
    """A module's bytes that print as the module's file name: Hypothesis prints a failing
    example's arguments, and a multi-megabyte repr is refused by it as a warning (an error
    here), hiding the failure itself."""

    name = ""

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self)} bytes>"


def go_module(name: str, flavour: str = "go") -> bytes:
    path = EXAMPLES / f"{flavour}-{name}.wasm"
    assert path.is_file(), f"{path} is missing: run `make wasm-go`"
    module = ModuleBytes(path.read_bytes())
    module.name = path.name
    return module


@pytest.fixture(scope="module", params=FLAVOURS)
def demo(request: pytest.FixtureRequest) -> bytes:
    """The Go demo-pod-tweaks, once per flavour."""
    return go_module(NAME, request.param)


def test_a_go_module_is_a_wasi_reactor_with_the_sdk_exports(sandbox: Sandbox, demo: bytes) -> None:
    info = sandbox.load(demo).info
    assert (info.flavour, info.abi_version) == ("modelserving", 2)
    assert module_hooks(info) == (Hook.ON_POD_CREATE, Hook.VALIDATE_CONFIG)
    # its _initialize ran at load: calls start from the snapshot, which no longer exports it
    assert info.preinitialized and not info.initialize and info.wasi
    markers = {"modelserving_abi_v1", "modelserving_abi_v2"}
    assert {"memory", "ms_alloc", *markers} <= set(info.exports)
    assert "_initialize" not in info.exports
    # The runtime's WASI imports (which ones depends on the toolchain) and the SDK's log.
    assert "modelserving.log" in info.imports
    others = {i for i in info.imports if not i.startswith("wasi_snapshot_preview1.")}
    assert others == {"modelserving.log"}


def test_each_runtime_imports_its_own_wasi(sandbox: Sandbox) -> None:
    """Standard Go's runtime imports the clock, the scheduler's poll_oneoff and proc_exit;
    TinyGo's, with -scheduler=none, only output and random numbers: neither is assumed of
    the other."""

    def wasi(flavour: str) -> set[str]:
        imports = sandbox.load(go_module(NAME, flavour)).info.imports
        return {i.removeprefix("wasi_snapshot_preview1.") for i in imports if "wasi" in i}

    assert {"fd_write", "clock_time_get", "random_get", "proc_exit", "poll_oneoff"} <= wasi("go")
    assert wasi("tinygo") == {"fd_write", "fd_close", "fd_seek", "random_get"}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_vector_through_the_go_module(sandbox: Sandbox, demo: bytes, path: Path) -> None:
    vector = load(path)
    response, failure = wasm_outcome(sandbox, vector, demo)
    expect = vector["expect"]
    assert failure == expect.get("failure")
    if failure != "PluginError":
        assert response == base64.b64decode(expect["response"])


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_go_and_rust_modules_answer_alike(sandbox: Sandbox, demo: bytes, path: Path) -> None:
    """Every response byte, the error texts of refused configs included."""
    vector = load(path)
    request = base64.b64decode(vector["request"])
    hook = Hook(vector["hook"])
    responses = [
        sandbox.call(sandbox.load(module), HOOK_EXPORTS[hook], request, unhurried(sandbox)).response
        for module in (demo, builtin_wasm(f"{NAME}.wasm"))
    ]
    assert responses[0] == responses[1]


def go_response(sandbox: Sandbox, go: CompiledModule, config: Any, pod: Any) -> bytes | None:
    """The Go module's response bytes; None when its ValidateConfig refuses the config."""
    return module_response(sandbox, go, config, pod)


# Fewer examples than the Rust built-in's differential test: a Go call costs milliseconds.
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(config=configs, pod=pods)
def test_go_and_native_give_identical_patches(
    sandbox: Sandbox, demo: bytes, config: Any, pod: dict[str, Any]
) -> None:
    go = sandbox.load(demo)
    assert (native(config, None) is None) == (go_response(sandbox, go, config, None) is None)
    expected = native(config, pod)
    if expected is not None:
        assert go_response(sandbox, go, config, pod) == expected


@pytest.fixture(scope="module")
def go_demo() -> bytes:
    return go_module(NAME, "go")


@pytest.fixture(scope="module")
def tinygo_demo() -> bytes:
    return go_module(NAME, "tinygo")


def large_call(sandbox: Sandbox, module: bytes, **limits: int) -> tuple[CompiledModule, Any]:
    """The largest vector's OnPodCreate, checked against its expected response."""
    compiled = sandbox.load(module)
    large = load(vectors.VECTORS / "create-large-pod.json")
    request = base64.b64decode(large["request"])
    # the longest deadline unless one is given: these tests weigh fuel and memory, not time
    limits.setdefault("timeout_ms", sandbox.settings.max_timeout_ms)
    result = sandbox.call(compiled, "ms_on_pod_create", request, sandbox.limits(**limits))
    assert result.response == base64.b64decode(large["expect"]["response"])
    assert result.logs == []
    return compiled, result


def test_the_default_limits_are_ample_for_go(sandbox: Sandbox, go_demo: bytes) -> None:
    """The largest vector stays far below the defaults: about 600 000 fuel units (the runtime
    started at load) and 2.5 of the 64 MiB."""
    compiled, result = large_call(sandbox, go_demo)
    limits = sandbox.limits()
    assert 500_000 < result.fuel_consumed < limits.fuel // 20
    assert compiled.info.memory_min_bytes < limits.memory_bytes // 16


@pytest.fixture(scope="module")
def per_call(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    """A sandbox that runs _initialize in every call (no pre-initialisation)."""
    cache = tmp_path_factory.mktemp("per-call-cache")
    return plugin_sandbox(roomy(cache_dir=cache, preinitialize=False))


def test_a_tinygo_call_is_a_fraction_of_a_go_call(
    per_call: Sandbox, go_demo: bytes, tinygo_demo: bytes
) -> None:
    """With _initialize in every call: TinyGo's runtime starts in a few thousand instructions
    and its memory starts at 2 pages (128 KiB): the largest vector costs a quarter of standard
    Go's fuel or less."""
    tiny, tiny_result = large_call(per_call, tinygo_demo)
    _, go_result = large_call(per_call, go_demo)
    assert tiny_result.fuel_consumed < 500_000
    assert tiny_result.fuel_consumed * 4 < go_result.fuel_consumed
    assert tiny.info.memory_min_bytes == 2 * 65536


@pytest.mark.parametrize(
    ("flavour", "limits", "failure_class"),
    [
        # the call needs about 450 000 even with the runtime started at load
        ("go", {"fuel": 300_000}, "FuelExhausted"),
        # the snapshot's initial memory is 40 pages (2.5 MiB; the module declares 34)
        ("go", {"memory_mib": 2}, "MemoryLimit"),
        # a TinyGo call of this vector needs about 190 000
        ("tinygo", {"fuel": 100_000}, "FuelExhausted"),
    ],
)
def test_limits_too_small_for_the_go_runtime(
    sandbox: Sandbox, flavour: str, limits: dict[str, int], failure_class: str
) -> None:
    request = base64.b64decode(load(vectors.VECTORS / "create-full-config.json")["request"])
    module = go_module(NAME, flavour)
    with pytest.raises(CallFailure) as info:
        sandbox.call(sandbox.load(module), "ms_on_pod_create", request, sandbox.limits(**limits))
    assert info.value.failure_class == failure_class


@pytest.mark.parametrize(("flavour", "memory_mib"), [("go", 3), ("tinygo", 1)])
def test_the_least_memory_that_is_enough(sandbox: Sandbox, flavour: str, memory_mib: int) -> None:
    large_call(sandbox, go_module(NAME, flavour), memory_mib=memory_mib)


@pytest.mark.parametrize("name", GO_EXAMPLES)
def test_a_go_module_needs_gzip_to_fit_a_configmap(name: str) -> None:
    """Standard Go modules are about 2 MB, a ConfigMap holds 1 MiB: gzip-compressed they fit."""
    module = go_module(name)
    assert len(module) > CONFIG_MAP_MAX_BYTES * 3 // 2
    with pytest.raises(ModuleTooLarge, match=r"1 MiB\): store it gzip-compressed"):
        check_module_size(module)
    assert check_module_size(module, gzipped=True) < CONFIG_MAP_MAX_BYTES * 3 // 4


@pytest.mark.parametrize("name", GO_EXAMPLES)
def test_a_tinygo_module_fits_a_configmap_as_it_is(name: str) -> None:
    """TinyGo modules are 70 to 110 KB, under an eighth of a ConfigMap."""
    module = go_module(name, "tinygo")
    assert check_module_size(module) == len(module) < CONFIG_MAP_MAX_BYTES // 8


# --- ABI v2: observations from a Go module -----------------------------------------------------


def ready_request() -> HookRequest:
    """An OnPodReady request for a Pod that became Ready 61.25 s after its creation."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llama-0-server-0-0", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "server", "image": "vllm"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:01.25Z"}
            ]
        },
    }
    where = PodPlace("llama-0", "server", "server-0", True)
    return HookRequest(Hook.ON_POD_READY, parse_model_serving(MODEL_SERVING), where, pod)


@pytest.fixture(scope="module", params=FLAVOURS)
def timer(request: pytest.FixtureRequest) -> bytes:
    return go_module("ready-timer", request.param)


def timer_plugin(sandbox: Sandbox, module: bytes) -> WasmPlugin:
    return WasmPlugin("timer", None, sandbox.load(module), sandbox, unhurried(sandbox))


def test_a_go_modules_v2_observations_reach_the_host(sandbox: Sandbox, timer: bytes) -> None:
    """Both markers: the host runs it as v2, and the observation comes in the response."""
    p = timer_plugin(sandbox, timer)
    assert p.compiled.info.abi_version == 2
    assert module_hooks(p.compiled.info) == (Hook.ON_POD_READY, Hook.VALIDATE_CONFIG)
    request = ready_request()
    outcome = p.run(Hook.ON_POD_READY, p.encode(request), request.pod_name)
    expected = [Observation("pod_ready_seconds", 61.25)]
    assert outcome.response.observations == expected
    assert (outcome.observations, outcome.call.logs) == (expected, [])
    assert p.on_pod_ready(request) == expected


def test_a_go_module_observes_by_log_line_for_a_v1_request(sandbox: Sandbox, timer: bytes) -> None:
    """What a host that knows only v1 sends: the answer is empty, the observation a log line
    the host reads as one."""
    p = timer_plugin(sandbox, timer)
    request = ready_request()
    v1 = msgpack.unpackb(p.encode(request))
    v1["abiVersion"] = 1
    payload = msgpack.packb(v1)
    result = sandbox.call(p.compiled, "ms_on_pod_ready", payload, unhurried(sandbox))
    assert result.response == b""
    lines = [(r.level, r.message, r.source) for r in result.logs]
    assert lines == [("info", "observe pod_ready_seconds 61.250", "log")]
    reply = p.call_bytes(Hook.ON_POD_READY, payload, request.pod_name)
    assert (reply.failure, reply.observations) == (None, [Observation("pod_ready_seconds", 61.25)])


def test_a_go_module_refuses_abi_version_3(sandbox: Sandbox, timer: bytes) -> None:
    p = timer_plugin(sandbox, timer)
    v3 = msgpack.unpackb(p.encode(ready_request()))
    v3["abiVersion"] = 3
    result = sandbox.call(p.compiled, "ms_on_pod_ready", msgpack.packb(v3), unhurried(sandbox))
    assert msgpack.unpackb(result.response) == {
        "error": "request: abiVersion 3 is not supported (this plugin speaks 1 to 2)"
    }
