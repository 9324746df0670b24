"""entry-address-file, native and WebAssembly side by side: on generated configs, Pods and
ServingGroups both accept the same configs and give byte-identical responses, the OnPodCreate
patch and the OnServingGroupChange ConfigMap (role ids that collide as keys, that JSON must
escape, entries with and without IPs, namespaces given, empty or absent)."""

from __future__ import annotations

import copy
import json
from random import Random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from modelserving.abi.codec import encode_request
from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain import build_chain
from modelserving.plugins.builtins.entry_address_file import NAME
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from modelserving.workload.plan import plan
from tests.vectors import GROUP_MODEL_SERVING, native_response
from tests.wasm import twins
from tests.wasm.test_builtin_rdma_network import TENTHS, maps, mostly

DIFF = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def model_serving(namespace: str | None) -> dict[str, Any]:
    """The vectors' ModelServing in ``namespace`` (None: none given)."""
    manifest = copy.deepcopy(GROUP_MODEL_SERVING)
    if namespace is None:
        del manifest["metadata"]["namespace"]
    else:
        manifest["metadata"]["namespace"] = namespace
    return manifest


def group_request(
    config: Any, pods: list[GroupPod], namespace: str | None, serving_group: str = "llama-0"
) -> bytes:
    manifest = model_serving(namespace)
    request = GroupRequest(parse_model_serving(manifest), serving_group, len(pods), tuple(pods))
    return encode_request(
        Hook.ON_SERVING_GROUP_CHANGE, NAME, config, manifest, group=request, version=3
    )


def pod_request(config: Any, pod: dict[str, Any], role_id: str, is_entry: bool) -> bytes:
    where = PodPlace("llama-0", "prefill", role_id, is_entry)
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


def data(response: bytes) -> dict[str, str]:
    (obj,) = twins.decoded(response)["objects"]
    return obj["data"]  # type: ignore[no-any-return]


# --- generated cases --------------------------------------------------------------------------

CONFIG_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "mountPath": mostly(
        st.sampled_from(["/etc/modelserving/entry", "/etc/leader/", "/"]),
        st.sampled_from(["etc", "/a:b", "", "/a\0", 2, None]),
    ),
    "configMapSuffix": mostly(
        st.sampled_from(["entry-address", "leader", "a" * 40]),
        st.sampled_from(["Leader", "a_b", "a" * 41, "", "a.b", 1]),
    ),
    "container": mostly(st.sampled_from(["engine", "sidecar", "missing"]), st.just(3)),
}
configs = mostly(
    maps(CONFIG_FIELDS, [{"config_map_suffix": "x"}, {"fileName": "address"}]), st.none()
)
ROLE_IDS = ["prefill-0", "prefill-1", "decode-0", "a", "a.json", 'quote"d', "é-0", "tab\t", ""]
IPS = ["10.244.1.7", "fe80::1", "10.244.2.9", "1.2"]
NOT_IPS = ["", "pending", "10.0.0.1/24", "a" * 46, "10.0.0.1\n"]
NAMESPACES = st.sampled_from([None, "", "serving", "team-a"])
SERVING_GROUPS = st.sampled_from(["llama-0", "llama-12", 'g"é'])


@st.composite
def members(draw: st.DrawFn) -> list[GroupPod]:
    """Up to eight Pods: role replicas (now and then with odd ids) in the request's order, the
    entry first or missing, IPs valid, invalid or none."""
    pods: list[GroupPod] = []
    role_ids = draw(
        mostly(
            st.lists(st.sampled_from(ROLE_IDS[:3]), max_size=3, unique=True),
            st.lists(st.sampled_from(ROLE_IDS), max_size=4),
        )
    )
    for role_id in role_ids:
        for index in range(draw(st.integers(1, 2))):
            is_entry = index == 0 if draw(TENTHS) != 9 else draw(st.booleans())
            if index == 0 and draw(TENTHS) == 8:
                continue  # the entry is not there (deleted, recreated)
            pod_ip = draw(mostly(st.sampled_from(IPS), st.sampled_from(NOT_IPS)))
            pods.append(
                GroupPod(
                    name=f"llama-0-{role_id}-{index}",
                    place=PodPlace("llama-0", "prefill", role_id, is_entry),
                    pod_ip=pod_ip,
                    phase="Running" if pod_ip else "Pending",
                )
            )
    return pods


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(
        mostly(
            st.lists(st.sampled_from(["engine", "sidecar"]), min_size=1, max_size=2, unique=True),
            st.just([]),
        )
    )
    containers: list[Any] = []
    for name in names:
        container: dict[str, Any] = {"name": name}
        how = draw(TENTHS)
        if how == 9:
            container["volumeMounts"] = "x"
        elif how >= 5:
            path = draw(st.sampled_from(["/etc/modelserving/entry", "/cache"]))
            container["volumeMounts"] = [{"name": "mine", "mountPath": path}]
        containers.append(container)
    spec: dict[str, Any] = {"containers": containers}
    how = draw(TENTHS)
    if how == 9:
        spec["volumes"] = draw(st.sampled_from(["x", [None]]))
    elif how >= 5:
        name = draw(st.sampled_from(["entry-address", "leader", "cache"]))
        spec["volumes"] = [{"name": name, "emptyDir": {}}]
    return {"metadata": {"name": "p"}, "spec": spec}


