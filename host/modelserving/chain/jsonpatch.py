"""JSON Pointer (RFC 6901) and JSON Patch (RFC 6902), applied copy-on-write.

``check_shape`` checks a patch's form (a list of ``{op, path[, value]}`` maps, bounded in
depth); ``apply_one`` applies one operation so that only the maps and lists on its path are new
(``apply_step``: the same for an operation prepared once as a ``Step``, as the validator keeps a
patch it has checked; ``run_program``: a whole patch of plain changes in one pass, its paths
walked once);
``replaces_member`` tells an ``add`` that overwrites from one that creates. The patch policy
(``modelserving.chain.policy``) decides what may be applied; this module only applies.
"""

from __future__ import annotations

import builtins
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, FunctionType
from typing import Any

from modelserving.api.errors import PatchRejected
from modelserving.api.hook import PATCH_OP_KEYS, PATCH_OPS, PatchOperation
from modelserving.api.jsondata import MAX_DEPTH, NotPlain, json_copy, json_problem, plain_copy

_BAD_ESCAPE = re.compile(r"~(?![01])")


def split_pointer(path: str) -> list[str]:
    """RFC 6901 pointer -> unescaped reference tokens; raises PatchRejected when malformed."""
    return list(split_tokens(path))


MAX_POINTER_LENGTH = 1024
"""Longest JSON Pointer a patch may use; real Pod paths stay under 200 characters."""


def split_tokens(path: str) -> tuple[str, ...]:
    """``split_pointer`` as a tuple; a path seen before is answered from a dict (each operation's
    path is split by every check that reads it)."""
    tokens = _SPLIT.get(path)
    if tokens is not None:
        return tokens
    tokens = _split_new(path)
    if len(_SPLIT) >= _SPLIT_CACHE_SIZE:
        _SPLIT.clear()
    _SPLIT[path] = tokens
    return tokens


_SPLIT: dict[str, tuple[str, ...]] = {}
_SPLIT_CACHE_SIZE = 4096


def _split_new(path: str) -> tuple[str, ...]:
    if len(path) > MAX_POINTER_LENGTH:
        raise PatchRejected(
            path[:80] + "...", f"a JSON Pointer may have at most {MAX_POINTER_LENGTH} characters"
        )
    if path.count("/") > MAX_DEPTH:
        raise PatchRejected(path[:80] + "...", f"the path is more than {MAX_DEPTH} levels deep")
    if path == "":
        return ()
    if not path.startswith("/"):
        raise PatchRejected(path, "a JSON Pointer must start with '/'")
    if _BAD_ESCAPE.search(path):
        raise PatchRejected(path, "a JSON Pointer may use '~' only as '~0' or '~1'")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/"))


_SMALL = 16
"""A value with at most this many members (at its top) is checked and copied in one walk."""


def check_shape(raw: Any, copy_values: bool = True) -> list[PatchOperation]:
    """A patch must be a list (or tuple) of ``{op, path[, value]}`` maps with known ops and no
    other keys. ``copy_values=False`` is for operations nobody else holds (freshly decoded)."""
    if not isinstance(raw, list | tuple):
        raise PatchRejected("", f"a patch is a list of operations, not {type(raw).__name__}")
    ops: list[PatchOperation] = []
    for i, item in enumerate(raw):
        if type(item) is not dict and not isinstance(item, Mapping):
            raise PatchRejected("", f"operation {i} is not a map")
        op, path = item.get("op"), item.get("path")
        if type(op) is not str or op not in PATCH_OPS:
            raise PatchRejected(
                path if isinstance(path, str) else "",
                f"operation {i}: op {op!r} is not one of add, remove, replace, test",
            )
        if type(path) is not str:
            if not isinstance(path, str):
                raise PatchRejected("", f"operation {i}: path must be a string")
            path = str(path)
        if not item.keys() <= PATCH_OP_KEYS:
            extra = set(item) - PATCH_OP_KEYS
            raise PatchRejected(path, f"operation {i}: unknown keys {sorted(extra)}")
        has_value = "value" in item
        if not has_value and op != "remove":
            raise PatchRejected(path, f"operation {i}: '{op}' needs a value")
        # The value's depth counts from where it lands, so no sequence of operations can build a
        # Pod nested deeper than MAX_DEPTH (and no later walk of the Pod can exhaust the stack).
        room = MAX_DEPTH - len(split_tokens(path))
        if room < 0:
            raise PatchRejected(
                path, f"operation {i}: the path is more than {MAX_DEPTH} levels deep"
            )
        if not has_value:
            ops.append({"op": op, "path": path})  # type: ignore[typeddict-item]
            continue
        value = item["value"]
        kind = type(value)
        if not (kind is str or kind is bool or value is None):  # a scalar is plain as it is
            value = _checked_value(i, path, value, room, copy_values)
        ops.append({"op": op, "path": path, "value": value})  # type: ignore[typeddict-item]
    return ops


