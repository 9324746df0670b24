"""lws-standard-labels, native and WebAssembly side by side: on generated ModelServings, groups,
Pods and labels (well- and ill-named) both give byte-identical responses, and both accept and
refuse the same configs; plus what only the module can be sent (a ModelServing without a name),
and its SHA-1 checked against hashlib."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import encode_request
from modelserving.api.hook import Hook, HookRequest
from modelserving.api.modelserving import ModelServing
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain import build_chain
from modelserving.plugins.base import EmptyConfig, HookError
from modelserving.plugins.builtins.lws_standard_labels import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    NAME,
    NAME_LABEL,
    WORKER_INDEX_LABEL,
    LwsStandardLabels,
)
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from modelserving.workload.plan import plan
from tests.wasm import twins

DIFF = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
LWS_KEYS = [NAME_LABEL, GROUP_INDEX_LABEL, WORKER_INDEX_LABEL, GROUP_KEY_LABEL]
SPEC: dict[str, Any] = {
    "template": {
        "roles": [
            {
                "name": "prefill",
                "entryTemplate": {"spec": {"containers": [{"name": "e", "image": "vllm:1"}]}},
                "workerReplicas": 0,
            }
        ]
    }
}


@dataclass(frozen=True)
class Case:
    """One OnPodCreate call: the ModelServing's metadata, where the Pod sits, and the Pod."""

    metadata: dict[str, Any]
    where: PodPlace
    pod: dict[str, Any]
    config: Any = None

    @property
    def model_serving(self) -> dict[str, Any]:
        return {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": self.metadata,
            "spec": SPEC,
        }

    def request(self) -> bytes:
        return encode_request(
            Hook.ON_POD_CREATE, NAME, self.config, self.model_serving, self.where, self.pod
        )


# --- the two implementations ------------------------------------------------------------------


def native_accepts(config: Any) -> bool:
    """Whether the chain accepts ``config`` for the native built-in (null = {}, a map, no
    field)."""
    raw = config if config is not None else {}
    if not isinstance(raw, dict):
        return False
    try:
        EmptyConfig.model_validate(raw)
    except ValueError:
        return False
    return True


def native(case: Case) -> bytes:
    """The native response bytes to ``case`` (as tests.vectors.native_response, but the
    ModelServing is checked by its schema only, so that names the admission rules refuse, such
    as one longer than 63 characters, still reach the plugin)."""
    fields = msgpack.unpackb(case.request())
    request = HookRequest(
        hook=Hook.ON_POD_CREATE,
        model_serving=ModelServing.model_validate(fields["modelServing"]),
        place=PodPlace(
            fields["servingGroup"], fields["roleName"], fields["roleId"], fields["isEntry"]
        ),
        pod=fields["pod"],
    )
    try:
        ops = LwsStandardLabels(NAME).on_pod_create(request)
    except HookError as exc:
        return bytes(msgpack.packb({"error": str(exc)}, use_bin_type=True))
    return bytes(msgpack.packb({"patch": list(ops)}, use_bin_type=True)) if ops else b""


@pytest.fixture(scope="module")
def compiled(sandbox: Sandbox) -> CompiledModule:
    return twins.load(sandbox, NAME)


def wasm_accepts(sandbox: Sandbox, compiled: CompiledModule, config: Any) -> bool:
    return twins.wasm_accepts(sandbox, compiled, NAME, config)


def wasm(sandbox: Sandbox, compiled: CompiledModule, case: Case) -> bytes:
    return twins.on_pod_create(sandbox, compiled, case.request())


decoded = twins.decoded


# --- generated cases --------------------------------------------------------------------------

dns_names = st.from_regex(r"[a-z]([-a-z0-9]{0,12}[a-z0-9])?", fullmatch=True)
ms_names = dns_names | st.sampled_from(["llm", "a-1", "llm-0", "modèle", "名前", "m" * 63])
long_names = st.integers(64, 70).map(lambda n: "m" * n)
namespaces = (
    dns_names
    | st.sampled_from(["default", "team-a", "espace-é"])
    | st.integers(50, 130).map(lambda n: "n" * n)
)
roles = st.sampled_from(["prefill", "decode", "server", "p-1"])
ordinals = st.integers(0, 12) | st.integers(0, 10**12)
bad_ordinals = st.sampled_from(["", "00", "01", "007", "1a", "x", "-1", "+1", "\u0661", " 1"])


