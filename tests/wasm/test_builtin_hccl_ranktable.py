"""hccl-ranktable, native and WebAssembly side by side: on generated configs, Pods and
ServingGroups both accept the same configs and give byte-identical responses, the OnPodCreate
patch and the OnServingGroupChange ConfigMap. The groups' device annotations are valid, invalid
and hostile: what Python's json refuses (NaN, a key twice, control characters, long integers,
a byte-order mark, trailing data, deep nesting), what the rules refuse (device ids, IPs, a
device twice, the size limit) and odd but valid JSON (escapes, surrogates, spacing)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from random import Random
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from modelserving.abi.codec import encode_request
from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import Hook
from modelserving.api.modelserving import PluginSpec
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain import ChainEntry, build_chain, invoke
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.builtins.hccl_ranktable import (
    DEFAULT_ANNOTATION,
    MAX_ANNOTATION_BYTES,
    MAX_NESTING,
    NAME,
    parse_devices,
)
from modelserving.plugins.registry import default_registry
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from modelserving.workload.plan import plan
from tests.vectors import GROUP_MODEL_SERVING, native_response
from tests.wasm import twins
from tests.wasm.test_builtin_rdma_network import TENTHS, maps, mostly

DIFF = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
MS = parse_model_serving(GROUP_MODEL_SERVING)
OTHER_ANNOTATION = "example.com/npus"


# --- the two implementations ------------------------------------------------------------------


def group_request(config: Any, pods: list[GroupPod], expected: int) -> bytes:
    request = GroupRequest(MS, "llama-0", expected, tuple(pods))
    return encode_request(
        Hook.ON_SERVING_GROUP_CHANGE, NAME, config, GROUP_MODEL_SERVING, group=request, version=3
    )


def pod_request(config: Any, pod: dict[str, Any]) -> bytes:
    where = PodPlace("llama-0", "prefill", "prefill-0", True)
    return encode_request(
        Hook.ON_POD_CREATE, NAME, config, GROUP_MODEL_SERVING, where, pod, version=3
    )


def native(request: bytes) -> bytes:
    response = native_response(request)
    assert response is not None, "only called with accepted configs"
    return response


def native_accepts(config: Any) -> bool:
    return twins.native_accepts(NAME, config)


@pytest.fixture(scope="module")
def compiled(sandbox: Sandbox) -> CompiledModule:
    return twins.load(sandbox, NAME)


def wasm_accepts(sandbox: Sandbox, compiled: CompiledModule, config: Any) -> bool:
    return twins.wasm_accepts(sandbox, compiled, NAME, config)


def table(response: bytes) -> dict[str, Any]:
    """The rank table of a group response (the ConfigMap's only key)."""
    (obj,) = twins.decoded(response)["objects"]
    (text,) = obj["data"].values()
    return json.loads(text)  # type: ignore[no-any-return]


# --- generated configs ------------------------------------------------------------------------

CONFIG_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "mountPath": mostly(
        st.sampled_from(["/etc/hccl", "/etc/hccl/", "/", "/user/serverid/devindex/config"]),
        st.sampled_from(["etc/hccl", "/a:b", "", "/a\0b", 1, None]),
    ),
    "fileName": mostly(
        st.sampled_from(["hccl.json", "rank_table.json", "a-b_c.D9", "."[:0] + "x"]),
        st.sampled_from(["../hccl.json", "a/b", ".", "..", "", "é.json", "a" * 254, 1]),
    ),
    "configMapSuffix": mostly(
        st.sampled_from(["ranktable", "hccl", "a" * 40, "rank-table-0"]),
        st.sampled_from(["Rank", "a_b", "a" * 41, "", "-a", "a.b", 1]),
    ),
    "container": mostly(st.sampled_from(["engine", "sidecar", "missing"]), st.just(3)),
    "deviceAnnotation": mostly(
        st.sampled_from([DEFAULT_ANNOTATION, OTHER_ANNOTATION, "npus"]),
        st.sampled_from(["-x", "a/b/c", "", "Example.com/x", 1]),
    ),
}
configs = mostly(
    maps(CONFIG_FIELDS, [{"file_name": "x.json"}, {"extra": 1}, {"mount_path": "/x"}]),
    st.none(),
)


def annotation_key(config: Any) -> str:
    """The annotation the config reads (for an accepted config)."""
    key = (config or {}).get("deviceAnnotation") or (config or {}).get("device_annotation")
    return str(key) if isinstance(key, str) else DEFAULT_ANNOTATION