def _checked_value(i: int, path: str, value: Any, room: int, copy_values: bool) -> Any:
    """The value of operation ``i``, plain JSON nested at most ``room`` deep; copied when
    ``copy_values`` (it lands in the Pod by reference, and must not be shared with the plugin's
    own objects)."""
    small = type(value) not in (dict, list) or len(value) <= _SMALL
    if copy_values and small:
        try:
            return plain_copy(value, room)
        except NotPlain:
            pass  # json_problem says why
    problem = json_problem(value, room)
    if problem:
        raise PatchRejected(path, f"operation {i}: the value {problem}")
    return json_copy(value) if copy_values else value


def _shallow(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


@dataclass(frozen=True, slots=True)
class Step:
    """One operation ready to apply to many documents: its path split once, and each token
    read as a list index once (``step_of``)."""

    op: PatchOperation
    name: str
    tokens: tuple[str, ...]
    parents: tuple[tuple[str, int | None], ...]
    """The tokens down to the changed container, each with the list index it names (None: it
    names none)."""
    last: str | None
    """The last token (None: the path is the whole document)."""
    last_index: int | None


def step_of(op: PatchOperation) -> Step:
    """``op`` as a Step; raises PatchRejected when its path is malformed."""
    tokens = split_tokens(op["path"])
    if not tokens:
        return Step(op, op["op"], tokens, (), None, None)
    parents = tuple((token, array_index(token)) for token in tokens[:-1])
    return Step(op, op["op"], tokens, parents, tokens[-1], array_index(tokens[-1]))


def apply_one(doc: Any, op: PatchOperation, owned: set[int] | None = None) -> Any:
    """Apply one RFC 6902 operation to a copy-on-write copy of ``doc``: only the maps and lists on
    the operation's path are new, so nothing shared with ``doc`` changes. ``owned`` holds the ids
    of containers made by earlier operations of the same patch, which are changed in place
    instead of being copied again. (The tests check this against the jsonpatch library.)"""
    return apply_step(doc, step_of(op), set() if owned is None else owned)


def apply_step(doc: Any, step: Step, owned: set[int]) -> Any:
    """``apply_one`` of a Step (its path already split)."""
    name, op = step.name, step.op
    if name == "test":
        target = _resolve(doc, step.tokens, op["path"])
        if not json_equal(target, op["value"]):
            raise PatchRejected(op["path"], "test operation failed: the value differs")
        return doc
    last = step.last
    if last is None:
        if name == "remove":
            raise PatchRejected(
                op["path"], "patch does not apply to the Pod: cannot remove the Pod"
            )
        return op["value"]
    root = _owned_copy(doc, owned)
    parent = root
    for token, index in step.parents:
        kind = type(parent)
        if kind is dict and token in parent:  # most steps: a map's member
            key: str | int = token
        elif kind is list and index is not None and index < len(parent):
            key = index
        else:
            key = _member(parent, token, op["path"])
        child = parent[key]
        if id(child) not in owned:
            child = _shallow(child)
            owned.add(id(child))
            parent[key] = child
        parent = child
    # the commonest change, a map's member set, without the call (0.1 to 0.6 us a patch for
    # the built-ins'); everything else, and every refusal, is ``_change``'s
    if type(parent) is dict and (name == "add" or (name == "replace" and last in parent)):
        parent[last] = op["value"]
        return root
    _change(parent, last, op, step.last_index)
    return root


_APPEND, _SET, _GUARDED_SET, _REPLACE = range(4)
"""What a ``Program``'s write does: append values to a list (those of adjacent appends to the
same list together, a tuple), set a map's member, set one that must be absent or null (an
``add`` the allow-list lets create but not replace), replace an existing map member or list
item."""


@dataclass(frozen=True, slots=True)
class Program:
    """A patch of plain ``add``s and ``replace``s as one pass over a document (``program_of``):
    copy each map and list on the operations' paths once, in path order, then make each change
    in the copies, in the operations' order. The same result as applying the Steps one by one,
    without walking each operation's path again.

    ``run`` interprets it (``run_program``) the first time and from its second document on
    runs it as a Python function written for it (``compile_program``): a patch kept by its bytes
    runs again for every Pod, one met once (a patch not kept makes a new Program every time) is
    not worth compiling, nor is a program of more than ``COMPILED_STEPS`` copies and writes (its
    code would be large to compile and to keep)."""

    copies: tuple[tuple[int, str, int | None], ...]
    """Per copy: the copy (register) it is taken from, the token, and the list index it names;
    register 0 is the document's own copy, register n the copy of ``copies[n - 1]``."""
    writes: tuple[tuple[int, int, str, int | None, Any], ...]
    """Per operation: the register it changes, what it does (``_APPEND``...), the member, its
    list index (None: it names none) and the value (an append's: the values, a tuple)."""
    compiled: list[Callable[[Any], dict[str, Any] | None] | None] = field(
        default_factory=list, compare=False, repr=False
    )
    """What ``run`` knows of the program's runs, in a list (the dataclass is frozen): nothing
    before the first, None after it, then ``compile_program``'s function from the second."""

    def run(self, doc: Any) -> dict[str, Any] | None:
        """``run_program`` of ``doc``: interpreted the first time, compiled from the second."""
        compiled = self.compiled
        if compiled:
            function = compiled[0]
            if function is not None:
                return function(doc)
            if len(self.copies) + len(self.writes) <= COMPILED_STEPS:
                function = compiled[0] = compile_program(self)
                return function(doc)
        else:
            compiled.append(None)
        return run_program(doc, self)


def program_of(steps: Sequence[Step], guarded: Sequence[bool]) -> Program | None:
    """``steps`` as a Program, or None when one is not a plain change: a ``remove`` or a
    ``test``, the whole document, an ``add`` at a list index (it moves the items after it), a
    ``replace`` at ``-``, or an operation whose path goes through what an earlier one set (it
    changes that value, which must be copied first). ``guarded``: per step, an ``add`` that may
    not land on an existing member (``_GUARDED_SET``)."""
    registers: dict[tuple[str, ...], int] = {(): 0}
    copies: list[tuple[int, str, int | None]] = []
    writes: list[tuple[int, int, str, int | None, Any]] = []
    set_paths: set[tuple[str, ...]] = set()
    for step, guard in zip(steps, guarded, strict=True):
        name, last = step.name, step.last
        if last is None or name not in ("add", "replace"):
            return None
        tokens = step.tokens
        if any(tokens[:depth] in set_paths for depth in range(1, len(tokens))):
            return None
        register = 0
        for depth, (token, index) in enumerate(step.parents, 1):
            prefix = tokens[:depth]
            found = registers.get(prefix)
            if found is None:
                found = registers[prefix] = len(copies) + 1
                copies.append((register, token, index))
            register = found
        value = step.op["value"]
        if last == "-":
            if name != "add":
                return None
            if writes and writes[-1][:2] == (register, _APPEND):  # one extend for both
                writes[-1] = (register, _APPEND, last, None, (*writes[-1][4], value))
            else:
                writes.append((register, _APPEND, last, None, (value,)))
            continue
        if name == "add" and step.last_index is not None:
            return None
        kind = _REPLACE if name == "replace" else _GUARDED_SET if guard else _SET
        writes.append((register, kind, last, step.last_index, value))
        set_paths.add(tokens)
    return Program(tuple(copies), tuple(writes))


def compile_program(program: Program) -> Callable[[Any], dict[str, Any] | None]:
    """A function that does what ``run_program`` does with ``program``, written out: a few lines
    per copy and per write, no loop, no dispatch on what a write does (inference-engine's
    program: 1.41 against 2.02 us, ``timeit``). Its text holds only register numbers and
    positions in tuples of the program's tokens, indexes and values (``K``, ``X``, ``V``), never
    a token or a value, so no patch can write code; and it depends only on the program's shape
    (``_shape``), so its code is compiled once per shape (about 0.5 ms) and each program gets a
    function of that code over its own tuples (about a microsecond)."""
    shape = _shape(program)
    code = _CODES.get(shape)
    if code is None:
        code = _code_of(program)
        with _CODES_LOCK:
            while len(_CODES) >= _CODES_KEPT:
                _CODES.pop(next(iter(_CODES)))
            _CODES[shape] = code
    tokens: list[str] = []
    indexes: list[int | None] = []
    for _, token, index in program.copies:
        tokens.append(token)
        indexes.append(index)
    for _, _, last, index, _ in program.writes:
        tokens.append(last)
        indexes.append(index)
    scope = {
        "__builtins__": builtins,
        "K": tuple(tokens),
        "X": tuple(indexes),
        "V": tuple(write[4] for write in program.writes),
    }
    run: Callable[[Any], dict[str, Any] | None] = FunctionType(code, scope)
    return run


def _shape(program: Program) -> tuple[Any, ...]:
    """What the text ``_code_of`` writes depends on: each copy's source and whether it names a
    list index, each write's register, what it does and whether it names one."""
    return (
        tuple((source, index is not None) for source, _, index in program.copies),
        tuple(
            (register, what, index is not None) for register, what, _, index, _ in program.writes
        ),
    )


def _code_of(program: Program) -> CodeType:
    lines = ["def run(doc):", "    if type(doc) is not dict:", "        return None"]
    lines.append("    r0 = dict(doc)")
    add = lines.append
    k = 0  # the position of the next token and index in K and X
    for n, (source, _, index) in enumerate(program.copies, 1):
        add(f"    p = r{source}")
        add("    if type(p) is dict:")
        add(f"        key = K[{k}]")
        add("        c = p.get(key)")
        if index is not None:
            add(f"    elif type(p) is list and X[{k}] < len(p):")
            add(f"        key = X[{k}]")
            add("        c = p[key]")
        add("    else:")
        add("        return None")
        add("    if type(c) is dict:")
        add(f"        r{n} = p[key] = dict(c)")
        add("    elif type(c) is list:")
        add(f"        r{n} = p[key] = list(c)")
        add("    else:")
        add("        return None")
        k += 1
    for v, (register, what, _, index, _) in enumerate(program.writes):
        add(f"    t = r{register}")
        if what == _SET:
            add("    if type(t) is not dict:")
            add("        return None")
            add(f"    t[K[{k}]] = V[{v}]")
        elif what == _APPEND:
            add("    if type(t) is not list:")
            add("        return None")
            add(f"    t.extend(V[{v}])")
        elif what == _GUARDED_SET:
            add(f"    if type(t) is not dict or t.get(K[{k}]) is not None:")
            add("        return None")
            add(f"    t[K[{k}]] = V[{v}]")
        else:  # _REPLACE
            add("    if type(t) is dict:")
            add(f"        if K[{k}] not in t:")
            add("            return None")
            add(f"        t[K[{k}]] = V[{v}]")
            if index is not None:
                add(f"    elif type(t) is list and X[{k}] < len(t):")
                add(f"        t[X[{k}]] = V[{v}]")
            add("    else:")
            add("        return None")
        k += 1
    add("    return r0")
    module = compile("\n".join(lines), "<patch program>", "exec")
    return next(c for c in module.co_consts if isinstance(c, CodeType))


_CODES: dict[tuple[Any, ...], CodeType] = {}
"""Compiled programs by shape (``compile_program``), the oldest dropped past ``_CODES_KEPT``;
changed under ``_CODES_LOCK`` (the validator serves several threads)."""
_CODES_KEPT = 256
_CODES_LOCK = threading.Lock()
COMPILED_STEPS = 64
"""The most copies and writes of a program ``Program.run`` compiles (the built-ins' have 9 to
12): the code of a program of a thousand deep writes took seconds and a gigabyte to compile."""


def run_program(doc: Any, program: Program) -> dict[str, Any] | None:
    """``doc`` with the program's changes, built copy-on-write (nothing shared with ``doc``
    changes); None when the document is not as the program needs it (a member or index on the
    way is missing or not a map or list, a ``replace`` finds nothing, a guarded ``add`` lands on
    a member, a ``-`` is in a map): the Steps then apply one by one, and refuse or apply
    as they do."""
    if type(doc) is not dict:
        return None
    root: dict[str, Any] = dict(doc)
    registers: list[Any] = [root]
    keep = registers.append
    for source, token, index in program.copies:
        parent = registers[source]
        if type(parent) is dict:
            key: str | int = token
            child = parent.get(token)  # None, like a missing member, is not a map or list
        elif type(parent) is list and index is not None and index < len(parent):
            key = index
            child = parent[index]
        else:
            return None
        if type(child) is dict:
            child = parent[key] = dict(child)
        elif type(child) is list:
            child = parent[key] = list(child)
        else:
            return None
        keep(child)
    for register, what, last, index, value in program.writes:
        target = registers[register]
        if type(target) is dict:
            if what == _SET:
                target[last] = value
            elif what == _APPEND:  # '-' names a map's member: rare, the Steps apply it
                return None
            elif what == _REPLACE:
                if last not in target:
                    return None
                target[last] = value
            elif target.get(last) is not None:  # a guarded add over a member
                return None
            else:
                target[last] = value
        elif type(target) is list:
            if what == _APPEND:
                target.extend(value)
            elif what == _REPLACE and index is not None and index < len(target):
                target[index] = value
            else:
                return None
        else:
            return None
    return root


def _owned_copy(value: Any, owned: set[int]) -> Any:
    """``value`` itself when this patch made it, else a shallow copy that this patch now owns."""
    if id(value) in owned:
        return value
    copy = _shallow(value)
    owned.add(id(copy))
    return copy


def _change(parent: Any, last: str, op: PatchOperation, index: int | None) -> None:
    """Apply ``op`` to the member ``last`` of ``parent`` (``index``: the list index ``last``
    names, None when it names none)."""
    path, name = op["path"], op["op"]
    if isinstance(parent, dict):
        if name == "add":
            parent[last] = op["value"]
        elif last not in parent:
            raise PatchRejected(path, f"patch does not apply to the Pod: no member '{last}'")
        elif name == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
        return
    if not isinstance(parent, list):
        raise PatchRejected(
            path, f"patch does not apply to the Pod: a {type(parent).__name__} has no members"
        )
    if name == "add" and last == "-":
        parent.append(op["value"])
        return
    limit = len(parent) + (1 if name == "add" else 0)
    if index is None or index >= limit:
        raise PatchRejected(path, f"patch does not apply to the Pod: no index '{last}'")
    if name == "add":
        parent.insert(index, op["value"])
    elif name == "remove":
        del parent[index]
    else:
        parent[index] = op["value"]


def array_index(token: str) -> int | None:
    """The list index an array index token names: ASCII digits (``str.isdigit`` is true of
    '²' too, which ``int`` refuses) without leading zeros (RFC 6901); None for any other."""
    if not token.isascii() or not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        return None
    return int(token)


def _member(parent: Any, token: str, path: str) -> Any:
    """The key or index ``token`` names in ``parent``, which must exist."""
    if isinstance(parent, dict):
        if token in parent:
            return token
    elif isinstance(parent, list):
        index = array_index(token)
        if index is not None and index < len(parent):
            return index
    raise PatchRejected(path, f"patch does not apply to the Pod: '{token}' does not exist")


def _resolve(doc: Any, tokens: Sequence[str], path: str) -> Any:
    for token in tokens:
        doc = doc[_member(doc, token, path)]
    return doc


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: unlike ``==``, true is not 1 and 1 is not 1.0... except that JSON has one
    number type, so 1 and 1.0 are equal; true and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(json_equal, a, b))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def step_replaces_member(doc: Any, step: Step) -> bool:
    """``replaces_member`` of a Step's path: the same answer, its tokens and list indexes read
    once (``step_of``) instead of for every document."""
    if step.last is None:
        return True
    parent = doc
    for token, index in step.parents:
        kind = type(parent)
        if kind is dict:
            if token not in parent:
                return False
            parent = parent[token]
        elif isinstance(parent, list):
            if index is None or index >= len(parent):
                return False  # it will not apply at all
            parent = parent[index]
        elif isinstance(parent, Mapping) and token in parent:
            parent = parent[token]
        else:
            return False
    return _has_member(parent, step.last)


def replaces_member(doc: Any, path: str) -> bool:
    """Whether an 'add' at ``path`` would overwrite a non-null object member (RFC 6902 4.1)."""
    tokens = split_tokens(path)
    if not tokens:
        return True
    parent = doc
    for token in tokens[:-1]:
        # exact types first: ``isinstance`` of Mapping (an ABC) is slow to say no
        kind = type(parent)
        if kind is not dict and isinstance(parent, list):
            index = array_index(token)
            if index is None or index >= len(parent):
                return False  # it will not apply at all
            parent = parent[index]
        elif (kind is dict or isinstance(parent, Mapping)) and token in parent:
            parent = parent[token]
        else:
            return False
    return _has_member(parent, tokens[-1])


def _has_member(parent: Any, last: str) -> bool:
    """Whether ``parent`` (where a path led) is a map with a non-null member ``last``."""
    return (
        type(parent) is dict or (not isinstance(parent, list) and isinstance(parent, Mapping))
    ) and parent.get(last) is not None