# Which name, if any, a generated case breaks: mostly none (about half the cases), else one of
# these, each in about one case in twelve: a worker's name ("pod name", "unnamed pod") or an
# entry Pod's ("entry", which is not checked).
FAULTS = [None] * 6 + ["long name", "no namespace", "group", "pod name", "unnamed pod", "entry"]


ANY_FAULT = st.sampled_from(FAULTS)

LWS = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "uid": "u"}
NOT_LWS_OWNERS: list[Any] = [
    [],
    [{"kind": "Deployment", "name": "d"}],
    [{**LWS, "name": ""}],  # no name: not an owner to use
    [{"kind": "leaderworkerset", "name": "x"}],
    "not-a-list",
]
LWS_OWNERS: list[Any] = [
    [{**LWS, "name": "lws"}],
    [{"kind": "Deployment", "name": "d"}, {**LWS, "name": "w-2"}, {**LWS, "name": "second"}],
    [{"kind": "LeaderWorkerSet", "name": "名前"}],
]


@st.composite
def cases(draw: st.DrawFn, faults: st.SearchStrategy[str | None] = ANY_FAULT) -> Case:
    """Calls that follow the controller's naming, or break one rule (see FAULTS)."""
    fault = draw(faults)
    ms_name = draw(long_names if fault == "long name" else ms_names)
    namespace = draw(st.sampled_from(["", None]) if fault == "no namespace" else namespaces)
    metadata: dict[str, Any] = {"name": ms_name}
    if namespace is not None or draw(st.booleans()):
        metadata["namespace"] = namespace  # None here: an explicit null
    # Owners that are not an LWS, or (when no fault is about the ModelServing) an owning LWS.
    owners = st.sampled_from(NOT_LWS_OWNERS)
    if fault not in ("long name", "no namespace"):
        owners = owners | st.sampled_from(LWS_OWNERS)
    owner_refs = draw(st.none() | owners)
    if owner_refs is not None:
        metadata["ownerReferences"] = owner_refs

    group_index = str(draw(ordinals))
    group = f"{ms_name}-{group_index}"
    if fault == "group":
        group = draw(
            st.sampled_from(
                [
                    f"{ms_name}-{draw(bad_ordinals)}",
                    f"other-{group_index}",
                    ms_name,
                    f"{ms_name}{group_index}",
                ]
            )
        )

    role = draw(roles)
    role_id = f"{role}-{draw(ordinals)}"
    is_entry = fault == "entry" or (
        fault not in ("pod name", "unnamed pod") and draw(st.booleans())
    )
    k = 0 if is_entry else draw(st.integers(1, 9) | st.integers(1, 10**6))
    pod_name: str | None = f"{group}-{role_id}-{k}"
    if fault in ("pod name", "entry"):  # an entry Pod's name is not checked
        pod_name = draw(
            st.sampled_from(
                [
                    f"{group}-{role_id}-0",
                    f"{group}-{role_id}-{draw(bad_ordinals)}",
                    f"{group}-other-0-{k or 1}",
                    f"{group}-{role_id}",
                    "custom",
                ]
            )
        )
    elif fault == "unnamed pod":
        pod_name = None

    pod_metadata: dict[str, Any] = {"namespace": namespace or "default"}
    if pod_name is not None:
        pod_metadata["name"] = pod_name
    labels = draw(
        st.none()
        | st.just({})
        | st.dictionaries(
            st.sampled_from([*LWS_KEYS, "app", "modelserving.volcano.sh/name", "a~b"]),
            st.text(alphabet="abc012", max_size=4),
            max_size=5,
        )
    )
    if labels is not None or draw(st.booleans()):
        pod_metadata["labels"] = labels  # None here: an explicit null
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_metadata,
        "spec": {"containers": [{"name": "e", "image": "vllm:1"}]},
    }
    config = draw(st.sampled_from([None, {}, {"anything": None}]))
    return Case(metadata, PodPlace(group, role, role_id, is_entry), pod, config)


