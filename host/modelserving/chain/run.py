"""Runs a ModelServing's chain on one Pod: each in-scope plugin, in list order, through ``invoke``.

``Chain.on_pod_create`` runs the in-scope OnPodCreate hooks, each on the Pod the previous one
produced, and applies the failure policy; ``Chain.on_pod_ready`` runs the in-scope OnPodReady
hooks and hands what they measured (``Observation``s) to the observer with each call's record.
``Chain.group_request`` gives a plugin the Pods of a ServingGroup in its scope, for the
ServingGroup hook it names, and ``Chain.on_serving_group_change`` runs that hook, the objects
checked by the object policy. Every call is reported to the observer (the controller's
metrics) as a ``CallRecord``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from modelserving.api.errors import PluginFailure
from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import SPEC, Hook, HookRequest
from modelserving.api.jsondata import json_copy
from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.api.modelserving import ModelServing
from modelserving.chain.objects import ObjectValidator
from modelserving.chain.policy import PatchValidator
from modelserving.chain.step import ChainEntry, Outcome, invoke
from modelserving.plugins.base import Observation
from modelserving.workload.plan import DesiredPod


@dataclass(slots=True)
class CreateResult:
    """The Pod after the chain, and each in-scope plugin's outcome in order."""

    pod: dict[str, Any]
    outcomes: list[Outcome]

    @property
    def ignored(self) -> list[Outcome]:
        """Failures the Pod was created without (failure policy Ignore)."""
        return [o for o in self.outcomes if o.failure is not None and not o.monitored]

    @property
    def monitored(self) -> list[Outcome]:
        """What the plugins in Monitor mode would have done (nothing of it applied)."""
        return [o for o in self.outcomes if o.monitored]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One hook call as metrics see it: ``result`` is "ok" or the failure class; ``role`` is
    the Pod's role (from the request); ``observations`` what a successful OnPodReady call
    measured; ``namespace`` the ModelServing's."""

    plugin: str
    hook: str
    runtime: str
    result: str
    seconds: float
    fuel: int | None = None
    role: str = ""
    observations: tuple[Observation, ...] = ()
    namespace: str = ""
    monitored: bool = False
    """The plugin runs in Monitor mode (``changes``: what it would have changed)."""
    changes: int = 0


CallObserver = Callable[[CallRecord], None]


