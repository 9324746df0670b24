"""build_chain (resolving and validating plugins up front), Chain.on_pod_create / on_pod_ready
(order, scope, failure policy, copies, the plugins-applied annotation) and ChainCache."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest

from modelserving.api import (
    FailureClass,
    Hook,
    HookRequest,
    PatchOperation,
    PatchPolicy,
    PathRule,
    PluginConfigError,
    PluginFailure,
)
from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.chain import ChainCache, ChainEntry, PatchValidator, build_chain
from modelserving.plugins import Builtin, Registry, default_registry
from modelserving.plugins.adapter import NativePlugin
from modelserving.plugins.base import EmptyConfig
from tests.unit.chain.conftest import (
    Annotate,
    CallLog,
    Fail,
    Label,
    MsFactory,
    desired_pods,
)

PREFILL_ENTRY = "llm-0-prefill-0-0"
PREFILL_WORKER = "llm-0-prefill-0-1"
DECODE_ENTRY = "llm-0-decode-0-0"
DECODE_WORKERS = ("llm-0-decode-0-1", "llm-0-decode-0-2")
ALL_PODS = (PREFILL_ENTRY, PREFILL_WORKER, DECODE_ENTRY, *DECODE_WORKERS)


def one_plugin(name: str, factory: Any, *hooks: str) -> Registry:
    """A registry holding one config-less test plugin."""
    registry = Registry()
    registry.register(
        Builtin(
            name=name,
            config_model=EmptyConfig,
            factory=factory,
            summary="",
            hooks=frozenset(hooks),
        )
    )
    return registry


def owner(entry: ChainEntry) -> object:
    """The plugin instance behind a chain entry's hooks."""
    assert isinstance(entry.plugin, NativePlugin)
    return entry.plugin.instance


def plugin(name: str, config: Any = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, **extra}
    if config is not None:
        out["config"] = config
    return out


def annotate(tag: str, **extra: Any) -> dict[str, Any]:
    return plugin("annotate", {"tag": tag}, **extra)


def tags(pod: dict[str, Any]) -> set[str]:
    """The ``example.com/<tag>`` annotations the test plugins left on a Pod."""
    annotations = pod["metadata"].get("annotations") or {}
    return {k.removeprefix("example.com/") for k in annotations if k.startswith("example.com/")}


def applied(pod: dict[str, Any]) -> list[dict[str, str]] | None:
    raw = (pod["metadata"].get("annotations") or {}).get(PLUGINS_APPLIED_ANNOTATION)
    return None if raw is None else list(json.loads(raw))


# --- build_chain -----------------------------------------------------------------------------


