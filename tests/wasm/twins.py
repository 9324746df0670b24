"""What the differential tests of the built-ins share: a built-in's compiled module, whether the
native or the WebAssembly twin accepts a config, one call's response bytes (OnPodCreate, and
OnServingGroupChange of ABI v3), and decoding."""

from __future__ import annotations

from typing import Any

import msgpack

from modelserving.abi.codec import encode_request
from modelserving.api.errors import PluginFailure
from modelserving.api.hook import Hook
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import CompiledModule
from tests.vectors import native_response


def load(sandbox: Sandbox, name: str) -> CompiledModule:
    """The compiled WebAssembly twin of the built-in ``name``."""
    return sandbox.load(builtin_wasm(f"{name}.wasm"))


def native_accepts(name: str, config: Any) -> bool:
    """Whether the native built-in's config model accepts ``config``."""
    return native_response(encode_request(Hook.VALIDATE_CONFIG, name, config)) is not None


def wasm_accepts(sandbox: Sandbox, compiled: CompiledModule, name: str, config: Any) -> bool:
    """Whether the module's ValidateConfig accepts ``config``; a failure other than a refused
    config (a trap...) fails the test."""
    plugin = WasmPlugin(name, config, compiled, sandbox, sandbox.limits())
    try:
        plugin.validate_config()
    except PluginFailure as failure:
        refused = failure
    else:
        return True
    assert refused.failure_class == "PluginError", str(refused)  # not a trap or a crash
    return False


def on_pod_create(sandbox: Sandbox, compiled: CompiledModule, request: bytes) -> bytes:
    """The module's response bytes to an OnPodCreate request."""
    return sandbox.call(compiled, "ms_on_pod_create", request, sandbox.limits()).response


def on_serving_group_change(sandbox: Sandbox, compiled: CompiledModule, request: bytes) -> bytes:
    """The module's response bytes to an OnServingGroupChange request."""
    call = sandbox.call(compiled, "ms_on_serving_group_change", request, sandbox.limits())
    return call.response


def decoded(response: bytes | None) -> dict[str, Any]:
    """A response as a map (the empty response: {})."""
    value: dict[str, Any] = msgpack.unpackb(response) if response else {}
    return value
