"""The built-ins that declare ``reads_pod_only`` are handed the Pod itself, not a copy: on Pods
whose every map and list refuses a change, each of their Pod hooks gives exactly what it gives on
an ordinary copy, and the Pod is unchanged."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api.hook import SPEC, Hook, HookRequest
from modelserving.api.jsondata import json_copy
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain import build_chain
from modelserving.chain.step import invoke
from modelserving.plugins.adapter import NativePlugin
from modelserving.plugins.registry import default_registry
from tests.unit.conftest import manifest, role

CONFIGS: dict[str, list[Any]] = {
    "accelerator": [
        {"vendor": "nvidia", "devices": 8, "shmSize": "16Gi", "env": [{"name": "A", "value": "1"}]},
        {
            "vendor": "ascend",
            "container": "engine",
            "runtimeClassName": "ascend",
            "nodeSelector": {"accelerator": "910b"},
            "tolerations": [{"key": "npu", "operator": "Exists"}],
        },
    ],
    "demo-pod-tweaks": [
        {
            "runtimeClassName": "nvidia",
            "annotations": {"example.com/team": "llm"},
            "env": [{"name": "VAR_1", "value": "y"}, {"name": "NEW", "value": "z"}],
        }
    ],
    "entry-address-file": [{}, {"container": "engine"}],
    "hccl-ranktable": [{}],
    "inference-engine": [{"engine": "vllm"}, {"engine": "sglang"}],
    "lws-standard-labels": [None],
    "rdma-network": [
        {"networks": ["rdma-net"], "hugepages": {"pageSize": "2Mi", "amount": "1Gi"}},
    ],
    "ready-reporter": [{"warnAfterSeconds": 1}],
}


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise AssertionError("a plugin that reads the Pod only changed it")


class FrozenMap(dict[str, Any]):
    """A map that refuses every change."""

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse


class FrozenList(list[Any]):
    """A list that refuses every change."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse


def frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return FrozenMap({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList([frozen(v) for v in value])
    return value


def test_every_builtin_reads_the_pod_only_and_is_covered() -> None:
    names = {b.name for b in default_registry() if b.reads_pod_only}
    assert names == set(CONFIGS)
    assert names == {b.name for b in default_registry()}


NAMES = st.sampled_from(["engine", "sidecar", "A", "VAR_1", "NEW", "dshm", "x"])
env = st.lists(
    st.fixed_dictionaries(
        {"name": NAMES},
        optional={"value": st.text(max_size=3), "valueFrom": st.just({"fieldRef": {}})},
    ),
    max_size=4,
)
container = st.fixed_dictionaries(
    {"name": NAMES, "image": st.just("img:1")},
    optional={
        "env": env,
        "volumeMounts": st.lists(
            st.fixed_dictionaries(
                {"name": NAMES, "mountPath": st.sampled_from(["/dev/shm", "/x"])}
            ),
            max_size=2,
        ),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "limits": st.dictionaries(
                    st.sampled_from(["nvidia.com/gpu", "cpu", "huawei.com/Ascend910"]),
                    st.sampled_from(["1", "8"]),
                    max_size=2,
                ),
                "requests": st.dictionaries(
                    st.sampled_from(["nvidia.com/gpu", "cpu"]), st.just("1"), max_size=2
                ),
            },
        ),
        "args": st.lists(st.sampled_from(["--port", "8000", "--model"]), max_size=3),
        "securityContext": st.sampled_from(
            [{}, {"capabilities": {}}, {"capabilities": {"add": ["NET_ADMIN"]}}, {"runAsUser": 0}]
        ),
        "ports": st.lists(
            st.fixed_dictionaries(
                {"containerPort": st.sampled_from([8000, 8080])},
                optional={"name": st.sampled_from(["http", "x"])},
            ),
            max_size=2,
        ),
        "readinessProbe": st.just({"httpGet": {"path": "/health", "port": 8000}}),
    },
)
pods = st.builds(
    lambda containers, init, volumes, labels, annotations, tolerations, selector: {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llm-0-leader-0-0",
            "namespace": "default",
            "creationTimestamp": "2026-11-24T10:00:00Z",
            **({"labels": labels} if labels is not None else {}),
            **({"annotations": annotations} if annotations is not None else {}),
        },
        "spec": {
            "containers": containers,
            **({"initContainers": init} if init else {}),
            **({"volumes": volumes} if volumes is not None else {}),
            **({"tolerations": tolerations} if tolerations is not None else {}),
            **({"nodeSelector": selector} if selector is not None else {}),
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.7",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T10:02:13Z"}
            ],
        },
    },
    st.lists(container, min_size=1, max_size=2),
    st.lists(container, max_size=1),
    st.none()
    | st.lists(st.fixed_dictionaries({"name": NAMES, "emptyDir": st.just({})}), max_size=2),
    st.none() | st.dictionaries(st.sampled_from(["app", "team"]), st.just("x"), max_size=2),
    st.none()
    | st.dictionaries(
        st.sampled_from(
            ["example.com/team", "ascend.kubectl.kubernetes.io/ascend-910-configuration"]
        ),
        st.just("x"),
        max_size=2,
    ),
    st.none() | st.lists(st.just({"key": "npu", "operator": "Exists"}), max_size=1),
    st.none() | st.just({"accelerator": "910b"}),
)


def _manifest(name: str, config: Any) -> dict[str, Any]:
    plugin: dict[str, Any] = {"name": name}
    if config is not None:
        plugin["config"] = config
    return manifest("llm", [role("leader", workers=1)], replicas=1, plugins=[plugin])


CHAINS = [(name, config) for name, configs in sorted(CONFIGS.items()) for config in configs]


@pytest.mark.parametrize(
    ("name", "config"), CHAINS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CHAINS)]
)
@settings(max_examples=60, deadline=None)
@given(pod=pods, is_entry=st.booleans())
def test_a_builtin_gives_on_a_pod_that_refuses_changes_what_it_gives_on_a_copy(
    name: str, config: Any, pod: dict[str, Any], is_entry: bool
) -> None:
    ms = parse_model_serving(_manifest(name, config))
    [entry] = build_chain(ms).entries
    assert isinstance(entry.plugin, NativePlugin)
    assert not entry.plugin.copies_pod
    place = PodPlace("llm-0", "leader", "leader-0", is_entry)
    for hook in sorted(entry.hooks & {h for h, s in SPEC.items() if s.per_pod}, key=str):
        given_pod = frozen(pod)
        on_frozen = invoke(entry, HookRequest(hook, ms, place, given_pod))
        on_copy = invoke(entry, HookRequest(hook, ms, place, json_copy(pod)))
        assert given_pod == pod
        assert (on_frozen.failure is None) is (on_copy.failure is None), (
            on_frozen.failure,
            on_copy.failure,
        )
        assert on_frozen.patch == on_copy.patch
        assert on_frozen.pod == on_copy.pod
        assert on_frozen.observations == on_copy.observations
        if hook is Hook.ON_POD_CREATE and on_copy.failure is None:
            assert on_copy.patch or name in ("hccl-ranktable", "entry-address-file"), name
