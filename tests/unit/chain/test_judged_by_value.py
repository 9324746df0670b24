"""The checks the validator skips for an operation judged by its value (a port list, a probe, a
lifecycle handler, a volume or the whole list, an env variable) or by the Pod (a volume mount
where no hostPath volume is): whatever the operations, the Pod and the policy, the validator
decides exactly as it does with every check run."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api import PatchPolicy, PatchRejected, PathRule
from modelserving.api.policy import BASELINE_CAPABILITIES
from modelserving.chain import PatchValidator, policy
from modelserving.plugins.registry import default_registry
from tests.unit.chain.test_access_controls import RESTRICTED, agent, template
from tests.unit.plugins.conftest import hook_request

OPEN = [PathRule(path="/**")]
ENV = "/spec/containers/0/env"


class EveryCheck(PatchValidator):
    """The reference: every check runs for every patch."""

    def _patch_effects(self, checked: Any, before: Any) -> int:
        return policy._ALL_EFFECTS


HOST = {"name": "host", "hostPath": {"path": "/var/log"}}
PODS = [
    template(),  # no volumes
    template({"name": "bare", "image": "b:1"}, volumes=[{"name": "cache", "emptyDir": {}}]),
    template(
        {**agent(), "volumeMounts": [{"name": "host", "mountPath": "/h", "readOnly": True}]},
        volumes=[HOST, {"name": "state", "emptyDir": {}}],
    ),
    template(
        {
            "name": "side",
            "image": "s:1",
            "securityContext": dict(RESTRICTED),
            "ports": [{"containerPort": 9, "hostPort": 9}],
            "lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
            "env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        }
    ),
]
HANDLER = {"httpGet": {"path": "/health", "port": 8000}}
HOSTED = {"httpGet": {"host": "10.0.0.1", "port": 80}}
TCP_HOSTED = {"tcpSocket": {"host": "h", "port": 1}}
ODD: list[Any] = [None, "x", 7, [], {}]
# Per field of a container (or the Pod's volumes): the paths below it and the values tried.
FIELDS: dict[str, tuple[list[str], list[Any]]] = {
    "ports": (
        ["", "/0", "/-", "/1", "/0/hostPort"],
        [[{"containerPort": 80}], [{"containerPort": 80, "hostPort": 80}], {"containerPort": 80},
         {"containerPort": 80, "hostPort": 8080}, {"hostPort": "1"}, 8080, "1"],
    ),
    "readinessProbe": (
        ["", "/httpGet", "/httpGet/host", "/tcpSocket"],
        [HANDLER, HOSTED, TCP_HOSTED, {"tcpSocket": {"port": 1}}, {"host": "h"}, "10.0.0.2"],
    ),
    "startupProbe": (["", "/tcpSocket"], [HANDLER, TCP_HOSTED, {"host": "h"}]),
    "lifecycle": (
        ["", "/postStart", "/preStop", "/postStart/httpGet", "/stopSignal"],
        [{"postStart": HANDLER}, {"preStop": HOSTED}, {"postStart": "x"}, HANDLER, HOSTED,
         {"host": "h"}, {"stopSignal": HOSTED}],
    ),
    "volumeMounts": (
        ["", "/0", "/-", "/1", "/0/readOnly", "/0/name"],
        [[{"name": "host", "mountPath": "/x"}], {"name": "host", "mountPath": "/y"},
         {"name": "host", "mountPath": "/z", "readOnly": True},
         {"name": "state", "mountPath": "/bin"}, [{"name": "cache", "mountPath": "/c"}], "host",
         False],
    ),
    "env": (
        ["", "/0", "/-", "/0/valueFrom", "/0/valueFrom/secretKeyRef"],
        [{"name": "T", "value": "v"}, {"name": "T", "valueFrom": {"fieldRef": {"fieldPath": "a"}}},
         {"name": "T", "valueFrom": {"secretKeyRef": {"name": "db"}}},
         {"name": "T", "valueFrom": "x"},
         [{"name": "T", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
         [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "new"}}}],
         {"fieldRef": {"fieldPath": "a"}}, {"secretKeyRef": {"name": "db"}}, {"name": "new"}],
    ),
    "securityContext": (
        ["", "/capabilities", "/capabilities/add", "/capabilities/add/-", "/capabilities/add/0"],
        [{"capabilities": {"add": ["IPC_LOCK"]}}, {"add": ["IPC_LOCK"]}, ["IPC_LOCK"],
         "IPC_LOCK", "CAP_IPC_LOCK", "ipc_lock", "NET_RAW", "SYS_ADMIN", "CHOWN", "not a name",
         {"capabilities": {"add": ["SYS_ADMIN"]}}, {"add": ["NET_RAW"]}, ["IPC_LOCK", "CHOWN"],
         ["NET_RAW"], ["CAP_IPC_LOCK", "IPC_LOCK"],
         {"capabilities": {"add": ["IPC_LOCK"]}, "privileged": True}, {"add": [], "drop": []}],
    ),
    "volumes": (
        ["", "/0", "/-", "/1", "/0/hostPath", "/0/emptyDir", "/0/name", "/1/name"],
        [{"name": "dshm", "emptyDir": {"medium": "Memory"}}, [{"name": "dshm", "emptyDir": {}}],
         {"name": "h2", "hostPath": {"path": "/"}}, [{"name": "h2", "hostPath": {"path": "/"}}],
         {"name": "host", "emptyDir": {}}, {"name": "n", "nfs": {"server": "s", "path": "/"}},
         {"name": "c", "configMap": {"name": "c"}}, {"name": "s", "secret": {"secretName": "db"}},
         [{"name": "e", "emptyDir": {}}, "x"], {"path": "/"}, [HOST],
         [{"name": "d", "emptyDir": {}}, {"name": "d", "emptyDir": {}}],
         [{"name": "host", "emptyDir": {}}, {"name": "e", "emptyDir": {}}], [{"emptyDir": {}}],
         [{"name": 7, "emptyDir": {}}], "state"],
    ),
}  # fmt: skip
POLICIES = [
    PatchPolicy(allowed_paths=OPEN),
    PatchPolicy(allowed_paths=OPEN, allowed_volume_types=["configMap", "secret"]),
    PatchPolicy(allowed_paths=OPEN, allow_host_ports=True, allowed_secrets=["db"]),
    PatchPolicy(allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK", "NET_RAW"]),
    PatchPolicy(allowed_paths=OPEN, allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK"]),
]


def _op(name: str, path: str, value: Any) -> dict[str, Any]:
    if name == "remove":
        return {"op": name, "path": path}
    return {"op": name, "path": path, "value": value}


def _operations(field: str) -> list[dict[str, Any]]:
    """Every operation tried on ``field``: each name, path below it and value, in each container
    (the Pod's own volumes: once)."""
    tails, values = FIELDS[field]
    bases = (
        ["/spec/volumes"] if field == "volumes" else [f"/spec/containers/{i}/{field}" for i in "01"]
    )
    out = []
    for base in bases:
        for tail in tails:
            out.append(_op("remove", base + tail, None))
            for value in [*values, *ODD]:
                out += [_op("add", base + tail, value), _op("replace", base + tail, value)]
    return out


EVERY_OPERATION = [op for field in FIELDS for op in _operations(field)]


def _outcome(validator: PatchValidator, pod: dict[str, Any], ops: list[Any]) -> Any:
    try:
        return validator.apply(pod, copy.deepcopy(ops))
    except PatchRejected as exc:
        return ("refused", exc.path, exc.reason)


@pytest.mark.parametrize("field", list(FIELDS))
def test_skipping_a_check_never_changes_the_decision_on_one_operation(field: str) -> None:
    """Every operation of ``FIELDS`` alone, on every Pod, under every policy."""
    for i, policy_ in enumerate(POLICIES):
        fast, reference = PatchValidator(policy_), EveryCheck(policy_)
        for pod in PODS:
            for operation in _operations(field):
                decided = _outcome(fast, pod, [operation])
                assert decided == _outcome(reference, pod, [operation]), (i, pod, operation)


@settings(max_examples=1500, deadline=None)
@given(
    pod=st.sampled_from(PODS),
    rules=st.sampled_from(POLICIES),
    ops=st.lists(st.sampled_from(EVERY_OPERATION), min_size=2, max_size=4),
)
def test_skipping_a_check_never_changes_the_decision_on_a_patch(
    pod: dict[str, Any], rules: PatchPolicy, ops: list[Any]
) -> None:
    """Sequences of them (one can add the hostPath volume another mounts)."""
    before = copy.deepcopy(pod)
    assert _outcome(PatchValidator(rules), pod, ops) == _outcome(EveryCheck(rules), pod, ops)
    assert pod == before  # (never changed in place)


def _effects(policy_: PatchPolicy, pod: dict[str, Any], *ops: dict[str, Any]) -> int:
    return PatchValidator(policy_)._effects(list(ops), pod)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pod", "operation", "checked"),
    [
        (PODS[0], _op("add", "/spec/volumes", [{"name": "d", "emptyDir": {}}]), False),
        (PODS[0], _op("add", "/spec/volumes", [{"name": "d", "hostPath": {"path": "/"}}]), True),
        (PODS[0], _op("add", "/spec/volumes/-", {"name": "d", "nfs": {"server": "s"}}), True),
        (PODS[0], _op("add", "/spec/containers/0/volumeMounts", [{"name": "d"}]), False),
        (PODS[2], _op("add", "/spec/containers/0/volumeMounts", [{"name": "d"}]), True),
        (PODS[0], _op("add", "/spec/containers/0/ports", [{"containerPort": 1}]), False),
        (PODS[0], _op("add", "/spec/containers/0/ports/-", {"hostPort": 1}), True),
        (PODS[0], _op("add", "/spec/containers/0/readinessProbe", HANDLER), False),
        (PODS[0], _op("add", "/spec/containers/0/readinessProbe", HOSTED), True),
        (PODS[0], _op("add", "/spec/containers/0/lifecycle", {"preStop": HOSTED}), True),
        (PODS[0], _op("add", "/spec/containers/0/lifecycle/postStart", HANDLER), False),
    ],
)
def test_what_the_privilege_check_is_run_for(
    pod: dict[str, Any], operation: dict[str, Any], checked: bool
) -> None:
    assert bool(_effects(POLICIES[0], pod, operation) & policy._GRANTS) is checked


