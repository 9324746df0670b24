"""A module's shape, read from its binary sections before anything compiles it.

``check_shape`` walks the section headers and the few vectors whose sizes decide what compiling
and instantiating will cost (functions, code bodies and their locals, tables, globals, data and
element segments, imports, exports). It never decodes an instruction, so it runs in time linear
in the module's size and allocates next to nothing, and it refuses the first figure over the
operator's ``ModuleBounds`` as InvalidModule, naming the bound and the module's figure, as soon as
it is read. What it cannot see (a small function body that is slow to compile) is bounded by the
compile worker's deadline and memory cap instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelserving.sandbox.errors import invalid_module
from modelserving.sandbox.settings import ModuleBounds, setting_name

_MAGIC = b"\0asm"
_VERSION = b"\x01\0\0\0"

_CUSTOM, _TYPE, _IMPORT, _FUNCTION, _TABLE, _MEMORY, _GLOBAL, _EXPORT = range(8)
_START, _ELEMENT, _CODE, _DATA, _DATA_COUNT, _TAG = range(8, 14)
_SECTION_NAMES = {
    _TYPE: "type",
    _IMPORT: "import",
    _FUNCTION: "function",
    _TABLE: "table",
    _MEMORY: "memory",
    _GLOBAL: "global",
    _EXPORT: "export",
    _START: "start",
    _ELEMENT: "element",
    _CODE: "code",
    _DATA: "data",
    _DATA_COUNT: "data count",
    _TAG: "tag",
}


@dataclass(frozen=True)
class ModuleShape:
    """What a module declares, as far as cost goes."""

    functions: int = 0
    largest_function_body_bytes: int = 0
    code_bytes: int = 0
    most_locals_in_a_function: int = 0
    local_declarations: int = 0
    """Local declarations (a count and a type each) in all function bodies: what reading the
    locals costs, whatever they declare (a declaration of no locals is valid)."""
    types: int = 0
    imports: int = 0
    exports: int = 0
    globals: int = 0
    tables: int = 0
    largest_table_elements: int = 0
    data_segments: int = 0
    data_bytes: int = 0
    element_segments: int = 0
    element_section_bytes: int = 0


# Each figure of a shape, the bound it is held to, and the words of the refusal.
_CHECKS = (
    ("functions", "max_functions", "functions"),
    ("largest_function_body_bytes", "max_function_body_bytes", "bytes in one function body"),
    ("code_bytes", "max_code_bytes", "bytes of code"),
    ("most_locals_in_a_function", "max_locals_per_function", "locals in one function"),
    ("local_declarations", "max_local_declarations", "local declarations"),
    ("types", "max_types", "types"),
    ("imports", "max_imports", "imports"),
    ("exports", "max_exports", "exports"),
    ("globals", "max_globals", "globals"),
    ("tables", "max_tables", "tables"),
    ("largest_table_elements", "max_table_elements", "initial elements in one table"),
    ("data_segments", "max_data_segments", "data segments"),
    ("data_bytes", "max_data_bytes", "bytes in data segments"),
    ("element_segments", "max_element_segments", "element segments"),
    ("element_section_bytes", "max_element_section_bytes", "bytes of element segments"),
)


class _Malformed(Exception):
    pass


class _Reader:
    """LEB128 and bytes from one span of the module; every read is bounds-checked."""

    def __init__(self, data: bytes | memoryview, pos: int, end: int) -> None:
        self.data = data
        self.pos = pos
        self.end = end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise _Malformed("unexpected end")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def u32(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise _Malformed("integer representation too long")
        if result > 0xFFFFFFFF:
            raise _Malformed("integer too large")
        return result

    def skip(self, count: int) -> None:
        if count > self.end - self.pos:
            raise _Malformed("unexpected end")
        self.pos += count

    def value_type(self) -> None:
        """Skip one value type: one byte, or for a reference type with a heap type (``ref`` and
        ``ref null``, 0x64 and 0x63) that byte and the heap type (a signed LEB128 of at most
        33 bits: an abstract type or a type index)."""
        if self.byte() in (0x63, 0x64):
            for _ in range(5):
                if not self.byte() & 0x80:
                    return
            raise _Malformed("heap type representation too long")

    def limits(self) -> tuple[int, int | None]:
        flags = self.byte()
        wide = bool(flags & 0x04)
        minimum = self._u64() if wide else self.u32()
        maximum = (self._u64() if wide else self.u32()) if flags & 0x01 else None
        return minimum, maximum

    def _u64(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise _Malformed("integer representation too long")


MAX_CUSTOM_SECTIONS = 1_000
"""The most custom sections a module may have (compilers write a handful: names, producers,
target features, debug information). Each is read as it comes: a million of them, two bytes
each, took seconds of the controller's CPU before this bound; each other section may come once,
so the figures of one section cannot be spread over many."""


def check_shape(data: bytes, bounds: ModuleBounds) -> ModuleShape:
    """The shape of ``data``; InvalidModule when the binary framing is broken or a figure is over
    its bound (checked as soon as it is read, so a huge vector is never walked)."""
    if data[:4] != _MAGIC:
        raise invalid_module(
            f"not a WebAssembly module (it starts with {data[:4]!r}, not {_MAGIC!r})"
        )
    if data[4:8] != _VERSION:
        raise invalid_module(
            f"unsupported binary version {data[4:8].hex()} (a component or a newer format); "
            "a plugin is a core module of version 1"
        )
    view = memoryview(data)
    figures: dict[str, int] = {}
    pos, end = 8, len(data)
    section = "header"
    seen: set[int] = set()  # each section but custom ones comes once
    custom = 0
    try:
        while pos < end:
            head = _Reader(view, pos, end)
            sid = head.byte()
            section = _SECTION_NAMES.get(sid, f"#{sid}")
            if sid == _CUSTOM:
                custom += 1
                if custom > MAX_CUSTOM_SECTIONS:
                    raise invalid_module(
                        f"the module has more than {MAX_CUSTOM_SECTIONS} custom sections"
                    )
            elif sid in seen:
                raise _Malformed("it comes twice")
            else:
                seen.add(sid)
            size = head.u32()
            body = _Reader(view, head.pos, head.pos + size)
            if body.end > end:
                raise _Malformed("it runs past the end of the module")
            _section(sid, body, figures, bounds)
            pos = body.end
    except _Malformed as exc:
        raise invalid_module(f"malformed {section} section: {exc}") from None
    return ModuleShape(**figures)


def _over(figures: dict[str, int], name: str, value: int, bounds: ModuleBounds) -> None:
    """Record a figure (keeping the largest) and refuse it at once when it is over its bound."""
    figures[name] = max(figures.get(name, 0), value)
    _check_figure(name, value, bounds)


def _check_figure(name: str, value: int, bounds: ModuleBounds) -> None:
    for figure, limit_name, words in _CHECKS:
        if figure == name:
            limit = getattr(bounds, limit_name)
            if value > limit:
                raise invalid_module(
                    f"the module has {value} {words}; the limit is {limit} "
                    f"(operator setting {setting_name('moduleLimits', limit_name)})"
                )
            return


def check_figures(shape: ModuleShape, bounds: ModuleBounds) -> None:
    """Refuse ``shape`` (as ``check_shape`` measured it earlier) as InvalidModule when a figure
    is over its bound: what a module loaded from the disk cache is held to instead of being
    measured again (its artifact keeps the shape measured before it was compiled)."""
    for figure, _, _ in _CHECKS:
        _check_figure(figure, getattr(shape, figure), bounds)


def _section(sid: int, body: _Reader, figures: dict[str, int], bounds: ModuleBounds) -> None:
    if sid == _CUSTOM:
        return
    if sid in (_START, _DATA_COUNT):
        body.u32()
        return
    if sid not in _SECTION_NAMES:
        raise _Malformed(f"unknown section id {sid}")
    count = body.u32()
    if sid == _TYPE:
        _over(figures, "types", count, bounds)
    elif sid == _IMPORT:
        _over(figures, "imports", count, bounds)
    elif sid == _FUNCTION:
        _over(figures, "functions", count, bounds)
    elif sid == _TABLE:
        _over(figures, "tables", figures.get("tables", 0) + count, bounds)
        for _ in range(count):
            if not _table(body, figures, bounds):
                break
    elif sid == _MEMORY:
        if count > 1:  # the engine gives an instance one memory: no need to read millions
            raise invalid_module(f"the module declares {count} memories; a plugin has at most one")
        for _ in range(count):
            body.limits()
    elif sid == _GLOBAL:
        _over(figures, "globals", count, bounds)
    elif sid == _EXPORT:
        _over(figures, "exports", count, bounds)
    elif sid == _ELEMENT:
        _over(figures, "element_segments", count, bounds)
        _over(figures, "element_section_bytes", body.end - body.pos, bounds)
    elif sid == _CODE:
        _over(figures, "functions", count, bounds)
        _over(figures, "code_bytes", body.end - body.pos, bounds)
        for _ in range(count):
            _function_body(body, figures, bounds)
    elif sid == _DATA:
        _over(figures, "data_segments", count, bounds)
        _over(figures, "data_bytes", body.end - body.pos, bounds)


def _table(body: _Reader, figures: dict[str, int], bounds: ModuleBounds) -> bool:
    """One table's initial size; False when the rest of the section cannot be read without
    decoding instructions (a table with an initialiser expression, which the engine refuses
    anyway: it needs the function-references proposal)."""
    if body.data[body.pos : body.pos + 1] == b"\x40":
        body.skip(2)  # 0x40 0x00, then the element type, the limits and the expression
        body.value_type()
        minimum, _ = body.limits()
        _over(figures, "largest_table_elements", minimum, bounds)
        return False
    body.value_type()
    minimum, _ = body.limits()
    _over(figures, "largest_table_elements", minimum, bounds)
    return True


def _function_body(body: _Reader, figures: dict[str, int], bounds: ModuleBounds) -> None:
    size = body.u32()
    _over(figures, "largest_function_body_bytes", size, bounds)
    inner = _Reader(body.data, body.pos, body.pos + size)
    if inner.end > body.end:
        raise _Malformed("function body runs past the end of the section")
    groups = inner.u32()
    # counted before they are read: declarations of no locals never reach the locals' bound,
    # and reading 8 million of them (16 MiB of code) took 4 s of the controller's CPU
    _over(figures, "local_declarations", figures.get("local_declarations", 0) + groups, bounds)
    locals_ = 0
    for _ in range(groups):
        locals_ += inner.u32()
        if locals_ > bounds.max_locals_per_function:
            break
        inner.value_type()
    _over(figures, "most_locals_in_a_function", locals_, bounds)
    body.pos = inner.end


def cap_growth(data: bytes, table_elements: int, memory_pages: int) -> bytes:
    """``data`` with every table's maximum at most ``table_elements`` elements and its memory's
    at most ``memory_pages`` pages: one declared without a maximum, or with a larger one, gets
    the cap (or its initial size, when that is larger: it cannot grow then). Returns ``data``
    itself when nothing needs it.

    For engines the host cannot give a store limit to. Extism's limiter lets a table without a
    maximum grow without bound (a single ``table.grow`` took 2 GB), and counts a memory's growth
    from after the instance was made, so what a start function or ``_initialize`` grew comes on
    top of the call's limit: with the caps, ``table.grow`` and ``memory.grow`` past them give -1,
    as the native flavour's store limits do, whatever the engine counts. Call only on a module
    ``check_shape`` accepted: the framing is not checked again."""
    view = memoryview(data)
    out = [bytes(view[:8])]
    pos, changed = 8, False
    while pos < len(data):
        head = _Reader(view, pos, len(data))
        sid = head.byte()
        size = head.u32()
        end = head.pos + size
        body = None
        if sid in (_TABLE, _MEMORY):
            limit = table_elements if sid == _TABLE else memory_pages
            body = _capped_entries(_Reader(view, head.pos, end), limit, sid == _TABLE)
        if body is None:
            out.append(bytes(view[pos:end]))
        else:
            out.append(encode_section(sid, body))
            changed = True
        pos = end
    return b"".join(out) if changed else data


def _capped_limits(body: _Reader, limit: int) -> tuple[bytes, bool]:
    """One limits entry (flags, minimum, maximum) with its maximum capped at ``limit`` (never
    below its minimum), encoded; and whether it changed."""
    flags = body.data[body.pos]
    minimum, maximum = body.limits()
    capped = max(min(limit, maximum) if maximum is not None else limit, minimum)
    encoded = bytes([flags | 0x01]) + leb128(minimum) + leb128(capped)
    return encoded, capped != maximum


def _capped_entries(body: _Reader, limit: int, tables: bool) -> bytes | None:
    """The body of a table section (``tables``) or a memory section with each maximum capped
    at ``limit``; None when every one already is. (``check_shape`` refused a second memory.)"""
    what = "table" if tables else "memory"
    count = body.u32()
    parts = [leb128(count)]
    changed = False
    for _ in range(count):
        start = body.pos
        if tables:
            if body.data[start : start + 1] == b"\x40":
                # a table with an initialiser expression (function references): the compile
                # refuses it; never run one uncapped
                raise invalid_module("a table with an initialiser expression is not supported")
            body.value_type()
        element_type = bytes(body.data[start : body.pos])  # empty for a memory
        limits, capped = _capped_limits(body, limit)
        changed = changed or capped
        parts.append(element_type + limits)
    if body.pos != body.end:
        raise invalid_module(f"malformed {what} section: bytes after the last {what}")
    return b"".join(parts) if changed else None


START_EXPORT = "modelserving:start"
"""The export a module's start function is moved to by ``detach_start``."""


