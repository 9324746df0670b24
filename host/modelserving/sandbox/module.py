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

import json
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
    preinitialized: bool = False
    """The module runs as a snapshot taken after its ``_initialize`` (``preinit``): calls start
    from there (``initialize`` is then False: the snapshot no longer exports it)."""

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


@dataclass(frozen=True)
class Extern:
    """An import's or export's type as the checks see it: ``sig``, a function's signature
    (``(i32, i32) -> (i64)``) or the kind of anything else (``memory``, ``global``,
    ``table``); for a memory, its minimum pages and whether it is 64-bit or shared."""

    sig: str
    memory: tuple[int, bool, bool] | None = None

    @property
    def is_func(self) -> bool:
        return self.sig.startswith("(")


@dataclass(frozen=True)
class Interface:
    """A module's imports (module, name, type) and exports (name, type): all ``check_module``
    reads of it. Plain data, so the module cache keeps it in the module's artifact and a
    restart checks it without asking wasmtime again (``to_bytes``, ``from_bytes``)."""

    imports: tuple[tuple[str, str, Extern], ...]
    exports: tuple[tuple[str, Extern], ...]

    def to_bytes(self) -> bytes:
        return json.dumps(
            [
                [[m, n, e.sig, e.memory] for m, n, e in self.imports],
                [[n, e.sig, e.memory] for n, e in self.exports],
            ],
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Interface:
        """The interface ``to_bytes`` wrote; ValueError when ``data`` is not one."""
        try:
            imports, exports = json.loads(data)
            return cls(
                tuple((str(m), str(n), _extern(sig, mem)) for m, n, sig, mem in imports),
                tuple((str(n), _extern(sig, mem)) for n, sig, mem in exports),
            )
        except (TypeError, ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"not a module interface: {exc}") from None


def _extern(sig: object, memory: object) -> Extern:
    if memory is None:
        return Extern(str(sig))
    if not isinstance(memory, list) or len(memory) != 3:
        raise ValueError("a memory is [minimum, 64-bit, shared]")
    return Extern(str(sig), (int(memory[0]), bool(memory[1]), bool(memory[2])))


def describe(module: wasmtime.Module) -> Interface:
    """What ``check_module`` reads of ``module``, asked of wasmtime."""
    return Interface(
        tuple((i.module, i.name or "", _describe(i.type)) for i in module.imports),
        tuple((e.name, _describe(e.type)) for e in module.exports),
    )


def _describe(ty: Any) -> Extern:
    if isinstance(ty, wasmtime.MemoryType):
        return Extern("memory", (int(ty.limits.min), bool(ty.is_64), bool(ty.is_shared)))
    if not isinstance(ty, wasmtime.FuncType):
        return Extern(type(ty).__name__.removesuffix("Type").lower())
    params = ", ".join(str(p) for p in ty.params)
    results = ", ".join(str(r) for r in ty.results)
    return Extern(f"({params}) -> ({results})")


def _sig(ty: Extern) -> str:
    return ty.sig


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
    module: wasmtime.Module | Interface,
    sha256: str,
    size: int,
    entrypoints: tuple[Entrypoint, ...],
    detached_start: bool = False,
) -> ModuleInfo:
    """Describe ``module`` (or its ``Interface``) or raise InvalidModule naming the first
    broken rule. ``entrypoints``: the functions the host may call; ``detached_start``: the host
    moved the module's start function to ``START_EXPORT``."""
    interface = module if isinstance(module, Interface) else describe(module)
    imports, wasi, extism = _check_imports(interface)
    exports = dict(interface.exports)
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


def _check_imports(interface: Interface) -> tuple[tuple[str, ...], bool, bool]:
    names: list[str] = []
    wasi = extism = False
    for module, name, ty in interface.imports:
        where = f"{module}.{name}"
        names.append(where)
        if module == WASI_MODULE and ty.is_func:
            wasi = True
        elif module == EXTISM_MODULE and ty.is_func:
            extism = True
        elif module == LOG_MODULE and name == LOG_FUNC:
            if _sig(ty) != LOG_SIGNATURE:
                raise invalid_module(
                    f"import '{where}' has type {_sig(ty)}; ABI v1 defines {LOG_SIGNATURE}"
                )
        else:
            raise invalid_module(
                f"import '{where}' ({_sig(ty)}) is not allowed: a module may import only "
                f"{LOG_MODULE}.{LOG_FUNC} and functions of {WASI_MODULE} "
                f"(or {EXTISM_MODULE} for Extism plugins)"
            )
    return tuple(names), wasi, extism


def _abi_version(exports: dict[str, Extern]) -> int:
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


def _check_memory(memory: Extern | None) -> int:
    if memory is None:
        raise invalid_module(f"missing required export '{MEMORY}'")
    if memory.memory is None:
        raise invalid_module(f"export '{MEMORY}' must be a memory, not a {_sig(memory)}")
    minimum, is_64, is_shared = memory.memory
    if is_64:
        raise invalid_module(f"export '{MEMORY}' is a 64-bit memory; ABI v1 uses 32-bit pointers")
    if is_shared:
        raise invalid_module(f"export '{MEMORY}' is a shared memory; ABI v1 allows none")
    return minimum * WASM_PAGE


def _check_signatures(exports: dict[str, Extern], entrypoints: tuple[Entrypoint, ...]) -> None:
    wanted = {**SIGNATURES, **dict.fromkeys((e.core for e in entrypoints), CORE_ENTRY_SIGNATURE)}
    for name, want in wanted.items():
        if name in exports and _sig(exports[name]) != want:
            raise invalid_module(
                f"export '{name}' has type {_sig(exports[name])}; it must be {want}"
            )


def _extism_entrypoints(
    exports: dict[str, Extern], entrypoints: tuple[Entrypoint, ...]
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
