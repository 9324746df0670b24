"""The Go SDK's ABI v3 example in the sandbox: the Go port of the built-in entry-address-file
(examples/wasm/go-entry-address.wasm, built by `make wasm-go` from
plugins-src/examples-go/entry-address/) is a v3 module with the group hook; on generated
ServingGroups, Pods and configs its objects and its patches are the native built-in's, byte for
byte, and it accepts the configs the native one accepts. The golden file its Go test replays
natively (testdata/native.json) holds the native built-in's answers: regenerate it with
`.venv/bin/python -m tests.wasm.test_go_entry_address` when the built-in changes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import RequestEncoder
from modelserving.api.errors import PluginFailure
from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import Hook, HookRequest
from modelserving.api.modelserving import ModelServing
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.plugins.base import HookError
from modelserving.plugins.exports import module_hooks
from modelserving.plugins.registry import default_registry
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from tests.vectors import MODEL_SERVING
from tests.wasm.conftest import unhurried
from tests.wasm.test_go_plugins import FLAVOURS, go_module

NAME = "entry-address-file"
GOLDEN = (
    Path(__file__).resolve().parents[2]
    / "plugins-src/examples-go/entry-address/testdata/native.json"
)
DIFF = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
GROUP_EXPORT = "ms_on_serving_group_change"


def model_serving(namespace: str | None) -> ModelServing:
    ms = json.loads(json.dumps(MODEL_SERVING))
    if namespace is None:
        del ms["metadata"]["namespace"]
    else:
        ms["metadata"]["namespace"] = namespace
    return parse_model_serving(ms)


def view(ms: ModelServing) -> dict[str, Any]:
    """The ModelServing as a request carries it (no status)."""
    return {k: v for k, v in ms.to_api().items() if k != "status"}


def native_plugin(config: Any) -> Any:
    """The native built-in for ``config``; None when its config model refuses it."""
    builtin = default_registry().get(NAME)
    assert builtin is not None
    try:
        parsed = builtin.config_model.model_validate(config or {})
    except ValueError:
        return None
    return builtin.factory(NAME, parsed)


def pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def native_group(config: Any, request: GroupRequest) -> bytes | None:
    """The native built-in's OnServingGroupChange answer as response bytes; None when it
    refuses the config."""
    plugin = native_plugin(config)
    if plugin is None:
        return None
    objects = plugin.on_serving_group_change(request)
    return pack({"objects": objects}) if objects else b""


def native_create(config: Any, request: HookRequest) -> bytes | None:
    """The native built-in's OnPodCreate answer as response bytes; None when it refuses the
    config."""
    plugin = native_plugin(config)
    if plugin is None:
        return None
    try:
        ops = plugin.on_pod_create(request)
    except HookError as exc:
        return pack({"error": str(exc)})
    return pack({"patch": list(ops)}) if ops else b""


@pytest.fixture(scope="module", params=FLAVOURS)
def module(request: pytest.FixtureRequest) -> bytes:
    """The Go entry-address, once per flavour (standard Go, TinyGo)."""
    return go_module("entry-address", request.param)


def go_plugin(sandbox: Sandbox, compiled: CompiledModule, config: Any) -> WasmPlugin | None:
    """The module as the plugin entry with ``config``; None when its ValidateConfig refuses the
    config (any other failure fails the test)."""
    plugin = WasmPlugin(NAME, config, compiled, sandbox, unhurried(sandbox))
    try:
        plugin.validate_config()
    except PluginFailure as failure:
        refused = failure
    else:
        return plugin
    assert refused.failure_class == "PluginError", str(refused)  # not a trap or a crash
    return None


def go_group(
    sandbox: Sandbox, compiled: CompiledModule, config: Any, request: GroupRequest
) -> bytes | None:
    plugin = go_plugin(sandbox, compiled, config)
    if plugin is None:
        return None
    payload = plugin.encode_group(request)
    return sandbox.call(compiled, GROUP_EXPORT, payload, unhurried(sandbox)).response


def go_create(
    sandbox: Sandbox, compiled: CompiledModule, config: Any, request: HookRequest
) -> bytes | None:
    plugin = go_plugin(sandbox, compiled, config)
    if plugin is None:
        return None
    payload = plugin.encode(request)
    return sandbox.call(compiled, "ms_on_pod_create", payload, unhurried(sandbox)).response


# --- generated inputs --------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8"), max_size=6)
group_names = st.sampled_from(["llama-0", "llama-12", "x-0"]) | text
role_ids = st.sampled_from(["prefill-0", "prefill-1", "decode-0", "a-0.json"]) | text
ips = (
    st.sampled_from(["", "10.1.0.7", "fd00::1:2", "1", "10.1.0.7 ", "a" * 46, "AB:cd", "x.y"])
    | st.text(st.sampled_from("0123456789abcdefABCDEF.:g-"), max_size=48)
    | text
)
namespaces = st.sampled_from(["serving", "default", "team-a", None])
group_pods = st.builds(
    lambda name, role, role_id, entry, node, host_ip, pod_ip, phase, ready, annotations: GroupPod(
        name, PodPlace("g", role, role_id, entry), node, host_ip, pod_ip, phase, ready, annotations
    ),
    st.sampled_from(["llama-0-prefill-0-0", "llama-0-decode-0-1"]) | text,
    st.sampled_from(["prefill", "decode"]),
    role_ids,
    st.booleans(),
    st.sampled_from(["", "node-1"]),
    ips,
    ips,
    st.sampled_from(["", "Pending", "Running"]),
    st.booleans(),
    st.dictionaries(text, text, max_size=2),
)
mount_paths = st.sampled_from(["/etc/entry", "/", "relative", "/a:b", "/a\0b", ""]) | text
suffixes = st.sampled_from(["entry-address", "addr", "Bad", "-x", "a" * 40, "a" * 41, ""]) | text
configs = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "mountPath": mount_paths | st.none() | st.integers(0, 2),
        "configMapSuffix": suffixes | st.none() | st.just(["a"]),
        "container": st.sampled_from(["engine", "engine", "sidecar", "", "missing", None, True]),
        "extra": st.just(1),
    },
)
snake_configs = st.fixed_dictionaries(
    {}, optional={"mount_path": mount_paths, "config_map_suffix": suffixes}
)


@st.composite
def group_requests(draw: st.DrawFn) -> GroupRequest:
    ms = model_serving(draw(namespaces))
    pods = tuple(draw(st.lists(group_pods, max_size=6)))
    return GroupRequest(ms, draw(group_names), draw(st.integers(0, 9)), pods)


mounts = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["entry-address", "data"])},
        optional={"mountPath": st.sampled_from(["/etc/modelserving/entry", "/etc/entry", "/x"])},
    ),
    max_size=2,
)
containers = st.fixed_dictionaries(
    {"name": st.sampled_from(["engine", "sidecar"]), "image": st.just("vllm")},
    optional={"volumeMounts": st.one_of(mounts, mounts, mounts, st.none(), st.just("oops"))},
)
volumes: st.SearchStrategy[list[dict[str, Any]]] = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["entry-address", "addr", "cache"])},
        optional={"emptyDir": st.just({})},
    ),
    max_size=2,
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    listed = draw(st.lists(containers, min_size=1, max_size=3))
    shape = draw(st.sampled_from(["list"] * 6 + ["odd item", "empty", "absent", "null", "map"]))
    if shape == "odd item":
        listed.insert(draw(st.integers(0, len(listed))), draw(st.sampled_from([None, "x"])))
    if shape in ("list", "odd item", "empty"):
        spec["containers"] = listed if shape != "empty" else []
    elif shape != "absent":
        spec["containers"] = None if shape == "null" else {"name": "engine"}
    odd = st.none() | st.just({"a": 1})
    volume_list = draw(st.one_of(volumes, volumes, volumes, odd, st.just("absent")))
    if volume_list != "absent":
        spec["volumes"] = volume_list
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    if draw(st.sampled_from([True] * 9 + [False])):
        pod["spec"] = spec
    return pod


@st.composite
def create_requests(draw: st.DrawFn) -> HookRequest:
    where = PodPlace(draw(group_names), "prefill", draw(role_ids), draw(st.booleans()))
    ms = model_serving(draw(namespaces))
    return HookRequest(Hook.ON_POD_CREATE, ms, where, draw(pods()))


# --- the tests ---------------------------------------------------------------------------------


def test_the_go_module_is_an_abi_v3_plugin_with_the_group_hook(
    sandbox: Sandbox, module: bytes
) -> None:
    info = sandbox.load(module).info
    assert (info.flavour, info.abi_version) == ("modelserving", 3)
    assert set(module_hooks(info)) == {
        Hook.ON_POD_CREATE,
        Hook.ON_SERVING_GROUP_CHANGE,
        Hook.VALIDATE_CONFIG,
    }
    markers = {"modelserving_abi_v1", "modelserving_abi_v2", "modelserving_abi_v3"}
    assert {GROUP_EXPORT, "ms_alloc", *markers} <= set(info.exports)
    assert info.preinitialized  # its _initialize ran at load (the snapshot no longer has it)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_go_module_without_the_group_hook_stays_v2(sandbox: Sandbox, flavour: str) -> None:
    """Only a plugin that imports modelserving.dev/plugin/abiv3 exports the v3 marker."""
    for name in ("demo-pod-tweaks", "ready-timer"):
        info = sandbox.load(go_module(name, flavour)).info
        assert info.abi_version == 2
        assert "modelserving_abi_v3" not in info.exports


def test_its_objects_pass_the_host_and_name_the_entry(sandbox: Sandbox, module: bytes) -> None:
    """Through the host's decoding (shape) as the controller calls it."""
    ms = model_serving("serving")
    request = GroupRequest(
        ms,
        "llama-0",
        3,
        (
            GroupPod("llama-0-prefill-0-0", PodPlace("llama-0", "prefill", "prefill-0", True),
                     "node-1", "10.0.0.1", "10.1.0.7", "Running", True, {}),
            GroupPod("llama-0-prefill-0-1", PodPlace("llama-0", "prefill", "prefill-0", False)),
            GroupPod("llama-0-decode-0-0", PodPlace("llama-0", "decode", "decode-0", True)),
        ),
    )  # fmt: skip
    plugin = WasmPlugin(NAME, None, sandbox.load(module), sandbox, unhurried(sandbox), ms)
    assert plugin.on_serving_group_change(request) == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "llama-0-entry-address"},
            "data": {
                "prefill-0": "10.1.0.7",
                "prefill-0.json": '{"dns":"llama-0-prefill-0-0.serving","ip":"10.1.0.7"}',
                "decode-0": "llama-0-decode-0-0.serving",
                "decode-0.json": '{"dns":"llama-0-decode-0-0.serving","ip":""}',
            },
        }
    ]
    assert plugin.last is not None and plugin.last.call.logs == []
    assert native_group(None, request) == pack({"objects": plugin.last.response.objects})


