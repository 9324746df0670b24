"""A validator checks the shape, the paths and the value-decided effects of a patch once, and
takes them again for an equal patch (the same msgpack bytes, ``PatchValidator.apply_patch``):
equal in value and in type, never equal only as Python's ``==`` sees it. Everything that reads
the Pod is still judged for every Pod. Hypothesis compares a validator that keeps patches, given
a stream of patches that repeat, with one that keeps nothing."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api.errors import PatchRejected
from modelserving.api.policy import PatchPolicy, PathRule
from modelserving.chain.policy import KEPT_PATCH_BYTES, PATCH_BYTES, PatchValidator, _patch_key
from tests.unit.chain.test_access_controls import template

OPEN = PatchPolicy(allowed_paths=[PathRule(path="/**")])
HOST = {"name": "host", "hostPath": {"path": "/var/log"}}
MOUNT = [
    {
        "op": "add",
        "path": "/spec/containers/0/volumeMounts",
        "value": [{"name": "host", "mountPath": "/h"}],
    }
]


def _add(path: str, value: Any) -> list[dict[str, Any]]:
    return [{"op": "add", "path": path, "value": value}]


def test_an_equal_patch_is_checked_once_and_its_values_copied_once() -> None:
    validator = PatchValidator(OPEN)
    value = {"example.com/team": "llm"}
    first, ops = validator.apply_patch(template(), _add("/metadata/annotations", value))
    second, again = validator.apply_patch(template(), _add("/metadata/annotations", dict(value)))
    assert first == second and first["metadata"]["annotations"] == value
    # the validator's own copy, shared by both Pods, never the plugin's object
    assert first["metadata"]["annotations"] is second["metadata"]["annotations"]
    assert first["metadata"]["annotations"] is not value
    assert ops == again and ops is not again


def test_a_changed_value_is_a_new_patch() -> None:
    validator = PatchValidator(OPEN)
    value = {"a": "1"}
    raw = _add("/metadata/annotations", value)
    first, _ = validator.apply_patch(template(), raw)
    value["a"] = "2"  # the plugin changes the object it returned
    second, _ = validator.apply_patch(template(), raw)
    assert first["metadata"]["annotations"] == {"a": "1"}
    assert second["metadata"]["annotations"] == {"a": "2"}


@pytest.mark.parametrize(
    ("kept", "other"),
    [
        ([1, 2], (1, 2)),  # a tuple is no JSON array
        (1, True),
        (1, 1.0),
        ({"a": 1}, {1: 1}),  # nor is a map with a number for a key
        ("1", b"1"),
    ],
)
def test_values_equal_only_to_python_are_judged_apart(kept: Any, other: Any) -> None:
    validator, reference = PatchValidator(OPEN), PatchValidator(OPEN, memo=False)
    validator.apply_patch(template(), _add("/spec/x", kept))
    assert _outcome(validator, template(), _add("/spec/x", other)) == _outcome(
        reference, template(), _add("/spec/x", other)
    )


@pytest.mark.parametrize("unpackable", [(1, 2), 2**70, "\ud800", [{"a": [1, (2,)]}], b""])
def test_a_patch_with_no_bytes_leaves_no_trace_in_the_next_ones_key(unpackable: Any) -> None:
    """A thread's Packer that failed half-way through one patch (a tuple, an integer msgpack
    cannot hold, a lone surrogate; bytes pack) gives the next patch its own bytes alone."""
    first = _patch_key([{"op": "add", "path": "/spec/a", "value": "x"}, *_add("/b", unpackable)])
    assert first is None or isinstance(unpackable, bytes)
    raw = _add("/spec/y", {"k": [1, "v", True, None, 1.5]})
    assert _patch_key(raw) == msgpack.packb(raw, strict_types=True)


def test_each_thread_keys_patches_with_its_own_packer() -> None:
    raws = [_add(f"/spec/x{i}", list(range(i * 50))) for i in range(8)]
    expected = [msgpack.packb(raw) for raw in raws]

    def keys(_: int) -> list[bytes | None]:
        return [_patch_key(raw) for raw in raws for _ in range(200)][::200]

    with ThreadPoolExecutor(4) as pool:
        assert all(got == expected for got in pool.map(keys, range(8)))


def test_a_refused_patch_is_not_kept_and_is_refused_every_time() -> None:
    validator = PatchValidator()
    for _ in range(3):
        with pytest.raises(PatchRejected, match="not allowed here"):
            validator.apply_patch(template(), _add("/spec/nodeName", "n"))
    assert not validator._patches


def test_what_reads_the_pod_is_judged_for_each_pod() -> None:
    """The same mount adds nothing where no hostPath volume is, and a host path where one is."""
    validator = PatchValidator(OPEN)
    validator.apply_patch(template(volumes=[{"name": "host", "emptyDir": {}}]), MOUNT)
    with pytest.raises(PatchRejected, match="hostPath"):
        validator.apply_patch(template(volumes=[HOST]), MOUNT)


def test_the_kept_patches_are_bounded() -> None:
    """By their bytes: the newest are kept, never more than ``KEPT_PATCH_BYTES`` of them."""
    validator = PatchValidator(OPEN)
    big = "v" * (PATCH_BYTES - 100)
    for i in range(2 * KEPT_PATCH_BYTES // PATCH_BYTES):
        validator.apply_patch(template(), _add("/metadata/annotations", {"n": f"{i}{big}"}))
    kept = validator._patches
    assert sum(map(len, kept)) <= KEPT_PATCH_BYTES < sum(map(len, kept)) + PATCH_BYTES
    newest, _ = validator.apply_patch(template(), _add("/metadata/annotations", {"n": f"{i}{big}"}))
    assert newest["metadata"]["annotations"] is next(reversed(kept.values())).ops[0]["value"]


def test_a_patch_without_bytes_is_still_checked() -> None:
    """A tuple of operations, or one too long to keep, has no key: it is checked as always."""
    validator = PatchValidator(OPEN)
    patched, _ = validator.apply_patch(template(), tuple(_add("/metadata/annotations", {"a": "b"})))
    assert patched["metadata"]["annotations"] == {"a": "b"}
    long = _add("/metadata/annotations", {f"k{i}": "v" * 100 for i in range(1000)})
    validator.apply_patch(template(), long)
    assert not validator._patches


def _outcome(validator: PatchValidator, pod: dict[str, Any], ops: Any) -> str:
    """What the validator decided, as text that tells types apart (True from 1, 1.0 from 1)."""
    before = copy.deepcopy(pod)
    try:
        patched, _ = validator.apply_patch(pod, copy.deepcopy(ops))
    except PatchRejected as exc:
        return f"refused: {exc}"
    assert pod == before
    return repr(patched)


SCALARS = st.sampled_from([0, 1, True, False, 1.0, -0.0, "1", "", None, float("nan"), 2**70])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["name", "hostPath", "path", "a"]), inner, max_size=3),
    ),
    max_leaves=6,
)
PATHS = st.sampled_from(
    [
        "/metadata/annotations",
        "/metadata/labels/x",
        "/spec/volumes",
        "/spec/volumes/-",
        "/spec/containers/0/volumeMounts",
        "/spec/containers/0/securityContext",
        "/spec/containers/0/env",
        "/spec/hostNetwork",
        "/spec/x",
    ]
)
OPERATIONS = st.lists(
    st.fixed_dictionaries(
        {"op": st.sampled_from(["add", "replace", "remove", "test"]), "path": PATHS},
        optional={"value": VALUES},
    ),
    min_size=1,
    max_size=3,
)
PODS = [template(), template(volumes=[HOST]), template(volumes=[{"name": "host", "emptyDir": {}}])]


@settings(max_examples=400, deadline=None)
@given(
    pool=st.lists(OPERATIONS, min_size=1, max_size=4),
    picks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, len(PODS) - 1)), max_size=12),
    policy=st.sampled_from([PatchPolicy(), OPEN]),
)
def test_a_validator_that_keeps_patches_decides_as_one_that_keeps_none(
    pool: list[list[dict[str, Any]]], picks: list[tuple[int, int]], policy: PatchPolicy
) -> None:
    keeping, reference = PatchValidator(policy), PatchValidator(policy, memo=False)
    for patch, pod in picks:
        ops = pool[patch % len(pool)]
        assert _outcome(keeping, PODS[pod], ops) == _outcome(reference, PODS[pod], ops)
