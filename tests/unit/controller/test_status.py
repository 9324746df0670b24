"""The status the controller writes: Kthena's counts and conditions, PluginsReady, stable times."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from modelserving.api import ModelServing, parse_model_serving
from modelserving.api.errors import FailureClass, FieldError, PluginConfigError, PluginFailure
from modelserving.api.hook import Hook
from modelserving.api.labels import ROLE_ID_LABEL, ROLE_LABEL
from modelserving.controller import status
from modelserving.workload.sync import SyncStatus
from tests.unit.conftest import manifest, role

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
T0_TEXT = "2023-11-14T22:13:20Z"
T1 = T0 + 90.0
T1_TEXT = "2023-11-14T22:14:50Z"

MakeMs = Callable[..., ModelServing]
NO_PLUGINS = ("True", "NoPlugins", "no plugins are configured")


def counts(**changes: Any) -> SyncStatus:
    """Two ServingGroups, both ready at the new revision (override fields per test)."""
    fields: dict[str, Any] = {
        "replicas": 2,
        "current_replicas": 2,
        "updated_replicas": 2,
        "available_replicas": 2,
        "current_revision": "rev-new",
        "update_revision": "rev-new",
        "available": True,
        "progressing": False,
        "updating": False,
    }
    fields.update(changes)
    return SyncStatus(**fields)


ROLLING = counts(
    current_replicas=1,
    updated_replicas=1,
    available_replicas=1,
    current_revision="rev-old",
    available=False,
    progressing=False,
    updating=True,
)
STARTING = counts(available_replicas=0, available=False, progressing=True)


def conditions(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in st["conditions"]}


def summary(st: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}


@pytest.fixture
def ms(make_ms: MakeMs) -> ModelServing:
    return make_ms(replicas=2)


# --- fields ----------------------------------------------------------------------------------


def test_kthena_fields_come_from_the_counts(ms: ModelServing) -> None:
    st = status.build(ms, {}, ROLLING, NO_PLUGINS, T0)
    assert {k: v for k, v in st.items() if k != "conditions"} == {
        "replicas": 2,
        "currentReplicas": 1,
        "updatedReplicas": 1,
        "availableReplicas": 1,
        "currentRevision": "rev-old",
        "updateRevision": "rev-new",
        # Kthena's string for this ModelServing (its terms sorted as text: role-id first)
        "labelSelector": "modelserving.volcano.sh/entry=true,modelserving.volcano.sh/name=sample,"
        "modelserving.volcano.sh/role-id=server-0,modelserving.volcano.sh/role=server",
        "observedGeneration": 1,
    }


def test_the_label_selector_names_the_first_role(make_ms: MakeMs) -> None:
    ms = make_ms(roles=[role("prefill"), role("decode")])
    st = status.build(ms, {}, counts(), NO_PLUGINS, T0)
    assert f"{ROLE_LABEL}=prefill" in st["labelSelector"]
    assert f"{ROLE_ID_LABEL}=prefill-0" in st["labelSelector"]


def test_the_four_conditions_in_order_with_generation_and_time(ms: ModelServing) -> None:
    st = status.build(ms, {}, counts(), NO_PLUGINS, T0)
    assert [c["type"] for c in st["conditions"]] == [
        "Available",
        "Progressing",
        "UpdateInProgress",
        "PluginsReady",
    ]
    for cond in st["conditions"]:
        assert cond["observedGeneration"] == 1
        assert cond["lastTransitionTime"] == T0_TEXT
        assert set(cond) == {
            "type",
            "status",
            "reason",
            "message",
            "lastTransitionTime",
            "observedGeneration",
        }


def test_all_groups_ready(ms: ModelServing) -> None:
    st = status.build(ms, {}, counts(), NO_PLUGINS, T0)
    assert summary(st) == {
        "Available": ("True", "AllGroupsReady"),
        "Progressing": ("False", "NotProgressing"),
        "UpdateInProgress": ("False", "NoUpdate"),
        "PluginsReady": ("True", "NoPlugins"),
    }
    cond = conditions(st)
    assert cond["Available"]["message"] == "2/2 ServingGroups ready"
    assert cond["UpdateInProgress"]["message"] == "2/2 ServingGroups at the new revision"


def test_groups_starting(ms: ModelServing) -> None:
    st = status.build(ms, {}, STARTING, NO_PLUGINS, T0)
    assert summary(st)["Available"] == ("False", "GroupsNotReady")
    assert summary(st)["Progressing"] == ("True", "GroupProgressing")
    assert summary(st)["UpdateInProgress"] == ("False", "NoUpdate")
    assert conditions(st)["Progressing"]["message"] == "0/2 ServingGroups ready"


def test_groups_updating(ms: ModelServing) -> None:
    st = status.build(ms, {}, ROLLING, NO_PLUGINS, T0)
    assert summary(st)["Available"] == ("False", "GroupsNotReady")
    assert summary(st)["Progressing"] == ("False", "NotProgressing")
    assert summary(st)["UpdateInProgress"] == ("True", "GroupsUpdating")
    assert conditions(st)["UpdateInProgress"]["message"] == "1/2 ServingGroups at the new revision"


def test_the_plugins_condition_is_taken_as_given(ms: ModelServing) -> None:
    st = status.build(ms, {}, counts(), ("False", "Trap", "plugin 'x' trapped"), T0)
    assert conditions(st)["PluginsReady"]["status"] == "False"
    assert conditions(st)["PluginsReady"]["reason"] == "Trap"
    assert conditions(st)["PluginsReady"]["message"] == "plugin 'x' trapped"


def test_without_a_generation_no_observed_generation_is_written() -> None:
    raw = manifest()
    del raw["metadata"]["generation"]
    ms = parse_model_serving(raw)
    st = status.build(ms, {}, counts(), NO_PLUGINS, T0)
    assert "observedGeneration" not in st
    assert all("observedGeneration" not in c for c in st["conditions"])


def test_the_status_follows_the_api_schema(ms: ModelServing) -> None:
    """What ``build`` writes reads back as the ModelServing's status."""
    raw = manifest(replicas=2)
    raw["status"] = status.build(ms, {}, ROLLING, NO_PLUGINS, T0)
    parsed = parse_model_serving(raw).status
    assert parsed is not None
    assert parsed.current_revision == "rev-old"
    assert parsed.conditions is not None
    assert [c.type for c in parsed.conditions][-1] == "PluginsReady"


