"""accelerator, native and WebAssembly side by side: on generated configs (valid and not) both
accept and refuse the same ones, and on generated Pods (with and without what the plugin touches,
several containers, wrong-typed fields, entry and worker) both give byte-identical responses; the
native patch of a well-formed Pod passes the default patch policy. Plus the module in the chain
(``runtime: Wasm``) giving the same Pods as the native plugin."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import encode_request
from modelserving.api import PatchPolicy, parse_model_serving
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.chain import PatchValidator, build_chain
from modelserving.plugins.builtins.accelerator import NAME
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from modelserving.workload.plan import plan
from tests.vectors import MODEL_SERVING, native_response
from tests.wasm import twins

UNPROTECTED = PatchValidator(PatchPolicy(protected_fields=[]))

DIFF = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# --- the two implementations ------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One OnPodCreate call, and whether its Pod is well-formed (no wrong-typed field)."""

    config: Any
    pod: dict[str, Any]
    is_entry: bool
    well_formed: bool

    def request(self) -> bytes:
        where = PodPlace("llama-0", "prefill", "prefill-0", self.is_entry)
        return encode_request(Hook.ON_POD_CREATE, NAME, self.config, MODEL_SERVING, where, self.pod)


@pytest.fixture(scope="module")
def compiled(sandbox: Sandbox) -> CompiledModule:
    return twins.load(sandbox, NAME)


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


# --- generated configs ------------------------------------------------------------------------

resource_names = st.sampled_from(
    ["nvidia.com/gpu", "amd.com/gpu", "huawei.com/Ascend310P", "nvidia.com/mig-1g.10gb"]
)
bad_resource_names = st.sampled_from(["gpu", "Nvidia.com/gpu", "a.com/", "/gpu", "a/b/c", ""])
label_keys = st.sampled_from(["zone", "nvidia.com/gpu.product", "a.b/c_d", "-x", "A/b", ""])
label_values = st.sampled_from(["a", "H100", "x.y-z_1", "", "-bad", "a b"])
toleration = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["nvidia.com/gpu", "amd.com/gpu", "k", "-k"]) | st.none(),
        "operator": st.sampled_from(["Exists", "Equal", "In"]) | st.none(),
        "value": st.sampled_from(["", "v", "a b"]) | st.none(),
        "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute", "Never"])
        | st.none(),
        "tolerationSeconds": st.sampled_from([0, 30, -1, 2**63 - 1, 2**63]) | st.none(),
        "toleration_seconds": st.just(5),
        "taint": st.just("x"),
    },
)
env_names = st.sampled_from(["NVIDIA_DRIVER_CAPABILITIES", "A", "NCCL_DEBUG", "1bad", ""])
env_var = st.fixed_dictionaries(
    {"name": env_names},
    optional={"value": st.sampled_from(["", "1", "all"]) | st.integers(0, 1)},
)
config_maps = st.fixed_dictionaries(
    {},
    optional={
        "vendor": st.sampled_from(["nvidia", "ascend", "amd"])
        | st.sampled_from(["intel", "NVIDIA", 1])
        | st.none(),
        "devices": st.integers(1, 128)
        | st.sampled_from([0, 129, -1, 2**63, True, 8.0, "8"])
        | st.none(),
        "resourceName": resource_names | bad_resource_names | st.none(),
        "resource_name": st.just("example.com/dev"),
        "container": st.sampled_from(["engine", "proxy", "gone"]) | st.none(),
        "runtimeClassName": st.sampled_from(["nvidia", "kata.x", "", "Kata"]) | st.none(),
        "nodeSelector": st.dictionaries(label_keys, label_values, max_size=3)
        | st.just({"a": 1})
        | st.none(),
        "tolerations": st.lists(toleration, max_size=3) | st.just([None]) | st.none(),
        "env": st.lists(env_var, max_size=3) | st.just({}) | st.none(),
        "shmSize": st.sampled_from(["16Gi", "512Mi", "1.5", "16GB", "-1"]) | st.none(),
        "shm_size": st.just("1Gi"),
        "gpus": st.just(8),
    },
)
configs: st.SearchStrategy[Any] = config_maps | st.sampled_from([None, {}, [], "nvidia", 0])


