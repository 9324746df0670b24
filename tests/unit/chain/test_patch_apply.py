"""The validator's own RFC 6902 applier (copy-on-write) against the jsonpatch library."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api.errors import PatchRejected
from modelserving.api.policy import PatchPolicy, PathRule, default_path_rules
from modelserving.chain import jsonpatch as patch_module
from modelserving.chain.grants import may_grant
from modelserving.chain.jsonpatch import (
    _CODES,
    apply_one,
    apply_step,
    compile_program,
    program_of,
    replaces_member,
    run_program,
    step_of,
    step_replaces_member,
)
from modelserving.chain.policy import PatchValidator
from modelserving.chain.pss import pod_facts, weakenings
from tests.unit.chain.racing import race

scalars = st.none() | st.integers(-5, 5) | st.text(alphabet="ab~/", max_size=3)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet="ab~/", max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)
tokens = st.sampled_from(["a", "b", "0", "1", "2", "-", "00", "01", "~0", "~1", "", "a~1b"])
paths = st.lists(tokens, max_size=3).map(lambda ts: "".join("/" + t for t in ts))


def oracle(doc: Any, op: dict[str, Any]) -> Any:
    try:
        return jsonpatch.apply_patch(copy.deepcopy(doc), [op])
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
        return PatchRejected
    except (TypeError, KeyError, IndexError, ValueError):
        return PatchRejected


def ours(doc: Any, op: dict[str, Any]) -> Any:
    try:
        return apply_one(doc, op)  # type: ignore[arg-type]
    except PatchRejected:
        return PatchRejected


@settings(max_examples=1500, deadline=None)
@given(
    doc=st.dictionaries(st.sampled_from(["a", "b", "0", "a/b"]), values, max_size=3),
    name=st.sampled_from(["add", "remove", "replace", "test"]),
    path=paths,
    value=values,
)
def test_same_result_as_jsonpatch_and_the_input_unchanged(
    doc: dict[str, Any], name: str, path: str, value: Any
) -> None:
    op: dict[str, Any] = {"op": name, "path": path}
    if name != "remove":
        op["value"] = value
    before = copy.deepcopy(doc)
    assert ours(doc, op) == oracle(doc, op)
    assert doc == before


operations = st.builds(
    lambda name, path, value: (
        {"op": name, "path": path}
        if name == "remove"
        else {"op": name, "path": path, "value": value}
    ),
    st.sampled_from(["add", "remove", "replace", "test"]),
    paths,
    values,
)


def ours_whole(doc: Any, steps: list[Any]) -> Any:
    """The patch applied as the validator applies it: each step in turn, one ``owned`` set."""
    owned: set[int] = set()
    try:
        for step in steps:
            doc = apply_step(doc, step, owned)
    except PatchRejected:
        return PatchRejected
    return doc


@settings(max_examples=800, deadline=None)
@given(
    docs=st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "0", "a/b"]), values, max_size=3),
        min_size=2,
        max_size=2,
    ),
    patch=st.lists(operations, min_size=1, max_size=5),
)
def test_whole_patch_of_steps_as_jsonpatch_on_each_document(
    docs: list[dict[str, Any]], patch: list[dict[str, Any]]
) -> None:
    """A patch's Steps, made once, applied to one document after another (as the validator
    applies a kept patch to each Pod): each result is the jsonpatch library's, and neither
    document nor the operations change (later operations change in place only what earlier
    ones of the same patch copied)."""
    steps = [step_of(op) for op in patch]  # type: ignore[arg-type]
    kept = copy.deepcopy(patch)
    for doc in docs:
        before = copy.deepcopy(doc)
        try:
            expected = jsonpatch.apply_patch(copy.deepcopy(doc), copy.deepcopy(patch))
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
            expected = PatchRejected
        except (TypeError, KeyError, IndexError, ValueError):
            expected = PatchRejected
        if expected is not PatchRejected and any(op["op"] == "test" for op in patch):
            return  # jsonpatch's test uses ==: true is 1 to it (the test above)
        assert ours_whole(doc, steps) == expected
        assert doc == before
        assert patch == kept


def test_test_operation_tells_true_from_one() -> None:
    """JSON's true is not the number 1 (jsonpatch, using ==, says they are equal)."""
    assert ours({"a": True}, {"op": "test", "path": "/a", "value": 1}) is PatchRejected
    assert ours({"a": 1}, {"op": "test", "path": "/a", "value": 1.0}) == {"a": 1}