# --- generated device annotations -------------------------------------------------------------

IPS = ["10.244.1.7", "192.168.100.1", "fe80::1", "::1", "2001:DB8::8a2e:370:7334", "1.2"]
NOT_IPS = [
    "",
    "10.0.0.1/24",
    "node-a",
    "1",
    "a" * 46,
    "\uff11\uff10.0.0.1",
    "10.0.0.1 ",
    "\u0661\u0662",
]
ips = mostly(st.sampled_from(IPS), st.sampled_from(NOT_IPS))
device_ids = mostly(
    st.integers(0, 9999).map(str) | st.sampled_from(["00", "007", "0010"]),
    st.sampled_from(["12345", "", "-1", "1a", "\u0661", "0x1", 0, None]),
)


@st.composite
def devices(draw: st.DrawFn) -> dict[str, Any]:
    device: dict[str, Any] = {}
    for key, value in draw(
        st.permutations([("device_id", device_ids), ("device_ip", ips), ("rank_id", None)])
    ):
        if key == "rank_id":
            if draw(TENTHS) < 2:
                device["rank_id"] = "0"
        elif draw(TENTHS) != 9:  # now and then a key is missing
            device[key] = draw(value)
    return device


@st.composite
def device_values(draw: st.DrawFn) -> Any:
    """The annotation's JSON value: mostly a map with devices, now and then something else."""
    if draw(TENTHS) == 9:
        return draw(st.sampled_from([[], "devices", 1, None, {"devices": {}}, {"devices": []}]))
    value: dict[str, Any] = {}
    if draw(st.booleans()):
        value["pod_name"] = "llama-0-prefill-0-0"
    how = draw(TENTHS)
    if how < 3:
        value["server_id"] = draw(ips)
    elif how == 3:
        value["server_id"] = None
    elif how == 4:
        value["server_id"] = 5
    value["devices"] = draw(st.lists(devices(), min_size=1, max_size=4))
    return value


def dumped(draw: st.DrawFn, value: Any) -> str:
    """``value`` as JSON, spaced and escaped in one of the ways JSON allows."""
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]))
    indent = draw(st.sampled_from([None, None, 1, "\t"]))
    return json.dumps(value, separators=separators, indent=indent, ensure_ascii=draw(st.booleans()))


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


Draw = Callable[[st.SearchStrategy[Any]], Any]
"""A way to get a value of a strategy: hypothesis' ``draw``, or the simplest value."""

