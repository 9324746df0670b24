"""Reading Kubernetes manifests from YAML or JSON files (multi-document, ``kind: List``) and
writing YAML streams. Used by the CLI commands.

Reading accepts only what kubectl would send to the API server as JSON: UTF-8 text within the
limits of ``controller.yamltext`` (aliases that expand little and never recursively, at most
``MAX_DEPTH`` levels of nesting, timestamps kept as text); string map keys; no binary data,
sets, ordered maps, NaN or infinity. Every refusal is a ``ManifestError`` naming the file, the
document and, where there is one, the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from modelserving.api.jsondata import describe, find_json_problem
from modelserving.api.validation import format_loc
from modelserving.cli.errors import ManifestError as ManifestError
from modelserving.controller.yamltext import (
    MAX_DEPTH,
    YamlInvalid,
    YamlRefused,
    load_all,
    read_bytes,
)

_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


def read_documents(path: str) -> Iterator[dict[str, Any]]:
    """Every object in ``path`` (``-`` is standard input); Lists are flattened."""
    text = _read_text(path)
    try:
        docs = load_all(text)
    except YamlRefused as exc:
        raise ManifestError(f"{path}: {exc}") from None
    except YamlInvalid as exc:
        raise ManifestError(f"{path}: not valid YAML: {exc}") from None
    for number, doc in enumerate(docs, 1):
        if doc is None:
            continue
        where = f"{path}: document {number}"
        if not isinstance(doc, dict):
            raise ManifestError(f"{where} is not a map")
        _check_json(where, doc)
        kind = _kind(where, doc)
        if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
            yield from _list_items(where, doc)
        else:
            yield doc


def _read_text(path: str) -> str:
    try:
        data = read_bytes(path)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{path}: not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


def _kind(where: str, doc: dict[str, Any]) -> str:
    kind = doc.get("kind")
    if kind is None:
        return ""
    if not isinstance(kind, str):
        raise ManifestError(f"{where}: kind must be a string, not {describe(kind)}")
    return kind


def _list_items(where: str, doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    items = doc.get("items")
    if not isinstance(items, list):
        got = "missing" if "items" not in doc else describe(items)
        raise ManifestError(
            f"{where}: a {doc['kind']} needs items to be a list of objects, but items is {got}"
        )
    for i, item in enumerate(items):
        item_where = f"{where}, items[{i}]"
        if not isinstance(item, dict):
            raise ManifestError(f"{item_where} is not a map but {describe(item)}")
        _kind(item_where, item)
        yield item


_REFUSED: dict[type, str] = {
    bytes: "binary data (!!binary) has no JSON form; give the base64 text as a string",
    set: "a set (!!set) has no JSON form; use a list",
    tuple: "an ordered map (!!omap, !!pairs) has no JSON form; use a map",
}


def _check_json(where: str, doc: dict[str, Any]) -> None:
    """Refuse values JSON cannot hold, naming the field and what to write instead."""
    found = find_json_problem(doc, max_depth=MAX_DEPTH + 1)
    if found is None:
        return
    path = list(found.path)
    if found.kind == "key":
        reason = f"map key {found.offender!r} is {describe(found.offender)}, not a string; quote it"
    elif found.kind == "float":
        what = "NaN" if math.isnan(found.offender) else "infinity"
        reason = f"{what} has no JSON form; quote it if a string was meant"
    else:
        cls = type(found.offender)
        if cls is tuple and path and isinstance(path[-1], int):
            path.pop()  # !!omap and !!pairs load as lists of tuples: blame the list
        reason = _REFUSED.get(cls, f"{describe(found.offender)} has no JSON form")
    field = format_loc(path)
    raise ManifestError(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")


class _Dumper(_BaseDumper):  # type: ignore[misc]
    """Never writes anchors/aliases: every object is printed in full, as kubectl expects.

    Always used with ``sort_keys=False, default_flow_style=False``. Dicts, lists and strings take
    a direct path to their nodes, and the implicit tag of each plain scalar is cached: the output
    is byte-for-byte SafeDumper's, about a third faster on a large stream.
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_data(self, data: Any) -> Any:
        cls = type(data)
        if cls is str:
            if _ambiguous_for_kubectl(data):
                return ScalarNode(_STR_TAG, data, style="'")
            return ScalarNode(_STR_TAG, data)
        if cls is dict:
            rep = self.represent_data
            pairs = [(rep(k), rep(v)) for k, v in data.items()]
            return MappingNode(_MAP_TAG, pairs, flow_style=False)
        if cls is list:
            rep = self.represent_data
            return SequenceNode(_SEQ_TAG, [rep(v) for v in data], flow_style=False)
        return super().represent_data(data)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not ScalarNode or self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)
        if not implicit[0]:
            return self.DEFAULT_SCALAR_TAG
        tag = _PLAIN_TAGS.get(value)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(_PLAIN_TAGS) < _PLAIN_TAGS_MAX:
                _PLAIN_TAGS[value] = tag
        return tag