SEGMENTS = st.sampled_from(
    [
        "metadata",
        "annotations",
        "labels",
        "spec",
        "containers",
        "initContainers",
        "ephemeralContainers",
        "0",
        "1",
        "-",
        "env",
        "args",
        "image",
        "resources",
        "securityContext",
        "privileged",
        "capabilities",
        "add",
        "ports",
        "hostPort",
        "volumes",
        "hostPath",
        "volumeMounts",
        "hostNetwork",
        "runtimeClassName",
        "nodeSelector",
        "tolerations",
        "livenessProbe",
        "httpGet",
        "host",
        "container.apparmor.security.beta.kubernetes.io/main",
        "runAsUser",
        "runAsNonRoot",
        "name",
        "drop",
        "sysctls",
        "seccompProfile",
        "appArmorProfile",
        "seLinuxOptions",
        "windowsOptions",
        "procMount",
        "allowPrivilegeEscalation",
        "readOnly",
        "recursiveReadOnly",
        "mountPropagation",
        "subPath",
        "lifecycle",
        "nfs",
        "type",
    ]
)
PRIVILEGED_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {"x": "y"}},
    "spec": {
        "securityContext": {"runAsNonRoot": True},
        "volumes": [{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/h"}}],
        "containers": [
            {
                "name": "main",
                "image": "i",
                "env": [{"name": "A"}],
                "ports": [{"containerPort": 80}],
                "volumeMounts": [
                    {
                        "name": "h",
                        "mountPath": "/h",
                        "readOnly": True,
                        "recursiveReadOnly": "Enabled",
                    }
                ],
                "securityContext": {
                    "capabilities": {"drop": ["ALL"]},
                    "allowPrivilegeEscalation": False,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
            }
        ],
    },
}
grant_values = (
    st.sampled_from(
        [
            True,
            0,
            "unconfined",
            {"privileged": True},
            {"add": ["SYS_ADMIN"]},
            {"path": "/"},
            [{"hostPort": 80}],
            {"host": "1.2.3.4"},
            {"hostPath": {"path": "/"}, "name": "w"},
            {"name": "side", "image": "i", "securityContext": {"privileged": True}},
            {"name": "side", "image": "i"},
            "Disabled",
            "Bidirectional",
            "Unconfined",
            [{"name": "kernel.msgmax", "value": "1"}],
            {"type": "Unconfined"},
            {"server": "nfs", "path": "/"},
            ["NET_RAW"],
        ]
    )
    | values
)


@settings(max_examples=1500, deadline=None)
@given(
    name=st.sampled_from(["add", "remove", "replace"]),
    segments=st.lists(SEGMENTS, min_size=1, max_size=5),
    value=grant_values,
)
def test_operations_judged_neutral_never_change_privileges(
    name: str, segments: list[str], value: Any
) -> None:
    """The validator skips the privilege check for operations ``may_grant`` calls neutral;
    for any operation whatsoever, a change in privileges implies it was not called neutral."""
    op: dict[str, Any] = {"op": name, "path": "".join("/" + s.replace("/", "~1") for s in segments)}
    if name != "remove":
        op["value"] = value
    after = ours(PRIVILEGED_POD, op)
    if after is PatchRejected or not isinstance(after, dict):
        return
    if next(weakenings(pod_facts(PRIVILEGED_POD), pod_facts(after)), None):
        assert may_grant(op)  # type: ignore[arg-type]


def steps_result(doc: Any, steps: list[Any], guarded: list[bool]) -> Any:
    """The validator's one-by-one path: a guarded 'add' over a member is refused."""
    owned: set[int] = set()
    try:
        for step, guard in zip(steps, guarded, strict=True):
            if guard and replaces_member(doc, step.op["path"]):
                return PatchRejected
            doc = apply_step(doc, step, owned)
    except PatchRejected:
        return PatchRejected
    return doc


def shared(before: Any, after: Any) -> set[int]:
    """The ids of the containers of ``before`` that ``after`` still holds (the same objects)."""
    found: set[int] = set()
    originals: dict[int, Any] = {}
    stack = [before]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            originals[id(node)] = node
            stack.extend(node.values() if isinstance(node, dict) else node)
    stack = [after]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            if originals.get(id(node)) is node:
                found.add(id(node))
            stack.extend(node.values() if isinstance(node, dict) else node)
    return found


plain_operations = st.builds(
    lambda name, path, value: {"op": name, "path": path, "value": value},
    st.sampled_from(["add", "replace"]),
    paths,
    values,
)


@settings(max_examples=1500, deadline=None)
@given(
    docs=st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "0", "-", "a/b"]), values, max_size=3),
        min_size=2,
        max_size=2,
    ),
    patch=st.lists(plain_operations | operations, min_size=1, max_size=6),
    guards=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_program_does_what_the_steps_do(
    docs: list[dict[str, Any]], patch: list[dict[str, Any]], guards: list[bool]
) -> None:
    """A patch run as one Program, made once, on one document after another: wherever it gives
    a result, the Steps give the same, sharing the same parts of the document; where the Steps
    refuse, it gives none. Neither the document nor the operations change."""
    steps = [step_of(op) for op in patch]  # type: ignore[arg-type]
    guarded = [g and op["op"] == "add" for g, op in zip(guards, patch, strict=False)]
    program = program_of(steps, guarded)
    kept = copy.deepcopy(patch)
    for doc in docs:
        before = copy.deepcopy(doc)
        expected = steps_result(doc, steps, guarded)
        got = None if program is None else run_program(doc, program)
        if got is not None:
            assert got == expected
            assert shared(doc, got) == shared(doc, expected)
        assert doc == before
        if program is not None:  # written out, it does what it does interpreted
            compiled = compile_program(program)(doc)
            assert compiled == got
            if got is not None:
                assert shared(doc, compiled) == shared(doc, got)
            assert doc == before
        assert patch == kept