configs = st.none() | st.one_of(
    st.dictionaries(
        st.sampled_from(["a", "name", "groupKey", "group_key"]),
        st.none() | st.integers(0, 2) | st.text(max_size=2),
        max_size=3,
    ),
    st.sampled_from([[], [1], "", "x", 0, 1, False, True, 1.5]),
)


@DIFF
@given(case=cases())
def test_both_give_identical_responses(
    sandbox: Sandbox, compiled: CompiledModule, case: Case
) -> None:
    assert wasm(sandbox, compiled, case) == native(case)


@DIFF
@given(config=configs)
def test_both_accept_and_refuse_the_same_configs(
    sandbox: Sandbox, compiled: CompiledModule, config: Any
) -> None:
    assert wasm_accepts(sandbox, compiled, config) == native_accepts(config)


def _labels(response: dict[str, Any]) -> dict[str, str]:
    """The labels a patch sets, whether as a new map or one op per key."""
    labels: dict[str, str] = {}
    for op in response["patch"]:
        if op["path"] == "/metadata/labels":
            labels.update(op["value"])
        else:
            labels[op["path"].rpartition("~1")[2]] = op["value"]
    return {key.rpartition("/")[2]: value for key, value in labels.items()}


OUTCOMES: dict[str | None, Callable[[dict[str, Any]], bool]] = {
    None: lambda r: "patch" in r and len(_labels(r)) == 4,
    "long name": lambda r: "a label value may have" in r["error"],
    "no namespace": lambda r: "has no metadata.namespace" in r["error"],
    "group": lambda r: r["error"].startswith("serving group '"),
    "pod name": lambda r: r["error"].startswith("worker Pod '"),
    "unnamed pod": lambda r: r["error"] == "worker Pod has no metadata.name",
    "entry": lambda r: _labels(r)["worker-index"] == "0",
}


@pytest.mark.parametrize("fault", list(OUTCOMES))
def test_the_generated_cases_reach_success_and_every_error(
    sandbox: Sandbox, compiled: CompiledModule, fault: str | None
) -> None:
    """A guard that each branch of the strategy above gives the outcome it is meant to (so the
    differential test, which draws every branch, compares patches and each error), native and
    WebAssembly compared on each example."""
    assert set(OUTCOMES) == set(FAULTS)
    responses: list[dict[str, Any]] = []

    def record(case: Case) -> None:
        response = native(case)
        assert wasm(sandbox, compiled, case) == response
        responses.append(decoded(response))

    once = settings(
        max_examples=25,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    once(given(case=cases(st.just(fault)))(record))()
    assert len(responses) > 10
    assert [r for r in responses if not OUTCOMES[fault](r)] == []
    if fault is None:  # both ways of merging labels, and workers' own indexes
        shapes = {len(r["patch"]) for r in responses}
        assert shapes == {1, 4}
        assert {_labels(r)["worker-index"] != "0" for r in responses} == {True, False}


def test_configs_generated_reach_both_outcomes(sandbox: Sandbox, compiled: CompiledModule) -> None:
    accepted: list[Any] = [None, {}, {"a": None}]
    for config in accepted:
        assert native_accepts(config) and wasm_accepts(sandbox, compiled, config)
    refused: list[Any] = [{"a": 1}, [], "x", 0]
    for config in refused:
        assert not native_accepts(config)
        assert not wasm_accepts(sandbox, compiled, config)


# --- what only the module can be sent ----------------------------------------------------------


def _case(metadata: dict[str, Any], group: str = "llm-0") -> Case:
    where = PodPlace(group, "prefill", "prefill-0", True)
    return Case(metadata, where, {"metadata": {"name": f"{group}-prefill-0-0"}})


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"namespace": "a"}, "the ModelServing has no metadata.name"),
        ({"name": "", "namespace": "a"}, "the ModelServing has no metadata.name"),
        ({"name": 5, "namespace": "a"}, "the ModelServing has no metadata.name"),
        ({"name": "llm", "namespace": 5}, "ModelServing 'llm' has no metadata.namespace"),
    ],
)
def test_a_model_serving_the_host_would_not_send_is_refused(
    sandbox: Sandbox, compiled: CompiledModule, metadata: dict[str, Any], error: str
) -> None:
    assert decoded(wasm(sandbox, compiled, _case(metadata))) == {"error": error}


