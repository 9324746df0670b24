"""Module bytes of ``type: Wasm`` plugins, taken from ConfigMaps.

A module is stored under ``binaryData[key]`` (base64 in the object, plain bytes here) and may be
gzip-compressed (exactly one whole gzip member), which lets larger modules fit a ConfigMap's
1 MiB. ``data[key]`` (text) is refused with a hint, since a module is binary. The digest the
PluginSpec pins is checked against the uncompressed module by the sandbox, after the gzip
checks. ``check_module_size`` says whether a module fits a ConfigMap (as is, or
gzip-compressed) and, when not, what to do about it.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import zlib
from collections.abc import Mapping, Set
from typing import Any

from modelserving.api.jsondata import describe
from modelserving.api.modelserving import PluginSpec

GZIP_MAGIC = b"\x1f\x8b"
CONFIG_MAP_MAX_BYTES = 1024 * 1024
"""The API server's limit on a ConfigMap (``MaxConfigMapSize``, 1 MiB): the sum of the lengths of
its ``data`` values and its ``binaryData`` values, the latter as bytes (not as base64); keys and
metadata are not counted."""


class ModuleUnavailable(Exception):
    """A Wasm plugin's module could not be fetched (missing ConfigMap or key, unreadable data)."""


class ConfigMapTooLarge(ValueError):
    """A ConfigMap whose data and binaryData exceed what the API server accepts."""

    def __init__(self, where: str, size: int, limit: int = CONFIG_MAP_MAX_BYTES) -> None:
        super().__init__(
            f"{where} would hold {size} bytes of data and binaryData, over the {limit} bytes "
            f"({limit / (1024 * 1024):g} MiB) Kubernetes allows in a ConfigMap"
        )
        self.where = where
        self.size = size
        self.limit = limit


def config_map_size(config_map: Mapping[str, Any]) -> int:
    """The bytes of ``config_map`` that count against :data:`CONFIG_MAP_MAX_BYTES`: each ``data``
    value as UTF-8, each ``binaryData`` value as bytes (base64 text is counted decoded)."""
    size = 0
    for value in (config_map.get("data") or {}).values():
        size += len(value.encode("utf-8")) if isinstance(value, str) else len(value)
    for value in (config_map.get("binaryData") or {}).values():
        if isinstance(value, str):
            text = value.rstrip("=")
            size += len(text) * 3 // 4  # base64: 4 characters carry 3 bytes
        else:
            size += len(value)
    return size


def check_config_map_size(config_map: Mapping[str, Any], limit: int = CONFIG_MAP_MAX_BYTES) -> int:
    """The ConfigMap's counted size (:func:`config_map_size`); ConfigMapTooLarge past ``limit``."""
    size = config_map_size(config_map)
    if size > limit:
        meta = config_map.get("metadata") or {}
        namespace = meta.get("namespace")
        name = f"{namespace}/{meta.get('name', '')}" if namespace else meta.get("name", "")
        raise ConfigMapTooLarge(f"ConfigMap {name}", size, limit)
    return size


def module_from_config_map(config_map: Mapping[str, Any], key: str, max_bytes: int) -> bytes:
    """The module stored under ``key`` of a ConfigMap (as the API returns it: base64 text)."""
    meta = config_map.get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace', '')}/{meta.get('name', '')}"
    binary = config_map.get("binaryData") or {}
    text = config_map.get("data") or {}
    for field, value in (("binaryData", binary), ("data", text)):
        if not isinstance(value, Mapping):  # a file given to render, not the API's answer
            raise ModuleUnavailable(f"{where} {field} is not a map but {describe(value)}")
    if key not in binary:
        if key in text:
            raise ModuleUnavailable(
                f"{where} holds {key} under data (text); a module belongs under binaryData"
            )
        known = ", ".join(sorted(binary)) or "none"
        raise ModuleUnavailable(f"{where} has no binaryData key {key} (keys: {known})")
    raw = binary[key]
    if isinstance(raw, str):
        try:
            raw = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ModuleUnavailable(f"{where} key {key} is not valid base64: {exc}") from None
    if not isinstance(raw, bytes):
        raise ModuleUnavailable(f"{where} key {key} is not binary data")
    return gunzip_bounded(raw, max_bytes, f"{where} key {key}")


def gunzip_bounded(data: bytes, max_bytes: int, where: str) -> bytes:
    """``data``, decompressed when it is gzip; refuses output past ``max_bytes`` (gzip bombs).

    The gzip data must be exactly one whole member: a stream cut short (its CRC-32 and length
    never checked) or anything after the member (trailing bytes, a second member as ``cat a.gz
    b.gz`` makes) is refused as not valid gzip, before the module's digest is compared.
    """
    if not data.startswith(GZIP_MAGIC):
        return data
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise ModuleUnavailable(f"{where} is not valid gzip: {exc}") from None
    if len(out) > max_bytes:
        raise ModuleUnavailable(f"{where} decompresses to more than {max_bytes} bytes")
    if not inflater.eof:
        raise ModuleUnavailable(
            f"{where} is not valid gzip: the data ends before the gzip stream does (truncated)"
        )
    if inflater.unused_data:
        extra = len(inflater.unused_data)
        what = "a second gzip member" if inflater.unused_data.startswith(GZIP_MAGIC) else "data"
        raise ModuleUnavailable(
            f"{where} is not valid gzip: {extra} byte(s) after the end of the gzip stream "
            f"({what}; one member is accepted, nothing after it)"
        )
    return out