# --- lastTransitionTime ----------------------------------------------------------------------


def test_an_unchanged_status_keeps_its_transition_time(ms: ModelServing) -> None:
    first = status.build(ms, {}, STARTING, NO_PLUGINS, T0)
    # The counts move (a ServingGroup became ready) without any condition changing status.
    second = status.build(
        ms, first, counts(available_replicas=1, available=False, progressing=True), NO_PLUGINS, T1
    )
    for cond in second["conditions"]:
        assert cond["lastTransitionTime"] == T0_TEXT
    assert conditions(second)["Available"]["message"] == "1/2 ServingGroups ready"


def test_a_changed_status_moves_the_transition_time(ms: ModelServing) -> None:
    first = status.build(ms, {}, STARTING, NO_PLUGINS, T0)
    second = status.build(ms, first, counts(), NO_PLUGINS, T1)
    times = {c["type"]: c["lastTransitionTime"] for c in second["conditions"]}
    assert times == {
        "Available": T1_TEXT,  # False -> True
        "Progressing": T1_TEXT,  # True -> False
        "UpdateInProgress": T0_TEXT,  # False both times
        "PluginsReady": T0_TEXT,  # True both times
    }


def test_a_new_reason_with_the_same_status_keeps_the_time(ms: ModelServing) -> None:
    first = status.build(ms, {}, counts(), NO_PLUGINS, T0)
    loaded = ("True", "PluginsLoaded", "1 plugin(s) loaded and running")
    second = status.build(ms, first, counts(), loaded, T1)
    assert conditions(second)["PluginsReady"]["reason"] == "PluginsLoaded"
    assert conditions(second)["PluginsReady"]["lastTransitionTime"] == T0_TEXT
    broken = ("False", "InvalidConfig", "bad")
    third = status.build(ms, second, counts(), broken, T1 + 60)
    assert conditions(third)["PluginsReady"]["lastTransitionTime"] != T0_TEXT


