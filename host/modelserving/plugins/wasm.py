"""The WebAssembly plugin adapter: a plugin whose hooks run in the sandbox.

It encodes each HookRequest (the parts shared by every Pod once per ModelServing), calls the
module in a fresh instance, decodes the response and says how a call failed with exactly one
failure class (``Reply``; ``run`` raises it as a ``PluginFailure`` naming the plugin, the hook
and the Pod). Guest log lines go to the ``modelserving.plugin`` logger, attributed to the plugin
and the Pod. Requests say the ABI version the module's marker selected. A call of an observing
hook (OnPodReady) reports observations two ways, both in the reply when the call succeeds: the
``observations`` of an ABI v2 response (decoded by the codec), and info lines
``observe <name> <value>`` from ``modelserving.log`` (``modelserving.plugins.logs.
parse_observation``; v1 and v2, never logged). Native plugins return the same ``Observation``
values, so the chain and the controller treat both alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelserving.abi.codec import RequestEncoder, Response, decode_response
from modelserving.abi.contract import ResponseError
from modelserving.api.bytebudget import ByteBudget
from modelserving.api.errors import FailureClass
from modelserving.api.group import GroupRequest
from modelserving.api.hook import SPEC, Hook, HookRequest, PatchOperation
from modelserving.api.modelserving import ModelServing
from modelserving.plugins.adapter import Reply, Request, failed
from modelserving.plugins.base import Observation
from modelserving.plugins.exports import export_name, module_hooks
from modelserving.plugins.logs import OBSERVE_PREFIX, emit, parse_observation
from modelserving.sandbox import CallFailure, CallResult, CompiledModule, Limits, LogRecord, Sandbox


class Responses:
    """Decoded responses of patching hooks kept by their bytes, for every WebAssembly plugin of
    the process: most modules answer every Pod with the same bytes, and decoding is a pure
    function of the bytes, the hook and the ABI version. Only successful responses of at most
    ``max_bytes`` are kept, within a ``ByteBudget`` of ``budget`` bytes, so what modules can
    make the controller keep is bounded whatever they answer. A kept response is shared by
    every call that returned those bytes: read-only."""

    def __init__(self, max_bytes: int = 4096, budget: int = 64 * 1024) -> None:
        self.max_bytes = max_bytes
        self._kept: ByteBudget[tuple[Hook, int, bytes], Response] = ByteBudget(budget)

    @property
    def budget(self) -> int:
        return self._kept.budget

    @property
    def kept_bytes(self) -> int:
        return self._kept.kept_bytes

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def decode(self, data: bytes, hook: Hook, version: int) -> Response:
        """``decode_response(data, hook, version)``, from what is kept when it can be."""
        if not SPEC[hook].patches or len(data) > self.max_bytes:
            return decode_response(data, hook, version)
        key = (hook, version, data)
        response = self._kept.get(key)
        if response is None:
            response = decode_response(data, hook, version)
            if not response.error:
                self._kept.keep(key, len(data), response)
        return response


RESPONSES = Responses()
"""The process's kept responses: each at most 4 KiB (the built-ins' are 260 to 905 bytes), 64
KiB of them in all (as Python objects, at most about 70 times that)."""


def _request_view(ms: ModelServing) -> dict[str, Any]:
    """The ModelServing as a request carries it: apiVersion, kind, metadata and spec (no status)."""
    full = ms.to_api()
    return {key: full[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in full}


@dataclass(frozen=True)
class HookOutcome:
    """What one successful call returned (decoded) and used: for direct callers and tests."""

    response: Response
    call: CallResult
    observations: list[Observation] = field(default_factory=list)


class WasmPlugin:
    """One PluginSpec entry backed by a compiled module; serves every Pod of a chain.

    ``view`` replaces the ModelServing as requests carry it (``modelserving plugin run`` sends
    the request file's object as written)."""

    runtime = "Wasm"
    copies_pod = False
    copies_values = False

    def __init__(
        self,
        name: str,
        config: Any,
        compiled: CompiledModule,
        sandbox: Sandbox,
        limits: Limits,
        model_serving: ModelServing | None = None,
        view: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.compiled = compiled
        self.sandbox = sandbox
        self.limits = limits
        self._ms = model_serving
        if view is None and model_serving is not None:
            view = _request_view(model_serving)
        self.abi_version = compiled.info.abi_version
        self._encoder = RequestEncoder(name, config, view, self.abi_version)
        self.hooks = frozenset(module_hooks(compiled.info))
        self._exports = {hook: export_name(hook, compiled.info.flavour) for hook in Hook}
        self.last: HookOutcome | None = None
        self._warned_observation = False

    @property
    def digest(self) -> str:
        return self.compiled.info.sha256

    def encoder_for(self, ms: ModelServing) -> RequestEncoder:
        """The encoder of ``ms``: the cached one unless the caller passes a newer object."""
        if ms is not self._ms:
            self._ms = ms
            view = _request_view(ms)
            self._encoder = RequestEncoder(self.name, self.config, view, self.abi_version)
        return self._encoder

    def encode(self, request: HookRequest) -> bytes:
        encoder = self.encoder_for(request.model_serving)
        return encoder.pod_hook(request.hook, request.place, request.pod)

    def encode_group(self, request: GroupRequest) -> bytes:
        return self.encoder_for(request.model_serving).group_hook(request)

    def call(self, hook: Hook, request: Request) -> Reply:
        """One hook on ``request`` (ValidateConfig: the plugin's config alone)."""
        if isinstance(request, GroupRequest):
            return self.call_bytes(hook, self.encode_group(request), request.serving_group)
        if not SPEC[hook].per_pod:
            return self.call_bytes(hook, self._encoder.validate_config())
        return self.call_bytes(hook, self.encode(request), request.pod_name)

    def call_bytes(self, hook: Hook, payload: bytes, pod: str | None = None) -> Reply:
        """Call ``hook`` on encoded request bytes; a failure is in the reply, never raised."""
        result = self._exchange(hook, payload, pod)
        if isinstance(result, Reply):
            return result
        call = result.call
        return Reply(
            patch=result.response.patch,
            observations=result.observations,
            objects=result.response.objects,
            call=call,
            logs=call.logs,
        )

    def run(self, hook: Hook, payload: bytes, pod: str | None = None) -> HookOutcome:
        """Call ``hook`` on encoded request bytes; PluginFailure on any failure or guest error."""
        result = self._exchange(hook, payload, pod)
        if isinstance(result, Reply):
            raise result.failure_of(self.name, hook, pod)
        return result

    def _exchange(self, hook: Hook, payload: bytes, pod: str | None) -> HookOutcome | Reply:
        """The decoded outcome of one call, or the reply saying how it failed."""
        try:
            call = self.sandbox.call(self.compiled, self._exports[hook], payload, self.limits)
        except CallFailure as failure:
            self._emit(hook, pod, self._take_observations(hook, failure.logs)[0])
            return failed(failure.failure_class, failure.message, failure.logs)
        records, observations = self._take_observations(hook, call.logs)
        self._emit(hook, pod, records)
        try:
            response = RESPONSES.decode(call.response, hook, self.abi_version)
        except ResponseError as exc:
            return failed(FailureClass.INVALID_RESPONSE, str(exc), call.logs)
        outcome = HookOutcome(response, call, observations + response.observations)
        self.last = outcome  # for direct callers and tests; callers use what is returned
        if response.error:
            return failed(FailureClass.PLUGIN_ERROR, response.error, call.logs)
        return outcome

    def validate_config(self) -> None:
        """Run ms_validate_config, when exported; PluginFailure when the config is refused."""
        if Hook.VALIDATE_CONFIG in self.hooks:
            self.run(Hook.VALIDATE_CONFIG, self._encoder.validate_config())

    def on_pod_create(self, request: HookRequest) -> list[PatchOperation]:
        """OnPodCreate as a native plugin has it (the patch; PluginFailure on failure)."""
        return self.run(Hook.ON_POD_CREATE, self.encode(request), request.pod_name).response.patch

    def on_pod_ready(self, request: HookRequest) -> list[Observation]:
        """OnPodReady as a native plugin has it: the observations its guest logged."""
        return self.run(Hook.ON_POD_READY, self.encode(request), request.pod_name).observations

    def on_serving_group_change(self, request: GroupRequest) -> list[dict[str, Any]]:
        """OnServingGroupChange as a native plugin has it: the owned objects (their shape
        checked; PluginFailure on failure)."""
        payload = self.encode_group(request)
        return self.run(request.hook, payload, request.serving_group).response.objects

    def _take_observations(
        self, hook: Hook, records: list[LogRecord]
    ) -> tuple[list[LogRecord], list[Observation]]:
        """The log lines to emit and the observations of a call of an observing hook (others
        have none). A line that starts with ``observe `` but does not parse stays a log line; the
        first such line of this plugin gets a warning saying why."""
        if not SPEC[hook].observes:
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