# Plain scalars that YAML 1.1 readers such as kubectl's (go-yaml v2) take for a boolean, null or
# number although PyYAML would write them unquoted: ``y``, ``n``, ``on``, ``0o17``, ``1e3``...
# Every string starting like a number is quoted too, which is always safe.
_KUBECTL_NON_STRINGS = re.compile(
    r"[yYnN]|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|true|True|TRUE|false|False|FALSE"
    r"|null|Null|NULL|~|[-+]?\.?[0-9].*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)


def _ambiguous_for_kubectl(text: str) -> bool:
    answer = _AMBIGUOUS.get(text)
    if answer is None:
        answer = bool(text) and _KUBECTL_NON_STRINGS.fullmatch(text) is not None
        if len(_AMBIGUOUS) < _PLAIN_TAGS_MAX:
            _AMBIGUOUS[text] = answer
    return answer


_AMBIGUOUS: dict[str, bool] = {}


_PLAIN_TAGS: dict[str, str] = {}
"""Implicit tag of a plain scalar's text (``"8"`` -> int, ``"true"`` -> bool, else str)."""
_PLAIN_TAGS_MAX = 50_000


def _dump(obj: Any) -> str:
    fast = _block_text(obj)
    return fast if fast is not None else _pyyaml_dump(obj)


def _pyyaml_dump(obj: Any) -> str:
    return str(yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False))


# The block writer: the text ``_pyyaml_dump`` writes, for the documents whose every scalar
# takes one line. PyYAML's emitter builds and walks an event per node; a rendered Pod is a few
# hundred nodes, and a thousand Pods took half a second. This writes the same block layout
# (maps indented by 2, a list inside a map at the map's own indent, a map or list in a list
# item starting on the item's line) and takes each scalar's text from PyYAML itself: each
# distinct scalar is written once, alone, by ``_Dumper`` (so the style, quoting and escaping
# are PyYAML's and the kubectl quoting rule's), and kept. A scalar's text does not depend on
# where it stands as long as it ends within PyYAML's line width (80), or has no space and is
# not double-quoted: PyYAML breaks a plain or single-quoted scalar only at a space past the
# width. Any other scalar (longer there, or written on several lines, or a key PyYAML writes
# as a complex key) sends the whole document to PyYAML. A test compares the two on generated
# documents.

_WIDTH = 80
_SCALARS_MAX = 50_000
_value_texts: dict[Any, str | None] = {}
_key_texts: dict[str, str | None] = {}


class _NotBlock(Exception):
    """The document has a scalar the block writer leaves to PyYAML."""


def _block_text(obj: Any) -> str | None:
    """``obj`` (a map or list) as ``_pyyaml_dump`` writes it, or None to let PyYAML write it."""
    kind = type(obj)
    if (kind is not dict and kind is not list) or not obj:
        return None
    out: list[str] = []
    try:
        if kind is dict:
            _write_map(obj, 0, "", out)
        else:
            _write_list(obj, 0, "", out)
    except _NotBlock:
        return None
    return "".join(out)