# --- generated Pods ---------------------------------------------------------------------------

quantities = st.sampled_from(["1", "2", "8", "500m"])
resource_keys = st.sampled_from(
    ["nvidia.com/gpu", "amd.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend310P", "cpu"]
)
resource_maps = st.dictionaries(resource_keys, quantities, min_size=1, max_size=3) | st.none()
resources = st.fixed_dictionaries({}, optional={"limits": resource_maps, "requests": resource_maps})
existing_env = st.lists(
    st.fixed_dictionaries({"name": env_names}, optional={"value": st.sampled_from(["x", "all"])}),
    max_size=3,
)
mounts = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["dshm", "model"])},
        optional={"mountPath": st.sampled_from(["/dev/shm", "/models"])},
    ),
    max_size=2,
)
pod_tolerations = st.lists(
    st.sampled_from(
        [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "nvidia.com/gpu", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"},
            {"key": "k", "effect": "NoExecute", "tolerationSeconds": 5},
            {"operator": "Exists"},
        ]
    ),
    max_size=3,
)
volumes = st.lists(
    st.sampled_from([{"name": "dshm", "emptyDir": {}}, {"name": "model", "emptyDir": {}}]),
    max_size=2,
)
# A wrong-typed field: where it goes, and the value.
CONTAINER_FIELDS = ("resources", "env", "volumeMounts")
SPEC_FIELDS = ("tolerations", "nodeSelector", "volumes", "containers")
wrong_types = st.sampled_from(
    [
        ("resources", "x"),
        ("resources", {"limits": "x"}),
        ("resources", {"limits": [1]}),
        ("env", {"A": "1"}),
        ("volumeMounts", "x"),
        ("tolerations", {}),
        ("nodeSelector", "x"),
        ("volumes", {"dshm": {}}),
        ("containers", []),
        ("containers", "x"),
        ("containers", None),
    ]
)


def maybe(
    draw: st.DrawFn, target: dict[str, Any], key: str, values: st.SearchStrategy[Any]
) -> None:
    """Set ``target[key]`` to a drawn value, or leave it out (about half the time)."""
    if draw(st.booleans()):
        target[key] = draw(values)


@st.composite
def containers(draw: st.DrawFn, name: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "vllm:1"}
    maybe(draw, container, "resources", resources | st.none())
    maybe(draw, container, "env", existing_env | st.none())
    maybe(draw, container, "volumeMounts", mounts)
    maybe(draw, container, "ports", st.just([{"containerPort": 8000, "name": "http"}]))
    maybe(
        draw, container, "readinessProbe", st.just({"httpGet": {"path": "/health", "port": 8000}})
    )
    return container


@st.composite
def cases(draw: st.DrawFn, config: st.SearchStrategy[Any]) -> Case:
    names = ["engine", *draw(st.sampled_from([["proxy"], ["proxy", "side"], [], ["side"]]))]
    spec: dict[str, Any] = {"containers": [draw(containers(n)) for n in names]}
    maybe(draw, spec, "runtimeClassName", st.just("runc"))
    maybe(draw, spec, "nodeSelector", st.dictionaries(label_keys, st.just("a"), max_size=2))
    maybe(draw, spec, "tolerations", pod_tolerations)
    maybe(draw, spec, "volumes", volumes)
    maybe(draw, spec, "initContainers", st.just([{"name": "fetch", "image": "busybox"}]))
    well_formed = True
    if draw(st.sampled_from(range(5))) == 4:  # about one Pod in five
        field, value = draw(wrong_types)
        (spec if field in SPEC_FIELDS else spec["containers"][0])[field] = value
        well_formed = False
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llama-0-prefill-0-0", "namespace": "serving"},
        "spec": spec,
    }
    return Case(draw(config), pod, draw(st.booleans()), well_formed)


