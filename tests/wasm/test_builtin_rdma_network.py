"""rdma-network, native and WebAssembly side by side: on generated configs and Pods (resources,
volumes, mounts, security contexts and the Multus annotation present, absent or of the wrong
type; entry and worker Pods) both accept the same configs and give byte-identical responses.
The native patches of well-formed Pods go through the patch policy: the default one refuses
exactly the IPC_LOCK grant, and one that allows IPC_LOCK accepts every patch."""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from modelserving.abi.codec import encode_request
from modelserving.api.errors import PatchRejected, PluginFailure
from modelserving.api.hook import Hook
from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.api.place import PodPlace
from modelserving.api.policy import BASELINE_CAPABILITIES, PatchPolicy
from modelserving.chain import PatchValidator, build_chain
from modelserving.plugins.builtins.rdma_network import NAME, NETWORKS_ANNOTATION
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from modelserving.workload.plan import plan
from tests.unit.plugins.test_rdma_network import _model_serving
from tests.vectors import MODEL_SERVING, native_response
from tests.wasm import twins

DIFF = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
DEFAULT = PatchValidator()
ALLOWING = PatchValidator(PatchPolicy(allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK"]))
CAPABILITY_REFUSED = "add it to patchPolicy.allowedCapabilities"


# --- the two implementations ------------------------------------------------------------------


def request(config: Any, pod: dict[str, Any], is_entry: bool) -> bytes:
    where = PodPlace("llama-0", "prefill", "prefill-0", is_entry)
    return encode_request(Hook.ON_POD_CREATE, NAME, config, MODEL_SERVING, where, pod)


def native_accepts(config: Any) -> bool:
    return twins.native_accepts(NAME, config)


def native(config: Any, pod: dict[str, Any], is_entry: bool) -> bytes:
    response = native_response(request(config, pod, is_entry))
    assert response is not None, "only called with accepted configs"
    return response


@pytest.fixture(scope="module")
def compiled(sandbox: Sandbox) -> CompiledModule:
    return twins.load(sandbox, NAME)


def wasm_accepts(sandbox: Sandbox, compiled: CompiledModule, config: Any) -> bool:
    return twins.wasm_accepts(sandbox, compiled, NAME, config)


def wasm(
    sandbox: Sandbox, compiled: CompiledModule, config: Any, pod: dict[str, Any], is_entry: bool
) -> bytes:
    return twins.on_pod_create(sandbox, compiled, request(config, pod, is_entry))


decoded = twins.decoded


# --- generated cases --------------------------------------------------------------------------


TENTHS = st.integers(0, 99).map(lambda n: n % 10)
"""0 to 9 about evenly (hypothesis favours the bounds of a range, here 0 and 99, both 0 or 9)."""


def mostly(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> Any:
    """``valid`` about nine times out of ten."""
    return TENTHS.flatmap(lambda n: invalid if n == 7 else valid)


network_names = st.sampled_from(["rdma-net", "a", "ns/b", "infra/ib.rail-0", "c"])
bad_network_names = st.sampled_from(["A", "a.b/c", "a/b/c", "/a", "a/", "net@eth1", "", None, 1])


@st.composite
def maps(
    draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]], odd: list[dict[str, Any]]
) -> dict[str, Any]:
    """A map with about half of ``fields``, now and then with one of the ``odd`` entries too (an
    unknown field, or a field spelt twice)."""
    drawn = {key: draw(value) for key, value in fields.items() if draw(TENTHS) < 5}
    if draw(TENTHS) == 7:
        drawn.update(draw(st.sampled_from(odd)))
    return drawn


hugepages = maps(
    {
        "pageSize": mostly(
            st.sampled_from(["2Mi", "1Gi"]), st.sampled_from(["2M", "1gi", None, 2])
        ),
        "amount": mostly(
            st.sampled_from(["4Gi", "1", "0.5Gi", "2048Mi"]),
            st.sampled_from(["4 Gi", "", "-1Gi", None, 4]),
        ),
    },
    [{"size": "1"}, {"page_size": "2Mi"}],
).map(lambda h: {"pageSize": "2Mi", "amount": "1Gi", **h} if len(h) < 2 else h)
CONFIG_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "resourceName": mostly(
        st.sampled_from(["rdma/rdma_shared_device_a", "example.com/hca", "rdma/hca_shared"]),
        st.sampled_from(["rdma", "Bad.io/x", "rdma/", "", 1, None]),
    ),
    "devices": mostly(
        st.integers(1, 64), st.sampled_from([0, 65, -1, True, 1.0, "2", 2**63, None])
    ),
    "container": mostly(st.sampled_from(["engine", "sidecar", "missing"]), st.just(3) | st.none()),
    "ipcLock": mostly(st.booleans(), st.sampled_from(["true", 0, None])),
    "hugepages": mostly(hugepages, st.sampled_from(["2Mi", [], {}, None])),
    "networks": mostly(
        st.lists(network_names, min_size=1, max_size=3, unique=True),
        st.lists(network_names | bad_network_names, max_size=3) | st.just("a") | st.none(),
    ),
}
configs = mostly(maps(CONFIG_FIELDS, [{"ipc_lock": True}, {"extra": 1}]), st.none())

