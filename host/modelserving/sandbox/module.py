"""Checks a compiled module against the ABI's shape and describes it (``ModuleInfo``).

Everything the contract fixes is checked here, once, at load: the ABI marker, the required and
optional exports with their exact types, and the imports (only ``modelserving.log`` and WASI
preview 1; an ``extism:host/env`` import marks an Extism-flavoured module). A module that breaks
any rule is refused with ``InvalidModule`` naming the rule.

The sandbox knows exports, not hooks: the functions the host calls are given to it as
``Entrypoint``s (their export in each flavour; the plugin layer derives them from the hook
table), and ``ModuleInfo.entrypoints`` says which of them a module exports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import wasmtime

from modelserving.abi.shape import (
    ALLOC,
    EXTISM_MODULE,
    FREE,
    INITIALIZE,
    LOG_FUNC,
    LOG_MODULE,
    MARKER_PREFIX,
    MARKERS,
    MEMORY,
    WASI_MODULE,
)
from modelserving.sandbox.errors import invalid_module
from modelserving.sandbox.settings import WASM_PAGE
from modelserving.sandbox.structure import START_EXPORT

FLAVOUR_NATIVE = "modelserving"
FLAVOUR_EXTISM = "extism"


@dataclass(frozen=True, slots=True)
class Entrypoint:
    """A function the host calls: its export in a core module (type ``(i32, i32) -> (i64)``)
    and in an Extism module (``() -> (i32)``); ``required``: a module must export at least one
    of the required entry points; ``since``: the lowest ABI version a module that exports it
    may have."""

    core: str
    extism: str
    required: bool = False
    since: int = 1

    def export(self, flavour: str) -> str:
        """The export in a module of ``flavour``."""
        return self.extism if flavour == FLAVOUR_EXTISM else self.core


@dataclass(frozen=True)
class ModuleInfo:
    """What a module is: digest, size, ABI version, flavour, the entry points it exports (by
    their export names, in the order they were declared), imports and memory needs."""

    sha256: str
    size: int
    abi_version: int
    flavour: str
    entrypoints: tuple[str, ...]
    imports: tuple[str, ...]
    exports: tuple[str, ...]
    wasi: bool
    initialize: bool
    memory_min_bytes: int
    start: bool = False

    def to_json(self) -> dict[str, Any]:
        """The facts as ``modelserving plugin inspect`` shows them (the caller adds the hooks)."""
        return {
            "abiVersion": self.abi_version,
            "flavour": self.flavour,
            "imports": list(self.imports),
            "exports": list(self.exports),
            "wasi": self.wasi,
            "memoryMinBytes": self.memory_min_bytes,
            "size": self.size,
            "sha256": self.sha256,
        }


def _sig(ty: Any) -> str:
    if not isinstance(ty, wasmtime.FuncType):
        return type(ty).__name__.removesuffix("Type").lower()
    params = ", ".join(str(p) for p in ty.params)
    results = ", ".join(str(r) for r in ty.results)
    return f"({params}) -> ({results})"


_I32 = "i32"
SIGNATURES = {
    ALLOC: "(i32) -> (i32)",
    FREE: "(i32, i32) -> ()",
    INITIALIZE: "() -> ()",
}
CORE_ENTRY_SIGNATURE = "(i32, i32) -> (i64)"
LOG_SIGNATURE = "(i32, i32, i32) -> ()"
MARKER_SIGNATURE = "() -> ()"
EXTISM_SIGNATURE = "() -> (i32)"


def check_module(
    module: wasmtime.Module,
    sha256: str,
    size: int,
    entrypoints: tuple[Entrypoint, ...],
    detached_start: bool = False,
) -> ModuleInfo:
    """Describe ``module`` or raise InvalidModule naming the first broken rule.
    ``entrypoints``: the functions the host may call; ``detached_start``: the host moved the
    module's start function to ``START_EXPORT``."""
    imports, wasi, extism = _check_imports(module)
    exports = {e.name: e.type for e in module.exports}
    if START_EXPORT in exports and not detached_start:
        raise invalid_module(f"the export name '{START_EXPORT}' is reserved for the host")
    exports.pop(START_EXPORT, None)
    version = _abi_version(exports)
    flavour = FLAVOUR_EXTISM if extism else FLAVOUR_NATIVE
    if extism:
        # Extism's kernel owns the request and response buffers, so the module's own memory
        # (if it exports one) is not part of the contract; modelserving.log is not linked.
        memory_min = _check_memory(exports[MEMORY]) if MEMORY in exports else 0
        if f"{LOG_MODULE}.{LOG_FUNC}" in imports:
            raise invalid_module(
                f"an Extism plugin logs through {EXTISM_MODULE}; it may not import "
                f"{LOG_MODULE}.{LOG_FUNC}"
            )
        found = _extism_entrypoints(exports, entrypoints)
        initialize = False
    else:
        memory_min = _check_memory(exports.get(MEMORY))
        _check_signatures(exports, entrypoints)
        if ALLOC not in exports:
            raise invalid_module(f"missing required export '{ALLOC}' {SIGNATURES[ALLOC]}")
        found = tuple(e.core for e in entrypoints if e.core in exports)
        initialize = INITIALIZE in exports
    for e in entrypoints:
        if version < e.since and e.export(flavour) in found:
            raise invalid_module(
                f"export '{e.export(flavour)}' needs ABI v{e.since} (the module's highest marker "
                f"is {MARKER_PREFIX}{version})"
            )
    required = [e.export(flavour) for e in entrypoints if e.required]
    if required and not any(name in found for name in required):
        raise invalid_module(f"the module exports no hook: it needs {' or '.join(required)}")
    return ModuleInfo(
        sha256=sha256,
        size=size,
        abi_version=version,
        flavour=flavour,
        entrypoints=found,
        imports=imports,
        exports=tuple(sorted(exports)),
        wasi=wasi,
        initialize=initialize,
        memory_min_bytes=memory_min,
        start=detached_start,
    )