def test_build_chain_resolves_every_plugin_in_list_order(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    ms = two_role_ms([annotate("a"), plugin("label"), plugin("fail", {"mode": "crash"})])
    chain = build_chain(ms, registry)
    assert len(chain) == 3
    assert [(e.index, e.name, e.runtime) for e in chain.entries] == [
        (0, "annotate", "Native"),
        (1, "label", "Native"),
        (2, "fail", "Native"),
    ]
    first, second, third = (owner(e) for e in chain.entries)
    assert isinstance(first, Annotate)
    assert first.tag == "a"
    assert isinstance(second, Label)
    assert second.tag == "x"  # config omitted: the model's defaults
    assert isinstance(third, Fail)
    assert third.mode == "crash"
    assert chain.model_serving is ms


def test_no_plugins_is_an_empty_chain(two_role_ms: MsFactory, registry: Registry) -> None:
    ms = two_role_ms()
    chain = build_chain(ms, registry)
    assert len(chain) == 0
    desired = desired_pods(ms)[PREFILL_ENTRY]
    result = chain.on_pod_create(desired)
    assert result.pod == desired.pod
    assert result.pod is not desired.pod
    assert result.outcomes == []
    assert applied(result.pod) is None


def test_unknown_plugin_names_the_plugin_index_and_known_names(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    ms = two_role_ms([annotate("a"), plugin("gpu-tweaks")])
    with pytest.raises(PluginConfigError) as info:
        build_chain(ms, registry)
    exc = info.value
    assert (exc.plugin, exc.index) == ("gpu-tweaks", 1)
    assert [e.path for e in exc.errors] == ["name"]
    assert "known: annotate, fail, label, mutate, watch" in exc.errors[0].message
    assert str(exc).startswith("spec.plugins[1] (plugin 'gpu-tweaks'): name: ")


def test_the_default_registry_is_used_when_none_is_given(two_role_ms: MsFactory) -> None:
    with pytest.raises(PluginConfigError) as info:
        build_chain(two_role_ms([annotate("a")]))
    assert "(known: accelerator, demo-pod-tweaks, entry-address-file, hccl-ranktable, " in str(
        info.value
    )
    chain = build_chain(two_role_ms([plugin("demo-pod-tweaks")]))
    assert [e.name for e in chain.entries] == ["demo-pod-tweaks"]


def test_unknown_config_field_is_named_with_its_path(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    ms = two_role_ms(
        [annotate("a"), annotate("b"), plugin("annotate", {"tag": "c", "colour": "red"})]
    )
    with pytest.raises(PluginConfigError) as info:
        build_chain(ms, registry)
    assert (info.value.plugin, info.value.index) == ("annotate", 2)
    assert [(e.path, e.message) for e in info.value.errors] == [("config.colour", "unknown field")]
    assert "spec.plugins[2] (plugin 'annotate'): config.colour: unknown field" in str(info.value)


def test_config_values_are_validated(two_role_ms: MsFactory, registry: Registry) -> None:
    ms = two_role_ms([plugin("fail", {"mode": "explode"})])
    with pytest.raises(PluginConfigError) as info:
        build_chain(ms, registry)
    assert [e.path for e in info.value.errors] == ["config.mode"]
    assert "explode" in info.value.errors[0].message


@pytest.mark.parametrize(
    ("config", "kind"), [([1, 2], "list"), ("tag: a", "str"), (3, "int"), (True, "bool")]
)
def test_config_must_be_a_map(
    two_role_ms: MsFactory, registry: Registry, config: Any, kind: str
) -> None:
    with pytest.raises(PluginConfigError) as info:
        build_chain(two_role_ms([plugin("annotate", config)]), registry)
    assert [(e.path, e.message) for e in info.value.errors] == [
        ("config", f"must be a map, not {kind}")
    ]


def test_wasm_plugin_without_a_module_source_is_refused(two_role_ms: MsFactory) -> None:
    module = {"configMapRef": {"name": "mods", "key": "p.wasm"}, "sha256": "a" * 64}
    ms = two_role_ms([plugin("demo-pod-tweaks"), plugin("custom", type="Wasm", module=module)])
    with pytest.raises(PluginConfigError) as info:
        build_chain(ms, default_registry())
    assert (info.value.plugin, info.value.index) == ("custom", 1)
    assert info.value.failure_class == "InvalidModule"
    assert [e.path for e in info.value.errors] == ["module.configMapRef"]
    assert "ConfigMap team-a/mods key p.wasm" in str(info.value)


def test_builtin_without_a_wasm_build_is_refused_for_runtime_wasm(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    with pytest.raises(PluginConfigError) as info:
        build_chain(two_role_ms([annotate("a", runtime="Wasm")]), registry)
    assert [e.path for e in info.value.errors] == ["runtime"]
    assert "has no WebAssembly build; use runtime Native" in str(info.value)


def test_native_runtime_is_accepted_explicitly(two_role_ms: MsFactory, registry: Registry) -> None:
    chain = build_chain(two_role_ms([annotate("a", type="BuiltIn", runtime="Native")]), registry)
    assert [e.runtime for e in chain.entries] == ["Native"]


# --- running: order and what each plugin sees ------------------------------------------------


def test_plugins_run_in_list_order_each_on_the_previous_output(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms([annotate("first"), plugin("label", {"tag": "second"}), annotate("third")])
    desired = desired_pods(ms)[PREFILL_ENTRY]
    result = build_chain(ms, registry).on_pod_create(desired)

    assert [(c.plugin, c.tag) for c in log] == [
        ("annotate", "first"),
        ("label", "second"),
        ("annotate", "third"),
    ]
    assert [set(c.annotations) for c in log] == [
        set(),
        {"example.com/first"},
        {"example.com/first"},
    ]
    assert [o.index for o in result.outcomes] == [0, 1, 2]
    # The first found no annotations and added the map; the third built on that map.
    assert result.outcomes[0].patch == [
        {"op": "add", "path": "/metadata/annotations", "value": {"example.com/first": "annotate"}}
    ]
    assert result.outcomes[2].patch == [
        {"op": "add", "path": "/metadata/annotations/example.com~1third", "value": "annotate"}
    ]
    assert tags(result.pod) == {"first", "third"}
    assert result.pod["metadata"]["labels"]["example.com/second"] == "yes"
    assert result.ignored == []


def test_a_plugin_gets_the_hook_request_for_its_pod(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms([annotate("a")])
    chain = build_chain(ms, registry)
    for desired in desired_pods(ms).values():
        chain.on_pod_create(desired)
    assert [(c.hook, c.pod, c.group, c.role, c.role_id, c.is_entry) for c in log] == [
        (Hook.ON_POD_CREATE, PREFILL_ENTRY, "llm-0", "prefill", "prefill-0", True),
        (Hook.ON_POD_CREATE, PREFILL_WORKER, "llm-0", "prefill", "prefill-0", False),
        (Hook.ON_POD_CREATE, DECODE_ENTRY, "llm-0", "decode", "decode-0", True),
        (Hook.ON_POD_CREATE, DECODE_WORKERS[0], "llm-0", "decode", "decode-0", False),
        (Hook.ON_POD_CREATE, DECODE_WORKERS[1], "llm-0", "decode", "decode-0", False),
    ]


def test_plugins_are_scoped_by_role_and_target(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms(
        [
            annotate("everywhere"),
            annotate("prefill", scope={"roles": ["prefill"]}),
            annotate("entries", scope={"target": "Entry"}),
            annotate("workers", scope={"target": "Worker"}),
            annotate("decode-workers", scope={"roles": ["decode"], "target": "Worker"}),
            annotate("both-entries", scope={"roles": ["prefill", "decode"], "target": "Entry"}),
            annotate("all-roles", scope={"roles": [], "target": "All"}),
        ]
    )
    chain = build_chain(ms, registry)
    results = {name: chain.on_pod_create(d) for name, d in desired_pods(ms).items()}

    common = {"everywhere", "all-roles"}
    assert {name: tags(r.pod) for name, r in results.items()} == {
        PREFILL_ENTRY: common | {"prefill", "entries", "both-entries"},
        PREFILL_WORKER: common | {"prefill", "workers"},
        DECODE_ENTRY: common | {"entries", "both-entries"},
        DECODE_WORKERS[0]: common | {"workers", "decode-workers"},
        DECODE_WORKERS[1]: common | {"workers", "decode-workers"},
    }
    # Out-of-scope plugins are not called at all and have no outcome.
    assert [o.index for o in results[DECODE_ENTRY].outcomes] == [0, 2, 5, 6]
    assert sorted(c.tag for c in log if c.pod == DECODE_ENTRY) == sorted(
        common | {"entries", "both-entries"}
    )


# --- failure policy --------------------------------------------------------------------------

FAILURES = {
    "hook-error": (FailureClass.PLUGIN_ERROR, "no GPU left"),
    "crash": (FailureClass.PLUGIN_ERROR, "RuntimeError: boom"),
    "forbidden": (FailureClass.FORBIDDEN_PATCH, "/spec/containers/0/image"),
    "malformed": (FailureClass.FORBIDDEN_PATCH, "a patch is a list of operations, not dict"),
}


@pytest.mark.parametrize(
    ("mode", "failure_class", "detail"), [(m, *v) for m, v in FAILURES.items()]
)
@pytest.mark.parametrize("policy", [{}, {"failurePolicy": "Fail"}], ids=["default", "Fail"])
def test_failure_policy_fail_raises_naming_plugin_hook_and_pod(
    two_role_ms: MsFactory,
    registry: Registry,
    log: CallLog,
    mode: str,
    failure_class: FailureClass,
    detail: str,
    policy: dict[str, str],
) -> None:
    ms = two_role_ms([annotate("a"), plugin("fail", {"mode": mode}, **policy), annotate("after")])
    desired = desired_pods(ms)[DECODE_ENTRY]
    before = copy.deepcopy(desired.pod)
    with pytest.raises(PluginFailure) as info:
        build_chain(ms, registry).on_pod_create(desired)
    failure = info.value
    assert failure.failure_class == failure_class
    assert (failure.plugin, failure.hook, failure.pod) == ("fail", "OnPodCreate", DECODE_ENTRY)
    assert detail in failure.detail
    assert f"{failure_class}: plugin 'fail' OnPodCreate on Pod {DECODE_ENTRY}: " in str(failure)
    assert [c.tag for c in log] == ["a", mode], "nothing runs after a failed Fail-policy plugin"
    assert desired.pod == before


@pytest.mark.parametrize(
    ("mode", "failure_class", "detail"), [(m, *v) for m, v in FAILURES.items()]
)
def test_failure_policy_ignore_skips_the_plugin_and_goes_on(
    two_role_ms: MsFactory,
    registry: Registry,
    log: CallLog,
    mode: str,
    failure_class: FailureClass,
    detail: str,
) -> None:
    ms = two_role_ms(
        [
            annotate("before"),
            plugin("fail", {"mode": mode}, failurePolicy="Ignore"),
            plugin("label", {"tag": "after"}),
        ]
    )
    desired = desired_pods(ms)[PREFILL_WORKER]
    result = build_chain(ms, registry).on_pod_create(desired)

    assert [c.plugin for c in log] == ["annotate", "fail", "label"]
    assert set(log[2].annotations) == {"example.com/before"}
    assert tags(result.pod) == {"before"}
    assert result.pod["metadata"]["labels"]["example.com/after"] == "yes"
    assert result.pod["spec"]["containers"] == desired.pod["spec"]["containers"]

    skipped = result.outcomes[1]
    assert [o.applied for o in result.outcomes] == [True, False, True]
    assert result.ignored == [skipped]
    assert skipped.patch == []
    assert skipped.failure is not None
    assert skipped.failure.failure_class == failure_class
    assert (skipped.failure.plugin, skipped.failure.pod) == ("fail", PREFILL_WORKER)
    assert detail in skipped.failure.detail
    assert skipped.explain() == {
        "plugin": "fail",
        "index": 1,
        "runtime": "Native",
        "ignored": str(skipped.failure),
    }
    assert result.outcomes[2].explain()["patch"] == result.outcomes[2].patch
    assert applied(result.pod) == [
        {"name": "annotate", "runtime": "Native"},
        {"name": "label", "runtime": "Native"},
    ]


def test_the_chain_judges_patches_with_its_validator(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    labels_only = PatchValidator(PatchPolicy(allowed_paths=[PathRule(path="/metadata/labels/*")]))
    ms = two_role_ms([plugin("label", {"tag": "ok"}), annotate("no", failurePolicy="Ignore")])
    result = build_chain(ms, registry, labels_only).on_pod_create(desired_pods(ms)[DECODE_ENTRY])
    assert result.pod["metadata"]["labels"]["example.com/ok"] == "yes"
    failure = result.outcomes[1].failure
    assert failure is not None
    assert failure.failure_class == FailureClass.FORBIDDEN_PATCH
    assert "/metadata/annotations" in failure.detail


# --- the plugins-applied annotation ----------------------------------------------------------


def test_plugins_applied_lists_exactly_the_plugins_that_ran(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms(
        [
            annotate("a"),
            plugin("fail", {"mode": "crash"}, failurePolicy="Ignore"),
            plugin("label", scope={"roles": ["decode"]}),
            plugin("fail", {"mode": "noop"}),  # ran, changed nothing: it still ran
            plugin("watch"),  # OnPodReady only: not part of OnPodCreate
        ]
    )
    result = build_chain(ms, registry).on_pod_create(desired_pods(ms)[PREFILL_ENTRY])
    raw = result.pod["metadata"]["annotations"][PLUGINS_APPLIED_ANNOTATION]
    assert raw == '[{"name":"annotate","runtime":"Native"},{"name":"fail","runtime":"Native"}]'
    assert [o.index for o in result.outcomes] == [0, 1, 3]
    assert all(PLUGINS_APPLIED_ANNOTATION not in c.annotations for c in log)


@pytest.mark.parametrize(
    "plugins",
    [
        [annotate("a", scope={"roles": ["decode"]})],
        [plugin("fail", {"mode": "forbidden"}, failurePolicy="Ignore")],
        [plugin("watch")],
    ],
    ids=["out of scope", "all ignored", "no OnPodCreate hook"],
)
def test_plugins_applied_is_absent_when_no_plugin_ran(
    two_role_ms: MsFactory, registry: Registry, plugins: list[dict[str, Any]]
) -> None:
    ms = two_role_ms(plugins)
    desired = desired_pods(ms)[PREFILL_ENTRY]
    result = build_chain(ms, registry).on_pod_create(desired)
    assert applied(result.pod) is None
    assert result.pod == desired.pod


# --- copies ----------------------------------------------------------------------------------


def test_a_plugin_that_mutates_its_request_changes_nothing(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms([plugin("mutate"), annotate("after")])
    desired = desired_pods(ms)[DECODE_ENTRY]
    before = copy.deepcopy(desired.pod)
    result = build_chain(ms, registry).on_pod_create(desired)

    assert desired.pod == before
    assert result.pod["metadata"]["name"] == DECODE_ENTRY
    assert result.pod["spec"]["containers"][0]["image"] == "e:1"
    assert tags(result.pod) == {"after"}
    assert log[1].pod == DECODE_ENTRY, "the next plugin sees the Pod, not the scribbles"
    assert set(log[1].annotations) == set()
    assert applied(result.pod) == [
        {"name": "mutate", "runtime": "Native"},
        {"name": "annotate", "runtime": "Native"},
    ]


def test_the_desired_pod_is_never_changed(two_role_ms: MsFactory, registry: Registry) -> None:
    """Results share what no plugin touched with the desired Pod (copy-on-write), so the
    desired Pod must come through any number of runs unchanged."""
    ms = two_role_ms([annotate("a"), plugin("label")])
    chain = build_chain(ms, registry)
    desired = desired_pods(ms)[PREFILL_ENTRY]
    before = copy.deepcopy(desired.pod)
    first = chain.on_pod_create(desired)
    second = chain.on_pod_create(desired)
    assert desired.pod == before
    assert first.pod == second.pod
    assert first.pod["metadata"] is not desired.pod["metadata"]


# --- OnPodReady ------------------------------------------------------------------------------


def test_on_pod_ready_returns_failures_instead_of_raising(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms(
        [
            plugin("watch", {"mode": "noop"}),
            plugin("watch", {"mode": "hook-error"}, failurePolicy="Fail"),
            annotate("create-only"),
            plugin("watch", {"mode": "crash"}),
            plugin("watch", {"mode": "noop"}, scope={"target": "Worker"}),
        ]
    )
    desired = desired_pods(ms)[DECODE_ENTRY]
    running = copy.deepcopy(desired.pod)
    running["status"] = {"phase": "Running"}
    seen = copy.deepcopy(running)

    failures = build_chain(ms, registry).on_pod_ready(desired, running)

    assert [(c.hook, c.tag) for c in log] == [
        (Hook.ON_POD_READY, "noop"),
        (Hook.ON_POD_READY, "hook-error"),
        (Hook.ON_POD_READY, "crash"),
    ]
    assert [(f.failure_class, f.plugin, f.hook, f.pod, f.detail) for f in failures] == [
        (FailureClass.PLUGIN_ERROR, "watch", "OnPodReady", DECODE_ENTRY, "not warmed up"),
        (FailureClass.PLUGIN_ERROR, "watch", "OnPodReady", DECODE_ENTRY, "ValueError: bad gauge"),
    ]
    assert running == seen, "each plugin gets a copy; their scribbles stay there"


def test_a_chain_serves_a_hook_when_any_plugin_has_it_whatever_its_scope(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    scoped = two_role_ms([plugin("watch", {"mode": "noop"}, scope={"roles": ["prefill"]})])
    assert build_chain(scoped, registry).serves(Hook.ON_POD_READY)
    create_only = build_chain(two_role_ms([annotate("create-only")]), registry)
    assert create_only.serves(Hook.ON_POD_CREATE)
    assert not create_only.serves(Hook.ON_POD_READY)


def test_on_pod_ready_without_failures(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms([plugin("watch", {"mode": "noop"}, scope={"roles": ["prefill"]})])
    chain = build_chain(ms, registry)
    pods = desired_pods(ms)
    assert chain.on_pod_ready(pods[PREFILL_WORKER], pods[PREFILL_WORKER].pod) == []
    assert chain.on_pod_ready(pods[DECODE_ENTRY], pods[DECODE_ENTRY].pod) == []
    assert [(c.pod, c.is_entry) for c in log] == [(PREFILL_WORKER, False)]


# --- ChainCache ------------------------------------------------------------------------------


def test_cache_reuses_a_chain_for_the_same_generation_and_plugins(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    cache = ChainCache(registry)
    first = cache.get(two_role_ms([annotate("a")]))
    again = cache.get(two_role_ms([annotate("a")]))  # an equal object, parsed anew
    assert again is first
    assert cache.builds == 1


@pytest.mark.parametrize(
    "change",
    [
        {"generation": 2},
        {"plugins": [annotate("b")]},
        {"plugins": [annotate("a"), annotate("b")]},
        {"plugins": [annotate("a", failurePolicy="Ignore")]},
        {"plugins": [annotate("a", scope={"target": "Entry"})]},
        {"plugins": []},
        {"name": "other"},
    ],
    ids=["generation", "config", "added", "failure policy", "scope", "removed", "object"],
)
def test_cache_rebuilds_when_what_the_chain_depends_on_changes(
    two_role_ms: MsFactory, registry: Registry, change: dict[str, Any]
) -> None:
    cache = ChainCache(registry)
    first = cache.get(two_role_ms([annotate("a")]))
    changed = two_role_ms(**{"plugins": [annotate("a")], **change})
    rebuilt = cache.get(changed)
    assert rebuilt is not first
    assert rebuilt.model_serving is changed
    assert cache.builds == 2
    again = cache.get(two_role_ms([annotate("a")]))
    if "name" in change:  # another ModelServing: both chains are kept
        assert again is first
    else:  # one chain per ModelServing: the new one replaced the old one
        assert again is not first
        assert len(cache) == 1


def test_a_failed_build_drops_the_model_servings_previous_chain(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    cache = ChainCache(registry)
    cache.get(two_role_ms([annotate("a")]))
    cache.get(two_role_ms(name="other"))
    with pytest.raises(PluginConfigError):
        cache.get(two_role_ms([plugin("nope")], generation=2))
    assert len(cache) == 1, "only the other ModelServing's chain is left"


def test_cache_evicts_the_least_recently_used_past_its_size(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    cache = ChainCache(registry, size=2)
    a = cache.get(two_role_ms(name="a"))
    b = cache.get(two_role_ms(name="b"))
    assert cache.get(two_role_ms(name="a")) is a  # a is now the most recent
    cache.get(two_role_ms(name="c"))  # evicts b
    assert cache.builds == 3
    assert cache.get(two_role_ms(name="a")) is a
    assert cache.builds == 3
    assert cache.get(two_role_ms(name="b")) is not b
    assert cache.builds == 4


def test_cache_builds_with_its_registry_and_validator(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    validator = PatchValidator(PatchPolicy(allowed_paths=[]))
    chain = ChainCache(registry, validator).get(two_role_ms([annotate("a")]))
    assert chain.validator is validator
    assert isinstance(owner(chain.entries[0]), Annotate)


def test_cache_does_not_keep_a_failed_build(two_role_ms: MsFactory, registry: Registry) -> None:
    cache = ChainCache(registry)
    bad = two_role_ms([plugin("nope")])
    for _ in range(2):
        with pytest.raises(PluginConfigError):
            cache.get(bad)
    assert cache.builds == 0


# --- what plugins return ---------------------------------------------------------------------


class TuplePatch:
    """Returns its patch as a tuple: a Sequence[PatchOperation], as the protocol allows."""

    name = "tuple-patch"

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        return ({"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"},)


def test_a_patch_returned_as_a_tuple_is_applied(two_role_ms: MsFactory) -> None:
    registry = Registry()
    registry.register(
        Builtin(
            name="tuple-patch",
            config_model=EmptyConfig,
            factory=lambda name, cfg: TuplePatch(),
            summary="tuple",
            hooks=frozenset({"on_pod_create"}),
        )
    )
    ms = two_role_ms([plugin("tuple-patch")])
    result = build_chain(ms, registry).on_pod_create(desired_pods(ms)[PREFILL_ENTRY])
    assert result.pod["spec"]["runtimeClassName"] == "nvidia"
    assert result.outcomes[0].patch == [
        {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"}
    ]


def test_recorded_patches_share_nothing_with_the_pod(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    ms = two_role_ms([annotate("only")])
    result = build_chain(ms, registry).on_pod_create(desired_pods(ms)[PREFILL_ENTRY])
    recorded = {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {"example.com/only": "annotate"},
    }
    # The plugins-applied annotation went into the Pod's map, not into the recorded patch.
    assert result.outcomes[0].patch == [recorded]
    result.pod["metadata"]["annotations"]["example.com/later"] = "x"
    assert result.outcomes[0].patch == [recorded]


class Declares:
    """Declares on_pod_ready but implements only on_pod_create."""

    def __init__(self, name: str, config: Any) -> None:
        self.name = name

    def on_pod_create(self, request: Any) -> list[Any]:
        return []


def test_declared_hook_must_be_implemented(two_role_ms: MsFactory) -> None:
    registry = one_plugin("declares", Declares, "on_pod_create", "on_pod_ready")
    with pytest.raises(PluginConfigError) as info:
        build_chain(two_role_ms([plugin("declares")]), registry)
    assert "declares on_pod_ready but does not implement it" in str(info.value)
    assert info.value.plugin == "declares"


def test_undeclared_hooks_are_not_called(two_role_ms: MsFactory) -> None:
    registry = one_plugin("ready-only", Both, "on_pod_ready")
    (entry,) = build_chain(two_role_ms([plugin("ready-only")]), registry).entries
    assert Hook.ON_POD_CREATE not in entry.hooks
    assert Hook.ON_POD_READY in entry.hooks


class Both(Declares):
    def on_pod_ready(self, request: Any) -> None:
        return None


class ExplodingValidator(PatchValidator):
    """A validator with a bug: it raises something other than PatchRejected."""

    def apply_patch(
        self, pod: Any, raw_ops: Any, copy_values: bool = True, keep: bool = True
    ) -> Any:
        raise TypeError("unhashable type: 'dict'")


def test_a_validator_bug_is_a_forbidden_patch_under_the_failure_policy(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    ms = two_role_ms([annotate("a", failurePolicy="Ignore"), annotate("b")])
    chain = build_chain(ms, registry, ExplodingValidator())
    desired = desired_pods(ms)["llm-0-prefill-0-0"]
    with pytest.raises(PluginFailure) as info:
        chain.on_pod_create(desired)
    assert info.value.failure_class is FailureClass.FORBIDDEN_PATCH
    assert info.value.plugin == "annotate"
    assert "could not be validated: TypeError" in str(info.value)
    ignore_all = two_role_ms([annotate("a", failurePolicy="Ignore")])
    result = build_chain(ignore_all, registry, ExplodingValidator()).on_pod_create(
        desired_pods(ignore_all)["llm-0-prefill-0-0"]
    )
    assert result.outcomes[0].failure is not None


class ReturnsNone:
    def __init__(self, name: str, config: Any) -> None:
        self.name = name

    def on_pod_create(self, request: Any) -> None:
        return None


def test_a_native_hook_returning_none_changes_nothing(two_role_ms: MsFactory) -> None:
    registry = one_plugin("none", ReturnsNone, "on_pod_create")
    ms = two_role_ms([plugin("none")])
    desired = desired_pods(ms)["llm-0-prefill-0-0"]
    result = build_chain(ms, registry).on_pod_create(desired)
    assert result.outcomes[0].patch == []
    assert result.outcomes[0].failure is None
    assert applied(result.pod) == [{"name": "none", "runtime": "Native"}]


class SharesValues:
    """Returns a patch whose value it keeps and changes later."""

    def __init__(self, name: str, config: Any) -> None:
        self.name = name
        self.value = {"example.com/x": "1"}

    def on_pod_create(self, request: Any) -> list[dict[str, Any]]:
        return [{"op": "add", "path": "/metadata/labels/example.com~1x", "value": self.value}]


def test_the_recorded_patch_does_not_share_values_with_the_plugin(
    two_role_ms: MsFactory,
) -> None:
    registry = one_plugin("shares", SharesValues, "on_pod_create")
    ms = two_role_ms([plugin("shares")])
    chain = build_chain(ms, registry)
    result = chain.on_pod_create(desired_pods(ms)["llm-0-prefill-0-0"])
    instance = owner(chain.entries[0])
    assert isinstance(instance, SharesValues)
    instance.value["example.com/x"] = "changed"
    assert result.outcomes[0].patch[0]["value"] == {"example.com/x": "1"}


def test_requests_carry_the_current_model_serving(
    two_role_ms: MsFactory, registry: Registry
) -> None:
    seen: list[dict[str, str] | None] = []

    class Spy:
        def __init__(self, name: str, config: Any) -> None:
            self.name = name

        def on_pod_create(self, request: Any) -> list[Any]:
            seen.append(request.model_serving.metadata.labels)
            return []

    spy_registry = one_plugin("spy", Spy, "on_pod_create")
    ms = two_role_ms([plugin("spy")])
    chain = build_chain(ms, spy_registry)
    edited = ms.model_copy(deep=True)
    edited.metadata.labels = {"tier": "gold"}
    chain.on_pod_create(desired_pods(ms)["llm-0-prefill-0-0"], edited)
    chain.on_pod_create(desired_pods(ms)["llm-0-prefill-0-0"])
    assert seen == [{"tier": "gold"}, ms.metadata.labels]


# --- Monitor mode ----------------------------------------------------------------------------


def test_a_monitored_plugin_runs_but_its_patch_is_not_applied(
    two_role_ms: MsFactory, registry: Registry, log: CallLog
) -> None:
    ms = two_role_ms([annotate("seen", mode="Monitor"), annotate("kept")])
    desired = desired_pods(ms)[DECODE_ENTRY]
    result = build_chain(ms, registry).on_pod_create(desired)
    assert [c.tag for c in log] == ["seen", "kept"]
    assert set(log[1].annotations) == set(desired.pod["metadata"].get("annotations") or {})
    assert tags(result.pod) == {"kept"}  # the monitored patch never reaches the Pod
    watched = result.outcomes[0]
    assert watched.monitored and watched.failure is None
    assert watched.patch and watched.changes == len(watched.patch)
    assert result.monitored == [watched]
    assert result.ignored == []
    assert watched.explain()["mode"] == "Monitor"
    assert applied(result.pod) == [{"name": "annotate", "runtime": "Native"}]


@pytest.mark.parametrize("mode", list(FAILURES))
def test_a_monitored_plugin_never_blocks_even_under_fail(
    two_role_ms: MsFactory, registry: Registry, log: CallLog, mode: str
) -> None:
    ms = two_role_ms([plugin("fail", {"mode": mode}, mode="Monitor"), annotate("after")])
    desired = desired_pods(ms)[PREFILL_WORKER]
    result = build_chain(ms, registry).on_pod_create(desired)  # no PluginFailure
    assert tags(result.pod) == {"after"}
    (watched,) = result.monitored
    assert watched.failure is not None
    assert result.ignored == []
    assert applied(result.pod) == [{"name": "annotate", "runtime": "Native"}]


def test_a_pod_made_from_a_template_is_judged_with_what_the_last_one_showed(
    two_role_ms: MsFactory,
) -> None:
    """The chain tells its validator the last Pod each role's entry or worker template made
    (``PatchValidator.related``): the next Pod's facts are found from it where the two share
    objects, and the chain gives the Pods a validator reading each Pod whole gives."""
    tweaks = plugin("demo-pod-tweaks", {"env": [{"name": "NCCL_DEBUG", "value": "INFO"}]})
    ms = two_role_ms([tweaks])
    chain = build_chain(ms)
    whole = build_chain(ms, validator=PatchValidator(memo=False))
    pods = desired_pods(ms)
    workers = [pods[name] for name in DECODE_WORKERS]
    entry = pods[DECODE_ENTRY]
    for desired in (workers[0], entry, workers[1]):
        assert chain.on_pod_create(desired).pod == whole.on_pod_create(desired).pod
    known = chain.validator._entry(workers[1].pod)
    # the last worker's, not the entry's
    assert known.parent is not None and known.parent.pod is workers[0].pod
    assert known.parent.parent is None
    assert chain.validator._entry(entry.pod).parent is None  # the first entry Pod of its role