@pytest.mark.parametrize(
    "namespace",
    [
        "a",
        "espace-é",
        "名前空間",
        *("n" * size for size in (47, 48, 49, 55, 56, 57, 111, 112, 113, 200)),
    ],
)
def test_the_group_key_is_hashlibs_sha1(
    sandbox: Sandbox, compiled: CompiledModule, namespace: str
) -> None:
    """Namespaces of 47 to 57 and 111 to 113 bytes put ``<namespace>/llm-0`` (6 more bytes) on
    both sides of SHA-1's one- and two-block padding boundaries (55/56 and 119/120 bytes)."""
    response = decoded(wasm(sandbox, compiled, _case({"name": "llm", "namespace": namespace})))
    [op] = response["patch"]
    expected = hashlib.sha1(f"{namespace}/llm-0".encode()).hexdigest()
    assert op["value"][GROUP_KEY_LABEL] == expected


@pytest.mark.parametrize("runtime", ["native", "wasm"])
def test_with_an_owning_lws_the_name_and_key_are_kthenas(
    sandbox: Sandbox, compiled: CompiledModule, runtime: str
) -> None:
    """Kthena: name from the LWS, key SHA-1 of ``<lws>-<index>``; no namespace needed."""
    metadata = {"name": "llm", "ownerReferences": [{**LWS, "name": "my-lws"}]}
    case = _case(metadata, group="llm-4")
    response = decoded(native(case) if runtime == "native" else wasm(sandbox, compiled, case))
    [op] = response["patch"]
    assert op["value"] == {
        NAME_LABEL: "my-lws",
        GROUP_INDEX_LABEL: "4",
        WORKER_INDEX_LABEL: "0",
        GROUP_KEY_LABEL: hashlib.sha1(b"my-lws-4").hexdigest(),
    }


@pytest.mark.parametrize("runtime", ["native", "wasm"])
def test_a_too_long_lws_name_is_refused(
    sandbox: Sandbox, compiled: CompiledModule, runtime: str
) -> None:
    lws = "l" * 64
    case = _case({"name": "llm", "namespace": "a", "ownerReferences": [{**LWS, "name": lws}]})
    response = decoded(native(case) if runtime == "native" else wasm(sandbox, compiled, case))
    assert response == {
        "error": f"LeaderWorkerSet name '{lws}' has 64 characters, more than the 63 a label "
        "value may have"
    }


def _pod_template(container: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": container, "image": "vllm:1"}]}}


def test_in_the_chain_both_runtimes_label_every_pod_alike() -> None:
    """The real chain (policy included), native vs ``runtime: Wasm``, on every planned Pod."""
    pods: dict[str, list[dict[str, Any]]] = {}
    for runtime in ("Native", "Wasm"):
        ms = parse_model_serving(
            {
                "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                "kind": "ModelServing",
                "metadata": {"name": "llm", "namespace": "team-a"},
                "spec": {
                    "replicas": 2,
                    "plugins": [{"name": NAME, "runtime": runtime}],
                    "template": {
                        "roles": [
                            {
                                "name": "prefill",
                                "replicas": 2,
                                "entryTemplate": {
                                    "spec": {"containers": [{"name": "e", "image": "v:1"}]}
                                },
                                "workerReplicas": 2,
                                "workerTemplate": {
                                    "spec": {"containers": [{"name": "w", "image": "v:1"}]}
                                },
                            }
                        ]
                    },
                },
            }
        )
        chain = build_chain(ms)
        pods[runtime] = [chain.on_pod_create(d).pod for g in plan(ms) for d in g.pods()]
    native_labels = [p["metadata"]["labels"] for p in pods["Native"]]
    assert native_labels == [p["metadata"]["labels"] for p in pods["Wasm"]]
    assert len(native_labels) == 12
    assert {(lb[GROUP_INDEX_LABEL], lb[WORKER_INDEX_LABEL]) for lb in native_labels} == {
        (g, w) for g in "01" for w in "012"
    }