BLANKS = st.sampled_from(["", "", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c"])


@st.composite
def comma_forms(draw: st.DrawFn) -> str:
    """The comma form as people write it: names (some the config lists), empty entries and
    whitespace around them."""
    entries = draw(st.lists(network_names | st.sampled_from(["x", "", "ns/b@net1"]), max_size=4))
    return ",".join(draw(BLANKS) + entry + draw(BLANKS) for entry in entries)


json_forms = st.sampled_from(
    ['[{"name": "a"}]', " [ ]", '\n[{"name": "rdma-net", "namespace": "ns"}]', "\t[]"]
)
annotation_values = comma_forms() | json_forms
requests_maps = st.dictionaries(
    st.sampled_from(["cpu", "rdma/rdma_shared_device_a", "example.com/hca", "hugepages-2Mi"]),
    st.sampled_from(["1", "2Gi"]) | st.none(),
    max_size=3,
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "limits": st.dictionaries(
            st.sampled_from(["cpu", "rdma/rdma_shared_device_a", "hugepages-1Gi"]),
            st.sampled_from(["4", "1Gi"]),
            max_size=2,
        )
        | st.none(),
        "requests": requests_maps | st.none() | st.just("x"),
    },
)
CAPABILITIES = ["CHOWN", "IPC_LOCK", "CAP_IPC_LOCK", "ipc_lock", "NET_BIND_SERVICE"]


@st.composite
def security_contexts(draw: st.DrawFn) -> dict[str, Any]:
    """A container's securityContext: maybe a user, maybe capabilities (null, drop, add: a few
    of CAPABILITIES in any order, IPC_LOCK among them or not)."""
    context: dict[str, Any] = {"runAsUser": 1000} if draw(TENTHS) < 3 else {}
    how = draw(TENTHS)
    if how == 0:
        context["capabilities"] = None
    elif how >= 3:
        capabilities: dict[str, Any] = {"drop": ["ALL"]} if draw(TENTHS) < 3 else {}
        if draw(TENTHS) >= 2:
            chosen = [cap for cap in CAPABILITIES if draw(TENTHS) < 4]
            capabilities["add"] = draw(st.permutations(chosen))
        context["capabilities"] = capabilities
    return context


mounts = st.lists(
    st.sampled_from(
        [
            {"name": "cache", "mountPath": "/cache"},
            {"name": "mine", "mountPath": "/dev/hugepages"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ]
    ),
    max_size=2,
    unique_by=lambda m: str(m["mountPath"]),
)
volumes = st.lists(
    st.sampled_from(
        [
            {"name": "cache", "emptyDir": {}},
            {"name": "hugepages", "emptyDir": {"medium": "HugePages-1Gi"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ]
    ),
    max_size=2,
    unique_by=lambda v: str(v["name"]),
)
NOT_A_MAP = st.sampled_from(["x", 1, ["x"]])
BAD_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "resources": NOT_A_MAP | st.sampled_from([{"limits": "x"}, {"limits": ["a"]}]),
    "volumeMounts": st.sampled_from(["x", {"name": "m"}]),
    "securityContext": NOT_A_MAP
    | st.sampled_from([{"capabilities": []}, {"capabilities": {"add": "IPC_LOCK"}}]),
}


@st.composite
def containers(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], bool]:
    """A container and whether it is well-formed (no field of the wrong type)."""
    container: dict[str, Any] = {"name": name, "image": "vllm:1"}
    well_formed = True
    for field, good in (
        ("resources", resources),
        ("volumeMounts", mounts),
        ("securityContext", security_contexts()),
    ):
        how = draw(TENTHS)
        if how < 4:
            continue  # absent
        if how == 9:
            container[field] = draw(BAD_FIELDS[field])
            well_formed = False
        else:
            container[field] = draw(good)
    if draw(st.booleans()):
        container["env"] = [{"name": "A", "value": "1"}]
        container["ports"] = [{"containerPort": 8000}]
        container["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8000}}
    return container, well_formed


@st.composite
def pods(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A Pod and whether it is well-formed (the patch policy is then checked on its patch)."""
    names = draw(
        mostly(
            st.lists(
                st.sampled_from(["engine", "sidecar", "proxy"]), min_size=1, max_size=3, unique=True
            ),
            st.just([]),
        )
    )
    well_formed = bool(names)
    spec: dict[str, Any] = {}
    if names or draw(st.booleans()):
        spec["containers"] = []
    for name in names:
        container, ok = draw(containers(name))
        spec["containers"].append(container)
        well_formed = well_formed and ok
    if not names and draw(st.booleans()):  # containers of the wrong type
        spec["containers"] = draw(st.sampled_from(["x", ["x"], [None], {"name": "engine"}]))
    how = draw(TENTHS)
    if how == 9:
        spec["volumes"] = "x"
        well_formed = False
    elif how >= 4:
        spec["volumes"] = draw(volumes)
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "a", "operator": "Exists"}]
    metadata: dict[str, Any] = {"name": "llama-0-prefill-0-0", "namespace": "serving"}
    how = draw(TENTHS)
    if how == 9:
        metadata["annotations"] = draw(
            st.sampled_from(["x", {NETWORKS_ANNOTATION: 5}, {NETWORKS_ANNOTATION: ["a"]}])
        )
        well_formed = False
    elif how >= 3:
        annotations: dict[str, Any] = draw(
            st.dictionaries(st.sampled_from(["x", "y"]), st.just("1"), max_size=1)
        )
        if draw(st.booleans()):
            annotations[NETWORKS_ANNOTATION] = draw(annotation_values | st.none())
        metadata["annotations"] = annotations
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if draw(TENTHS) == 9:
        pod["spec"] = draw(st.sampled_from(["x", None, []]))
        well_formed = False
    return pod, well_formed


def check_policy(pod: dict[str, Any], response: bytes) -> None:
    """A patch of a well-formed Pod passes the policy that allows IPC_LOCK, and the default
    policy too unless it gives a container IPC_LOCK it did not have (in any spelling the policy
    reads, ``ipc_lock`` included): then the default policy's error names the setting. Its
    mounts into a container the template already gives IPC_LOCK pass (IPC_LOCK is not a
    privilege worth taking a container over for)."""
    ops = decoded(response).get("patch")
    if not ops:
        return
    ALLOWING.apply(pod, ops)
    granted = [op for op in ops if "/securityContext" in op["path"]]
    assert len(granted) <= 1
    had = granted and _has_ipc_lock(pod, int(granted[0]["path"].split("/")[3]))
    if granted and not had:
        with pytest.raises(PatchRejected) as info:
            DEFAULT.apply(pod, ops)
        assert str(info.value).endswith(CAPABILITY_REFUSED)
        assert "adds capability IPC_LOCK" in str(info.value)
    else:
        DEFAULT.apply(pod, ops)


def _has_ipc_lock(pod: dict[str, Any], index: int) -> bool:
    return "IPC_LOCK" in [
        str(cap).upper().removeprefix("CAP_") for cap in _capabilities(pod, index)
    ]


def _capabilities(pod: dict[str, Any], index: int) -> list[Any]:
    """The capabilities container ``index`` of a well-formed Pod adds."""
    context = pod["spec"]["containers"][index].get("securityContext") or {}
    return list((context.get("capabilities") or {}).get("add") or [])


@DIFF
@given(config=configs)
def test_both_accept_and_refuse_the_same_configs(
    sandbox: Sandbox, compiled: CompiledModule, config: Any
) -> None:
    assert wasm_accepts(sandbox, compiled, config) == native_accepts(config)


@DIFF
@given(config=configs, case=pods(), is_entry=st.booleans())
def test_both_give_identical_responses(
    sandbox: Sandbox,
    compiled: CompiledModule,
    config: Any,
    case: tuple[dict[str, Any], bool],
    is_entry: bool,
) -> None:
    pod, well_formed = case
    if not native_accepts(config):
        assert not wasm_accepts(sandbox, compiled, config)
        return
    expected = native(config, pod, is_entry)
    assert wasm(sandbox, compiled, config, pod, is_entry) == expected
    assert native(config, pod, not is_entry) == expected, "entry and worker Pods alike"
    if well_formed:
        check_policy(pod, expected)


def test_the_generated_cases_reach_patches_errors_and_refused_configs(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    """A guard that the strategies above reach each kind of outcome, and that native and
    WebAssembly agree on the examples found."""
    search = settings(
        max_examples=3000,
        database=None,
        phases=[Phase.generate],  # the first example found will do: no shrinking
        suppress_health_check=list(HealthCheck),
    )
    cases = st.tuples(configs.filter(native_accepts), pods())

    def paths(response: bytes) -> list[str]:
        return [op["path"] for op in decoded(response).get("patch", [])]

    def error(response: bytes) -> str:
        return str(decoded(response).get("error", ""))

    wanted: dict[str, Callable[[bytes], bool]] = {
        "a request updated": lambda r: any("/requests/" in p for p in paths(r)),
        "a volume appended": lambda r: "/spec/volumes/-" in paths(r),
        "a mount created": lambda r: any(p.endswith("/volumeMounts") for p in paths(r)),
        "a capability appended": lambda r: any(p.endswith("/add/-") for p in paths(r)),
        "an annotation key added": lambda r: any(p.endswith("~1networks") for p in paths(r)),
        "the annotations created": lambda r: "/metadata/annotations" in paths(r),
        "the JSON form": lambda r: "Multus's JSON form" in error(r),
        "a missing container": lambda r: "has no container named" in error(r),
        "no containers": lambda r: error(r) == "the Pod has no containers",
        "a wrong type": lambda r: " is a " in error(r) and ", not a" in error(r),
    }
    for what, check in wanted.items():

        def reaches(case: Any, check: Callable[[bytes], bool] = check) -> bool:
            return check(native(case[0], case[1][0], True))

        try:
            config, (pod, _) = find(cases, reaches, settings=search, random=Random(0))
        except NoSuchExample:
            pytest.fail(f"no generated case reaches {what}")
        assert wasm(sandbox, compiled, config, pod, True) == native(config, pod, True), what
    refused = find(configs, lambda c: not native_accepts(c), settings=search)
    assert not wasm_accepts(sandbox, compiled, refused)
    for refuses in (True, False):  # the policy check meets patches the default policy refuses

        def policy_case(case: Any, refuses: bool = refuses) -> bool:
            config, (pod, well_formed) = case
            ops = decoded(native(config, pod, True)).get("patch")
            if not well_formed or not ops:
                return False
            try:
                DEFAULT.apply(pod, ops)
            except PatchRejected:
                return refuses
            return not refuses

        find(cases, policy_case, settings=search, random=Random(0))


# --- WebAssembly specifics ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"devices": 0}, "config.devices: must be from 1 to 64, got 0"),
        ({"networks": []}, "config.networks: must have at least 1 item"),
        ({"networks": ["a", "a"]}, "config.networks.1: 'a' is listed twice"),
        ({"hugepages": {"pageSize": "4Ki", "amount": "1"}}, "must be '2Mi' or '1Gi', got '4Ki'"),
        ({"resourceName": "rdma"}, "config.resourceName: 'rdma' is not a resource name"),
        ({"hugepages": {"pageSize": "2Mi", "amount": "1", "x": 1}}, "config.hugepages.x: unknown"),
    ],
)
def test_the_module_names_the_field_it_refuses(
    sandbox: Sandbox, compiled: CompiledModule, config: Any, error: str
) -> None:
    plugin = WasmPlugin(NAME, config, compiled, sandbox, sandbox.limits())
    with pytest.raises(PluginFailure) as info:
        plugin.validate_config()
    assert error in str(info.value)


def test_the_wasm_twin_in_the_chain_configures_pods_like_the_native_one(sandbox: Sandbox) -> None:
    config = {"networks": ["rdma-net"], "hugepages": {"pageSize": "1Gi", "amount": "8Gi"}}
    native_ms = _model_serving(config)
    wasm_ms = _model_serving(config)
    assert wasm_ms.spec.plugins is not None
    wasm_ms.spec.plugins[0].runtime = "Wasm"
    native_chain = build_chain(native_ms, validator=ALLOWING)
    wasm_chain = build_chain(wasm_ms, validator=ALLOWING, sandbox=sandbox)
    for desired in plan(native_ms)[0].pods():
        native_pod = native_chain.on_pod_create(desired).pod
        wasm_pod = wasm_chain.on_pod_create(desired).pod
        for pod in (native_pod, wasm_pod):
            pod["metadata"]["annotations"].pop(PLUGINS_APPLIED_ANNOTATION)
        assert wasm_pod == native_pod
        assert native_pod["metadata"]["annotations"][NETWORKS_ANNOTATION] == "rdma-net"
    with pytest.raises(PluginFailure) as info:
        build_chain(wasm_ms, sandbox=sandbox).on_pod_create(next(iter(plan(wasm_ms)[0].pods())))
    assert info.value.failure_class == "ForbiddenPatch"
    assert str(info.value.detail).endswith(CAPABILITY_REFUSED)


def test_a_typical_call_is_cheap(sandbox: Sandbox, compiled: CompiledModule) -> None:
    config = {"networks": ["rdma-net"], "hugepages": {"pageSize": "2Mi", "amount": "4Gi"}}
    pod = {
        "metadata": {"name": "p", "annotations": {NETWORKS_ANNOTATION: "a"}},
        "spec": {"containers": [{"name": "engine", "resources": {"limits": {"cpu": "8"}}}]},
    }
    call = sandbox.call(compiled, "ms_on_pod_create", request(config, pod, True), sandbox.limits())
    assert len(decoded(call.response)["patch"]) == 6
    assert call.fuel_consumed < 2_000_000, call.fuel_consumed
