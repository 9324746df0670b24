"""The sandbox knows exports, not hooks: it calls the entry points it is given, and the plugin
layer maps each hook to its export in a module of either flavour."""

from __future__ import annotations

import pytest

from modelserving.abi.versions import since
from modelserving.api.hook import HOOK_SPECS, Hook
from modelserving.plugins.exports import ENTRYPOINTS, export_name, module_hooks, plugin_sandbox
from modelserving.sandbox import (
    FLAVOUR_EXTISM,
    FLAVOUR_NATIVE,
    Entrypoint,
    Sandbox,
    SandboxError,
    SandboxSettings,
)
from tests.wasm.guests import guest, responding

EXPORTS = (Entrypoint("run", "run_x", required=True), Entrypoint("check", "check_x"))


@pytest.fixture(scope="module")
def own() -> Sandbox:
    """A sandbox with entry points of its own, none of them a hook's."""
    return Sandbox(SandboxSettings(cache_dir=None), EXPORTS)


def test_a_sandbox_calls_the_entry_points_it_was_given(own: Sandbox) -> None:
    compiled = own.load(responding(b"\x80", hooks=("run", "check")))
    assert compiled.info.entrypoints == ("run", "check")
    assert own.call(compiled, "run", b"\x80", own.limits()).response == b"\x80"


def test_a_module_needs_one_required_entry_point(own: Sandbox) -> None:
    with pytest.raises(SandboxError, match="the module exports no hook: it needs run"):
        own.load(responding(b"\x80", hooks=("check",)))


def test_an_entry_point_has_the_core_type(own: Sandbox) -> None:
    wrong = guest('(func (export "run") (param i32 i32) (result i32) i32.const 0)')
    with pytest.raises(SandboxError, match=r"export 'run' has type \(i32, i32\) -> \(i32\)"):
        own.load(wrong)


def test_a_hook_export_is_nothing_to_a_sandbox_not_given_it(own: Sandbox) -> None:
    with pytest.raises(SandboxError, match="exports no hook"):
        own.load(responding(b"\x80", hooks=("ms_on_pod_create",)))


def test_an_export_the_module_lacks_is_invalid_module(own: Sandbox) -> None:
    compiled = own.load(responding(b"\x80", hooks=("run",)))
    with pytest.raises(SandboxError, match="the module does not export check") as info:
        own.call(compiled, "check", b"\x80", own.limits())
    assert info.value.failure_class == "InvalidModule"


def test_the_plugin_entry_points_are_the_hook_table() -> None:
    assert [(e.core, e.extism, e.required, e.since) for e in ENTRYPOINTS] == [
        (s.export, s.extism, s.target != "plugin", since(s.hook)) for s in HOOK_SPECS
    ]
    assert export_name(Hook.ON_POD_READY, FLAVOUR_NATIVE) == "ms_on_pod_ready"
    assert export_name(Hook.ON_POD_READY, FLAVOUR_EXTISM) == "on_pod_ready"


def test_module_hooks_maps_exports_back_to_hooks() -> None:
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=None))
    module = responding(b"", hooks=("ms_validate_config", "ms_on_pod_ready"))
    info = sandbox.load(module).info
    assert info.entrypoints == ("ms_on_pod_ready", "ms_validate_config")  # table order
    assert module_hooks(info) == (Hook.ON_POD_READY, Hook.VALIDATE_CONFIG)
