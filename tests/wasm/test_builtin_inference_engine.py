"""inference-engine, native and WebAssembly side by side: on generated configs (valid and not) and
Pods (entry and worker; with and without env, volumes, mounts, ports and probes; several
containers; malformed fields) both give byte-identical responses and accept the same configs,
and the default patch policy accepts every patch of a well-formed Pod. Plus what is easier to
check against the module directly: the whitespace rule of ``healthPath`` over all of Unicode,
and a multi-node role through the chain with ``runtime: Wasm``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import encode_request
from modelserving.api import parse_model_serving
from modelserving.api.hook import Hook
from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.api.place import PodPlace
from modelserving.chain import PatchValidator, build_chain
from modelserving.plugins.builtins.inference_engine import NAME
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from modelserving.workload.plan import plan
from tests.vectors import MODEL_SERVING, native_response
from tests.wasm import twins

DIFF = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def compiled(sandbox: Sandbox) -> CompiledModule:
    return twins.load(sandbox, NAME)


@dataclass(frozen=True)
class Case:
    """One OnPodCreate call; ``well_formed`` when every field the plugin reads has its API type."""

    config: Any
    pod: dict[str, Any]
    is_entry: bool
    well_formed: bool = True

    def request(self) -> bytes:
        where = PodPlace("llama-0", "leader", "leader-0", self.is_entry)
        return encode_request(Hook.ON_POD_CREATE, NAME, self.config, MODEL_SERVING, where, self.pod)


def native_accepts(config: Any) -> bool:
    return twins.native_accepts(NAME, config)


def wasm_accepts(sandbox: Sandbox, compiled: CompiledModule, config: Any) -> bool:
    return twins.wasm_accepts(sandbox, compiled, NAME, config)


def native(case: Case) -> bytes | None:
    """The native response bytes; None when the config is refused."""
    return native_response(case.request())


def wasm(sandbox: Sandbox, compiled: CompiledModule, case: Case) -> bytes:
    return twins.on_pod_create(sandbox, compiled, case.request())


decoded = twins.decoded


def patch_of(response: dict[str, Any] | None) -> list[dict[str, Any]]:
    patch: list[dict[str, Any]] = (response or {}).get("patch", [])
    return patch


def error_of(response: dict[str, Any] | None) -> str:
    error: str = (response or {}).get("error", "")
    return error


# --- generated configs ------------------------------------------------------------------------

engines = st.sampled_from(["vllm", "sglang", "trt-llm"])
bad_engines = st.sampled_from(["VLLM", "trtllm", "", "tgi"]) | st.integers(0, 2) | st.none()
ports = st.sampled_from([1, 8000, 8080, 30000, 65535]) | st.integers(1, 65535)
bad_ports = st.sampled_from([0, -1, 65536, 10**12, True, 8000.0, "8000"])
health_paths = st.sampled_from(
    ["/health", "/", "/v1/models", "/health_generate", "/a\u200bb", "/\u180e", "/é" * 128]
) | st.text(alphabet="/abc_é", max_size=8).map(lambda s: "/" + s)
bad_health_paths = st.sampled_from(
    [
        "health",
        "",
        "/a b",
        "/a\tb",
        "/\n",
        "/\x1c",
        "/\x1f",
        "/\x85",
        "/\xa0",
        "/\u2028",
        "/\u3000",
        "/" + "x" * 256,
        "/" + "é" * 256,
        7,
    ]
)
timeouts = st.sampled_from([10, 11, 15, 1800, 1801, 86400]) | st.integers(10, 86400)
bad_timeouts = st.sampled_from([9, 0, -10, 86401, False, 60.0, "600"])
containers = st.sampled_from(["engine"] * 3 + ["sidecar", "proxy", "missing", ""])
shm_sizes = st.sampled_from(["16Gi", "0", ".5", "1e3", "500m", "64Mi"])
bad_shm_sizes = st.sampled_from(["16GB", "-1Gi", "", "1 Gi", "Gi"]) | st.integers(0, 2)


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws."""
    return st.sampled_from([False] * (n - 1) + [True])


