"""The WebAssembly plugin adapter: a plugin whose hooks run in the sandbox.

It encodes each HookRequest (the parts shared by every Pod once per ModelServing), calls the
module in a fresh instance, decodes the response and turns every failure into a
``PluginFailure`` naming the plugin, the hook, the Pod and exactly one failure class. Guest log
lines go to the ``modelserving.plugin`` logger, attributed to the plugin and the Pod. In an
OnPodReady call, info lines ``observe <name> <value>`` from ``modelserving.log`` are
observations (``modelserving.plugins.logs.parse_observation``): returned by ``on_pod_ready``
when the call succeeds, never logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelserving.abi.codec import PodContext, RequestEncoder, Response, decode_response
from modelserving.abi.contract import ResponseError
from modelserving.api.errors import FailureClass, PluginFailure
from modelserving.api.hook import Hook, HookRequest, PatchOperation
from modelserving.api.modelserving import ModelServing
from modelserving.plugins.base import Observation
from modelserving.plugins.logs import OBSERVE_PREFIX, emit, parse_observation
from modelserving.sandbox import CallFailure, CallResult, CompiledModule, Limits, LogRecord, Sandbox


@dataclass
class HookOutcome:
    """What one call returned (decoded) and used: for the CLI and benchmarks."""

    response: Response
    call: CallResult
    observations: list[Observation] = field(default_factory=list)


def _request_view(ms: ModelServing) -> dict[str, Any]:
    """The ModelServing as a request carries it: apiVersion, kind, metadata and spec (no status)."""
    full = ms.to_api()
    return {key: full[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in full}


class WasmPlugin:
    """One PluginSpec entry backed by a compiled module; serves every Pod of a chain."""

    def __init__(
        self,
        name: str,
        config: Any,
        compiled: CompiledModule,
        sandbox: Sandbox,
        limits: Limits,
        model_serving: ModelServing | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.compiled = compiled
        self.sandbox = sandbox
        self.limits = limits
        self._ms = model_serving
        self._encoder = RequestEncoder(
            name, config, _request_view(model_serving) if model_serving is not None else None
        )
        self.last: HookOutcome | None = None
        self._warned_observation = False

    @property
    def digest(self) -> str:
        return self.compiled.info.sha256

    @property
    def hooks(self) -> tuple[Hook, ...]:
        return self.compiled.info.hooks

    def encoder_for(self, ms: ModelServing) -> RequestEncoder:
        """The encoder of ``ms``: the cached one unless the caller passes a newer object."""
        if ms is not self._ms:
            self._ms = ms
            self._encoder = RequestEncoder(self.name, self.config, _request_view(ms))
        return self._encoder

    def encode(self, request: HookRequest) -> bytes:
        where = PodContext(
            request.serving_group, request.role_name, request.role_id, request.is_entry
        )
        return self.encoder_for(request.model_serving).pod_hook(request.hook, where, request.pod)

    def run(self, hook: Hook, payload: bytes, pod: str | None = None) -> HookOutcome:
        """Call ``hook`` on encoded request bytes; PluginFailure on any failure or guest error."""
        try:
            call = self.sandbox.call(self.compiled, hook, payload, self.limits)
        except CallFailure as failure:
            self._emit(hook, pod, self._take_observations(hook, failure.logs)[0])
            raise PluginFailure(
                failure.failure_class, self.name, hook, failure.message, pod
            ) from None
        records, observations = self._take_observations(hook, call.logs)
        self._emit(hook, pod, records)
        try:
            response = decode_response(call.response, hook)
        except ResponseError as exc:
            raise PluginFailure(
                FailureClass.INVALID_RESPONSE, self.name, hook, str(exc), pod
            ) from None
        outcome = HookOutcome(response, call, observations)
        self.last = outcome  # for the CLI and benchmarks; callers use what is returned
        if response.error:
            raise PluginFailure(FailureClass.PLUGIN_ERROR, self.name, hook, response.error, pod)
        return outcome

    def validate_config(self) -> None:
        """Run ms_validate_config, when exported; PluginFailure when the config is refused."""
        if Hook.VALIDATE_CONFIG in self.hooks:
            self.run(Hook.VALIDATE_CONFIG, self._encoder.validate_config())

    def on_pod_create(self, request: HookRequest) -> list[PatchOperation]:
        return self.run(Hook.ON_POD_CREATE, self.encode(request), request.pod_name).response.patch

    def on_pod_ready(self, request: HookRequest) -> list[Observation]:
        """Run OnPodReady; the observations its guest logged (empty when none)."""
        return self.run(Hook.ON_POD_READY, self.encode(request), request.pod_name).observations

    def _take_observations(
        self, hook: Hook, records: list[LogRecord]
    ) -> tuple[list[LogRecord], list[Observation]]:
        """The log lines to emit and the observations of an OnPodReady call (other hooks have
        none). A line that starts with ``observe `` but does not parse stays a log line; the
        first such line of this plugin gets a warning saying why."""
        if hook is not Hook.ON_POD_READY:
            return records, []
        kept: list[LogRecord] = []
        observations: list[Observation] = []
        for record in records:
            candidate = record.source == "log" and record.level == "info"
            if not candidate or not record.message.startswith(OBSERVE_PREFIX):
                kept.append(record)
                continue
            try:
                observation = parse_observation(record.message)
            except ValueError as exc:
                kept.append(record)
                if not self._warned_observation:
                    self._warned_observation = True
                    why = (
                        f"a line starting with 'observe ' is not an observation: {exc} (said once)"
                    )
                    kept.append(LogRecord("warn", why, "host"))
                continue
            if observation is not None:
                observations.append(observation)
        return kept, observations

    def _emit(self, hook: Hook, pod: str | None, records: list[LogRecord]) -> None:
        for record in records:
            emit(self.name, hook, pod, record.level, record.message, record.source)