@DIFF
@given(config=configs | snake_configs)
def test_go_and_native_accept_the_same_configs(
    sandbox: Sandbox, module: bytes, config: Any
) -> None:
    accepted = go_plugin(sandbox, sandbox.load(module), config) is not None
    assert accepted == (native_plugin(config) is not None)


@DIFF
@given(config=configs, request=group_requests())
def test_go_and_native_give_identical_objects(
    sandbox: Sandbox, module: bytes, config: Any, request: GroupRequest
) -> None:
    expected = native_group(config, request)
    if expected is None:
        return
    assert go_group(sandbox, sandbox.load(module), config, request) == expected


@DIFF
@given(config=configs, request=create_requests())
def test_go_and_native_give_identical_patches(
    sandbox: Sandbox, module: bytes, config: Any, request: HookRequest
) -> None:
    expected = native_create(config, request)
    if expected is None:
        return
    assert go_create(sandbox, sandbox.load(module), config, request) == expected


def test_the_generated_cases_reach_every_outcome(sandbox: Sandbox, module: bytes) -> None:
    """A guard that the strategies reach what they are meant to: a patch, an error, objects
    with an IP and without, escaped JSON, and a refused config."""
    compiled = sandbox.load(module)
    bare = {"spec": {"containers": [{"name": "engine"}]}}
    create = HookRequest(
        Hook.ON_POD_CREATE, model_serving(None), PodPlace("g", "r", "r-0", True), bare
    )
    assert go_create(sandbox, compiled, None, create) == native_create(None, create) != b""
    no_containers = HookRequest(Hook.ON_POD_CREATE, create.model_serving, create.place, {})
    error = go_create(sandbox, compiled, None, no_containers)
    assert (
        error == native_create(None, no_containers) == pack({"error": "the Pod has no containers"})
    )
    odd = GroupPod("p", PodPlace("g", "r", 'é"\\\n\x7f😀', True), pod_ip="::1")
    group = GroupRequest(model_serving("default"), "g", 1, (odd,))
    objects = go_group(sandbox, compiled, {"configMapSuffix": "addr"}, group)
    assert objects == native_group({"configMapSuffix": "addr"}, group)
    assert objects is not None and b'\\u00e9\\"\\\\\\n\\u007f\\ud83d\\ude00' in objects
    assert go_plugin(sandbox, compiled, {"mountPath": "x"}) is None
    assert native_plugin({"mountPath": "x"}) is None


