"""The operator's sandbox settings (defaults, maxima, bounds) and the per-call limits they yield.

``SandboxSettings`` is built once by whoever owns the sandbox (the controller, the CLI, tests);
``resolve_limits`` turns a plugin's requested limits into the ones a call runs under: a missing
value takes the default, a value above the operator's maximum is clamped to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
WASM_PAGE = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """What one hook call may use: fuel (wasm instructions, roughly), memory bytes, wall clock."""

    fuel: int
    memory_bytes: int
    timeout_ms: int


@dataclass(frozen=True)
class ModuleBounds:
    """The most a module may declare; defaults leave room for standard Go modules (about 2 MB,
    5,000 functions) several times over."""

    max_functions: int = 30_000
    max_function_body_bytes: int = 512 * 1024
    max_code_bytes: int = 16 * 1024 * 1024
    max_locals_per_function: int = 10_000
    max_local_declarations: int = 100_000
    max_types: int = 10_000
    max_imports: int = 1_000
    max_exports: int = 10_000
    max_globals: int = 10_000
    max_tables: int = 4
    max_table_elements: int = 100_000
    max_data_segments: int = 100_000
    max_data_bytes: int = 16 * 1024 * 1024
    max_element_segments: int = 10_000
    max_element_section_bytes: int = 4 * 1024 * 1024


def setting_name(*path: str) -> str:
    """How the operator configuration spells a sandbox setting: ``sandbox.<camelCase>...``."""
    words = [_camel(p) for p in path]
    return ".".join(["sandbox", *words])


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    word = head + "".join(w.capitalize() for w in rest)
    return word.replace("Mib", "MiB")


@dataclass(frozen=True)
class SandboxSettings:
    """Defaults and maxima for plugin limits, and the host's own fixed bounds."""

    default_fuel: int = 100_000_000
    max_fuel: int = 2_000_000_000
    default_memory_mib: int = 64
    max_memory_mib: int = 512
    default_timeout_ms: int = 250
    max_timeout_ms: int = 5_000
    max_response_bytes: int = 1 * MIB
    max_module_bytes: int = 32 * MIB
    max_wasm_stack_bytes: int = 512 * 1024
    max_table_elements: int = 100_000
    log_max_lines: int = 64
    log_max_line_bytes: int = 1024
    log_max_bytes: int = 16 * 1024
    epoch_tick_ms: int = 5
    pool_slots: int = 64
    pool_keep_resident_bytes: int = 1 * MIB
    cache_dir: Path | None = None
    module_bounds: ModuleBounds = ModuleBounds()
    compile_timeout_ms: int = 10_000
    compile_memory_mib: int = 512
    compile_workers: int = 2
    max_artifact_bytes: int = 256 * MIB
    extism_compiled_plugins: int = 8
    extism_workers: int = 2
    cache_max_bytes: int = 512 * MIB
    memory_cache_max_bytes: int = 256 * MIB
    preinitialize: bool = True
    """Run a module's ``_initialize`` once at load and start every call from what it left
    (``preinit``), instead of in every call."""

    def default_limits(self) -> Limits:
        return Limits(
            fuel=self.default_fuel,
            memory_bytes=self.default_memory_mib * MIB,
            timeout_ms=self.default_timeout_ms,
        )


def resolve_limits(
    settings: SandboxSettings,
    fuel: int | None = None,
    memory_mib: int | None = None,
    timeout_ms: int | None = None,
) -> Limits:
    """The limits a call runs under: defaults where unset, clamped to the operator's maxima."""
    return Limits(
        fuel=min(fuel or settings.default_fuel, settings.max_fuel),
        memory_bytes=min(memory_mib or settings.default_memory_mib, settings.max_memory_mib) * MIB,
        timeout_ms=min(timeout_ms or settings.default_timeout_ms, settings.max_timeout_ms),
    )


def default_cache_dir() -> Path:
    """Where compiled modules are kept: ``$MODELSERVING_CACHE/wasm``, by default
    ``~/.cache/modelserving/wasm``."""
    root = os.environ.get("MODELSERVING_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "modelserving"
    )
    return Path(root) / "wasm"
