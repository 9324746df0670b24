"""The validator finds a Pod's facts once and a patched Pod's from its template's (``memo``): it
must judge every patch exactly as reading both Pods whole does (``PatchValidator(memo=False)``,
the reference). Hypothesis drives both with random and hostile patches (securityContext,
capabilities, volumes, hostPath, host namespaces and ports, probes, Secrets, ServiceAccounts...)
on templates with and without privileges, under strict and open policies, on a fresh
validator and on one that already knows the template, and along a chain of patches."""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelserving.api.errors import PatchRejected
from modelserving.api.modelserving import MAX_PLUGINS
from modelserving.api.policy import PatchPolicy, PathRule
from modelserving.chain import access, pss
from modelserving.chain.jsonpatch import apply_one
from modelserving.chain.policy import KNOWN_PODS, PatchValidator
from tests.unit.chain.racing import race

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _templates() -> list[dict[str, Any]]:
    plain: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {
            "securityContext": {"runAsNonRoot": True},
            "containers": [
                {
                    "name": "engine",
                    "image": "vllm:1",
                    "env": [{"name": f"V{i}", "value": "v"} for i in range(5)],
                    "ports": [{"containerPort": 80}],
                    "securityContext": dict(RESTRICTED),
                }
            ],
        },
    }
    rich = copy.deepcopy(plain)
    spec: dict[str, Any] = rich["spec"]
    spec["automountServiceAccountToken"] = False
    spec["hostUsers"] = False
    spec["serviceAccountName"] = "engine"
    spec["imagePullSecrets"] = [{"name": "pull"}]
    spec["volumes"] = [
        {"name": "state", "emptyDir": {}},
        {"name": "h", "hostPath": {"path": "/models", "type": "Directory"}},
        {"name": "t", "projected": {"sources": [{"secret": {"name": "p"}}]}},
    ]
    spec["initContainers"] = [
        {
            "name": "fetch",
            "image": "busybox",
            "volumeMounts": [{"name": "state", "mountPath": "/s"}],
        }
    ]
    spec["containers"].append(
        {
            "name": "agent",
            "image": "agent:1",
            "command": ["/bin/sh"],
            "env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s"}}}],
            "volumeMounts": [
                {"name": "state", "mountPath": "/state"},
                {"name": "h", "mountPath": "/models", "readOnly": True},
            ],
            "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
            "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}},
        }
    )
    return [plain, rich]


TEMPLATES = _templates()
OPEN = [PathRule(path="/**")]
POLICIES = [
    PatchPolicy(),
    PatchPolicy(allowed_paths=OPEN),
    PatchPolicy(allowed_paths=OPEN, allow_host_path=True, allowed_secrets=["y"]),
    PatchPolicy(
        allowed_paths=OPEN,
        allow_privileged=True,
        allow_privileged_container_changes=True,
        allowed_capabilities=["SYS_ADMIN", "IPC_LOCK"],
    ),
]