valid_configs = st.builds(
    lambda vendor, rest: {"vendor": vendor, **rest},
    st.sampled_from(["nvidia", "ascend", "amd"]),
    st.fixed_dictionaries(
        {},
        optional={
            "devices": st.integers(1, 128),
            "resourceName": resource_names,
            "container": st.sampled_from(["proxy", "engine", "gone"]),
            "runtimeClassName": st.just("nvidia"),
            "nodeSelector": st.dictionaries(
                st.sampled_from(["zone", "a.b/c"]), st.just("x"), min_size=1
            ),
            "tolerations": st.lists(
                st.sampled_from(
                    [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "k", "operator": "Equal", "value": "v"},
                        {"key": "k", "effect": "NoExecute", "tolerationSeconds": 2**63 - 1},
                        {"operator": "Exists"},
                    ]
                ),
                max_size=3,
            ),
            "env": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["NVIDIA_DRIVER_CAPABILITIES", "A", "NCCL_DEBUG"]),
                        "value": st.sampled_from(["", "1"]),
                    }
                ),
                max_size=3,
            ),
            "shmSize": st.sampled_from(["16Gi", "512Mi", "1.5"]),
        },
    ),
)


# --- the differential properties --------------------------------------------------------------


@DIFF
@given(config=configs)
def test_both_accept_and_refuse_the_same_configs(
    sandbox: Sandbox, compiled: CompiledModule, config: Any
) -> None:
    assert wasm_accepts(sandbox, compiled, config) == native_accepts(config)


@DIFF
@given(case=cases(valid_configs | configs))
def test_both_give_identical_responses(
    sandbox: Sandbox, compiled: CompiledModule, case: Case
) -> None:
    expected = native(case)
    if expected is None:  # the chain never calls a plugin whose config it refused
        assert not wasm_accepts(sandbox, compiled, case.config)
        return
    assert wasm(sandbox, compiled, case) == expected


@DIFF
@given(case=cases(valid_configs))
def test_valid_configs_give_identical_responses_the_default_policy_accepts(
    sandbox: Sandbox, compiled: CompiledModule, case: Case
) -> None:
    expected = native(case)
    assert expected is not None, case.config
    assert wasm(sandbox, compiled, case) == expected
    response = decoded(expected)
    if case.well_formed and "patch" in response:
        # Replacing the Pod's runtimeClassName or tolerating every taint is the plugin's job
        # when configured so, and what the default protectedFields refuse.
        UNPROTECTED.apply(case.pod, response["patch"])


GUARD = settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _ops(response: dict[str, Any]) -> list[str]:
    return [f"{op['op']} {op['path']}" for op in response.get("patch", [])]


REACHED: dict[str, Callable[[dict[str, Any]], bool]] = {
    "all seven changes": lambda r: len(r.get("patch", [])) >= 7,
    "a request": lambda r: any("/resources/requests/" in p for p in _ops(r)),
    "a limit in an existing map": lambda r: any("/resources/limits/" in p for p in _ops(r)),
    "a toleration appended": lambda r: "add /spec/tolerations/-" in _ops(r),
    "a node selector key": lambda r: any("/spec/nodeSelector/" in p for p in _ops(r)),
    "an env var appended": lambda r: any(p.endswith("/env/-") for p in _ops(r)),
    "a mount appended": lambda r: any(p.endswith("/volumeMounts/-") for p in _ops(r)),
    "a volume appended": lambda r: "add /spec/volumes/-" in _ops(r),
    "a second container": lambda r: any("/containers/1/" in p for p in _ops(r)),
    "no named container": lambda r: "no container named" in r.get("error", ""),
    "no containers": lambda r: r.get("error") == "the Pod has no containers",
    "a wrong type": lambda r: ", not a" in r.get("error", ""),
}