class Chain:
    """The plugins of one ModelServing generation, ready to run on its Pods.

    ``observer``, when set, is told about every hook call (the controller's metrics).
    """

    def __init__(self, ms: ModelServing, entries: Sequence[ChainEntry], validator: PatchValidator):
        self.model_serving = ms
        self.entries = tuple(entries)
        self.validator = validator
        self.observer: CallObserver | None = None
        self.announced = False
        """Set by the controller once it has reported this chain (a new chain starts False)."""
        self._applied_texts: dict[tuple[int, ...], str] = {}
        """The plugins-applied annotation's text by the indexes of the plugins applied."""
        self._serving: dict[tuple[Hook, str, bool], tuple[ChainEntry, ...]] = {}
        """The entries whose hook is in scope, by hook, role and entry or worker Pod."""
        self._last_made: dict[tuple[str, bool], dict[str, Any]] = {}
        """The last Pod each role's entry or worker template made that the chain patched: the
        validator may find the next one's facts from its (``PatchValidator.related``)."""

    def __len__(self) -> int:
        return len(self.entries)

    def request(
        self,
        hook: Hook,
        desired: DesiredPod,
        pod: dict[str, Any],
        ms: ModelServing | None = None,
    ) -> HookRequest:
        return HookRequest(hook, ms or self.model_serving, desired.place, pod)

    def run(
        self, hook: Hook, desired: DesiredPod, pod: dict[str, Any], ms: ModelServing | None = None
    ) -> tuple[dict[str, Any], list[Outcome]]:
        """``hook`` of every in-scope plugin in list order, each call reported to the observer;
        the Pod after the patches and each outcome. A patching hook runs on the Pod the previous
        plugin produced, and a failure of a plugin with failure policy Fail is raised. A plugin in
        Monitor mode runs on the same Pod, but its patch is not carried on and its failure is
        never raised."""
        patches = SPEC[hook].patches
        outcomes: list[Outcome] = []
        place = desired.place
        key = (hook, place.role_name, place.is_entry)
        serving = self._serving.get(key)
        if serving is None:  # the same few roles and hooks for every Pod of the chain
            serving = self._serving[key] = tuple(e for e in self.entries if e.serves(hook, place))
        if not serving:
            return pod, outcomes
        model, validator, last = ms or self.model_serving, self.validator, serving[-1]
        for entry in serving:
            request = HookRequest(hook, model, place, pod)  # ``request``, without the call
            outcome = invoke(entry, request, validator, None, entry is last)
            self._observe(outcome, place.role_name)
            if outcome.failure is not None and patches and entry.spec.blocks:
                raise outcome.failure
            if outcome.pod is not None and not outcome.monitored:
                pod = outcome.pod
            outcomes.append(outcome)
        return pod, outcomes

    def on_pod_create(self, desired: DesiredPod, ms: ModelServing | None = None) -> CreateResult:
        """Run each in-scope OnPodCreate; raise PluginFailure when a Fail-policy plugin fails.

        ``ms`` is the ModelServing as the caller sees it now (its labels and annotations may have
        changed without a new generation); by default the one the chain was built from.
        """
        made = desired.pod
        place = desired.place
        key = (place.role_name, place.is_entry)
        sibling = self._last_made.get(key)
        if sibling is not None:
            self.validator.related(made, sibling)
        self._last_made[key] = made
        pod, outcomes = self.run(Hook.ON_POD_CREATE, desired, made, ms)
        if pod is made:
            pod = json_copy(pod)
        applied = tuple([o.index for o in outcomes if o.failure is None and not o.monitored])
        if applied:
            text = self._applied_texts.get(applied)
            if text is None:  # the same few sets of plugins apply to every Pod of the chain
                entries = [e for e in self.entries if e.index in applied]
                text = self._applied_texts[applied] = _applied_text(entries)
            pod = _annotated(pod, text)
        return CreateResult(pod=pod, outcomes=outcomes)

    def on_pod_ready(
        self, desired: DesiredPod, pod: dict[str, Any], ms: ModelServing | None = None
    ) -> list[PluginFailure]:
        """Run OnPodReady of every in-scope plugin; failures are returned, never raised.

        What each successful call returned (its ``Observation``s) goes to the observer with the
        call's record, attributed to the plugin and the Pod's role.
        """
        _, outcomes = self.run(Hook.ON_POD_READY, desired, pod, ms)
        return [o.failure for o in outcomes if o.failure is not None]

    def serves(self, hook: Hook) -> bool:
        """Whether any plugin of the chain has ``hook`` (whatever its scope)."""
        return any(hook in e.hooks for e in self.entries)

    def has_ready_hooks(self, desired: DesiredPod) -> bool:
        """Whether any OnPodReady hook is in scope for this Pod."""
        return any(e.serves(Hook.ON_POD_READY, desired.place) for e in self.entries)

    def group_entries(self, hook: Hook = Hook.ON_SERVING_GROUP_CHANGE) -> list[ChainEntry]:
        """The plugins with the ServingGroup hook ``hook``, in list order."""
        return [e for e in self.entries if hook in e.hooks]

    def group_request(
        self,
        entry: ChainEntry,
        serving_group: str,
        pods: Sequence[GroupPod],
        ms: ModelServing | None = None,
        hook: Hook = Hook.ON_SERVING_GROUP_CHANGE,
    ) -> GroupRequest | None:
        """The request of ``entry``'s ServingGroup hook ``hook``: the Pods of ``pods`` (in the
        request's order) in its scope, and how many it should see; None when none is in scope."""
        ms = ms or self.model_serving
        spec = entry.spec
        mine = tuple(p for p in pods if spec.applies_to(p.place.role_name, p.place.is_entry))
        if not mine:
            return None
        expected = 0
        for role in ms.spec.template.roles:
            if spec.applies_to(role.name, True):
                expected += role.replicas
            if spec.applies_to(role.name, False):
                expected += role.replicas * role.worker_replicas
        return GroupRequest(ms, serving_group, expected, mine, hook)

    def on_serving_group_change(
        self, entry: ChainEntry, request: GroupRequest, objects: ObjectValidator | None = None
    ) -> Outcome:
        """``entry``'s ServingGroup hook ``request.hook`` on ``request``, reported to the
        observer: the owned objects the object policy let through, or the failure (never
        raised)."""
        outcome = invoke(entry, request, self.validator, objects)
        self._observe(outcome, "")
        return outcome

    def _observe(self, outcome: Outcome, role: str) -> None:
        if self.observer is None:
            return
        failure = outcome.failure
        self.observer(
            CallRecord(
                outcome.plugin,
                str(outcome.hook),
                outcome.runtime,
                "ok" if failure is None else str(failure.failure_class),
                outcome.duration_us / 1e6,
                outcome.fuel,
                role,
                tuple(outcome.observations) if failure is None else (),
                self.model_serving.namespace,
                outcome.monitored,
                outcome.changes,
            )
        )


def _annotated(pod: dict[str, Any], text: str) -> dict[str, Any]:
    """``pod`` with the plugins-applied annotation ``text``. Copy-on-write: ``pod`` itself and
    everything it shares with earlier Pods stay unchanged."""
    metadata = dict(pod.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[PLUGINS_APPLIED_ANNOTATION] = text
    metadata["annotations"] = annotations
    return {**pod, "metadata": metadata}


def _applied_text(entries: Sequence[ChainEntry]) -> str:
    """The plugins-applied annotation's value for ``entries`` (those whose OnPodCreate
    succeeded): each one's name, runtime and, for WebAssembly, module digest, in order."""
    items = []
    for entry in entries:
        item = {"name": entry.name, "runtime": entry.runtime}
        if entry.digest:
            item["sha256"] = entry.digest
        items.append(item)
    return json.dumps(items, separators=(",", ":"))
