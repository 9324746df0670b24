"""One plugin step: ``invoke`` calls one hook of one chain entry and returns an ``Outcome``.

It hands the plugin its request (a private copy of the Pod when the adapter needs one), calls
it, classifies every failure into exactly one failure class, validates and applies a patch with
the patch policy, checks a ServingGroup hook's owned objects with the object policy, and times
the call. The chain runs it for each in-scope plugin and hook;
``modelserving plugin run`` and ``bench`` and the benchmarks call it directly, so every caller
takes the same step.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from modelserving.api.errors import FailureClass, ObjectRejected, PatchRejected, PluginFailure
from modelserving.api.group import GroupRequest
from modelserving.api.hook import SPEC, Hook, HookRequest, PatchOperation
from modelserving.api.jsondata import json_copy
from modelserving.api.modelserving import PluginSpec
from modelserving.api.place import PodPlace
from modelserving.chain.objects import ObjectValidator
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.adapter import PluginAdapter, Reply, Request, failed
from modelserving.plugins.base import HookError, Observation


@dataclass(frozen=True)
class ChainEntry:
    """One resolved plugin of the chain: its place in the list, its spec and its adapter.

    The same adapter serves every Pod of the ModelServing generation, so plugins keep no
    per-Pod state.
    """

    index: int
    spec: PluginSpec
    plugin: PluginAdapter

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def runtime(self) -> str:
        return self.plugin.runtime

    @property
    def digest(self) -> str | None:
        return self.plugin.digest

    @property
    def hooks(self) -> frozenset[Hook]:
        return self.plugin.hooks

    def serves(self, hook: Hook, place: PodPlace) -> bool:
        """Whether ``hook`` of this plugin runs for a Pod at ``place`` (its role, entry or
        worker)."""
        return hook in self.plugin.hooks and self.spec.applies_to(place.role_name, place.is_entry)


@dataclass(slots=True)
class Outcome:
    """What one plugin's hook did: the validated patch and the Pod after it (patching hooks),
    the observations (observing hooks), the owned objects the object policy let through
    (ServingGroup hooks), or why it failed; the call's time and the adapter's reply (fuel and
    the guest's log lines of a WebAssembly call)."""

    plugin: str
    index: int
    runtime: str
    hook: Hook = Hook.ON_POD_CREATE
    patch: list[PatchOperation] = field(default_factory=list)
    duration_us: float = 0.0
    failure: PluginFailure | None = None
    pod: dict[str, Any] | None = None
    reply: Reply = field(default_factory=Reply)
    objects: list[dict[str, Any]] = field(default_factory=list)
    monitored: bool = False
    """The plugin runs in Monitor mode: this is what it would have done; nothing of it is
    applied and a failure blocks nothing."""

    @property
    def applied(self) -> bool:
        return self.failure is None

    @property
    def observations(self) -> Sequence[Observation]:
        return self.reply.observations

    @property
    def fuel(self) -> int | None:
        """The fuel a successful WebAssembly call used (None: native, or failed)."""
        return self.reply.fuel if self.failure is None else None

    @property
    def changes(self) -> int:
        """How many changes the call made (or, in Monitor mode, would have made): patch
        operations, or owned objects."""
        return len(self.patch) + len(self.objects)

    def explain(self) -> dict[str, Any]:
        out: dict[str, Any] = {"plugin": self.plugin, "index": self.index, "runtime": self.runtime}
        if self.monitored:
            out["mode"] = "Monitor"
        if self.failure is None:
            out["patch"] = self.patch
        else:
            out["ignored"] = str(self.failure)
        return out


def invoke(
    entry: ChainEntry,
    request: Request,
    validator: PatchValidator | None = None,
    objects: ObjectValidator | None = None,
    last: bool = False,
) -> Outcome:
    """Call ``request.hook`` of ``entry``; never raises for a plugin's failure (it is in the
    outcome, classified, naming plugin, hook and Pod or ServingGroup). ``last``: no plugin
    patches the Pod after this one (``PatchValidator.apply_patch``'s ``keep``)."""
    hook = request.hook
    start = time.perf_counter()
    reply = _call(entry.plugin, request)
    pod: dict[str, Any] | None = None
    patch: list[PatchOperation] = []
    owned: list[dict[str, Any]] = []
    group = None
    if isinstance(request, GroupRequest):
        group = request.serving_group
        if reply.failure is None:
            reply, owned = _own(reply, request, objects or ObjectValidator())
    elif reply.failure is None and SPEC[hook].patches:
        assert isinstance(request, HookRequest)
        reply, pod, patch = _apply(
            reply, request.pod, validator or PatchValidator(), entry.plugin.copies_values, last
        )
    failure = None
    if reply.failure is not None:
        failure = reply.failure_of(entry.name, hook, request.pod_name, group)
    return Outcome(
        entry.spec.name,
        entry.index,
        entry.plugin.runtime,
        hook,
        patch,
        (time.perf_counter() - start) * 1e6,
        failure,
        pod,
        reply,
        owned,
        entry.spec.monitor,
    )


def _own(
    reply: Reply, request: GroupRequest, validator: ObjectValidator
) -> tuple[Reply, list[dict[str, Any]]]:
    """The reply and its objects the object policy let through; a refusal is ForbiddenObject
    (and no objects)."""
    namespace = request.model_serving.namespace
    try:
        return reply, validator.check(reply.objects, request.serving_group, namespace)
    except ObjectRejected as exc:
        message = str(exc)
    except Exception as exc:  # a validator bug must not escape the failure policy
        message = f"the objects could not be validated: {type(exc).__name__}: {exc}"
    return dataclasses.replace(reply, failure=FailureClass.FORBIDDEN_OBJECT, message=message), []


def _call(plugin: PluginAdapter, request: Request) -> Reply:
    """The adapter's reply; an exception it raises is a PluginError."""
    if plugin.copies_pod and isinstance(request, HookRequest) and SPEC[request.hook].per_pod:
        request = dataclasses.replace(request, pod=json_copy(request.pod))
    try:
        return plugin.call(request.hook, request)
    except PluginFailure as exc:  # a plugin that classified its own failure
        return failed(exc.failure_class, exc.detail)
    except HookError as exc:
        return failed(FailureClass.PLUGIN_ERROR, str(exc))
    except Exception as exc:
        return failed(FailureClass.PLUGIN_ERROR, f"{type(exc).__name__}: {exc}")


def _apply(
    reply: Reply, pod: dict[str, Any], validator: PatchValidator, copy: bool, last: bool
) -> tuple[Reply, dict[str, Any] | None, list[PatchOperation]]:
    """The reply, the patched Pod and the validated operations; a refusal is ForbiddenPatch
    (and no Pod)."""
    raw = [] if reply.patch is None else reply.patch
    try:
        patched, ops = validator.apply_patch(pod, raw, copy, keep=not last)
        return reply, patched, ops
    except PatchRejected as exc:
        message = str(exc)
    except Exception as exc:  # a validator bug must not escape the failure policy
        message = f"the patch could not be validated: {type(exc).__name__}: {exc}"
    failed_reply = dataclasses.replace(reply, failure=FailureClass.FORBIDDEN_PATCH, message=message)
    return failed_reply, None, []