def test_the_generated_cases_reach_patches_errors_and_refused_configs(
    sandbox: Sandbox, compiled: CompiledModule
) -> None:
    """A guard that 200 generated cases (a fixed sequence) reach each kind of change, each Pod
    error, and accepted and refused configs; native and WebAssembly agree on the first case of
    each."""
    first: dict[str, Case] = {}
    verdicts: set[bool] = set()

    @GUARD
    @given(case=cases(valid_configs), config=configs)
    def collect(case: Case, config: Any) -> None:
        response = decoded(native(case))
        for what, check in REACHED.items():
            if what not in first and check(response):
                first[what] = case
        verdicts.add(native_accepts(config))

    collect()
    assert sorted(set(REACHED) - set(first)) == []
    assert verdicts == {True, False}
    for what, case in first.items():
        assert wasm(sandbox, compiled, case) == native(case), what


# --- examples ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {
            "vendor": "nvidia",
            "tolerations": [{"key": "k", "effect": "NoExecute", "tolerationSeconds": 2**63 - 1}],
        },
        {
            "vendor": "nvidia",
            "tolerations": [{"key": "k", "effect": "NoExecute", "tolerationSeconds": 2**63}],
        },
        {"vendor": "nvidia", "devices": 2**64 - 1},
        {"vendor": "nvidia", "devices": 128},
        {"vendor": "nvidia", "devices": 129},
        {"vendor": "nvidia", "devices": 1},
        {"vendor": "nvidia", "devices": 0},
        {"vendor": "amd", "tolerations": [{"key": "k", "operator": "Exists", "value": ""}]},
        {"vendor": "amd", "tolerations": [{"operator": "Exists", "value": "v"}]},
        {"vendor": "amd", "env": [{"name": "A", "value": "1"}], "snake_case": 1},
        {"vendor": "amd", "shmSize": "1" * 64},
        {"vendor": "amd", "shmSize": "1" * 65},
        {"vendor": "amd", "runtimeClassName": "a" * 253},
        {"vendor": "amd", "runtimeClassName": "a" * 254},
        {"vendor": "amd", "nodeSelector": {"é": "x"}},
        {"vendor": "amd", "env": [{"name": "A\n", "value": "1"}]},
    ],
)
def test_edge_configs_are_judged_alike(
    sandbox: Sandbox, compiled: CompiledModule, config: dict[str, Any]
) -> None:
    assert wasm_accepts(sandbox, compiled, config) == native_accepts(config)


def _model_serving(runtime: str) -> Any:
    container = {"name": "engine", "image": "vllm/vllm-openai:v0.10.0"}
    return parse_model_serving(
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {
                "plugins": [
                    {
                        "name": NAME,
                        "runtime": runtime,
                        "config": {"vendor": "nvidia", "devices": 8, "shmSize": "16Gi"},
                    }
                ],
                "template": {
                    "roles": [
                        {
                            "name": "server",
                            "entryTemplate": {"spec": {"containers": [container]}},
                            "workerReplicas": 1,
                            "workerTemplate": {"spec": {"containers": [container]}},
                        }
                    ]
                },
            },
        }
    )


def test_in_the_chain_the_module_gives_the_native_pods(sandbox: Sandbox) -> None:
    pods = {}
    for runtime in ("Native", "Wasm"):
        ms = _model_serving(runtime)
        chain = build_chain(ms, sandbox=sandbox)
        pods[runtime] = [chain.on_pod_create(d).pod for d in plan(ms)[0].pods()]
    for native_pod, wasm_pod in zip(pods["Native"], pods["Wasm"], strict=True):
        annotations = "annotations"
        native_pod["metadata"].pop(annotations, None)
        wasm_pod["metadata"].pop(annotations, None)
        assert wasm_pod == native_pod
        assert wasm_pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