@st.composite
def configs(draw: st.DrawFn) -> Any:
    """Mostly valid configs (camelCase or snake_case), each field sometimes invalid or null; a
    few that are not maps, lack the engine or carry an unknown field."""
    shape = draw(st.sampled_from(["map"] * 18 + ["no engine", "not a map"]))
    if shape == "not a map":
        return draw(st.sampled_from([None, [], "vllm", 0, [{"engine": "vllm"}]]))
    config: dict[str, Any] = {}
    if shape == "map":
        config["engine"] = draw(bad_engines if draw(one_in(12)) else engines)
    fields: list[tuple[str, str, st.SearchStrategy[Any], st.SearchStrategy[Any]]] = [
        ("port", "port", ports, bad_ports),
        ("healthPath", "health_path", health_paths, bad_health_paths),
        ("startupTimeoutSeconds", "startup_timeout_seconds", timeouts, bad_timeouts),
        ("container", "container", containers, st.integers(0, 1)),
        ("shmSize", "shm_size", shm_sizes, bad_shm_sizes),
    ]
    for camel, snake, good, bad in fields:
        if draw(one_in(3)) or (camel == "container" and draw(st.booleans())):
            continue
        key = draw(st.sampled_from([camel, camel, snake]))
        value = draw(st.sampled_from(["good"] * 14 + ["bad", "null"]))
        config[key] = None if value == "null" else draw(good if value == "good" else bad)
    if draw(one_in(30)):
        config[draw(st.sampled_from(["extra", "shm", "health_Path"]))] = 1
    return config


# --- generated Pods ---------------------------------------------------------------------------

env_names = st.sampled_from(["POD_IP", "POD_NAME", "POD_NAMESPACE", "VLLM_HOST_IP", "OTHER"])
env_lists = st.lists(
    st.fixed_dictionaries({"name": env_names, "value": st.sampled_from(["x", ""])}), max_size=4
)
mount_lists = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["dshm", "data", "scratch"]),
            "mountPath": st.sampled_from(["/dev/shm", "/data", "/dev/shm/sub"]),
        }
    ),
    max_size=3,
)
port_lists = st.lists(
    st.fixed_dictionaries(
        {"containerPort": st.sampled_from([8000, 8080, 30000, 9000, 1])},
        optional={"name": st.sampled_from(["http", "api", "metrics"]), "protocol": st.just("TCP")},
    ),
    max_size=3,
)
probe = st.fixed_dictionaries(
    {
        "httpGet": st.fixed_dictionaries(
            {"path": st.just("/ready"), "port": st.sampled_from([8000, 30000])}
        )
    },
    optional={"periodSeconds": st.integers(1, 9)},
) | st.just({"exec": {"command": ["true"]}})
volume_lists = st.lists(
    st.sampled_from(
        [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "data", "emptyDir": {}},
            {"name": "models", "persistentVolumeClaim": {"claimName": "models"}},
        ]
    ),
    max_size=3,
    unique_by=lambda v: str(v["name"]),
)
# Wrong types where the plugin reads or writes (and whether the chain would still be handed such
# a Pod is beside the point: both runtimes must fail the same way).
MALFORMED: dict[str, list[Any]] = {
    "env": ["x", {}, 1],
    "volumeMounts": [{}, "x"],
    "ports": [1, "x"],
}


@st.composite
def a_container(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], bool]:
    container: dict[str, Any] = {"name": name, "image": "vllm/vllm-openai:v0.10.0"}
    well_formed = True
    for field, items in (("env", env_lists), ("volumeMounts", mount_lists), ("ports", port_lists)):
        choice = draw(st.sampled_from(["absent"] * 3 + ["list"] * 4 + ["null", "malformed"]))
        if choice == "list":
            container[field] = draw(items)
        elif choice == "null":
            container[field] = None
        elif choice == "malformed":
            container[field] = draw(st.sampled_from(MALFORMED[field]))
            well_formed = False
    for field in ("startupProbe", "readinessProbe"):
        choice = draw(st.sampled_from(["absent"] * 3 + ["probe", "null"]))
        if choice != "absent":
            container[field] = draw(probe) if choice == "probe" else None
    return container, well_formed


