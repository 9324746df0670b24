"""msgpack encoding of hook requests and decoding of responses (every ABI version).

``RequestEncoder`` encodes the parts that stay the same for every Pod of a chain (the plugin and
its config, the ModelServing) once and splices them into each request; the bytes are exactly
those of ``msgpack.packb`` on the whole map. ``decode_response`` checks every rule of the
response shape and raises ``ResponseError`` naming the first one broken. A request says the
ABI version its module speaks, and a response may carry the keys of that version
(``modelserving.abi.versions``): ``observations`` (observing hooks), decoded into the same
``Observation`` values native plugins return, and ``objects`` (ServingGroup hooks, requests of
``RequestEncoder.group_hook``), whose shape is checked here, the operator's object policy by the
chain. Which hook may carry which key comes from the hook table.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Any

import msgpack

from modelserving.abi.contract import (
    ABI_VERSION,
    MAX_ERROR_TEXT,
    MAX_OBSERVATIONS,
    MAX_PATCH_OPS,
    MAX_RESPONSE_DEPTH,
    MAX_RESPONSE_VALUES,
    OBSERVATION_KEYS,
    OP_KEYS,
    OPS,
    OPS_WITH_VALUE,
    RESPONSE_KEYS,
    ResponseError,
)
from modelserving.api.group import GroupRequest, kind_of, objects_shape_problem
from modelserving.api.hook import HOOK_SPECS, SPEC, Hook, PatchOperation
from modelserving.api.jsondata import json_problem
from modelserving.api.observation import (
    MAX_OBSERVATION_SECONDS,
    Observation,
    observation_name_problem,
)
from modelserving.api.place import PodPlace

_packb = msgpack.packb


def _pack(value: Any) -> bytes:
    return _packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def _pack_str(text: str) -> bytes:
    """``_pack(text)`` for a str, without a Packer: msgpack's fixstr / str8 / str16 / str32."""
    data = text.encode("utf-8")
    n = len(data)
    if n < 32:
        return bytes([0xA0 | n]) + data
    if n < 0x100:
        return b"\xd9" + bytes([n]) + data
    if n < 0x10000:
        return b"\xda" + n.to_bytes(2, "big") + data
    return b"\xdb" + n.to_bytes(4, "big") + data


_K_SERVING_GROUP = _pack("servingGroup")
_K_ROLE_NAME = _pack("roleName")
_K_ROLE_ID = _pack("roleId")
_ENTRY = {True: _pack("isEntry") + _pack(True), False: _pack("isEntry") + _pack(False)}
_K_POD = _pack("pod")
_K_EXPECTED_PODS = _pack("expectedPods")
_K_PODS = _pack("pods")


def _map_header(n: int) -> bytes:
    if n < 16:
        return bytes([0x80 | n])
    return b"\xde" + n.to_bytes(2, "big")


class RequestEncoder:
    """Requests of one plugin for one ModelServing: the shared parts are encoded once."""

    def __init__(
        self,
        plugin: str,
        config: Any,
        model_serving: dict[str, Any] | None,
        version: int = ABI_VERSION,
    ) -> None:
        self._plugin = _pack("plugin") + _pack({"name": plugin, "config": config})
        self._ms = b"" if model_serving is None else _pack("modelServing") + _pack(model_serving)
        self._version = _pack("abiVersion") + _pack(version)
        self._hooks = {hook: _pack("hook") + _pack(hook.value) for hook in Hook}

    def validate_config(self) -> bytes:
        """The ValidateConfig request: abiVersion, hook and plugin only."""
        return _map_header(3) + self._version + self._hooks[Hook.VALIDATE_CONFIG] + self._plugin

    def pod_hook(self, hook: Hook, where: PodPlace, pod: dict[str, Any]) -> bytes:
        """An OnPodCreate or OnPodReady request for ``pod``."""
        if not self._ms:
            raise ValueError("a Pod hook request needs the ModelServing")
        return b"".join(
            (
                _map_header(9),
                self._version,
                self._hooks[hook],
                self._plugin,
                self._ms,
                _K_SERVING_GROUP,
                _pack_str(where.serving_group),
                _K_ROLE_NAME,
                _pack_str(where.role_name),
                _K_ROLE_ID,
                _pack_str(where.role_id),
                _ENTRY[bool(where.is_entry)],
                _K_POD,
                _pack(pod),
            )
        )

    def group_hook(self, request: GroupRequest) -> bytes:
        """The request of the ServingGroup hook ``request.hook`` (ABI v3, 15.3)."""
        if not self._ms:
            raise ValueError("a ServingGroup hook request needs the ModelServing")
        return b"".join(
            (
                _map_header(7),
                self._version,
                self._hooks[request.hook],
                self._plugin,
                self._ms,
                _K_SERVING_GROUP,
                _pack_str(request.serving_group),
                _K_EXPECTED_PODS,
                _pack(request.expected_pods),
                _K_PODS,
                _pack(request.wire_pods()),
            )
        )


