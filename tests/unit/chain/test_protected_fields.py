"""patchPolicy.protectedFields: the named protections on by default (an existing
runtimeClassName, system priority classes, control-plane tolerations), JSON Pointers of single
fields, turning them off, and the configuration's own errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from modelserving.api import PatchPolicy, PatchRejected, PathRule
from modelserving.api.operator import OperatorConfig
from modelserving.api.policy import NAMED_PROTECTIONS
from modelserving.api.validation import pydantic_errors
from modelserving.chain import PatchValidator
from modelserving.chain import policy as policy_module
from modelserving.chain.protected import Protections
from tests.unit.chain.test_patch_policy import expected, op, rejected

Ops = list[dict[str, Any]]
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
MASTER = {"key": "node-role.kubernetes.io/master", "operator": "Exists"}
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def refused(pod: dict[str, Any], ops: Ops, protection: str, **policy: Any) -> PatchRejected:
    """Refused by the default policy (or ``policy``), naming the entry and the setting; allowed
    once the entry is taken out of protectedFields."""
    exc = rejected(PatchValidator(PatchPolicy(**policy)), pod, ops)
    assert f"patchPolicy.protectedFields lists {protection}; take it out" in exc.reason
    entries = policy.pop("protected_fields", list(NAMED_PROTECTIONS))
    rest = [e for e in entries if e != protection]
    allowing = PatchValidator(PatchPolicy(protected_fields=rest, **policy))
    assert allowing.apply(pod, ops) == expected(pod, ops)
    return exc


def accepted(pod: dict[str, Any], ops: Ops, **policy: Any) -> None:
    assert PatchValidator(PatchPolicy(**policy)).apply(pod, ops) == expected(pod, ops)


# --- existingRuntimeClassName ----------------------------------------------------------------


@pytest.mark.parametrize(
    "ops",
    [
        [op("replace", "/spec/runtimeClassName", "runc")],
        [op("add", "/spec/runtimeClassName", "runc")],  # an add over it is a replace
        [op("remove", "/spec/runtimeClassName")],
    ],
    ids=["replaced", "added over", "removed"],
)
def test_an_existing_runtime_class_is_protected(pod: dict[str, Any], ops: Ops) -> None:
    pod["spec"]["runtimeClassName"] = "kata"
    exc = refused(pod, ops, "existingRuntimeClassName")
    assert exc.path == "/spec/runtimeClassName"
    assert "the template's runtimeClassName 'kata' may not be changed or removed" in exc.reason


def test_a_runtime_class_may_be_set_where_there_was_none(pod: dict[str, Any]) -> None:
    accepted(pod, [op("add", "/spec/runtimeClassName", "nvidia")])
    pod["spec"]["runtimeClassName"] = "kata"
    accepted(pod, [op("replace", "/spec/runtimeClassName", "kata")])  # the same value


# --- systemPriorityClassName -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "ops", "says"),
    [
        (
            "system-node-critical",
            [op("replace", "/spec/priorityClassName", "high")],
            "the template's priorityClassName 'system-node-critical' may not be changed",
        ),
        (
            "system-cluster-critical",
            [op("remove", "/spec/priorityClassName")],
            "the template's priorityClassName 'system-cluster-critical' may not be changed",
        ),
        (
            None,
            [op("add", "/spec/priorityClassName", "system-node-critical")],
            "priorityClassName 'system-node-critical' is reserved for system components",
        ),
        (
            "high",
            [op("replace", "/spec/priorityClassName", "system-cluster-critical")],
            "priorityClassName 'system-cluster-critical' is reserved for system components",
        ),
    ],
    ids=["changed", "removed", "set", "raised"],
)
def test_system_priority_classes_are_protected(
    pod: dict[str, Any], template: str | None, ops: Ops, says: str
) -> None:
    if template is not None:
        pod["spec"]["priorityClassName"] = template
    exc = refused(pod, ops, "systemPriorityClassName")
    assert exc.path == "/spec/priorityClassName"
    assert says in exc.reason


def test_other_priority_classes_may_change(pod: dict[str, Any]) -> None:
    accepted(pod, [op("add", "/spec/priorityClassName", "high")])
    pod["spec"]["priorityClassName"] = "high"
    accepted(pod, [op("replace", "/spec/priorityClassName", "low")])


# --- controlPlaneTolerations -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "ops"),
    [
        ([], [op("add", "/spec/tolerations/-", CONTROL_PLANE)]),
        ([], [op("add", "/spec/tolerations/-", MASTER)]),
        ([], [op("add", "/spec/tolerations/-", {"operator": "Exists"})]),  # every taint
        ([CONTROL_PLANE], [op("remove", "/spec/tolerations/0")]),
        ([CONTROL_PLANE], [op("replace", "/spec/tolerations/0/effect", "NoExecute")]),
        ([CONTROL_PLANE], [op("replace", "/spec/tolerations", [GPU])]),
    ],
    ids=["control-plane", "master", "every taint", "removed", "changed", "list replaced"],
)
def test_control_plane_tolerations_are_protected(
    pod: dict[str, Any], template: list[dict[str, Any]], ops: Ops
) -> None:
    pod["spec"]["tolerations"] = list(template)
    exc = refused(pod, ops, "controlPlaneTolerations")
    assert exc.path == "/spec/tolerations"
    assert "node-role.kubernetes.io/control-plane" in exc.reason


def test_other_tolerations_may_change_next_to_control_plane_ones(pod: dict[str, Any]) -> None:
    pod["spec"]["tolerations"] = [CONTROL_PLANE, {"key": "spot", "operator": "Exists"}]
    accepted(pod, [op("add", "/spec/tolerations/0", GPU)])  # moves the protected one
    accepted(pod, [op("remove", "/spec/tolerations/1")])
    accepted(pod, [op("replace", "/spec/tolerations", [GPU, CONTROL_PLANE])])


# --- JSON Pointers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "ops"),
    [
        ("/spec/hostname", [op("add", "/spec/hostname", "db-0")]),
        ("/spec/schedulerName", [op("replace", "/spec/schedulerName", "default-scheduler")]),
        ("/spec/schedulerName", [op("remove", "/spec/schedulerName")]),
        ("/spec/nodeSelector/gpu", [op("replace", "/spec/nodeSelector", {"zone": "a"})]),
        ("/metadata/labels/app", [op("replace", "/metadata/labels/app", "other")]),
        ("/metadata/annotations/a~1b", [op("add", "/metadata/annotations/a~1b", "x")]),
        ("/spec/containers/0/env", [op("add", "/spec/containers/0/env/-", {"name": "B"})]),
    ],
)
def test_a_pointer_protects_one_field_whatever_the_paths_allow(
    pod: dict[str, Any], entry: str, ops: Ops
) -> None:
    everything = [PathRule(path="/**")]
    exc = refused(pod, ops, entry, protected_fields=[entry], allowed_paths=everything)
    assert exc.path == entry
    assert exc.reason.startswith("plugins may not change this field")


def test_a_pointer_leaves_the_rest_alone(pod: dict[str, Any]) -> None:
    policy = {"protected_fields": ["/spec/nodeSelector/gpu", "/spec/serviceAccountName"]}
    accepted(pod, [op("add", "/spec/nodeSelector/zone", "a")], **policy)
    accepted(pod, [op("replace", "/spec/nodeSelector/gpu", "a100")], **policy)  # same value


def test_the_defaults_and_turning_them_off(pod: dict[str, Any]) -> None:
    assert PatchPolicy().protected_fields == [
        "existingRuntimeClassName",
        "systemPriorityClassName",
        "controlPlaneTolerations",
    ]
    pod["spec"].update(runtimeClassName="kata", priorityClassName="system-node-critical")
    pod["spec"]["tolerations"] = [CONTROL_PLANE]
    ops = [
        op("replace", "/spec/runtimeClassName", "runc"),
        op("replace", "/spec/priorityClassName", "high"),
        op("replace", "/spec/tolerations", []),
    ]
    rejected(PatchValidator(), pod, ops)
    accepted(pod, ops, protected_fields=[])


# --- the configuration -----------------------------------------------------------------------


def problems(entries: Any) -> list[str]:
    with pytest.raises(ValidationError) as info:
        OperatorConfig.model_validate({"patchPolicy": {"protectedFields": entries}})
    return [str(e) for e in pydantic_errors(info.value)]


def test_protected_fields_are_validated_with_their_index() -> None:
    assert problems(["runtimeClassName", "/spec/a~2b", "/spec/containers/*/image", 7]) == [
        "patchPolicy.protectedFields[0]: 'runtimeClassName' is neither a JSON Pointer (starting "
        "with '/') nor a named protection (existingRuntimeClassName, systemPriorityClassName, "
        "controlPlaneTolerations)",
        "patchPolicy.protectedFields[1]: '/spec/a~2b': a JSON Pointer may use '~' only as '~0' "
        "or '~1'",
        "patchPolicy.protectedFields[2]: '/spec/containers/*/image': an entry names one field; "
        "'*', '**' and '-' are not patterns here",
        "patchPolicy.protectedFields[3]: Input should be a valid string",
    ]
    assert problems("existingRuntimeClassName") == [
        "patchPolicy.protectedFields: Input should be a valid list"
    ]


def test_protected_fields_are_read_from_camel_case() -> None:
    config = OperatorConfig.model_validate(
        {"patchPolicy": {"protectedFields": ["controlPlaneTolerations", "/spec/hostname"]}}
    )
    assert config.patch_policy.protected_fields == ["controlPlaneTolerations", "/spec/hostname"]


def test_a_pointer_with_a_non_ascii_digit_names_no_list_item() -> None:
    """'²' is a digit to ``str.isdigit`` but no index: the pointer names nothing in a list, so
    changes there are not its to refuse (and the check does not fail on ``int('²')``)."""
    protections = Protections(["/spec/containers/²/image", "/spec/containers/0/image"])
    before = {"spec": {"containers": [{"image": "a"}]}}
    protections.check(before, {"spec": {"containers": [{"image": "a"}, {"image": "b"}]}})
    with pytest.raises(PatchRejected, match="may not change this field"):
        protections.check(before, {"spec": {"containers": [{"image": "b"}]}})


# --- which patches are checked ------------------------------------------------------------


class EveryTime(PatchValidator):
    """The reference: the protections are checked for every patch, whatever its paths."""

    def _patch_effects(self, checked: Any, before: Any) -> int:
        return super()._patch_effects(checked, before) | policy_module._PROTECTED


ENTRIES = [
    *NAMED_PROTECTIONS,
    "/spec/containers/1/image",
    "/spec/nodeSelector/gpu",
    "/metadata/labels/team",
    "/spec/tolerations/0/key",
]
PATHS = [
    "",
    "/spec",
    "/metadata",
    "/metadata/labels",
    "/metadata/labels/team",
    "/metadata/labels/other",
    "/spec/runtimeClassName",
    "/spec/priorityClassName",
    "/spec/schedulerName",
    "/spec/tolerations",
    "/spec/tolerations/0",
    "/spec/tolerations/1",
    "/spec/tolerations/-",
    "/spec/tolerations/0/key",
    "/spec/nodeSelector",
    "/spec/nodeSelector/gpu",
    "/spec/nodeSelector/zone",
    "/spec/containers",
    "/spec/containers/0",
    "/spec/containers/1",
    "/spec/containers/-",
    "/spec/containers/0/image",
    "/spec/containers/1/image",
    "/spec/containers/0/env",
]
VALUES = st.sampled_from(
    [
        "kata",
        "runc",
        "system-node-critical",
        "high",
        [CONTROL_PLANE],
        [GPU],
        [],
        {},
        {"gpu": "a100"},
        {"key": "node-role.kubernetes.io/control-plane"},
        {"name": "side", "image": "s:1"},
        [{"name": "main", "image": "m:1"}, {"name": "side", "image": "s:1"}],
        None,
    ]
)
OPS = st.builds(
    lambda name, path, value: (
        {"op": name, "path": path, "value": value}
        if name != "remove"
        else {"op": "remove", "path": path}
    ),
    st.sampled_from(["add", "replace", "remove"]),
    st.sampled_from(PATHS),
    VALUES,
)


def _outcome(validator: PatchValidator, pod: dict[str, Any], ops: Ops) -> Any:
    try:
        return validator.apply(pod, ops)
    except PatchRejected as exc:
        return ("refused", exc.path, exc.reason)


@settings(max_examples=600, deadline=None)
@given(ops=st.lists(OPS, min_size=1, max_size=3), entries=st.sets(st.sampled_from(ENTRIES)))
def test_a_patch_whose_paths_reach_no_protected_field_is_not_checked_for_one(
    ops: Ops, entries: set[str]
) -> None:
    """A patch is checked against protectedFields only when an operation's path may change a
    protected field (``Protections.reaches``); it is decided exactly as when every patch is."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"team": "a", "app": "x"}},
        "spec": {
            "runtimeClassName": "kata",
            "priorityClassName": "system-node-critical",
            "tolerations": [CONTROL_PLANE, GPU],
            "nodeSelector": {"gpu": "h100"},
            "containers": [{"name": "main", "image": "m:1"}, {"name": "side", "image": "s:1"}],
        },
    }
    policy = PatchPolicy(protected_fields=sorted(entries), allowed_paths=[PathRule(path="/**")])
    gated, reference = PatchValidator(policy), EveryTime(policy)
    assert _outcome(gated, pod, ops) == _outcome(reference, pod, ops)


def test_reaches_follows_the_path_and_list_items() -> None:
    protections = Protections(["/spec/containers/1/image", "controlPlaneTolerations"])
    assert protections.reaches(())  # the whole Pod
    assert protections.reaches(("spec",))
    assert protections.reaches(("spec", "tolerations", "3"))  # inside a protected field
    assert protections.reaches(("spec", "containers", "0"))  # an add here moves item 1
    assert protections.reaches(("spec", "containers", "1", "image"))
    assert not protections.reaches(("spec", "containers", "1", "env"))
    assert not protections.reaches(("metadata", "labels", "team"))
    assert not protections.reaches(("spec", "nodeSelector"))