# --- the differential tests -------------------------------------------------------------------


@DIFF
@given(config=configs)
def test_both_accept_and_refuse_the_same_configs(
    sandbox: Sandbox, compiled: CompiledModule, config: Any
) -> None:
    assert twins.wasm_accepts(sandbox, compiled, NAME, config) == native_accepts(config)


@DIFF
@given(
    config=configs,
    pod=pods(),
    role_id=st.sampled_from(ROLE_IDS),
    is_entry=st.booleans(),
)
def test_both_give_identical_patches(
    sandbox: Sandbox,
    compiled: CompiledModule,
    config: Any,
    pod: dict[str, Any],
    role_id: str,
    is_entry: bool,
) -> None:
    if not native_accepts(config):
        assert not twins.wasm_accepts(sandbox, compiled, NAME, config)
        return
    request = pod_request(config, pod, role_id, is_entry)
    assert twins.on_pod_create(sandbox, compiled, request) == native(request)


@DIFF
@given(
    config=configs.filter(native_accepts),
    group=members(),
    namespace=NAMESPACES,
    serving_group=SERVING_GROUPS,
)
def test_both_write_identical_address_files(
    sandbox: Sandbox,
    compiled: CompiledModule,
    config: Any,
    group: list[GroupPod],
    namespace: str | None,
    serving_group: str,
) -> None:
    request = group_request(config, group, namespace, serving_group)
    assert twins.on_serving_group_change(sandbox, compiled, request) == native(request)


def test_the_generated_cases_reach_every_outcome(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    """A guard that the strategies reach each kind of file, and that native and WebAssembly
    agree on the examples found."""
    search = settings(
        max_examples=3000,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    cases = st.tuples(members(), NAMESPACES, SERVING_GROUPS)
    wanted = {
        "an entry's IP": lambda d: any(v in IPS for v in d.values()),
        "a DNS name in the default namespace": lambda d: any(
            v.endswith(".default") for v in d.values()
        ),
        "a role id whose files collide": lambda d: "a.json" in d and "a.json.json" in d,
        "escapes in the JSON": lambda d: any("\\" in v for v in d.values()),
        "no Pods at all": lambda d: d == {},
    }
    for what, check in wanted.items():

        def reaches(case: Any, check: Any = check) -> bool:
            return bool(check(data(native(group_request(None, *case)))))

        try:
            case = find(cases, reaches, settings=search, random=Random(0))
        except NoSuchExample:
            pytest.fail(f"no generated case reaches {what}")
        request = group_request(None, *case)
        assert twins.on_serving_group_change(sandbox, compiled, request) == native(request), what


def test_the_wasm_twin_in_the_chain_writes_what_the_native_one_writes(sandbox: Sandbox) -> None:
    """Both runtimes through the chain: the same patch on every planned Pod, and the same
    objects, through the object policy, for the ServingGroup."""
    chains = {}
    for runtime in ("Native", "Wasm"):
        manifest = {
            **GROUP_MODEL_SERVING,
            "spec": {
                **GROUP_MODEL_SERVING["spec"],
                "plugins": [{"name": NAME, "runtime": runtime}],
            },
        }
        ms = parse_model_serving(manifest)
        chains[runtime] = (ms, build_chain(ms, sandbox=sandbox))
    (native_ms, native_chain), (_, wasm_chain) = chains["Native"], chains["Wasm"]
    group = plan(native_ms)[0]
    members_: list[GroupPod] = []
    for n, desired in enumerate(group.pods()):
        native_pod = native_chain.on_pod_create(desired).pod
        assert wasm_chain.on_pod_create(desired).pod["spec"] == native_pod["spec"]
        ip = f"10.244.0.{n}" if n != 2 else ""
        members_.append(GroupPod(desired.name, desired.place, pod_ip=ip))
    outcomes = []
    for chain in (native_chain, wasm_chain):
        (entry,) = chain.group_entries()
        request = chain.group_request(entry, group.name, members_)
        assert request is not None
        outcomes.append(chain.on_serving_group_change(entry, request))
    assert outcomes[0].failure is None and outcomes[1].failure is None
    assert outcomes[0].objects == outcomes[1].objects
    files = outcomes[1].objects[0]["data"]
    assert files["prefill-0"] == "10.244.0.0"
    assert json.loads(files["prefill-1.json"]) == {"dns": "llama-0-prefill-1-0.serving", "ip": ""}


def test_a_typical_call_is_cheap(sandbox: Sandbox, compiled: CompiledModule) -> None:
    """A group of 8 role replicas of an entry and three workers."""
    members_ = [
        GroupPod(
            f"llama-0-prefill-{r}-{i}",
            PodPlace("llama-0", "prefill", f"prefill-{r}", i == 0),
            pod_ip=f"10.244.{r}.{i}",
        )
        for r in range(8)
        for i in range(4)
    ]
    request = group_request(None, members_, "serving")
    call = sandbox.call(compiled, "ms_on_serving_group_change", request, sandbox.limits())
    assert len(data(call.response)) == 16
    assert call.fuel_consumed < 2_000_000, call.fuel_consumed
