"""Reading manifests: Lists, kinds, encodings, aliases, nesting and values JSON cannot hold; and
the YAML writer's output matching PyYAML's safe dumper exactly."""

from __future__ import annotations

import io
import math
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.cli import manifests
from modelserving.cli.manifests import ManifestError, dump_stream, dump_yaml, read_documents
from modelserving.controller.yamltext import MAX_ALIAS_NODES, MAX_DEPTH


def read(tmp_path: Path, text: str | bytes) -> list[dict[str, Any]]:
    path = tmp_path / "m.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return list(read_documents(str(path)))


def refused(tmp_path: Path, text: str | bytes) -> str:
    with pytest.raises(ManifestError) as info:
        read(tmp_path, text)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'm.yaml'}: ")
    return message.removeprefix(f"{tmp_path / 'm.yaml'}: ")


def test_documents_and_lists_are_flattened(tmp_path: Path) -> None:
    text = (
        "kind: A\n---\n---\n"
        "kind: List\nitems: [{kind: B}, {kind: C}]\n---\n"
        "kind: PodList\nitems: [{kind: D}]\n---\n"
        "kind: List\nitems: []\n"
    )
    assert [d["kind"] for d in read(tmp_path, text)] == ["A", "B", "C", "D"]


@pytest.mark.parametrize(
    ("items", "got"),
    [("", "missing"), ("items:\n", "null"), ("items: 3\n", "a number"), ("items: {}\n", "a map")],
)
def test_list_without_a_list_of_items_refused(tmp_path: Path, items: str, got: str) -> None:
    message = refused(tmp_path, f"kind: A\n---\nkind: List\n{items}")
    assert message == f"document 2: a List needs items to be a list of objects, but items is {got}"


def test_list_item_that_is_not_a_map_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, "kind: List\nitems:\n- {kind: A}\n- just text\n")
    assert message == "document 1, items[1] is not a map but a string"


@pytest.mark.parametrize(
    ("kind", "got"), [("[1]", "a list"), ("{a: 1}", "a map"), ("3", "a number")]
)
def test_kind_that_is_not_a_string_refused(tmp_path: Path, kind: str, got: str) -> None:
    assert refused(tmp_path, f"kind: A\n---\nkind: {kind}\n") == (
        f"document 2: kind must be a string, not {got}"
    )
    assert refused(tmp_path, f"kind: List\nitems:\n- kind: {kind}\n") == (
        f"document 1, items[0]: kind must be a string, not {got}"
    )


def test_not_utf8_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, b"kind: Pod\nmetadata: {name: caf\xe9}\n")
    assert message == "not UTF-8 text (invalid byte at offset 30)"


def test_standard_input_is_read_as_utf8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("kind: Caf\u00e9\n".encode())))
    assert list(read_documents("-")) == [{"kind": "Caf\u00e9"}]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"kind: \xff\n")))
    with pytest.raises(ManifestError, match=r"^-: not UTF-8 text"):
        list(read_documents("-"))


def test_small_aliases_are_accepted(tmp_path: Path) -> None:
    (_, doc) = read(tmp_path, "kind: A\n---\nkind: B\na: &x {k: [1, 2]}\nb: *x\n")
    assert doc["a"] == doc["b"] == {"k": [1, 2]}


def test_recursive_alias_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, "kind: A\n---\na: &x [1, *x]\n")
    assert message == "alias *x refers to a node that contains it (document 2)"


BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.timeout(10)
def test_alias_bomb_refused_at_once(tmp_path: Path) -> None:
    assert len(BOMB) < 800
    start = time.perf_counter()
    assert refused(tmp_path, BOMB) == (
        f"YAML aliases expand to more than {MAX_ALIAS_NODES} extra nodes (document 1); "
        "write the repeated parts out"
    )
    assert time.perf_counter() - start < 1


def test_nesting_limit(tmp_path: Path) -> None:
    def nested(depth: int) -> str:
        return "a: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"

    assert read(tmp_path, nested(MAX_DEPTH))
    assert refused(tmp_path, "---\n" + nested(MAX_DEPTH + 1)) == (
        f"maps and lists nested more than {MAX_DEPTH} levels deep (document 1)"
    )