def _write_map(value: dict[Any, Any], indent: int, first: str, out: list[str]) -> None:
    """The map's entries at ``indent``; the first entry's line starts with ``first`` instead of
    the indent (a list item's ``- ``)."""
    pad = " " * indent
    lead = first or pad
    for key, child in value.items():
        if type(key) is not str:
            raise _NotBlock
        text = _key_texts.get(key, "")
        if text == "":
            text = _key_text(key)
        if text is None:
            raise _NotBlock
        head = lead + text + ":"
        lead = pad
        kind = type(child)
        if kind is dict:
            if child:
                out.append(head + "\n")
                _write_map(child, indent + 2, "", out)
            else:
                out.append(head + " {}\n")
        elif kind is list:
            if child:
                out.append(head + "\n")
                _write_list(child, indent, "", out)
            else:
                out.append(head + " []\n")
        elif (
            kind is str and (scalar := _value_texts.get(child)) and len(head) + len(scalar) < _WIDTH
        ):
            out.append(f"{head} {scalar}\n")  # most values: a short string seen before
        else:
            out.append(head + " " + _scalar(child, indent + len(text) + 2) + "\n")


def _write_list(value: list[Any], indent: int, first: str, out: list[str]) -> None:
    """The list's items at ``indent``; the first item's line starts with ``first``."""
    pad = " " * indent
    lead = first or pad
    for child in value:
        head = lead + "- "
        lead = pad
        kind = type(child)
        if kind is dict:
            if child:
                _write_map(child, indent + 2, head, out)
            else:
                out.append(head + "{}\n")
        elif kind is list:
            if child:
                _write_list(child, indent + 2, head, out)
            else:
                out.append(head + "[]\n")
        elif (
            kind is str
            and (scalar := _value_texts.get(child))
            and len(head) + len(scalar) <= _WIDTH
        ):
            out.append(f"{head}{scalar}\n")  # a short string seen before
        else:
            out.append(head + _scalar(child, indent + 2) + "\n")


def _scalar(value: Any, column: int) -> str:
    """The text of a scalar value starting at ``column``."""
    if type(value) is str:
        text = _value_texts.get(value, "")
        if text == "":
            text = _value_text(value)
    elif value is True or value is False or value is None or type(value) is int:
        key: tuple[type, Any] = (type(value), value)  # True and 1 are equal: keep them apart
        text = _value_texts.get(key, "")
        if text == "":
            text = _value_text(value, key)
    elif type(value) is float:
        key = (float, repr(value))  # 0.0 and -0.0 are equal: keep them apart
        text = _value_texts.get(key, "")
        if text == "":
            text = _value_text(value, key)
    else:
        raise _NotBlock
    if text is None:
        raise _NotBlock
    if column + len(text) > _WIDTH and (" " in text or text[0] == '"'):
        raise _NotBlock  # PyYAML may break it at a space (or a double-quoted one anywhere)
    return text


def _value_text(value: Any, key: Any = None) -> str | None:
    """How PyYAML writes ``value`` as a map's value (None: on more than one line)."""
    written = _pyyaml_dump({"k": value})
    text = written[3:-1] if written.startswith("k: ") and written.count("\n") == 1 else None
    if len(_value_texts) >= _SCALARS_MAX:
        _value_texts.clear()
    _value_texts[value if key is None else key] = text
    return text


def _key_text(key: str) -> str | None:
    """How PyYAML writes ``key`` as a map's key (None: not as a one-line simple key)."""
    written = _pyyaml_dump({key: 0})
    simple = written.endswith(": 0\n") and written.count("\n") == 1
    text = written[:-4] if simple and not written.startswith("? ") else None
    if len(_key_texts) >= _SCALARS_MAX:
        _key_texts.clear()
    _key_texts[key] = text
    return text


def dump_stream(objects: Iterable[dict[str, Any]], comments: dict[int, str] | None = None) -> str:
    """A YAML stream; ``comments`` maps an object's position to comment text put above it."""
    parts = []
    for i, obj in enumerate(objects):
        text = _dump(obj)
        comment = (comments or {}).get(i)
        if comment:
            text = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines()) + text
        parts.append(text)
    return "---\n" + "---\n".join(parts) if parts else ""


def dump_yaml(obj: Any) -> str:
    return _dump(obj)