HOSTILE: dict[str, Callable[[str, Draw], str]] = {
    "NaN": lambda t, d: t[:-1] + ', "x": NaN}',
    "-Infinity": lambda t, d: t[:-1] + ', "x": [-Infinity]}',
    "a key twice": lambda t, d: t[:-1] + ', "devices": []}',
    "a key twice, escaped": lambda t, d: t[:-1] + ', "dev\\u0069ces": 1}',
    "a pair and its character": lambda t, d: t[:-1] + ', "\\ud83d\\ude00": 1, "😀": 2}',
    "lone surrogates": lambda t, d: t[:-1] + ', "\\ud800": "\\udfff\\ud800x"}',
    "an escaped key": lambda t, d: t.replace('"server_id"', '"server\\u005fid"'),
    "a raw control character": lambda t, d: t[:-1] + ', "c": "a\x01b"}',
    "a raw DEL and non-ASCII": lambda t, d: t[:-1] + ', "c": "a\x7fé\u2028"}',
    "a long integer": lambda t, d: t[:-1] + f', "n": 1{"0" * d(st.sampled_from([4299, 4300]))}}}',
    "floats": lambda t, d: t[:-1] + ', "n": [1e999, -0, 1.5E+3, -0.0e-0]}',
    "bad numbers": lambda t, d: (
        t[:-1] + d(st.sampled_from([', "n": 01}', ', "n": 1.}', ', "n": .5}']))
    ),
    "trailing data": lambda t, d: t + d(st.sampled_from([" x", "}", " \n", "\x0c", "[]"])),
    "leading space": lambda t, d: d(st.sampled_from(["\ufeff", " \t\r\n", "\xa0", "\x0c"])) + t,
    "a trailing comma": lambda t, d: t[:-1] + ",}",
    "single quotes": lambda t, d: t.replace('"', "'"),
    "nesting": lambda t, d: t[:-1] + f', "n": {nested(d(st.integers(1, 2 * MAX_NESTING)))}}}',
    "truncated": lambda t, d: t[: d(st.integers(0, max(0, len(t) - 1)))],
    "over the size limit": lambda t, d: t[:-1] + f', "p": "{"x" * MAX_ANNOTATION_BYTES}"}}',
    "at the size limit": lambda t, d: (
        t[:-1] + ', "p": "' + "é" * ((MAX_ANNOTATION_BYTES - len(t.encode()) - 9) // 2) + '"}'
    ),
    "text": lambda t, d: d(st.text(max_size=40)),
}


@st.composite
def device_annotations(draw: st.DrawFn) -> str:
    """A device annotation: valid JSON of devices (itself valid or not by the rules), now and
    then changed by one of the HOSTILE ways."""
    text = dumped(draw, draw(device_values()))
    if draw(TENTHS) < 4 and text.endswith("}"):
        text = HOSTILE[draw(st.sampled_from(sorted(HOSTILE)))](text, draw)
    return text


@st.composite
def members(draw: st.DrawFn, key: str) -> list[GroupPod]:
    """Up to six Pods of a ServingGroup, in the request's order, each with or without an IP, a
    host IP and the device annotation (under ``key``, another key, or none)."""
    pods: list[GroupPod] = []
    for replica in range(draw(st.integers(0, 3))):
        for index in range(draw(st.integers(1, 2))):
            role_id = f"prefill-{replica}"
            annotations_: dict[str, str] = {"example.com/team": "llm"}
            how = draw(TENTHS)
            if how < 8:
                annotations_[key] = draw(device_annotations())
            elif how == 8:
                annotations_["other.example.com/npus"] = draw(device_annotations())
            pod_ip = draw(mostly(st.sampled_from(IPS), st.sampled_from(NOT_IPS)))
            pods.append(
                GroupPod(
                    name=f"llama-0-{role_id}-{index}",
                    place=PodPlace("llama-0", "prefill", role_id, index == 0),
                    node=f"node-{index}",
                    host_ip=draw(mostly(st.sampled_from(IPS), st.sampled_from(NOT_IPS))),
                    pod_ip=pod_ip,
                    phase="Running" if pod_ip else "Pending",
                    ready=bool(pod_ip),
                    annotations=annotations_,
                )
            )
    return pods


@st.composite
def groups(draw: st.DrawFn) -> tuple[Any, list[GroupPod], int]:
    """An accepted config, the group's Pods and how many Pods it should have."""
    config = draw(configs.filter(native_accepts))
    pods = draw(members(annotation_key(config)))
    expected = len(pods) + draw(st.sampled_from([0, 0, 0, 1, -1]))
    return config, pods, expected


# --- generated Pods (OnPodCreate) -------------------------------------------------------------


@st.composite
def containers(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], bool]:
    container: dict[str, Any] = {"name": name, "image": "mindie:1"}
    well_formed = True
    how = draw(TENTHS)
    if how == 9:
        container["env"] = draw(st.sampled_from(["x", {"name": "A"}]))
        well_formed = False
    elif how >= 4:
        env = [{"name": "A", "value": "1"}]
        if draw(st.booleans()):
            env.append({"name": "RANK_TABLE_FILE", "value": "/mine/hccl.json"})
        container["env"] = env
    how = draw(TENTHS)
    if how == 9:
        container["volumeMounts"] = "x"
        well_formed = False
    elif how >= 4:
        container["volumeMounts"] = draw(
            st.lists(
                st.sampled_from(
                    [
                        {"name": "cache", "mountPath": "/cache"},
                        {"name": "mine", "mountPath": "/etc/hccl"},
                        {"name": "mine", "mountPath": "/user/serverid/devindex/config"},
                    ]
                ),
                max_size=2,
                unique_by=lambda m: str(m["mountPath"]),
            )
        )
    return container, well_formed


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(
        mostly(
            st.lists(st.sampled_from(["engine", "sidecar"]), min_size=1, max_size=2, unique=True),
            st.just([]),
        )
    )
    spec: dict[str, Any] = {"containers": [draw(containers(name))[0] for name in names]}
    if not names and draw(st.booleans()):
        spec["containers"] = draw(st.sampled_from(["x", [None], {"name": "engine"}]))
    how = draw(TENTHS)
    if how == 9:
        spec["volumes"] = "x"
    elif how >= 4:
        spec["volumes"] = draw(
            st.lists(
                st.sampled_from(
                    [
                        {"name": "cache", "emptyDir": {}},
                        {"name": "ranktable", "emptyDir": {}},
                        {"name": "hccl", "configMap": {"name": "mine"}},
                    ]
                ),
                max_size=2,
                unique_by=lambda v: str(v["name"]),
            )
        )
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    if draw(TENTHS) == 9:
        pod["spec"] = draw(st.sampled_from(["x", None]))
    return pod


