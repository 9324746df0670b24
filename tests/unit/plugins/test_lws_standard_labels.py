"""lws-standard-labels: LeaderWorkerSet's labels on entry and worker Pods, how it treats labels
already there, the names it refuses, and its (empty) config."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
from pydantic import ValidationError

from modelserving.api import HookRequest, ModelServing, parse_model_serving
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.chain import build_chain
from modelserving.plugins.base import EmptyConfig, HookError
from modelserving.plugins.builtins import BUILTINS
from modelserving.plugins.builtins.lws_standard_labels import (
    BUILTIN,
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    NAME,
    NAME_LABEL,
    WORKER_INDEX_LABEL,
    LwsStandardLabels,
    group_key,
    ordinal,
)
from modelserving.workload.plan import plan
from tests.unit.plugins.conftest import apply, sample_pod


def model_serving(
    name: str = "llm", namespace: str | None = "team-a", owners: Any = None
) -> ModelServing:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if owners is not None:
        metadata["ownerReferences"] = owners
    return ModelServing.model_validate(
        {
            "metadata": metadata,
            "spec": {
                "template": {
                    "roles": [
                        {
                            "name": "server",
                            "entryTemplate": {
                                "spec": {"containers": [{"name": "e", "image": "e"}]}
                            },
                            "workerReplicas": 0,
                        }
                    ]
                }
            },
        }
    )


def request(
    pod: dict[str, Any],
    is_entry: bool = True,
    group: str = "llm-0",
    role_id: str = "server-0",
    ms: ModelServing | None = None,
) -> HookRequest:
    return HookRequest(
        hook=Hook.ON_POD_CREATE,
        model_serving=ms or model_serving(),
        place=PodPlace(group, "server", role_id, is_entry),
        pod=pod,
    )


def named(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    pod = sample_pod()
    pod["metadata"]["name"] = name
    if labels is None:
        del pod["metadata"]["labels"]
    else:
        pod["metadata"]["labels"] = labels
    return pod


def run(req: HookRequest) -> list[Any]:
    before = copy.deepcopy(req.pod)
    ops = list(LwsStandardLabels(NAME).on_pod_create(req))
    assert req.pod == before, "the plugin returns a patch and leaves its request alone"
    return ops


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# --- the definition and its config -----------------------------------------------------------


def test_definition_and_registration() -> None:
    assert BUILTIN.name == NAME == "lws-standard-labels"
    assert BUILTIN.config_model is EmptyConfig
    assert BUILTIN.hooks == frozenset({"on_pod_create"})
    assert BUILTIN.wasm_module == "lws-standard-labels.wasm"
    assert BUILTIN in BUILTINS
    plugin = BUILTIN.factory("lws-2", EmptyConfig())
    assert isinstance(plugin, LwsStandardLabels)
    assert plugin.name == "lws-2"


@pytest.mark.parametrize("config", [{}, {"anything": None}])
def test_an_empty_config_is_accepted(config: dict[str, Any]) -> None:
    EmptyConfig.model_validate(config)


@pytest.mark.parametrize("config", [{"name": "x"}, {"groupKey": True}, {"a": {}}])
def test_any_field_is_refused(config: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        EmptyConfig.model_validate(config)
    assert [e["type"] for e in info.value.errors()] == ["extra_forbidden"]


# --- labels ---------------------------------------------------------------------------------


def test_an_entry_pod_gets_all_four_labels_in_order() -> None:
    pod = named("llm-0-server-0-0")
    ops = run(request(pod))
    assert ops == [
        {
            "op": "add",
            "path": "/metadata/labels",
            "value": {
                NAME_LABEL: "llm",
                GROUP_INDEX_LABEL: "0",
                WORKER_INDEX_LABEL: "0",
                GROUP_KEY_LABEL: sha1("team-a/llm-0"),
            },
        }
    ]
    assert list(ops[0]["value"]) == [
        NAME_LABEL,
        GROUP_INDEX_LABEL,
        WORKER_INDEX_LABEL,
        GROUP_KEY_LABEL,
    ]


def test_a_worker_pod_gets_its_ordinal_and_its_groups_key() -> None:
    pod = named("llm-12-decode-3-7", labels={"app": "llm"})
    labels = apply(pod, run(request(pod, False, "llm-12", "decode-3")))["metadata"]["labels"]
    assert labels == {
        "app": "llm",
        NAME_LABEL: "llm",
        GROUP_INDEX_LABEL: "12",
        WORKER_INDEX_LABEL: "7",
        GROUP_KEY_LABEL: sha1("team-a/llm-12"),
    }
    entry = named("llm-12-decode-3-0")
    entry_labels = apply(entry, run(request(entry, True, "llm-12", "decode-3")))
    assert entry_labels["metadata"]["labels"][GROUP_KEY_LABEL] == labels[GROUP_KEY_LABEL], (
        "the leader and its workers share the group key"
    )


def test_existing_labels_are_kept_and_same_keys_overwritten() -> None:
    pod = named("llm-0-server-0-2", labels={NAME_LABEL: "other", GROUP_KEY_LABEL: "x", "k": "v"})
    ops = run(request(pod, is_entry=False))
    assert [o["path"] for o in ops] == [
        "/metadata/labels/leaderworkerset.sigs.k8s.io~1name",
        "/metadata/labels/leaderworkerset.sigs.k8s.io~1group-index",
        "/metadata/labels/leaderworkerset.sigs.k8s.io~1worker-index",
        "/metadata/labels/leaderworkerset.sigs.k8s.io~1group-key",
    ]
    assert apply(pod, ops)["metadata"]["labels"] == {
        NAME_LABEL: "llm",
        GROUP_KEY_LABEL: sha1("team-a/llm-0"),
        "k": "v",
        GROUP_INDEX_LABEL: "0",
        WORKER_INDEX_LABEL: "2",
    }


def test_an_empty_label_map_gets_one_op_per_label() -> None:
    pod = named("llm-0-server-0-0", labels={})
    ops = run(request(pod))
    assert len(ops) == 4
    assert apply(pod, ops)["metadata"]["labels"][WORKER_INDEX_LABEL] == "0"


def test_the_group_key_is_the_sha1_of_namespace_and_group() -> None:
    assert group_key("default", "vllm-0") == sha1("default/vllm-0")
    assert group_key("a", "b") != group_key("a/b", ""), "the two parts are not just concatenated"
    pod = named("m-0-server-0-0")
    ms = model_serving("m", "prod")
    [op] = run(request(pod, group="m-0", ms=ms))
    assert op["value"][GROUP_KEY_LABEL] == hashlib.sha1(b"prod/m-0").hexdigest()


LWS = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "uid": "u"}


@pytest.mark.parametrize(
    ("owners", "name", "key"),
    [
        # Kthena (plugins/lws_labels_plugin.go): the first owner of kind LeaderWorkerSet with a
        # name gives the name label, and the key is the SHA-1 of "<lws>-<groupIndex>".
        ([{**LWS, "name": "my-lws"}], "my-lws", sha1("my-lws-5")),
        (
            [{"kind": "Deployment", "name": "d"}, {**LWS, "name": ""}, {**LWS, "name": "b"}],
            "b",
            sha1("b-5"),
        ),
        # Without one, the documented behaviour: the ModelServing's name, namespace/group key.
        (None, "llm", sha1("team-a/llm-5")),
        ([{"kind": "Deployment", "name": "d"}], "llm", sha1("team-a/llm-5")),
        ([{"kind": "leaderworkerset", "name": "x"}], "llm", sha1("team-a/llm-5")),
    ],
)
def test_an_owning_lws_gives_the_name_and_key(owners: Any, name: str, key: str) -> None:
    req = request(named("llm-5-server-0-0"), group="llm-5", ms=model_serving(owners=owners))
    [op] = run(req)
    assert op["value"][NAME_LABEL] == name
    assert op["value"][GROUP_KEY_LABEL] == key
    assert op["value"][GROUP_INDEX_LABEL] == "5"


def test_with_an_owning_lws_no_namespace_is_needed() -> None:
    ms = model_serving(namespace=None, owners=[{**LWS, "name": "w"}])
    [op] = run(request(named("llm-0-server-0-0"), ms=ms))
    assert op["value"][GROUP_KEY_LABEL] == sha1("w-0")


def test_a_63_character_name_is_accepted() -> None:
    name = "m" * 63
    [op] = run(request(named("p"), group=f"{name}-4", ms=model_serving(name)))
    assert op["value"][NAME_LABEL] == name
    assert op["value"][GROUP_INDEX_LABEL] == "4"


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("llm-0", "llm-", "0"),
        ("llm-10", "llm-", "10"),
        ("llm-01", "llm-", None),
        ("llm-", "llm-", None),
        ("llm-1x", "llm-", None),
        ("llm-\u0661", "llm-", None),
        ("llm-+1", "llm-", None),
        ("lm-1", "llm-", None),
    ],
)
def test_ordinal(name: str, prefix: str, expected: str | None) -> None:
    assert ordinal(name, prefix) == expected


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (
            request(named("p"), group="llm"),
            "serving group 'llm' is not named llm-<index>",
        ),
        (
            request(named("p"), group="llm-007"),
            "serving group 'llm-007' is not named llm-<index>",
        ),
        (
            request(named("p"), group="other-0"),
            "serving group 'other-0' is not named llm-<index>",
        ),
        (
            request(named("llm-0-server-0-0"), is_entry=False),
            "worker Pod 'llm-0-server-0-0' is not named llm-0-server-0-<index> with an index >= 1",
        ),
        (
            request(named("llm-0-server-1-1"), is_entry=False),
            "worker Pod 'llm-0-server-1-1' is not named llm-0-server-0-<index> with an index >= 1",
        ),
        (
            request(named("llm-0-server-0-02"), is_entry=False),
            "worker Pod 'llm-0-server-0-02' is not named llm-0-server-0-<index> with an index >= 1",
        ),
        (
            request({"metadata": {}}, is_entry=False),
            "worker Pod has no metadata.name",
        ),
        (
            request(named("p"), ms=model_serving(namespace=None)),
            "ModelServing 'llm' has no metadata.namespace",
        ),
        (
            request(named("p"), ms=model_serving(namespace="")),
            "ModelServing 'llm' has no metadata.namespace",
        ),
        (
            request(named("p"), group="x" * 64 + "-0", ms=model_serving("x" * 64)),
            f"ModelServing name '{'x' * 64}' has 64 characters, more than the 63 a label value "
            "may have",
        ),
    ],
    ids=[
        "group without index",
        "group index with leading zeros",
        "group of another ModelServing",
        "worker with ordinal 0",
        "worker of another role id",
        "worker ordinal with a leading zero",
        "worker without a name",
        "no namespace",
        "empty namespace",
        "name too long for a label value",
    ],
)
def test_names_that_break_the_naming_are_refused(req: HookRequest, message: str) -> None:
    with pytest.raises(HookError) as info:
        run(req)
    assert str(info.value) == message


def test_an_entry_pod_name_is_not_checked() -> None:
    [op] = run(request(named("custom-name"), is_entry=True))
    assert op["value"][WORKER_INDEX_LABEL] == "0"


# --- in the chain ----------------------------------------------------------------------------


def test_in_the_chain_every_pod_of_a_planned_model_serving_is_labelled() -> None:
    ms = parse_model_serving(
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {
                "replicas": 2,
                "plugins": [{"name": NAME}],
                "template": {
                    "roles": [
                        {
                            "name": "prefill",
                            "entryTemplate": {
                                "spec": {"containers": [{"name": "e", "image": "vllm:1"}]}
                            },
                            "workerReplicas": 2,
                            "workerTemplate": {
                                "spec": {"containers": [{"name": "w", "image": "vllm:1"}]}
                            },
                        }
                    ]
                },
            },
        }
    )
    chain = build_chain(ms)
    seen = set()
    for group in plan(ms):
        for desired in group.pods():
            pod = chain.on_pod_create(desired).pod
            labels = pod["metadata"]["labels"]
            seen.add((labels[GROUP_INDEX_LABEL], labels[WORKER_INDEX_LABEL]))
            assert labels[NAME_LABEL] == "llm"
            assert labels[GROUP_KEY_LABEL] == sha1(f"team-a/llm-{labels[GROUP_INDEX_LABEL]}")
    assert seen == {(g, w) for g in ("0", "1") for w in ("0", "1", "2")}
