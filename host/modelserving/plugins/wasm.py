"""The WebAssembly plugin adapter: a plugin whose hooks run in the sandbox.

It encodes each HookRequest (the parts shared by every Pod once per ModelServing), calls the
module in a fresh instance, decodes the response and turns every failure into a
``PluginFailure`` naming the plugin, the hook, the Pod and exactly one failure class. Guest log
lines go to the ``modelserving.plugin`` logger, attributed to the plugin and the Pod.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from modelserving.abi.codec import PodContext, RequestEncoder, Response, decode_response
from modelserving.abi.contract import ResponseError
from modelserving.api.errors import FailureClass, PluginFailure
from modelserving.api.hook import Hook, HookRequest, PatchOperation
from modelserving.api.modelserving import ModelServing
from modelserving.sandbox import CallFailure, CallResult, CompiledModule, Limits, LogRecord, Sandbox

log = logging.getLogger("modelserving.plugin")
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}


@dataclass
class HookOutcome:
    """What one call returned (decoded) and used: for the CLI and benchmarks."""

    response: Response
    call: CallResult


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
            self._emit(hook, pod, failure.logs)
            raise PluginFailure(
                failure.failure_class, self.name, hook, failure.message, pod
            ) from None
        self._emit(hook, pod, call.logs)
        try:
            response = decode_response(call.response, hook)
        except ResponseError as exc:
            raise PluginFailure(
                FailureClass.INVALID_RESPONSE, self.name, hook, str(exc), pod
            ) from None
        self.last = HookOutcome(response, call)
        if response.error:
            raise PluginFailure(FailureClass.PLUGIN_ERROR, self.name, hook, response.error, pod)
        return self.last

    def validate_config(self) -> None:
        """Run ms_validate_config, when exported; PluginFailure when the config is refused."""
        if Hook.VALIDATE_CONFIG in self.hooks:
            self.run(Hook.VALIDATE_CONFIG, self._encoder.validate_config())

    def on_pod_create(self, request: HookRequest) -> list[PatchOperation]:
        return self.run(Hook.ON_POD_CREATE, self.encode(request), request.pod_name).response.patch

    def on_pod_ready(self, request: HookRequest) -> None:
        self.run(Hook.ON_POD_READY, self.encode(request), request.pod_name)

    def _emit(self, hook: Hook, pod: str | None, records: list[LogRecord]) -> None:
        on_pod = f" on Pod {pod}" if pod else ""
        for record in records:
            log.log(
                _LEVELS.get(record.level, logging.INFO),
                "plugin '%s' %s%s: %s",
                self.name,
                hook,
                on_pod,
                record.message,
                extra={"plugin": self.name, "hook": str(hook), "pod": pod, "source": record.source},
            )