SEGMENTS = st.sampled_from(
    [
        "metadata", "annotations", "labels", "spec", "containers", "initContainers",
        "ephemeralContainers", "0", "1", "2", "-", "env", "envFrom", "args", "image", "command",
        "resources", "securityContext", "privileged", "capabilities", "add", "drop", "ports",
        "hostPort", "volumes", "hostPath", "path", "type", "volumeMounts", "readOnly",
        "mountPropagation", "hostNetwork", "hostPID", "hostUsers", "runtimeClassName",
        "livenessProbe", "httpGet", "host", "exec", "lifecycle", "runAsUser", "runAsNonRoot",
        "name", "sysctls", "seccompProfile", "appArmorProfile", "seLinuxOptions",
        "windowsOptions", "procMount", "allowPrivilegeEscalation", "valueFrom", "secretKeyRef",
        "projected", "sources", "serviceAccountToken", "imagePullSecrets", "nodeName",
        "serviceAccountName", "automountServiceAccountToken", "shareProcessNamespace",
        "container.apparmor.security.beta.kubernetes.io~1engine",
    ]
)  # fmt: skip
REALISTIC = [
    "/spec/containers/0/env/-",
    "/spec/containers/0/env/0",
    "/spec/containers/0/securityContext",
    "/spec/containers/0/securityContext/privileged",
    "/spec/containers/0/securityContext/capabilities/add",
    "/spec/containers/0/securityContext/capabilities/add/-",
    "/spec/containers/1/securityContext",
    "/spec/containers/1/image",
    "/spec/containers/1/volumeMounts/-",
    "/spec/containers/1/volumeMounts/1/readOnly",
    "/spec/containers/-",
    "/spec/containers/0",
    "/spec/initContainers/-",
    "/spec/volumes/-",
    "/spec/volumes/0",
    "/spec/volumes/1/hostPath/path",
    "/spec/securityContext",
    "/spec/securityContext/runAsUser",
    "/spec/hostNetwork",
    "/spec/hostUsers",
    "/spec/serviceAccountName",
    "/spec/imagePullSecrets/-",
    "/metadata/annotations",
    "/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1engine",
    "/spec/runtimeClassName",
]
VALUES = st.sampled_from(
    [
        None, True, False, 0, 1, "x", "unconfined", "Unconfined", "Bidirectional", [], {},
        ["SYS_ADMIN"], ["NET_RAW"], "SYS_ADMIN", "IPC_LOCK", {"add": ["SYS_ADMIN"]},
        {"privileged": True}, dict(RESTRICTED), {"type": "Unconfined"},
        {"name": "B", "value": "1"},
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}},
        [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}}],
        {"containerPort": 1, "hostPort": 1}, [{"hostPort": 80}],
        {"name": "root", "hostPath": {"path": "/"}},
        {"name": "h", "hostPath": {"path": "/var/run"}},
        {"name": "shm", "emptyDir": {}}, {"name": "s", "secret": {"secretName": "y"}},
        {"name": "state", "mountPath": "/bin"}, {"name": "h", "mountPath": "/x"},
        {"name": "side", "image": "i"},
        {"name": "side", "image": "i", "securityContext": {"privileged": True}},
        {"name": "agent", "image": "evil"}, {"name": "engine", "image": "twin"},
        {"httpGet": {"host": "1.2.3.4"}}, {"exec": {"command": ["sh"]}},
        [{"name": "kernel.msgmax", "value": "1"}], {"path": "/"},
        {"x": "y", "container.apparmor.security.beta.kubernetes.io/engine": "unconfined"},
        {"sources": [{"serviceAccountToken": {"audience": "a"}}]}, {"name": "pull2"},
    ]
)  # fmt: skip


def _op(name: str, path: str, value: Any) -> dict[str, Any]:
    return (
        {"op": name, "path": path}
        if name == "remove"
        else {"op": name, "path": path, "value": value}
    )