def _check_imports(module: wasmtime.Module) -> tuple[tuple[str, ...], bool, bool]:
    names: list[str] = []
    wasi = extism = False
    for imp in module.imports:
        where = f"{imp.module}.{imp.name}"
        names.append(where)
        if imp.module == WASI_MODULE and isinstance(imp.type, wasmtime.FuncType):
            wasi = True
        elif imp.module == EXTISM_MODULE and isinstance(imp.type, wasmtime.FuncType):
            extism = True
        elif imp.module == LOG_MODULE and imp.name == LOG_FUNC:
            if _sig(imp.type) != LOG_SIGNATURE:
                raise invalid_module(
                    f"import '{where}' has type {_sig(imp.type)}; ABI v1 defines {LOG_SIGNATURE}"
                )
        else:
            raise invalid_module(
                f"import '{where}' ({_sig(imp.type)}) is not allowed: a module may import only "
                f"{LOG_MODULE}.{LOG_FUNC} and functions of {WASI_MODULE} "
                f"(or {EXTISM_MODULE} for Extism plugins)"
            )
    return tuple(names), wasi, extism


def _abi_version(exports: dict[str, Any]) -> int:
    supported = ", ".join(sorted(MARKERS))
    found = sorted(n for n in exports if n.startswith(MARKER_PREFIX))
    # The newest version the host and the module share wins.
    shared = sorted((n for n in found if n in MARKERS), key=MARKERS.__getitem__, reverse=True)
    for name in shared:
        if _sig(exports[name]) != MARKER_SIGNATURE:
            raise invalid_module(
                f"ABI marker '{name}' has type {_sig(exports[name])}; it must be {MARKER_SIGNATURE}"
            )
        return MARKERS[name]
    if found:
        raise invalid_module(
            f"unsupported ABI: the module exports {', '.join(found)}; "
            f"this host supports {supported}"
        )
    raise invalid_module(f"no ABI marker: the module must export one of: {supported}")


def _check_memory(memory: Any) -> int:
    if memory is None:
        raise invalid_module(f"missing required export '{MEMORY}'")
    if not isinstance(memory, wasmtime.MemoryType):
        raise invalid_module(f"export '{MEMORY}' must be a memory, not a {_sig(memory)}")
    if memory.is_64:
        raise invalid_module(f"export '{MEMORY}' is a 64-bit memory; ABI v1 uses 32-bit pointers")
    if memory.is_shared:
        raise invalid_module(f"export '{MEMORY}' is a shared memory; ABI v1 allows none")
    return int(memory.limits.min) * WASM_PAGE


def _check_signatures(exports: dict[str, Any], entrypoints: tuple[Entrypoint, ...]) -> None:
    wanted = {**SIGNATURES, **dict.fromkeys((e.core for e in entrypoints), CORE_ENTRY_SIGNATURE)}
    for name, want in wanted.items():
        if name in exports and _sig(exports[name]) != want:
            raise invalid_module(
                f"export '{name}' has type {_sig(exports[name])}; it must be {want}"
            )


def _extism_entrypoints(
    exports: dict[str, Any], entrypoints: tuple[Entrypoint, ...]
) -> tuple[str, ...]:
    found = []
    for name in (e.extism for e in entrypoints):
        if name not in exports:
            continue
        if _sig(exports[name]) != EXTISM_SIGNATURE:
            raise invalid_module(
                f"Extism export '{name}' has type {_sig(exports[name])}; it must be "
                f"{EXTISM_SIGNATURE}"
            )
        found.append(name)
    return tuple(found)