def encode_request(
    hook: Hook,
    plugin: str,
    config: Any,
    model_serving: dict[str, Any] | None = None,
    where: PodPlace | None = None,
    pod: dict[str, Any] | None = None,
    version: int = ABI_VERSION,
    group: GroupRequest | None = None,
) -> bytes:
    """One request, encoded from scratch (tests, the CLI); the chain uses ``RequestEncoder``."""
    encoder = RequestEncoder(plugin, config, model_serving, version)
    if hook is Hook.VALIDATE_CONFIG:
        return encoder.validate_config()
    if SPEC[hook].per_group:
        if group is None:
            raise ValueError(f"a {hook} request needs the ServingGroup's Pods")
        return encoder.group_hook(group)
    if where is None or pod is None:
        raise ValueError(f"a {hook} request needs the Pod and where it sits")
    return encoder.pod_hook(hook, where, pod)


@dataclass(frozen=True)
class Response:
    """A decoded response: a patch (possibly empty) and observations (v2, OnPodReady), or the
    guest's error message."""

    patch: list[PatchOperation] = field(default_factory=list)
    error: str | None = None
    observations: list[Observation] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)


def _refuse_ext(code: int, data: bytes) -> Any:
    raise ResponseError(f"msgpack extension type {code} is not JSON")