def test_the_builtins_patches_run_as_programs() -> None:
    """The patches the built-ins make (appends, members set, an item replaced) take the
    one-pass path, and give what the Steps give."""
    pod = copy.deepcopy(PRIVILEGED_POD)
    patch = [
        {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "B", "value": "1"}},
        {"op": "replace", "path": "/spec/containers/0/env/0", "value": {"name": "A", "value": "x"}},
        {"op": "add", "path": "/spec/containers/0/resources", "value": {"limits": {"cpu": "1"}}},
        {"op": "add", "path": "/spec/volumes", "value": [{"name": "dshm", "emptyDir": {}}]},
        {"op": "add", "path": "/metadata/annotations/k", "value": "v"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "j"},
    ]
    steps = [step_of(op) for op in patch]  # type: ignore[arg-type]
    guarded = [False, False, True, False, False, False]
    program = program_of(steps, guarded)
    assert program is not None
    assert run_program(pod, program) == steps_result(pod, steps, guarded)
    assert pod == PRIVILEGED_POD
    # a guarded add over a member has no result of its own (the Steps refuse it)
    pod["spec"]["containers"][0]["resources"] = {"limits": {}}
    assert steps_result(pod, steps, guarded) is PatchRejected
    assert run_program(pod, program) is None


def test_what_a_program_leaves_to_the_steps() -> None:
    """Removals, tests, inserts at a list index and changes inside a value set by an earlier
    operation are not made into Programs."""

    def program(*ops: dict[str, Any]) -> Any:
        steps = [step_of(op) for op in ops]  # type: ignore[arg-type]
        return program_of(steps, [False] * len(steps))

    assert program({"op": "remove", "path": "/a"}) is None
    assert program({"op": "test", "path": "/a", "value": 1}) is None
    assert program({"op": "add", "path": "/a/0", "value": 1}) is None
    assert program({"op": "add", "path": "", "value": {}}) is None
    assert program({"op": "replace", "path": "/a/-", "value": 1}) is None
    assert (
        program({"op": "add", "path": "/a", "value": {}}, {"op": "add", "path": "/a/b", "value": 1})
        is None
    )
    # the other way round both are plain: the later one replaces what the earlier one changed
    assert program(
        {"op": "add", "path": "/a/b", "value": 1}, {"op": "add", "path": "/a", "value": {}}
    )