@pytest.mark.parametrize(
    ("operation", "checked"),
    [
        (_op("add", "/spec/volumes/-", {"name": "d", "emptyDir": {"medium": "Memory"}}), False),
        (_op("add", "/spec/volumes/-", {"name": "d", "secret": {"secretName": "x"}}), True),
        (_op("add", "/spec/volumes", [{"name": "p", "persistentVolumeClaim": {}}]), True),
        (_op("add", f"{ENV}/-", {"name": "I", "valueFrom": {"fieldRef": {}}}), False),
        (_op("add", f"{ENV}/-", {"name": "I", "valueFrom": {"secretKeyRef": {}}}), True),
    ],
)  # fmt: skip
def test_what_the_access_check_is_run_for(operation: dict[str, Any], checked: bool) -> None:
    assert bool(_effects(POLICIES[0], PODS[0], operation) & policy._ACCESS) is checked


WHOLE = _op("add", "/spec/volumes", [{"name": "d", "emptyDir": {}}, {"name": "e", "emptyDir": {}}])
TWICE = _op("add", "/spec/volumes", [{"name": "d", "emptyDir": {}}, {"name": "d", "emptyDir": {}}])


@pytest.mark.parametrize(
    ("ops", "checked"),
    [
        ([WHOLE], False),
        ([TWICE], True),
        ([_op("add", "/spec/volumes", [{"emptyDir": {}}])], True),
        ([WHOLE, _op("add", "/spec/volumes/-", {"name": "d", "emptyDir": {}})], True),
        ([_op("add", "/spec/volumes/-", {"name": "d", "emptyDir": {}}), WHOLE], False),
        ([WHOLE, _op("add", "/spec/volumes/0/emptyDir", {"medium": "Memory"})], False),
        ([WHOLE, _op("replace", "/spec/volumes/1/name", "d")], True),
        ([WHOLE, _op("replace", "/spec", {"containers": [], "volumes": []})], True),
        ([_op("replace", "/spec/volumes/0/name", "state"), WHOLE], False),
    ],
    ids=["whole", "twice", "unnamed", "then-append", "append-then", "then-type", "then-rename",
         "then-spec", "rename-then"],
)  # fmt: skip
def test_what_the_volume_name_check_is_run_for(ops: list[Any], checked: bool) -> None:
    """A patch whose last operation that can rename volumes sets the whole list to distinct
    names leaves them unique whatever the Pod had: the check is not run, and the patch is
    decided as when it is."""
    assert bool(_effects(POLICIES[0], PODS[2], *ops) & policy._VOLUME_NAMES) is checked
    for pod in PODS:
        for rules in POLICIES:
            assert _outcome(PatchValidator(rules), pod, ops) == _outcome(
                EveryCheck(rules), pod, ops
            )