# --- the golden file of the Go test ------------------------------------------------------------


def golden_cases() -> list[dict[str, Any]]:
    """Requests the Go test replays natively, with the native built-in's answers (the response
    bytes, or None when the native built-in refuses the config; the file adds them decoded, for
    the reader)."""
    ms = model_serving("serving")
    place = PodPlace("llama-0", "prefill", "prefill-0", True)

    def pod(spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}

    engine = {"name": "engine", "image": "vllm"}
    creates: list[tuple[str, Any, dict[str, Any]]] = [
        ("bare Pod", None, pod({"containers": [engine]})),
        (
            "config: mountPath, suffix, the second container",
            {"mountPath": "/run/entry", "configMapSuffix": "addr", "container": "sidecar"},
            pod({"containers": [engine, {"name": "sidecar"}], "volumes": []}),
        ),
        (
            "volume and mount there already",
            None,
            pod(
                {
                    "containers": [
                        {
                            **engine,
                            "volumeMounts": [{"name": "x", "mountPath": "/etc/modelserving/entry"}],
                        }
                    ],
                    "volumes": [{"name": "entry-address", "emptyDir": {}}],
                }
            ),
        ),
        ("no containers", None, pod({"containers": []})),
        ("no such container", {"container": "gpu"}, pod({"containers": [engine]})),
        ("volumes not a list", None, pod({"containers": [engine], "volumes": {"a": 1}})),
        ("the first container is null", None, pod({"containers": [None, engine]})),
        ("mounts not a list", None, pod({"containers": [{**engine, "volumeMounts": "x"}]})),
        ("config refused", {"mountPath": "relative"}, pod({"containers": [engine]})),
    ]
    pods = (
        GroupPod("llama-0-prefill-0-0", PodPlace("llama-0", "prefill", "prefill-0", True),
                 "node-1", "10.0.0.1", "10.1.0.7", "Running", True, {"a": "b"}),
        GroupPod("llama-0-prefill-0-1", PodPlace("llama-0", "prefill", "prefill-0", False),
                 "node-2", "10.0.0.2", "10.1.0.8", "Running", True),
        GroupPod("llama-0-decode-0-0", PodPlace("llama-0", "decode", "decode-0", True),
                 pod_ip="not an ip"),
        GroupPod("llama-0-decode-1-1", PodPlace("llama-0", "decode", "decode-1", False)),
    )  # fmt: skip
    groups: list[tuple[str, Any, GroupRequest]] = [
        ("two roles, an IP, a worker alone", None, GroupRequest(ms, "llama-0", 6, pods)),
        ("no Pods", {"configMapSuffix": "addr"}, GroupRequest(ms, "llama-0", 2, ())),
        (
            "JSON escapes, the default namespace",
            None,
            GroupRequest(
                model_serving(None),
                'g"\\',
                1,
                (GroupPod("p", PodPlace("g", "r", "é\t\x01😀", True), pod_ip="fd00::1"),),
            ),
        ),
        ("config refused", {"extra": 1}, GroupRequest(ms, "llama-0", 1, pods[:1])),
    ]
    cases: list[dict[str, Any]] = []
    for name, config, create in creates:
        request = HookRequest(Hook.ON_POD_CREATE, ms, place, create)
        encoder = RequestEncoder(NAME, config, view(ms), 3)
        cases.append(
            {
                "name": name,
                "hook": "OnPodCreate",
                "request": encoder.pod_hook(Hook.ON_POD_CREATE, place, create),
                "response": native_create(config, request),
            }
        )
    for name, config, group in groups:
        encoder = RequestEncoder(NAME, config, view(group.model_serving), 3)
        cases.append(
            {
                "name": name,
                "hook": "OnServingGroupChange",
                "request": encoder.group_hook(group),
                "response": native_group(config, group),
            }
        )
    for config in (None, {"mountPath": "/x", "configMapSuffix": "a-b", "container": "c"}, {"x": 1}):
        encoder = RequestEncoder(NAME, config, None, 3)
        cases.append(
            {
                "name": f"config {json.dumps(config)}",
                "hook": "ValidateConfig",
                "request": encoder.validate_config(),
                "response": b"" if native_plugin(config) is not None else None,
            }
        )
    return cases