# --- the differential tests -------------------------------------------------------------------


@DIFF
@given(config=configs)
def test_both_accept_and_refuse_the_same_configs(
    sandbox: Sandbox, compiled: CompiledModule, config: Any
) -> None:
    assert wasm_accepts(sandbox, compiled, config) == native_accepts(config)


@DIFF
@given(config=configs, pod=pods())
def test_both_give_identical_patches(
    sandbox: Sandbox, compiled: CompiledModule, config: Any, pod: dict[str, Any]
) -> None:
    if not native_accepts(config):
        assert not wasm_accepts(sandbox, compiled, config)
        return
    request = pod_request(config, pod)
    assert twins.on_pod_create(sandbox, compiled, request) == native(request)


@DIFF
@given(case=groups())
def test_both_write_identical_rank_tables(
    sandbox: Sandbox, compiled: CompiledModule, case: tuple[Any, list[GroupPod], int]
) -> None:
    config, members_, expected = case
    request = group_request(config, members_, expected)
    assert twins.on_serving_group_change(sandbox, compiled, request) == native(request)


@DIFF
@given(text=device_annotations())
def test_both_read_device_annotations_alike(
    sandbox: Sandbox, compiled: CompiledModule, text: str
) -> None:
    """One known Pod of one: the table lists it exactly when Python's parse_devices reads it."""
    pod = GroupPod(
        "llama-0-prefill-0-0",
        PodPlace("llama-0", "prefill", "prefill-0", True),
        host_ip="10.0.0.1",
        pod_ip="10.244.0.1",
        annotations={DEFAULT_ANNOTATION: text},
    )
    request = group_request(None, [pod], 1)
    response = twins.on_serving_group_change(sandbox, compiled, request)
    assert response == native(request)
    assert (table(response)["server_count"] == "1") == (parse_devices(text) is not None)