def _name(text: str) -> bytes:
    raw = text.encode()
    return leb128(len(raw)) + raw


def leb128(value: int) -> bytes:
    """``value`` as unsigned LEB128, the binary format's integer encoding."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode_section(section_id: int, body: bytes) -> bytes:
    """One section of a module's binary: its id, its size, its body."""
    return bytes([section_id]) + leb128(len(body)) + body


def detach_start(data: bytes) -> bytes | None:
    """``data`` with its start function exported as ``START_EXPORT`` instead of run by
    instantiation, or None when it has no start section.

    wasmtime runs a start function inside instantiation, before the instance (and so its memory)
    can be looked at; as an export the host calls it right after instantiating, under the same
    fuel and deadline, with the memory known, so a start function that fails at the memory limit
    is reported as MemoryLimit like any other code. Call only on a module ``check_shape``
    accepted: the framing is not checked again."""
    view = memoryview(data)
    spans: list[tuple[int, int, int, int]] = []  # id, section start, body start, end
    pos, start_function = 8, None
    while pos < len(data):
        head = _Reader(view, pos, len(data))
        sid = head.byte()
        size = head.u32()
        spans.append((sid, pos, head.pos, head.pos + size))
        if sid == _START:
            start_function = _Reader(view, head.pos, head.pos + size).u32()
        pos = head.pos + size
    if start_function is None:
        return None
    entry = _name(START_EXPORT) + b"\x00" + leb128(start_function)
    has_exports = any(sid == _EXPORT for sid, *_ in spans)
    out = [data[:8]]
    for sid, begin, body, end in spans:
        if sid == _EXPORT:
            reader = _Reader(view, body, end)
            count = reader.u32()
            payload = leb128(count + 1) + bytes(view[reader.pos : end]) + entry
            out.append(encode_section(_EXPORT, payload))
        elif sid == _START:
            if not has_exports:  # the export section comes right before the start section
                payload = leb128(1) + entry
                out.append(encode_section(_EXPORT, payload))
        else:
            out.append(bytes(view[begin:end]))
    return b"".join(out)