def golden_text() -> str:
    cases = []
    for case in golden_cases():
        response = case["response"]
        readable = "refused" if response is None else msgpack.unpackb(response) if response else {}
        cases.append(
            {
                **case,
                "request": base64.b64encode(case["request"]).decode(),
                "response": None if response is None else base64.b64encode(response).decode(),
                "decoded": readable,
            }
        )
    return json.dumps(cases, indent=1, ensure_ascii=False) + "\n"


def test_the_go_tests_golden_file_is_the_native_built_ins_answers() -> None:
    assert GOLDEN.is_file(), f"{GOLDEN} is missing: run .venv/bin/python -m {__name__}"
    assert GOLDEN.read_text(encoding="utf-8") == golden_text(), (
        f"{GOLDEN} is stale: run .venv/bin/python -m {__name__}"
    )


def test_the_go_module_gives_the_golden_answers(sandbox: Sandbox, module: bytes) -> None:
    """The module itself, on the golden file's requests (the Go test runs the same code
    natively)."""
    compiled = sandbox.load(module)
    exports = {
        "OnPodCreate": "ms_on_pod_create",
        "OnServingGroupChange": GROUP_EXPORT,
        "ValidateConfig": "ms_validate_config",
    }
    for case in golden_cases():
        got = sandbox.call(compiled, exports[case["hook"]], case["request"], unhurried(sandbox))
        if case["response"] is None:
            assert set(msgpack.unpackb(got.response)) == {"error"}, case["name"]
        else:
            assert got.response == case["response"], case["name"]


if __name__ == "__main__":
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(golden_text(), encoding="utf-8")
    print(f"wrote {GOLDEN}")