def test_the_generated_cases_reach_every_outcome(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    """A guard that the strategies reach each kind of table, patch and annotation, and that
    native and WebAssembly agree on the examples found."""
    search = settings(
        max_examples=3000,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )

    def tables(check: Callable[[dict[str, Any], list[GroupPod]], bool]) -> None:
        def reaches(case: tuple[Any, list[GroupPod], int]) -> bool:
            return check(table(native(group_request(*case))), case[1])

        try:
            case = find(groups(), reaches, settings=search, random=Random(0))
        except NoSuchExample:
            pytest.fail(f"no generated group reaches {check.__doc__}")
        request = group_request(*case)
        assert twins.on_serving_group_change(sandbox, compiled, request) == native(request)

    def completed(t: dict[str, Any], pods: list[GroupPod]) -> bool:
        """a completed table of several servers"""
        return t["status"] == "completed" and int(t["server_count"]) > 1

    def partial(t: dict[str, Any], pods: list[GroupPod]) -> bool:
        """an initializing table with servers"""
        return t["status"] == "initializing" and int(t["server_count"]) > 0

    def own_server_id(t: dict[str, Any], pods: list[GroupPod]) -> bool:
        """a server_id from the annotation"""
        hosts = {p.host_ip for p in pods}
        return any(s["server_id"] not in hosts for s in t["server_list"])

    def sorted_ids(t: dict[str, Any], pods: list[GroupPod]) -> bool:
        """devices reordered by number"""
        return any(len(s["device"]) > 2 for s in t["server_list"])

    for check in (completed, partial, own_server_id, sorted_ids):
        tables(check)
    refused_patch = find(
        st.tuples(configs.filter(native_accepts), pods()),
        lambda c: "error" in twins.decoded(native(pod_request(*c))),
        settings=search,
        random=Random(0),
    )
    request = pod_request(*refused_patch)
    assert twins.on_pod_create(sandbox, compiled, request) == native(request)


VALID = json.dumps(
    {"server_id": "10.0.0.9", "devices": [{"device_id": "0", "device_ip": "192.168.0.1"}]}
)
READ = {
    "NaN": False,
    "-Infinity": False,
    "a key twice": False,
    "a key twice, escaped": False,
    "a pair and its character": False,
    "lone surrogates": True,
    "an escaped key": True,
    "a raw control character": False,
    "a raw DEL and non-ASCII": True,
    "a long integer": True,
    "floats": True,
    "bad numbers": False,
    "trailing data": False,
    "leading space": False,
    "a trailing comma": False,
    "single quotes": False,
    "nesting": True,
    "truncated": False,
    "over the size limit": False,
    "at the size limit": True,
    "text": False,
}
"""Whether Python reads VALID once changed by each HOSTILE way (its simplest form)."""


def simplest(strategy: st.SearchStrategy[Any]) -> Any:
    """The simplest value ``strategy`` draws (hypothesis shrinks to it)."""
    return find(strategy, lambda _: True, settings=settings(database=None))


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_each_hostile_change_is_read_as_python_reads_it(
    sandbox: Sandbox, compiled: CompiledModule, what: str
) -> None:
    text = HOSTILE[what](VALID, simplest)
    assert (parse_devices(text) is not None) is READ[what], text[:200]
    native_, wasm = one_pod_table(sandbox, compiled, text)
    assert wasm == native_
    assert (table(wasm)["server_count"] == "1") is READ[what]


# --- edges, named -----------------------------------------------------------------------------


def one_pod_table(sandbox: Sandbox, compiled: CompiledModule, text: str) -> tuple[bytes, bytes]:
    """The native and the WebAssembly response for one Pod with annotation ``text``."""
    pod = GroupPod(
        "llama-0-prefill-0-0",
        PodPlace("llama-0", "prefill", "prefill-0", True),
        host_ip="10.0.0.1",
        pod_ip="10.244.0.1",
        annotations={DEFAULT_ANNOTATION: text},
    )
    request = group_request(None, [pod], 1)
    return native(request), twins.on_serving_group_change(sandbox, compiled, request)


def with_key(value: str) -> str:
    return VALID[:-1] + f', "x": {value}}}'


@pytest.mark.parametrize(
    ("text", "known"),
    [
        (with_key("1" * 4300), True),
        (with_key("-" + "1" * 4301), False),
        (with_key("1" * 4301 + ".0"), True),
        (with_key(nested(MAX_NESTING - 1)), True),
        (with_key(nested(2000)), False),
        ("[" * 32_700 + "]" * 32_700, False),
        (VALID[:-1] + ', "p": "' + "x" * (MAX_ANNOTATION_BYTES - len(VALID) - 9) + '"}', True),
        (VALID[:-1] + ', "p": "' + "x" * (MAX_ANNOTATION_BYTES - len(VALID) - 8) + '"}', False),
    ],
    ids=[
        "4300-digits",
        "4301-digits",
        "a-long-float",
        "nested-to-the-bound",
        "nested-2000",
        "nested-32700",
        "65536-bytes",
        "65537-bytes",
    ],
)
def test_limits(sandbox: Sandbox, compiled: CompiledModule, text: str, known: bool) -> None:
    native_, wasm = one_pod_table(sandbox, compiled, text)
    assert wasm == native_
    assert (table(wasm)["server_count"] == "1") is known


def test_both_read_the_deepest_nesting_allowed_and_refuse_one_more(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    """The bound is explicit on both sides, so it does not depend on the caller's stack (as
    Python's recursion limit would): both read MAX_NESTING containers and refuse one more,
    also from a deep call."""
    for depth, known in ((MAX_NESTING - 1, True), (MAX_NESTING, False)):
        text = with_key(nested(depth))  # the annotation's object adds one level
        native_, wasm = one_pod_table(sandbox, compiled, text)
        assert wasm == native_
        assert (table(wasm)["server_count"] == "1") is known

    def deep(n: int) -> bool:
        if n:
            return deep(n - 1)
        return parse_devices(with_key(nested(MAX_NESTING - 1))) is not None

    assert deep(sys.getrecursionlimit() - 100)


def test_the_wasm_twin_in_the_chain_writes_what_the_native_one_writes(sandbox: Sandbox) -> None:
    """Both runtimes through the chain: the same patch on every planned Pod, and the same
    objects, through the object policy, for the ServingGroup once its Pods are known."""
    chains = {}
    for runtime in ("Native", "Wasm"):
        manifest = {
            **GROUP_MODEL_SERVING,
            "spec": {
                **GROUP_MODEL_SERVING["spec"],
                "plugins": [{"name": NAME, "runtime": runtime, "config": {"fileName": "t.json"}}],
            },
        }
        ms = parse_model_serving(manifest)
        chains[runtime] = (ms, build_chain(ms, sandbox=sandbox))
    (native_ms, native_chain), (_, wasm_chain) = chains["Native"], chains["Wasm"]
    group = plan(native_ms)[0]
    members_: list[GroupPod] = []
    for n, desired in enumerate(group.pods()):
        native_pod = native_chain.on_pod_create(desired).pod
        wasm_pod = wasm_chain.on_pod_create(desired).pod
        assert native_pod["spec"] == wasm_pod["spec"]
        text = json.dumps({"devices": [{"device_id": "0", "device_ip": f"192.168.0.{n}"}]})
        members_.append(
            GroupPod(
                desired.name,
                desired.place,
                host_ip=f"10.0.0.{n}",
                pod_ip=f"10.244.0.{n}",
                annotations={DEFAULT_ANNOTATION: text},
            )
        )
    outcomes = []
    for chain in (native_chain, wasm_chain):
        (entry,) = chain.group_entries()
        request = chain.group_request(entry, group.name, members_)
        assert request is not None
        outcomes.append(chain.on_serving_group_change(entry, request))
    assert outcomes[0].failure is None and outcomes[1].failure is None
    assert outcomes[0].objects == outcomes[1].objects
    assert json.loads(outcomes[1].objects[0]["data"]["t.json"])["status"] == "completed"


def test_a_typical_call_is_cheap(sandbox: Sandbox, compiled: CompiledModule) -> None:
    """A group of 16 Pods of 8 NPUs each: one table call, and one Pod's patch."""
    pods_ = []
    for n in range(16):
        devices_ = [{"device_id": str(d), "device_ip": f"192.168.{n}.{d}"} for d in range(8)]
        pods_.append(
            GroupPod(
                f"llama-0-prefill-{n}-0",
                PodPlace("llama-0", "prefill", f"prefill-{n}", True),
                host_ip=f"10.0.0.{n}",
                pod_ip=f"10.244.{n}.5",
                annotations={DEFAULT_ANNOTATION: json.dumps({"devices": devices_})},
            )
        )
    request = group_request(None, pods_, 16)
    call = sandbox.call(compiled, "ms_on_serving_group_change", request, sandbox.limits())
    assert table(call.response)["server_count"] == "16"
    assert call.fuel_consumed < 5_000_000, call.fuel_consumed
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "engine"}]}}
    call = sandbox.call(compiled, "ms_on_pod_create", pod_request(None, pod), sandbox.limits())
    assert len(twins.decoded(call.response)["patch"]) == 3
    assert call.fuel_consumed < 2_000_000, call.fuel_consumed