def test_timestamps_stay_the_text_written(tmp_path: Path) -> None:
    docs = read(
        tmp_path,
        "a: 2024-01-02\nb: 2024-01-02T03:04:05Z\nc: 2024-01-02 03:04:05.5 +01:00\n"
        "d: !!timestamp 2024-01-02\n2024-05-06: key\n",
    )
    assert docs == [
        {
            "a": "2024-01-02",
            "b": "2024-01-02T03:04:05Z",
            "c": "2024-01-02 03:04:05.5 +01:00",
            "d": "2024-01-02",
            "2024-05-06": "key",
        }
    ]


ENV = "spec:\n  template:\n    roles:\n    - entryTemplate:\n        spec:\n          containers:\n"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("!!binary aGk=", "binary data (!!binary) has no JSON form"),
        ("!!set {a: null}", "a set (!!set) has no JSON form"),
        ("!!omap [a: 1]", "an ordered map (!!omap, !!pairs) has no JSON form"),
        ("!!pairs [a: 1]", "an ordered map (!!omap, !!pairs) has no JSON form"),
        (".nan", "NaN has no JSON form"),
        (".inf", "infinity has no JSON form"),
        ("-.inf", "infinity has no JSON form"),
    ],
)
def test_values_json_cannot_hold_refused(tmp_path: Path, value: str, reason: str) -> None:
    text = ENV + f"          - {{name: a, env: [{{name: X, value: {value}}}]}}\n"
    message = refused(tmp_path, "kind: A\n---\n" + text)
    assert message.startswith(
        "document 2: spec.template.roles[0].entryTemplate.spec.containers[0].env[0].value: "
        + reason
    )


@pytest.mark.parametrize(
    ("key", "shown"), [("1", "1 is a number"), ("true", "True is a boolean"), ("~", "None is null")]
)
def test_map_keys_that_are_not_strings_refused(tmp_path: Path, key: str, shown: str) -> None:
    message = refused(tmp_path, f"metadata:\n  labels:\n    {key}: x\n")
    assert message == f"document 1: metadata.labels: map key {shown}, not a string; quote it"
    assert (
        refused(tmp_path, f"{key}: x\n") == f"document 1: map key {shown}, not a string; quote it"
    )


def test_json_values_kept(tmp_path: Path) -> None:
    text = '{"a": 1.5, "b": -0.0, "c": 12345678901234567890, "d": [true, null, "x"], "e": {}}'
    [doc] = read(tmp_path, text)
    assert doc == {"a": 1.5, "b": 0.0, "c": 12345678901234567890, "d": [True, None, "x"], "e": {}}
    assert math.copysign(1, doc["b"]) == -1


class PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """The writer before its fast paths: PyYAML's own (C when built) safe dumper, no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def safe_dump(obj: Any) -> str:
    return str(yaml.dump(obj, Dumper=PlainDumper, sort_keys=False, default_flow_style=False))


TRICKY = [
    "", " ", "true", "True", "yes", "no", "on", "Off", "null", "~", "1", "0777", "0x1F", "1e3",
    "1.5", ".inf", ".nan", "12:30", "2024-01-02", "=", "<<", "-", "- a", "a: b", "#x", "x #y",
    "'q'", '"q"', "multi\nline", "trailing\n", "tab\there", "caf\u00e9", "\u2028", "*a", "&a",
    "!tag", "%d", "@x", "`x", "{a}", "[1]", "? x", "a\x85b", "x" * 200,
]  # fmt: skip


def test_dump_round_trips_tricky_scalars() -> None:
    obj = {s: [s, {s: s}] for s in TRICKY}
    assert yaml.safe_load(dump_yaml(obj)) == obj
    numbers: list[Any] = [1, -2, 1.5, 1e300, True, False, None, {}, []]
    assert dump_yaml(numbers) == safe_dump(numbers)


GO_YAML_NON_STRINGS = [
    "y",
    "Y",
    "n",
    "N",
    "0o17",
    "0e0",
    "1e3",
    "1:20",
    "0x1F",
    "+1",
    ".5",
    "-.inf",
]


@pytest.mark.parametrize("text", GO_YAML_NON_STRINGS)
def test_strings_kubectl_would_read_as_other_types_are_quoted(text: str) -> None:
    """kubectl reads YAML 1.1 (go-yaml v2): unquoted, these would become booleans or numbers."""
    assert dump_yaml({"k": text}) == f"k: '{text}'\n"


def test_ordinary_strings_stay_plain() -> None:
    assert dump_yaml({"image": "vllm/vllm-openai:v0.10.0", "name": "engine"}) == (
        "image: vllm/vllm-openai:v0.10.0\nname: engine\n"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_dump_round_trips(value: Any) -> None:
    assert yaml.safe_load(dump_yaml(value)) == value
    # Twice: the second run answers plain scalars' tags from the cache.
    assert yaml.safe_load(dump_yaml(value)) == value


def test_dump_stream_with_comments() -> None:
    out = dump_stream([{"a": 1}, {"b": "x"}], {1: "first\n\nlast"})
    assert out == "---\na: 1\n---\n# first\n#\n# last\nb: x\n"
    assert dump_stream([]) == ""


# Strings as Pods have them, and ones PyYAML quotes, escapes, folds or writes as complex keys.
block_strings = st.sampled_from(TRICKY + GO_YAML_NON_STRINGS) | st.text(
    st.sampled_from("ab -:#'\"\n\\/.é\x00\t"), max_size=12
)
block_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | block_strings
    | st.text(st.sampled_from("abc "), min_size=60, max_size=140)
    | st.text(st.sampled_from("ab:'\"{}é\\"), min_size=60, max_size=140)
)
block_docs = st.recursive(
    block_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(block_strings | st.text(min_size=120, max_size=140), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=1500, deadline=None)
@given(block_docs)
def test_the_block_writer_writes_what_pyyaml_writes(value: Any) -> None:
    """Where the block writer writes a document at all, its text is PyYAML's (``_Dumper``);
    every other document is left to PyYAML."""
    expected = manifests._pyyaml_dump(value)
    fast = manifests._block_text(value)
    if fast is not None:
        assert fast == expected
    assert dump_yaml(value) == expected


APPLIED = '[{"name":"demo-pod-tweaks","runtime":"Native"},{"name":"inference-engine"}]'


def test_the_block_writer_keeps_equal_scalars_of_other_texts_apart() -> None:
    """The scalars' texts are kept by value: 0.0 and -0.0, 1 and True and 1.0 are equal keys."""
    for doc in ({"a": 0.0}, {"a": -0.0}, {"a": 1}, {"a": True}, {"a": 1.0}, {"a": 0}, {"a": False}):
        assert dump_yaml(doc) == manifests._pyyaml_dump(doc)
        assert manifests._block_text(doc) == manifests._pyyaml_dump(doc)


def test_the_block_writer_writes_a_rendered_pod() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llm-0-leader-0-0",
            "labels": {"modelserving.volcano.sh/name": "llm", "app": "x"},
            "annotations": {"modelserving.dev/plugins-applied": APPLIED},
        },
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": "vllm/vllm-openai:v0.10.0",
                    "args": ["--model", "meta-llama/Llama-3.1-70B", "--tensor-parallel-size", "8"],
                    "env": [{"name": "VAR_0", "value": "x" * 20}, {"name": "Y", "value": "true"}],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    "ports": [{"containerPort": 8000}],
                }
            ],
            "tolerations": [],
            "securityContext": {},
        },
    }
    fast = manifests._block_text(pod)
    assert fast is not None
    assert fast == manifests._pyyaml_dump(pod)


def test_an_endless_file_is_refused_at_the_limit() -> None:
    with pytest.raises(ManifestError, match=r"^/dev/zero: cannot read: larger than the limit of "):
        list(read_documents("/dev/zero"))