def outside_plugin_namespaces(namespace: str, name: str, own: str, allowed: Set[str]) -> str | None:
    """Why ConfigMap ``namespace``/``name`` may not hold a module for a ModelServing of
    namespace ``own`` (operator setting ``pluginNamespaces``: ``allowed``); None when it may."""
    if namespace == own or namespace in allowed:
        return None
    listed = ", ".join(sorted(allowed)) or "none"
    return (
        f"ConfigMap {namespace}/{name} is outside the ModelServing's namespace and "
        f"{namespace} is not an allowed plugin namespace (pluginNamespaces: {listed})"
    )


class ConfigMapModules:
    """A ModuleResolver over ConfigMaps already at hand, by (namespace, name); with
    ``allowed_namespaces``, only those of the ModelServing's namespace and those listed, as the
    controller reads them (``pluginNamespaces``)."""

    def __init__(
        self,
        config_maps: Mapping[tuple[str, str], Mapping[str, Any]],
        namespace: str,
        max_bytes: int,
        allowed_namespaces: Set[str] | None = None,
    ) -> None:
        self._maps = config_maps
        self._namespace = namespace
        self._max = max_bytes
        self._allowed = allowed_namespaces

    def __call__(self, spec: PluginSpec) -> bytes:
        assert spec.module is not None
        ref = spec.module.config_map_ref
        namespace = ref.namespace or self._namespace
        if self._allowed is not None:
            why = outside_plugin_namespaces(namespace, ref.name, self._namespace, self._allowed)
            if why is not None:
                raise ModuleUnavailable(why)
        config_map = self._maps.get((namespace, ref.name))
        if config_map is None:
            raise ModuleUnavailable(f"ConfigMap {namespace}/{ref.name} not found")
        module = module_from_config_map(config_map, ref.key, self._max)
        # ConfigMaps at hand may come from files (offline render); one past the API server's
        # limit would be refused at apply time, so say so now, with the remedy.
        size = config_map_size(config_map)
        if size > CONFIG_MAP_MAX_BYTES:
            too_large = ConfigMapTooLarge(f"ConfigMap {namespace}/{ref.name}", size)
            raise ModuleUnavailable(f"{too_large}: {module_size_remedy(module)}")
        return module


SMALLER_MODULE = (
    "build a smaller module: Rust with plugins-src/sdk-rust (modules of about 0.1 MB), or TinyGo "
    "rather than Go's standard toolchain (about 0.1 MB rather than 2 MB or more), and fewer "
    "dependencies"
)


class ModuleTooLarge(ValueError):
    """A module that does not fit a ConfigMap, even as it would be stored (``stored`` bytes)."""

    def __init__(self, message: str, size: int, stored: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.stored = stored
        self.limit = limit


def gzip_module(module: bytes) -> bytes:
    """Deterministic gzip (no file name, mtime 0), as ``gzip -9 -n`` writes it."""
    return gzip.compress(module, compresslevel=9, mtime=0)


def module_size_remedy(
    module: bytes, gzipped: bool = False, limit: int = CONFIG_MAP_MAX_BYTES
) -> str:
    """What to do about ``module`` (uncompressed) when its ConfigMap is too large: store it
    gzip-compressed when that fits ``limit`` (and it is not already), else build a smaller
    module."""
    if gzipped:
        return f"even gzip-compressed it does not fit: {SMALLER_MODULE}"
    packed = len(gzip_module(module))
    if packed <= limit:
        return (
            "store it gzip-compressed (`modelserving plugin pack --gzip`, or `gzip -9 -n`): "
            f"that is {packed} bytes, which fits, and the host decompresses it when it loads it"
        )
    return f"gzip-compressed it is still {packed} bytes: {SMALLER_MODULE}"


def check_module_size(
    module: bytes, gzipped: bool = False, limit: int = CONFIG_MAP_MAX_BYTES
) -> int:
    """The bytes ``module`` (uncompressed) takes in a ConfigMap's ``binaryData``, stored as is or
    (``gzipped``) gzip-compressed; ModuleTooLarge, stating the limit (1 MiB) and the remedy, when
    that is more than ``limit``. Other keys of the ConfigMap count too (config_map_size)."""
    stored = len(gzip_module(module)) if gzipped else len(module)
    if stored <= limit:
        return stored
    how = f"{stored} bytes gzip-compressed" if gzipped else f"{stored} bytes"
    megabytes = f"{limit / (1024 * 1024):g} MiB"
    raise ModuleTooLarge(
        f"the module is {how}, more than a ConfigMap holds ({limit} bytes, {megabytes}): "
        f"{module_size_remedy(module, gzipped, limit)}",
        len(module),
        stored,
        limit,
    )