def test_a_volume_type_the_policy_does_not_allow_is_checked() -> None:
    emptydir = _op("add", "/spec/volumes/-", {"name": "d", "emptyDir": {}})
    assert not _effects(POLICIES[0], PODS[0], emptydir) & policy._GRANTS
    assert _effects(POLICIES[1], PODS[0], emptydir) & policy._GRANTS
    with pytest.raises(PatchRejected, match=r"add emptyDir to patchPolicy\.allowedVolumeTypes"):
        PatchValidator(POLICIES[1]).apply(PODS[1], [emptydir])


@pytest.mark.parametrize(
    ("builtin", "config"),
    [
        ("accelerator", {"vendor": "nvidia", "shmSize": "1Gi"}),
        ("inference-engine", {"engine": "vllm"}),
        (
            "rdma-network",
            {"networks": ["rdma-net"], "hugepages": {"pageSize": "2Mi", "amount": "1Gi"}},
        ),
    ],
)
def test_the_builtins_patches_run_neither_the_privilege_nor_the_access_check(
    builtin: str, config: dict[str, Any]
) -> None:
    """What the built-ins add (device limits, env variables from the Pod's fields, a shared
    memory or hugepages emptyDir and its mount, ports, probes, IPC_LOCK where the policy allows
    it) reads neither privileges nor access again."""
    pod = template({"name": "bare", "image": "b:1"})
    found = next(b for b in default_registry() if b.name == builtin)
    plugin: Any = found.factory(builtin, found.config_model.model_validate(config))
    ops = plugin.on_pod_create(hook_request(pod))
    assert len(ops) >= 3
    rules = PatchPolicy(allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK"])
    assert not _effects(rules, pod, *ops) & (policy._GRANTS | policy._ACCESS)
    assert PatchValidator(rules).apply(pod, ops) == EveryCheck(rules).apply(pod, ops)