def test_the_module_speaks_abi_v3_and_names_the_field_it_refuses(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    assert compiled.info.abi_version == 3
    plugin = WasmPlugin(NAME, {"fileName": "a/b"}, compiled, sandbox, sandbox.limits(), MS)
    spec = PluginSpec.model_validate({"name": NAME, "type": "BuiltIn", "runtime": "Wasm"})
    outcome = invoke(ChainEntry(0, spec, plugin), GroupRequest(MS, "llama-0", 0, ()))
    assert outcome.failure is not None
    assert str(outcome.failure.detail) == (
        "config.fileName: 'a/b' is not a file name (letters, digits, '-', '_' and '.')"
    )
    assert (
        msgpack.unpackb(plugin.encode_group(GroupRequest(MS, "llama-0", 0, ())))["abiVersion"] == 3
    )


def test_only_the_built_ins_with_the_group_hook_are_v3_modules(sandbox: Sandbox) -> None:
    """The Rust SDK exports modelserving_abi_v3 for a plugin with on_serving_group_change only;
    the others stay v2 modules (the host keeps sending them abiVersion 2)."""
    for builtin in default_registry():
        assert builtin.wasm_module is not None
        info = sandbox.load(builtin_wasm(builtin.wasm_module)).info
        group = "on_serving_group_change" in builtin.hooks
        assert info.abi_version == (3 if group else 2), builtin.name
        assert ("modelserving_abi_v3" in info.exports) is group, builtin.name
        assert ("ms_on_serving_group_change" in info.exports) is group, builtin.name