def test_a_program_gives_no_result_where_the_document_differs() -> None:
    """Where a document is not as the program needs it, the program gives no result (the Steps
    then refuse or apply): an item past a list's end, a member a replace does not find, '-' in
    a map, a path through a scalar."""
    doc = {"a": [1, 2], "m": {"k": 1}, "s": "text"}

    def run(op: dict[str, Any]) -> Any:
        program = program_of([step_of(op)], [False])  # type: ignore[arg-type]
        assert program is not None
        return run_program(doc, program)

    assert run({"op": "replace", "path": "/a/2", "value": 3}) is None
    assert run({"op": "replace", "path": "/m/x", "value": 3}) is None
    assert run({"op": "add", "path": "/m/-", "value": 3}) is None
    assert run({"op": "add", "path": "/s/x", "value": 3}) is None
    assert run({"op": "add", "path": "/a/x", "value": 3}) is None
    assert run({"op": "replace", "path": "/a/1", "value": 3}) == {**doc, "a": [1, 3]}
    assert doc == {"a": [1, 2], "m": {"k": 1}, "s": "text"}


class _ListKind(list):  # type: ignore[type-arg]
    """A list of another type: a Pod read from elsewhere may hold one."""


class _MapKind(Mapping[str, Any]):
    """A read-only map that is not a dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_an_add_over_a_member_is_seen_through_lists_and_maps_of_any_type() -> None:
    """``replaces_member`` walks list subclasses and non-dict maps as it walks lists and dicts:
    a guarded 'add' over an existing member is refused whatever types hold it."""
    for containers in ([{"image": "i"}], _ListKind([{"image": "i"}])):
        for spec in ({"containers": containers}, _MapKind({"containers": containers})):
            doc = {"spec": spec}
            assert replaces_member(doc, "/spec/containers/0/image")
            assert not replaces_member(doc, "/spec/containers/0/args")
            assert not replaces_member(doc, "/spec/containers/1/image")
    assert replaces_member({"m": _MapKind({"k": 1})}, "/m/k")
    assert not replaces_member({"m": _ListKind([1])}, "/m/0")


def test_a_guarded_add_through_a_list_subclass_is_refused() -> None:
    """An allow-list that lets plugins create a container's image but not replace it refuses
    an 'add' over the image, also where the Pod's containers are a list subclass."""
    policy = PatchPolicy(
        allowed_paths=[
            *default_path_rules(),
            PathRule(path="/spec/containers/*/image", ops=["add"]),
        ]
    )
    for containers in (
        [{"name": "c", "image": "good"}],
        _ListKind([{"name": "c", "image": "good"}]),
    ):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
        pod["spec"] = {"containers": containers}
        patch = [{"op": "add", "path": "/spec/containers/0/image", "value": "evil"}]
        with pytest.raises(PatchRejected, match="replaces it"):
            PatchValidator(policy).apply(pod, patch)


def test_adjacent_appends_to_one_list_are_one_change() -> None:
    """Appends to one list that follow each other are made together, in their order; a change
    elsewhere between them keeps them apart."""
    patch = [
        {"op": "add", "path": "/a/-", "value": 1},
        {"op": "add", "path": "/a/-", "value": 2},
        {"op": "add", "path": "/a/-", "value": 3},
        {"op": "add", "path": "/m/x", "value": 1},
        {"op": "add", "path": "/a/-", "value": 4},
        {"op": "add", "path": "/b/-", "value": 5},
    ]
    steps = [step_of(op) for op in patch]  # type: ignore[arg-type]
    program = program_of(steps, [False] * len(steps))
    assert program is not None and len(program.writes) == 4
    doc = {"a": [0], "b": [], "m": {}}
    got = run_program(doc, program)
    assert got == steps_result(doc, steps, [False] * len(steps))
    assert got == {"a": [0, 1, 2, 3, 4], "b": [5], "m": {"x": 1}}
    assert doc == {"a": [0], "b": [], "m": {}}