@st.composite
def pods(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A Pod and whether it is well-formed."""
    first = draw(st.sampled_from(["engine"] * 3 + ["sidecar"]))
    names = [first, *draw(st.lists(st.sampled_from(["engine", "sidecar", "proxy"]), max_size=2))]
    built = [draw(a_container(name)) for name in names]
    well_formed = all(ok for _, ok in built)
    spec: dict[str, Any] = {"containers": [c for c, _ in built]}
    shape = draw(st.sampled_from(["normal"] * 8 + ["no containers", "str container"]))
    if shape == "no containers":
        spec["containers"] = draw(st.sampled_from([[], None, "x"]))
        well_formed = False
    elif shape == "str container":
        spec["containers"] = ["engine"]
        well_formed = False
    volumes = draw(st.sampled_from(["absent", "list", "list", "null", "malformed"]))
    if volumes == "list":
        spec["volumes"] = draw(volume_lists)
    elif volumes == "null":
        spec["volumes"] = None
    elif volumes == "malformed":
        spec["volumes"] = draw(st.sampled_from(["x", {"dshm": {}}]))
        well_formed = False
    if draw(st.booleans()):
        spec["initContainers"] = [{"name": "fetch", "image": "busybox:1.37"}]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llama-0-leader-0-0", "namespace": "serving"},
        "spec": spec,
    }
    return pod, well_formed


@st.composite
def cases(draw: st.DrawFn) -> Case:
    pod, well_formed = draw(pods())
    is_entry = draw(st.sampled_from([True, False]))
    return Case(draw(configs()), pod, is_entry, well_formed)


# --- the differential properties --------------------------------------------------------------


def check(sandbox: Sandbox, compiled: CompiledModule, case: Case) -> bytes | None:
    """Compare both runtimes on ``case`` (and the patch with the default policy); the native
    response."""
    expected = native(case)
    assert wasm_accepts(sandbox, compiled, case.config) == (expected is not None)
    if expected is None:
        return None
    assert wasm(sandbox, compiled, case) == expected
    patch = decoded(expected).get("patch")
    if patch and case.well_formed:
        PatchValidator().apply(case.pod, patch)  # raises PatchRejected if the policy refuses
    return expected


@DIFF
@given(case=cases())
def test_both_give_identical_responses(
    sandbox: Sandbox, compiled: CompiledModule, case: Case
) -> None:
    check(sandbox, compiled, case)


@DIFF
@given(config=configs())
def test_both_accept_and_refuse_the_same_configs(
    sandbox: Sandbox, compiled: CompiledModule, config: Any
) -> None:
    assert wasm_accepts(sandbox, compiled, config) == native_accepts(config)


def test_the_generated_cases_reach_patches_errors_and_refused_configs(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    """A guard that the strategies reach every outcome: for each, a deterministic search of at
    most 200 generated cases finds one, and both runtimes agree on it."""
    wanted: dict[str, Callable[[Case, dict[str, Any] | None], bool]] = {
        "refused config": lambda c, r: r is None,
        "entry patch with probes": lambda c, r: any(
            op["path"].endswith("/startupProbe") for op in patch_of(r)
        ),
        "worker patch": lambda c, r: not c.is_entry and bool(patch_of(r)),
        "patch of a well-formed Pod": lambda c, r: c.well_formed and bool(patch_of(r)),
        "a port kept": lambda c, r: (
            c.is_entry
            and bool(patch_of(r))
            and not any("/ports" in op["path"] for op in patch_of(r))
        ),
        "sizeLimit": lambda c, r: any("sizeLimit" in str(op["value"]) for op in patch_of(r)),
        "missing container": lambda c, r: "no container named" in error_of(r),
        "no containers": lambda c, r: error_of(r) == "the Pod has no containers",
        "wrong type": lambda c, r: "not an array" in error_of(r),
        "not a map": lambda c, r: "not a map" in error_of(r),
    }
    search = settings(
        max_examples=200,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    for what, hit in wanted.items():

        def reaches(case: Case, hit: Callable[[Case, dict[str, Any] | None], bool] = hit) -> bool:
            response = native(case)
            return hit(case, None if response is None else decoded(response))

        found = find(cases(), reaches, settings=search)
        assert check(sandbox, compiled, found) == native(found), what


def test_a_known_case_is_byte_identical_and_applies(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {"containers": [{"name": "engine", "env": [{"name": "POD_IP", "value": "x"}]}]},
    }
    case = Case({"engine": "vllm", "shmSize": "8Gi", "port": 8001}, pod, True)
    response = check(sandbox, compiled, case)
    patch = decoded(response)["patch"]
    assert [op["path"] for op in patch] == [
        "/spec/containers/0/env/-",
        "/spec/containers/0/env/-",
        "/spec/containers/0/env/-",
        "/spec/volumes",
        "/spec/containers/0/volumeMounts",
        "/spec/containers/0/ports",
        "/spec/containers/0/startupProbe",
        "/spec/containers/0/readinessProbe",
    ]
    assert patch[5]["value"] == [{"name": "http", "containerPort": 8001, "protocol": "TCP"}]
    assert not wasm_accepts(sandbox, compiled, {"engine": "vllm", "port": 0})
    assert not native_accepts({"engine": "vllm", "port": 0})


# --- healthPath's whitespace over all of Unicode ----------------------------------------------


def _code_points() -> list[str]:
    return [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]


def test_health_path_whitespace_is_the_same_over_all_of_unicode(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    """Each character Python calls whitespace is refused by the module; every other character
    is accepted (checked 255 at a time, and one by one in a group the module refuses)."""
    everything = _code_points()
    spaces = [c for c in everything if c.isspace()]
    assert len(spaces) >= 25 and "\x1c" in spaces and "\u200b" not in spaces
    for c in spaces:
        config = {"engine": "vllm", "healthPath": f"/a{c}"}
        assert not native_accepts(config)
        assert not wasm_accepts(sandbox, compiled, config), repr(c)
    others = [c for c in everything if not c.isspace()]
    for start in range(0, len(others), 255):
        group = others[start : start + 255]
        config = {"engine": "vllm", "healthPath": "/" + "".join(group)}
        if not wasm_accepts(sandbox, compiled, config):
            refused = [
                c
                for c in group
                if not wasm_accepts(sandbox, compiled, {"engine": "vllm", "healthPath": "/" + c})
            ]
            pytest.fail(f"the module refuses characters Python accepts: {refused!r}")


# --- through the chain ------------------------------------------------------------------------


def _multi_node(runtime: str) -> Any:
    head = "ray start --head --port=6379 && vllm serve m --pipeline-parallel-size 2"
    join = "ray start --address=$(ENTRY_ADDRESS):6379 --block"
    role = {
        "name": "leader",
        "entryTemplate": {
            "spec": {"containers": [{"name": "engine", "image": "vllm:1", "command": [head]}]}
        },
        "workerReplicas": 1,
        "workerTemplate": {
            "spec": {"containers": [{"name": "engine", "image": "vllm:1", "command": [join]}]}
        },
    }
    config = {"engine": "vllm", "shmSize": "16Gi", "startupTimeoutSeconds": 3600}
    return parse_model_serving(
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "llama", "namespace": "serving"},
            "spec": {
                "plugins": [{"name": NAME, "runtime": runtime, "config": config}],
                "template": {"roles": [role]},
            },
        }
    )


def test_a_multi_node_role_through_the_chain_is_the_same_in_both_runtimes(
    sandbox: Sandbox,
) -> None:
    results = {}
    for runtime in ("Native", "Wasm"):
        ms = _multi_node(runtime)
        chain = build_chain(ms, sandbox=sandbox)
        results[runtime] = [chain.on_pod_create(d).pod for d in plan(ms)[0].pods()]
    native_pods, wasm_pods = results["Native"], results["Wasm"]
    strip = PLUGINS_APPLIED_ANNOTATION
    for a, b in zip(native_pods, wasm_pods, strict=True):
        assert a["spec"] == b["spec"]
        assert {k: v for k, v in a["metadata"].get("annotations", {}).items() if k != strip} == {
            k: v for k, v in b["metadata"].get("annotations", {}).items() if k != strip
        }
    entry, worker = wasm_pods
    assert entry["spec"]["containers"][0]["startupProbe"]["failureThreshold"] == 360
    assert "ports" not in worker["spec"]["containers"][0]
    assert worker["spec"]["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    ]