def _values_over(value: Any, budget: int) -> bool:
    """Whether ``value`` holds more than ``budget`` map entries and array items in all; the
    work stops at the budget."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        count += len(item)
        if count > budget:
            return True
        children = item.values() if type(item) is dict else item
        stack.extend(c for c in children if type(c) is dict or type(c) is list)
    return False


_KEY_SETS = {version: frozenset(keys) for version, keys in RESPONSE_KEYS.items()}


def decode_response(data: bytes, hook: Hook, version: int = ABI_VERSION) -> Response:
    """The response of ``hook`` from a module of ABI ``version``; ResponseError when it breaks
    the contract."""
    if not data:
        return Response()
    collecting = gc.isenabled()
    # Each container the decoder makes can start a collection, which walks every object made
    # so far: a million empty arrays took 0.4 s with collections and 0.07 s without.
    gc.disable()
    try:
        value = msgpack.unpackb(
            data, raw=False, use_list=True, strict_map_key=False, ext_hook=_refuse_ext
        )
    except ResponseError:
        raise
    except msgpack.ExtraData:
        raise ResponseError("trailing bytes after the msgpack response") from None
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ResponseError(f"not a msgpack value: {detail}") from None
    finally:
        if collecting:
            gc.enable()
    if not isinstance(value, dict):
        raise ResponseError(f"the response must be a msgpack map, not {kind_of(value)}")
    # Every map entry and array item takes at least one byte of msgpack: a response no longer
    # than the bound cannot hold more values than it (and most are far shorter).
    if len(data) > MAX_RESPONSE_VALUES and _values_over(value, MAX_RESPONSE_VALUES):
        raise ResponseError(f"the response holds more than {MAX_RESPONSE_VALUES} values")
    problem = json_problem(value, MAX_RESPONSE_DEPTH)
    if problem is not None:
        raise ResponseError(f"the response {problem}")
    keys = RESPONSE_KEYS[version]
    unknown = [] if value.keys() <= _KEY_SETS[version] else sorted(set(value) - set(keys))
    if unknown:
        raise ResponseError(
            f"unknown response key(s) {', '.join(map(repr, unknown))} "
            f"(v{version} has {', '.join(keys)})"
        )
    error = value.get("error")
    if error is not None and not isinstance(error, str):
        raise ResponseError(f"error must be a string, not {kind_of(error)}")
    patch = _patch(value.get("patch"), hook)
    observations = _observations(value.get("observations"), hook)
    objects = _objects(value.get("objects"), hook)
    if error:
        if len(error) > MAX_ERROR_TEXT:
            error = error[:MAX_ERROR_TEXT] + "...[cut]"
        return Response(error=error)
    return Response(patch=patch, observations=observations, objects=objects)


def _patch(raw: Any, hook: Hook) -> list[PatchOperation]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ResponseError(f"patch must be an array, not {kind_of(raw)}")
    if len(raw) > MAX_PATCH_OPS:
        raise ResponseError(f"the patch has {len(raw)} operations; the limit is {MAX_PATCH_OPS}")
    if raw and not SPEC[hook].patches:
        patching = " and ".join(spec.hook for spec in HOOK_SPECS if spec.patches)
        raise ResponseError(f"{hook} responses may not carry a patch (only {patching} may)")
    ops: list[PatchOperation] = []
    for i, op in enumerate(raw):
        if not isinstance(op, dict):
            raise ResponseError(f"patch[{i}] must be a map, not {kind_of(op)}")
        unknown = [] if op.keys() <= OP_KEYS else sorted(set(op) - OP_KEYS)
        if unknown:
            raise ResponseError(f"patch[{i}] has unknown key(s) {', '.join(map(repr, unknown))}")
        name = op.get("op")
        if not isinstance(name, str) or name not in OPS:
            raise ResponseError(
                f"patch[{i}].op must be one of add, remove, replace, test, not {name!r}"
            )
        path = op.get("path")
        if not isinstance(path, str):
            raise ResponseError(f"patch[{i}].path must be a string, not {kind_of(path)}")
        if name in OPS_WITH_VALUE and "value" not in op:
            raise ResponseError(f"patch[{i}] ({name}) needs a value")
        if name == "remove" and "value" in op:
            raise ResponseError(f"patch[{i}] (remove) takes no value")
        ops.append(op)  # type: ignore[arg-type]
    return ops


def _observations(raw: Any, hook: Hook) -> list[Observation]:
    """The observations of a v2 response (the rules of ``Observation``, each broken one named
    with the entry); an unknown key has already refused them in v1."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ResponseError(f"observations must be an array, not {kind_of(raw)}")
    if raw and not SPEC[hook].observes:
        observing = " and ".join(spec.hook for spec in HOOK_SPECS if spec.observes)
        raise ResponseError(f"{hook} responses may not carry observations (only {observing} may)")
    if len(raw) > MAX_OBSERVATIONS:
        raise ResponseError(
            f"the response has {len(raw)} observations; the limit is {MAX_OBSERVATIONS}"
        )
    return [_observation(i, entry) for i, entry in enumerate(raw)]


def _objects(raw: Any, hook: Hook) -> list[dict[str, Any]]:
    """The owned objects of a v3 response (their shape only; an unknown key has already
    refused them before v3)."""
    if raw is None:
        return []
    if isinstance(raw, list) and raw and not SPEC[hook].per_group:
        owning = " and ".join(spec.hook for spec in HOOK_SPECS if spec.per_group)
        raise ResponseError(f"{hook} responses may not carry objects (only {owning} may)")
    problem = objects_shape_problem(raw)
    if problem is not None:
        raise ResponseError(problem)
    return list(raw)


def _observation(i: int, entry: Any) -> Observation:
    where = f"observations[{i}]"
    if not isinstance(entry, dict):
        raise ResponseError(f"{where} must be a map, not {kind_of(entry)}")
    unknown = sorted(set(entry) - set(OBSERVATION_KEYS))
    if unknown:
        raise ResponseError(f"{where} has unknown key(s) {', '.join(map(repr, unknown))}")
    for key in OBSERVATION_KEYS:
        if key not in entry:
            raise ResponseError(f"{where} needs a {key}")
    name, seconds = entry["name"], entry["seconds"]
    if not isinstance(name, str):
        raise ResponseError(f"{where}.name must be a string, not {kind_of(name)}")
    problem = observation_name_problem(name)
    if problem is not None:
        raise ResponseError(f"{where}.name: {problem}")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ResponseError(f"{where}.seconds must be a number, not {kind_of(seconds)}")
    if not 0 <= seconds <= MAX_OBSERVATION_SECONDS:  # finite: json_problem refused nan and inf
        raise ResponseError(
            f"{where}.seconds must be between 0 and {MAX_OBSERVATION_SECONDS} (7 days), "
            f"not {seconds}"
        )
    return Observation(name, float(seconds))