def test_a_guarded_add_through_a_non_ascii_digit_is_refused_as_not_applying() -> None:
    """'²' is a digit to ``str.isdigit`` but no list index: the patch does not apply (a
    PatchRejected saying so), rather than the check failing on ``int('²')``."""
    assert not replaces_member({"a": [{"b": 1}]}, "/a/²/b")
    policy = PatchPolicy(
        allowed_paths=[*default_path_rules(), PathRule(path="/spec/containers/*/env", ops=["add"])]
    )
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = {"containers": [{"name": "c", "image": "i", "env": []}]}
    with pytest.raises(PatchRejected, match="does not exist"):
        PatchValidator(policy).apply(
            pod, [{"op": "add", "path": "/spec/containers/²/env", "value": []}]
        )


@settings(max_examples=1000, deadline=None)
@given(
    doc=st.dictionaries(st.sampled_from(["a", "b", "0", "a/b"]), values, max_size=3),
    path=paths,
)
def test_a_steps_answer_to_replaces_member_is_the_paths(doc: dict[str, Any], path: str) -> None:
    """``step_replaces_member`` reads the path as a Step (split once, for every Pod of a kept
    patch); its answer is ``replaces_member``'s."""
    try:
        step = step_of({"op": "add", "path": path, "value": 1})
    except PatchRejected:
        return
    assert step_replaces_member(doc, step) is replaces_member(doc, path)


def test_a_compiled_programs_code_holds_no_token_or_value() -> None:
    """Two programs of one shape share one compiled code, whatever their tokens and values
    (here tokens that would be code if written into it); each runs with its own."""
    plain = program_of([step_of({"op": "add", "path": "/a/b", "value": 1})], [False])
    hostile = '"]); import os; os._exit(1); x = (["'
    tricky = program_of(
        [step_of({"op": "add", "path": f"/{hostile}/{hostile}", "value": "\n'\""})], [False]
    )
    assert plain is not None and tricky is not None
    _CODES.clear()
    assert compile_program(plain)({"a": {}}) == {"a": {"b": 1}}
    assert compile_program(tricky)({hostile: {}}) == {hostile: {hostile: "\n'\""}}
    assert len(_CODES) == 1


def test_a_program_is_interpreted_once_then_runs_compiled() -> None:
    program = program_of([step_of({"op": "add", "path": "/a/-", "value": 2})], [False])
    assert program is not None and not program.compiled
    assert program.run({"a": [1]}) == {"a": [1, 2]}
    assert program.compiled == [None]  # met once: not compiled
    assert program.run({"a": [0]}) == {"a": [0, 2]}
    assert program.compiled[0] is not None
    assert program.run({"a": {}}) is None  # the Steps apply it (and refuse it)


def test_a_large_program_is_never_compiled() -> None:
    """Found by a review helper: the code of a program of a thousand deep writes took seconds
    and a gigabyte to compile."""
    ops = [{"op": "add", "path": f"/x{i}", "value": i} for i in range(patch_module.COMPILED_STEPS)]
    program = program_of([step_of(op) for op in ops], [False] * len(ops))  # type: ignore[arg-type]
    assert program is not None and len(program.writes) == patch_module.COMPILED_STEPS
    bigger = program_of(
        [step_of({"op": "add", "path": f"/x{i}", "value": i}) for i in range(65)],
        [False] * 65,
    )
    assert bigger is not None
    for _ in range(3):
        assert bigger.run({}) == {f"x{i}": i for i in range(65)}
    assert bigger.compiled == [None]
    for _ in range(2):
        program.run({})
    assert program.compiled[0] is not None


def test_compiled_shapes_are_kept_safely_by_many_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a review helper: two threads evicting the oldest shape at once raised KeyError
    or RuntimeError, which refused a valid patch. Here every compile is of a new shape and
    takes no time, so the threads meet in the eviction again and again."""
    monkeypatch.setattr(patch_module, "_CODES_KEPT", 4)
    one = program_of([step_of({"op": "add", "path": "/a", "value": 1})], [False])
    assert one is not None
    code = patch_module._code_of(one)
    monkeypatch.setattr(patch_module, "_code_of", lambda program: code)
    shapes = itertools.count()
    monkeypatch.setattr(patch_module, "_shape", lambda program: next(shapes))
    errors: list[BaseException] = []

    def compile_many() -> None:
        try:
            for _ in range(20_000):
                compile_program(one)
        except BaseException as exc:
            errors.append(exc)

    race([compile_many] * 4)
    assert errors == []
    assert len(patch_module._CODES) <= 4