def test_a_condition_missing_from_the_old_status_gets_the_current_time(ms: ModelServing) -> None:
    first = status.build(ms, {}, counts(), NO_PLUGINS, T0)
    old = copy.deepcopy(first)
    old["conditions"] = [c for c in old["conditions"] if c["type"] != "PluginsReady"]
    del old["conditions"][0]["lastTransitionTime"]  # Available, without a time
    second = status.build(ms, old, counts(), NO_PLUGINS, T1)
    times = {c["type"]: c["lastTransitionTime"] for c in second["conditions"]}
    assert times["PluginsReady"] == T1_TEXT
    assert times["Available"] == T1_TEXT
    assert times["Progressing"] == T0_TEXT


def test_building_twice_from_the_same_inputs_gives_the_same_status(ms: ModelServing) -> None:
    first = status.build(ms, {}, ROLLING, NO_PLUGINS, T0)
    again = status.build(ms, copy.deepcopy(first), ROLLING, NO_PLUGINS, T1)
    assert again == first
    assert status.build(ms, again, ROLLING, NO_PLUGINS, T1 + 3600) == first


# --- PluginsReady ----------------------------------------------------------------------------


def test_no_plugins(ms: ModelServing) -> None:
    assert status.plugins_condition(ms, None, []) == NO_PLUGINS


def test_plugins_loaded(make_ms: MakeMs) -> None:
    ms = make_ms(plugins=[{"name": "demo-pod-tweaks"}, {"name": "other"}])
    assert status.plugins_condition(ms, None, []) == (
        "True",
        "PluginsLoaded",
        "2 plugin(s) loaded and running",
    )


def test_an_invalid_module(ms: ModelServing) -> None:
    error = PluginConfigError(
        "tweaks",
        0,
        [FieldError("module.configMapRef", "ConfigMap team-a/mods not found")],
        FailureClass.INVALID_MODULE,
    )
    state, reason, message = status.plugins_condition(ms, error, [])
    assert (state, reason) == ("False", "InvalidModule")
    assert "plugin 'tweaks'" in message
    assert "ConfigMap team-a/mods not found" in message


def test_a_long_error_is_cut_to_the_conditions_bound(ms: ModelServing) -> None:
    """A plugin's error may quote a module or a guest at any length (a red-team module made one
    of 30 million characters); the condition keeps its head and says how much was cut."""
    error = PluginConfigError("w", 0, [FieldError("module", "x" * 100_000)], FailureClass.TRAP)
    _, _, message = status.plugins_condition(ms, error, [])
    assert len(message) == status.MAX_CONDITION_MESSAGE
    assert message.startswith("spec.plugins[0] (plugin 'w'): module: xxx")
    assert message.endswith(" more characters)")
    slow = PluginFailure(FailureClass.TIMEOUT, "v", Hook.ON_POD_CREATE, "y" * 50_000, "s-0")
    assert len(status.plugins_condition(ms, None, [slow])[2]) == status.MAX_CONDITION_MESSAGE


def test_an_invalid_config(ms: ModelServing) -> None:
    error = PluginConfigError("demo-pod-tweaks", 1, [FieldError("config.bogus", "not allowed")])
    state, reason, message = status.plugins_condition(ms, error, [])
    assert (state, reason) == ("False", "InvalidConfig")
    assert message == "spec.plugins[1] (plugin 'demo-pod-tweaks'): config.bogus: not allowed"


def test_a_refused_config_keeps_its_failure_class(ms: ModelServing) -> None:
    error = PluginConfigError("w", 0, [FieldError("config", "no")], FailureClass.PLUGIN_ERROR)
    assert status.plugins_condition(ms, error, [])[:2] == ("False", "PluginError")


def test_a_plugin_failure_on_a_pod(ms: ModelServing) -> None:
    failures = [
        PluginFailure(FailureClass.TRAP, "w", Hook.ON_POD_CREATE, "unreachable", "sample-0-a"),
        PluginFailure(FailureClass.TIMEOUT, "v", Hook.ON_POD_CREATE, "slow", "sample-1-a"),
    ]
    state, reason, message = status.plugins_condition(ms, None, failures)
    assert (state, reason) == ("False", "Trap")  # the first failure
    assert "plugin 'w'" in message
    assert "sample-0-a" in message


def test_a_config_error_wins_over_pod_failures(ms: ModelServing) -> None:
    error = PluginConfigError("x", 0, [FieldError("name", "unknown")])
    failure = PluginFailure(FailureClass.TRAP, "w", Hook.ON_POD_CREATE, "boom")
    assert status.plugins_condition(ms, error, [failure])[1] == "InvalidConfig"