OPS = st.builds(
    _op,
    st.sampled_from(["add", "add", "replace", "remove", "test"]),
    st.one_of(
        st.sampled_from(REALISTIC),
        st.sampled_from(REALISTIC),
        st.lists(SEGMENTS, min_size=1, max_size=6).map(lambda ts: "".join("/" + t for t in ts)),
    ),
    VALUES,
)
HOSTILE = st.sampled_from(
    [
        _op(
            "add",
            "/spec/containers/0/env/-",
            {"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}},
        ),
        _op("add", "/spec/containers/0/envFrom", [{"secretRef": {"name": "y"}}]),
        _op("add", "/spec/containers/0/securityContext/privileged", True),
        _op("add", "/spec/containers/0/securityContext/capabilities/add", ["SYS_ADMIN"]),
        _op("add", "/spec/containers/0/securityContext/runAsUser", 0),
        _op("remove", "/spec/containers/0/securityContext/capabilities", None),
        _op("add", "/spec/containers/0/ports/-", {"containerPort": 1, "hostPort": 1}),
        _op("add", "/spec/containers/0/volumeMounts", [{"name": "h", "mountPath": "/x"}]),
        _op("add", "/spec/containers/0/livenessProbe", {"httpGet": {"host": "1.2.3.4"}}),
        _op(
            "add",
            "/spec/containers/-",
            {"name": "side", "image": "i", "securityContext": {"privileged": True}},
        ),
        _op(
            "add",
            "/spec/initContainers/-",
            {"name": "w", "image": "i", "volumeMounts": [{"name": "state", "mountPath": "/s"}]},
        ),
        _op("add", "/spec/volumes/-", {"name": "root", "hostPath": {"path": "/"}}),
        _op("replace", "/spec/volumes/0", {"name": "state", "hostPath": {"path": "/"}}),
        _op("add", "/spec/volumes/-", {"name": "s", "secret": {"secretName": "y"}}),
        _op("add", "/spec/hostNetwork", True),
        _op("remove", "/spec/hostUsers", None),
        _op("add", "/spec/securityContext/sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
        _op("add", "/spec/serviceAccountName", "admin"),
        _op("add", "/spec/automountServiceAccountToken", True),
        _op("add", "/spec/imagePullSecrets", [{"name": "pull2"}]),
        _op("add", "/spec/nodeName", "n1"),
        _op("add", "/spec/shareProcessNamespace", True),
        _op("replace", "/spec/containers/1/image", "evil:1"),
        _op("replace", "/spec/containers/1/volumeMounts/1/readOnly", False),
        _op(
            "add",
            "/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1engine",
            "unconfined",
        ),
    ]
)
PATCHES = st.lists(st.one_of(OPS, HOSTILE), min_size=1, max_size=4)
SETTINGS = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def verdict(validator: PatchValidator, pod: dict[str, Any], patch: Any) -> Any:
    """The patched Pod, or the refusal's path and reason."""
    try:
        return validator.apply(pod, copy.deepcopy(patch))
    except PatchRejected as exc:
        return ("rejected", exc.path, exc.reason)


@SETTINGS
@given(
    template=st.sampled_from(TEMPLATES),
    policy=st.sampled_from(POLICIES),
    first=PATCHES,
    second=PATCHES,
)
def test_the_memo_judges_every_patch_as_the_full_walk_does(
    template: dict[str, Any], policy: PatchPolicy, first: Any, second: Any
) -> None:
    pod = copy.deepcopy(template)
    reference, fast = PatchValidator(policy, memo=False), PatchValidator(policy)
    expected = verdict(reference, pod, first)
    assert verdict(fast, pod, first) == expected  # nothing known yet
    assert verdict(fast, pod, second) == verdict(reference, pod, second)  # the template known
    assert verdict(fast, pod, first) == expected  # and again
    if isinstance(expected, dict):  # the next plugin of a chain patches the patched Pod
        patched = fast.apply(pod, copy.deepcopy(first))
        assert verdict(fast, patched, second) == verdict(reference, patched, second)
    assert pod == template  # no Pod is changed


def _patched(pod: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any] | None:
    after: Any = pod
    try:
        for op in patch:
            after = apply_one(after, op)  # type: ignore[arg-type]
    except PatchRejected:
        return None
    return after if isinstance(after, dict) else None


@settings(max_examples=1500, deadline=None)
@given(template=st.sampled_from(TEMPLATES), patch=PATCHES)
def test_facts_found_from_the_template_are_those_of_the_whole_pod(
    template: dict[str, Any], patch: list[dict[str, Any]]
) -> None:
    """Exactly the same facts, in the same order, with the same paths."""
    after = _patched(template, patch)
    if after is None:
        return
    whole = pss.pod_facts(after)
    base = pss.pod_facts(template)
    reused = pss.pod_facts(after, reuse=base)
    assert list(reused.facts.items()) == list(whole.facts.items())
    assert reused.containers == whole.containers and reused.pod_sc == whole.pod_sc
    # a patched Pod's parts taken one by one (no test of them all first): the same facts, and
    # the template's own when every part is taken
    patched = pss.pod_facts(after, reuse=base, sibling=False)
    assert list(patched.facts.items()) == list(whole.facts.items())
    assert patched.containers == whole.containers and patched.pod_sc == whole.pod_sc
    assert (patched is base) == (reused is base)
    assert pss.pod_facts(template, reuse=base, sibling=False) is base
    for facts in (whole, reused, patched):  # what the validator's ``_granted`` skips facts by
        assert facts.privileged == any(
            control in pss.OWN_PRIVILEGES and subject in facts.containers
            for control, subject, _ in facts.facts
        )
    access_whole = access.facts_of(after)
    access_reused = access.facts_of(after, reuse=access.facts_of(template))
    assert list(access_reused.facts.items()) == list(access_whole.facts.items())


@settings(max_examples=600, deadline=None)
@given(
    template=st.sampled_from(TEMPLATES),
    patch=PATCHES,
    policy=st.sampled_from(POLICIES),
)
def test_the_granted_containers_are_found_as_from_every_fact(
    template: dict[str, Any], patch: list[dict[str, Any]], policy: PatchPolicy
) -> None:
    """A Pod whose containers have no fact that can grant them a privilege has no granted
    container: the same answer as reading all of its facts."""
    after = _patched(template, patch) or template
    validator = PatchValidator(policy)
    facts = pss.pod_facts(after, reuse=pss.pod_facts(template))
    every = dataclasses.replace(facts, privileged=True)
    assert validator._granted(facts, after) == validator._granted(every, after)


@pytest.mark.parametrize("field", ["volumes", "containers", "initContainers"])
def test_a_patched_pod_with_a_part_fewer_has_facts_of_its_own(field: str) -> None:
    """Every part of the patched Pod is the template's, but the template has one more: the
    facts are the Pod's, not the template's."""
    template = TEMPLATES[1]
    spec = template["spec"]
    after = {**template, "spec": {**spec, field: spec[field][:-1]}}
    base = pss.pod_facts(template)
    for sibling in (True, False):
        found = pss.pod_facts(after, reuse=base, sibling=sibling)
        assert found is not base
        assert list(found.facts.items()) == list(pss.pod_facts(after).facts.items())


def test_a_part_is_read_again_when_its_objects_are_new() -> None:
    """A privilege written into a copied securityContext is found, though the container's other
    fields are the template's objects."""
    template = TEMPLATES[0]
    container = dict(template["spec"]["containers"][0])
    container["securityContext"] = {**container["securityContext"], "privileged": True}
    after = {**template, "spec": {**template["spec"], "containers": [container]}}
    facts = pss.pod_facts(after, reuse=pss.pod_facts(template))
    assert (pss.PRIVILEGED, "container 'engine'", "runs privileged") in facts.facts
    hook = {**container, "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}}]}
    after = {**template, "spec": {**template["spec"], "containers": [hook]}}
    found = access.facts_of(after, reuse=access.facts_of(template)).facts
    assert (access.SECRETS, pss.THE_POD, "references Secret 'y'") in found


def test_a_container_is_read_again_when_the_pods_host_volumes_change() -> None:
    """A mount of a volume that becomes hostPath is a fact, though the container is the same
    object: the Pod's hostPath volumes are part of what its facts were read with."""
    template = TEMPLATES[1]
    mounted = {"name": "state", "hostPath": {"path": "/"}}
    volumes = [mounted, *template["spec"]["volumes"][1:]]
    after = {**template, "spec": {**template["spec"], "volumes": volumes}}
    facts = pss.pod_facts(after, reuse=pss.pod_facts(template))
    assert list(facts.facts.items()) == list(pss.pod_facts(after).facts.items())
    assert any("mounts hostPath volume 'state'" in what for _, _, what in facts.facts)


def test_the_validator_keeps_a_bounded_number_of_pods() -> None:
    validator = PatchValidator()
    pods = [copy.deepcopy(TEMPLATES[0]) for _ in range(KNOWN_PODS + 5)]
    for pod in pods:
        validator.apply(pod, [_op("add", "/spec/containers/0/env/-", {"name": "B", "value": "1"})])
    assert len(validator._known) == KNOWN_PODS
    assert all(entry.pod is not pods[0] for entry in validator._known.values())


def test_the_last_patch_of_a_chain_keeps_nothing_of_its_pod() -> None:
    """``keep=False`` (the chain's last plugin): the patched Pod is judged the same, and is not
    among the kept Pods; the template is, and a patched Pod another plugin patches is too."""
    env = [_op("add", "/spec/containers/0/env/-", {"name": "B", "value": "1"})]
    grant = [_op("add", "/spec/containers/0/securityContext/privileged", True)]
    validator = PatchValidator(PatchPolicy(allowed_paths=OPEN))
    pod = copy.deepcopy(TEMPLATES[0])
    last, _ = validator.apply_patch(pod, env, keep=False)
    kept = {id(entry.pod) for entry in validator._known.values()}
    assert id(pod) in kept and id(last) not in kept
    middle, _ = validator.apply_patch(pod, env)
    assert id(middle) in {id(entry.pod) for entry in validator._known.values()}
    with pytest.raises(PatchRejected, match="runs privileged"):
        validator.apply_patch(middle, grant, keep=False)


@pytest.mark.parametrize("memo", [True, False])
def test_a_new_privilege_is_refused_on_a_known_template(memo: bool) -> None:
    validator = PatchValidator(PatchPolicy(allowed_paths=OPEN), memo=memo)
    pod = copy.deepcopy(TEMPLATES[0])
    env = [_op("add", "/spec/containers/0/env/-", {"name": "B", "value": "1"})]
    grant = [_op("add", "/spec/containers/0/securityContext/privileged", True)]
    for _ in range(3):
        validator.apply(pod, env)
        with pytest.raises(PatchRejected, match="runs privileged"):
            validator.apply(pod, grant)


LABEL = _op("add", "/metadata/labels/team", "llm")  # judged by no check that reads facts


@pytest.mark.parametrize(
    "patches",
    [
        ["A", "B", "C"],
        ["A", LABEL, "C"],  # the middle Pod's facts are never found: the last's come from the first
        [LABEL, "B", "C"],
    ],
    ids=["env-env-env", "env-label-env", "label-env-env"],
)
def test_the_next_plugin_finds_the_facts_of_its_pod_from_the_pod_it_was_patched_from(
    monkeypatch: pytest.MonkeyPatch, patches: list[Any]
) -> None:
    """Along a chain, each plugin's Pod is the previous plugin's patched Pod: its Pod Security
    facts are found from those of the Pod it was patched from, so a container no patch touched
    the fields of is read once for the whole chain (and the facts are those of the whole Pod)."""
    read: list[str] = []
    real = {"_security": pss._security, "_reach": pss._reach}

    def counting(part: str) -> Any:
        def read_part(view: Any, subject: str, *args: Any) -> None:
            if subject:  # (not the container without settings that ``plain()`` compares with)
                read.append(f"{part} of {subject}")
            real[part](view, subject, *args)

        return read_part

    for part in real:  # a container's facts are read in two parts
        monkeypatch.setattr(pss, part, counting(part))
    validator = PatchValidator()
    pod: dict[str, Any] = copy.deepcopy(TEMPLATES[1])
    for patch in patches:  # three plugins: an env var (what runs: checked) or a label
        if isinstance(patch, str):
            patch = _op("add", "/spec/containers/0/env/-", {"name": patch})
        pod = validator.apply(pod, [patch])
    containers = len(pod["spec"]["containers"]) + len(pod["spec"].get("initContainers", []))
    assert len(read) == 2 * containers  # each part read once, for the first plugin's Pod
    known = validator._entry(pod)
    assert known.pss is None  # the last Pod's facts are found when the next plugin needs them
    found = list(validator._pss(known).facts.items())
    assert len(read) == 2 * containers
    assert found == list(pss.pod_facts(pod).facts.items())


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the container parts ``pss`` reads from now on (``_security``, ``_reach``),
    one entry per read."""
    read: list[str] = []
    for part in ("_security", "_reach"):
        real = getattr(pss, part)

        def read_part(*args: Any, _part: str = part, _real: Any = real) -> None:
            read.append(_part)
            _real(*args)

        monkeypatch.setattr(pss, part, read_part)
    return read


@pytest.mark.parametrize(
    ("operation", "security", "reach"),
    [
        (_op("add", "/spec/containers/0/ports", [{"containerPort": 1, "hostPort": 1}]), 0, 1),
        (_op("add", "/spec/containers/1/volumeMounts/-", {"name": "h", "mountPath": "/h"}), 0, 1),
        (_op("add", "/spec/containers/0/securityContext", {"privileged": True}), 1, 0),
        (_op("add", "/spec/containers/0/env/-", {"name": "E", "value": "1"}), 0, 0),
    ],
)
def test_a_container_is_read_again_only_in_the_part_a_patch_changed(
    monkeypatch: pytest.MonkeyPatch, operation: dict[str, Any], security: int, reach: int
) -> None:
    """A container's facts come in two parts: its security settings, and what it reaches (probe
    hosts, hostPath mounts, host ports). A patch of one part reads that part again, not the
    other; the facts are those of the patched Pod read whole."""
    pod = copy.deepcopy(TEMPLATES[1])
    before = pss.pod_facts(pod)
    after = apply_one(pod, operation)  # type: ignore[arg-type]
    read = _counted_reads(monkeypatch)
    found = pss.pod_facts(after, before)
    assert read.count("_security") == security and read.count("_reach") == reach
    monkeypatch.undo()
    assert list(found.facts.items()) == list(pss.pod_facts(after).facts.items())


def _made_from(template: dict[str, Any]) -> dict[str, Any]:
    """A Pod as ``workload.pods`` makes one from a template: its own metadata, spec map,
    container lists and container maps, the rest (securityContext, ports, volumes...) the
    template's objects."""
    spec = dict(template["spec"])
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        if kind in spec:
            spec[kind] = [dict(c) for c in spec[kind]]
    return {**template, "metadata": copy.deepcopy(template["metadata"]), "spec": spec}


@SETTINGS
@given(
    template=st.sampled_from(TEMPLATES),
    policy=st.sampled_from(POLICIES),
    first=PATCHES,
    differ=st.lists(st.one_of(OPS, HOSTILE), max_size=2),
    second=PATCHES,
)
def test_facts_found_from_a_sibling_judge_as_the_full_walk_does(
    template: dict[str, Any], policy: PatchPolicy, first: Any, differ: Any, second: Any
) -> None:
    """A Pod linked to a sibling (``related``) is judged as reading it whole judges it, whether
    it is made from the same template as the sibling or differs from it (``differ``: hostile
    and random changes, copy-on-write, so the rest stays shared)."""
    sibling = _made_from(template)
    pod = _patched(_made_from(template), differ) or _made_from(template)
    reference, fast = PatchValidator(policy, memo=False), PatchValidator(policy)
    verdict(fast, sibling, first)
    known = fast._entry(sibling)
    fast._pss(known), fast._access(known)  # every fact of the sibling known, whatever it needed
    fast.related(pod, sibling)
    assert verdict(fast, pod, second) == verdict(reference, pod, second)
    assert verdict(fast, pod, first) == verdict(reference, pod, first)
    # the next Pod of the template, linked to that one: its link taken as it is when that one's
    # facts are the sibling's, a copy of that one's otherwise
    third = _made_from(template)
    known = fast._entry(pod)
    fast._pss(known), fast._access(known)
    fast.related(third, pod)
    assert verdict(fast, third, second) == verdict(reference, third, second)
    assert verdict(fast, third, first) == verdict(reference, third, first)


@SETTINGS
@given(
    template=st.sampled_from(TEMPLATES),
    differ=st.lists(st.one_of(OPS, HOSTILE), max_size=2),
)
def test_unchanged_says_what_taking_the_parts_one_by_one_finds(
    template: dict[str, Any], differ: Any
) -> None:
    """``_unchanged`` (the sibling's test, building nothing) is true exactly when taking a
    Pod's parts one by one from a sibling's facts takes every one of them."""
    base = pss.pod_facts(_made_from(template))
    for pod in (_made_from(template), _patched(_made_from(template), differ)):
        if pod is None:
            continue
        taken = pss.pod_facts(pod, reuse=base, sibling=False) is base
        assert pss._unchanged(pod, base.parts) is taken


@pytest.mark.parametrize("where", ["pod", "container", "initContainer"])
def test_unchanged_compares_every_field_the_facts_are_read_from(where: str) -> None:
    """``_unchanged`` compares each field one by one: a sibling whose field is another object
    (an equal one: only the objects tell) is not unchanged, whichever field it is of those the
    facts read (``_POD_KEYS`` of the Pod, ``_REACH_KEYS`` and the securityContext of each
    container)."""
    template = {
        "metadata": {"name": "p"},
        "spec": {
            **{key: {"probe": key} for key in pss._POD_KEYS},
            "containers": [{key: {"probe": key} for key in (*pss._REACH_KEYS, "securityContext")}],
            "initContainers": [
                {key: {"probe": key} for key in (*pss._REACH_KEYS, "securityContext")}
            ],
        },
    }
    base = pss.pod_facts(_made_from(template))
    assert pss._unchanged(_made_from(template), base.parts)
    keys = pss._POD_KEYS if where == "pod" else (*pss._REACH_KEYS, "securityContext")
    for key in keys:
        pod = _made_from(template)
        spec = pod["spec"]
        target = spec if where == "pod" else spec[f"{where}s"][0]
        target[key] = copy.deepcopy(target[key])
        assert not pss._unchanged(pod, base.parts), key
        assert pss.pod_facts(pod, reuse=base, sibling=False) is not base, key


def test_a_pod_made_from_the_same_template_takes_its_siblings_facts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every part of a sibling made from the same template is the same object: none is read
    again, and the facts are those of the Pod read whole. Linking never makes a chain: each
    Pod holds only a detached copy of what was known of a sibling with the same facts."""
    template = TEMPLATES[1]
    validator = PatchValidator()
    env = [_op("add", "/spec/containers/0/env/-", {"name": "B", "value": "1"})]
    pods = [_made_from(template) for _ in range(3)]
    validator.apply(pods[0], env)
    validator._pss(validator._entry(pods[0]))
    read: list[str] = []
    real = pss._security

    def counting(view: Any, subject: str, *args: Any) -> None:
        read.append(subject)
        real(view, subject, *args)

    monkeypatch.setattr(pss, "_security", counting)
    found = []
    for before, pod in itertools.pairwise(pods):
        validator.related(pod, before)
        validator.apply(pod, env)
        known = validator._entry(pod)
        found.append(list(validator._pss(known).facts.items()))
        assert known.parent is not None and known.parent.parent is None
    assert [s for s in read if s] == []
    monkeypatch.undo()
    assert found == [list(pss.pod_facts(pod).facts.items()) for pod in pods[1:]]
    # every part the same objects: the sibling's facts themselves, and what its template grants
    first, last = validator._entry(pods[0]), validator._entry(pods[2])
    assert last.pss is first.pss and last.granted is first.granted and first.granted
    # a detached copy of what was known of a sibling with these very facts: made once, for the
    # second Pod, and taken as it is by the third (nothing is made per Pod)
    linked = last.parent
    assert linked is not None and linked.parent is None and linked.pss is first.pss
    assert linked is validator._entry(pods[1]).parent and linked.pod is pods[0]


def test_a_sibling_that_differs_gets_facts_and_grants_of_its_own() -> None:
    """A Pod whose agent container is no longer privileged (its securityContext a new object)
    takes the other parts from its sibling, but its facts and what its template grants are its
    own: a plugin may then change what runs in that container."""
    validator = PatchValidator(PatchPolicy(allowed_paths=OPEN))
    sibling = _made_from(TEMPLATES[1])
    env = [_op("add", "/spec/containers/0/env/-", {"name": "B", "value": "1"})]
    validator.apply(sibling, env)
    pod = _made_from(TEMPLATES[1])
    pod["spec"]["containers"][1] = {**pod["spec"]["containers"][1], "securityContext": {}}
    validator.related(pod, sibling)
    image = [_op("replace", "/spec/containers/1/image", "evil:1")]
    with pytest.raises(PatchRejected, match="agent"):
        validator.apply(sibling, image)
    assert validator.apply(pod, image)["spec"]["containers"][1]["image"] == "evil:1"
    known, other = validator._entry(pod), validator._entry(sibling)
    assert known.pss is not other.pss and known.granted != other.granted


def test_a_pod_is_linked_only_to_a_known_sibling_and_only_once() -> None:
    validator = PatchValidator()
    first, second, third = (_made_from(TEMPLATES[0]) for _ in range(3))
    validator.related(second, first)  # nothing known of the first: nothing to take
    assert validator._entry(second).parent is None
    validator._pss(validator._entry(first))
    validator._pss(validator._entry(third))
    validator.related(third, first)  # the third's own facts are known already
    assert validator._entry(third).parent is None
    validator.related(second, first)
    assert validator._entry(second).parent is not None
    validator.related(second, third)  # linked once
    parent = validator._entry(second).parent
    assert parent is not None and parent.pod is first
    off = PatchValidator(memo=False)
    off.related(second, first)
    assert not off._known


THREAD_PATCHES = [
    [_op("add", "/spec/containers/0/env/-", {"name": "A", "value": "1"})],
    [LABEL],
    [_op("add", "/spec/containers/0/securityContext/privileged", True)],
    [_op("add", "/spec/volumes/-", {"name": "h", "hostPath": {"path": "/var/log"}})],
    [_op("add", "/spec/containers/0/securityContext/capabilities", {"add": ["NET_ADMIN"]})],
]


def test_threads_sharing_a_validator_judge_as_each_alone() -> None:
    """Four threads, each making Pods from a template and running chains of patches on them
    through one validator (its table of Pods, the last entry it found, the sibling links), with
    the interpreter switching threads as often as it can: every verdict is the full walk's."""
    validator = PatchValidator(PatchPolicy(allowed_paths=OPEN))
    failures: list[str] = []
    start = threading.Barrier(4)

    def work(seed: int) -> None:
        reference = PatchValidator(PatchPolicy(allowed_paths=OPEN), memo=False)
        template = TEMPLATES[seed % len(TEMPLATES)]
        previous = None
        start.wait()
        for i in range(240):
            pod = _made_from(template)
            if previous is not None:
                validator.related(pod, previous)
            previous = pod
            for step in range(3):
                patch = THREAD_PATCHES[(seed + i + step) % len(THREAD_PATCHES)]
                got, want = verdict(validator, pod, patch), verdict(reference, pod, patch)
                if got != want:
                    failures.append(f"thread {seed}, Pod {i}, plugin {step}: {got!r} != {want!r}")
                if isinstance(got, dict):
                    pod = got

    race([functools.partial(work, seed) for seed in range(4)])
    assert not failures, failures[:3]


def test_a_privileged_container_without_a_host_mount_still_grants_in_a_sibling() -> None:
    """``TEMPLATES[1]``'s privileged container also mounts a hostPath volume. In a Pod whose
    volume is an emptyDir instead (its containers the template's objects, its facts found from
    the template's), only the container's security settings grant it a privilege: a change of
    its image is still a takeover."""
    policy = PatchPolicy(allowed_paths=OPEN)
    validator, reference = PatchValidator(policy), PatchValidator(policy, memo=False)
    template = _made_from(TEMPLATES[1])
    validator._pss(validator._entry(template))
    spec = template["spec"]
    volumes = [spec["volumes"][0], {"name": "h", "emptyDir": {}}, *spec["volumes"][2:]]
    pod = {**template, "spec": {**spec, "volumes": volumes}}
    validator.related(pod, template)
    assert validator._pss(validator._entry(pod)).privileged
    image = [_op("replace", "/spec/containers/1/image", "other:1")]
    got = verdict(validator, pod, image)
    assert got == verdict(reference, pod, image)
    assert got[0] == "rejected" and "runs privileged" in got[2], got


def test_the_facts_of_the_first_pod_serve_a_chain_of_the_most_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ModelServing lists at most 32 plugins: after 31 that change no fact (a label each),
    the last plugin's Pod still finds its facts from the first Pod's, reading no part again."""
    read = _counted_reads(monkeypatch)
    validator = PatchValidator()
    env = [_op("add", "/spec/containers/0/env/-", {"name": "A", "value": "1"})]
    pod = validator.apply(copy.deepcopy(TEMPLATES[1]), env)  # the template's facts read
    first = len(read)
    for i in range(MAX_PLUGINS - 1):
        pod = validator.apply(pod, [_op("add", f"/metadata/labels/l{i}", "x")])
    validator.apply(pod, env)  # what runs: the facts of its Pod, found up the chain
    assert first and len(read) == first


@pytest.mark.timeout(10)
def test_pods_checked_both_ways_do_not_loop_the_facts_search() -> None:
    """``check_invariants(a, b)`` links b to a as patched from it; the same the other way round
    links a to b. The search for the Pod whose facts to start from then meets a loop: it stops,
    and the facts are read whole."""
    validator = PatchValidator()
    a, b = copy.deepcopy(TEMPLATES[0]), copy.deepcopy(TEMPLATES[0])
    label: Any = [LABEL]
    validator.check_invariants(a, b, label)  # nothing read: a label needs no facts
    validator.check_invariants(b, a, label)
    validator.check_invariants(a, b)  # every check: the facts of both
    assert validator._entry(b).pss is not None
