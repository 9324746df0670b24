"""Module bytes of ``type: Wasm`` plugins, taken from ConfigMaps.

A module is stored under ``binaryData[key]`` (base64 in the object, plain bytes here) and may be
gzip-compressed, which lets larger modules fit a ConfigMap's 1 MiB. ``data[key]`` (text) is
refused with a hint, since a module is binary. The digest the PluginSpec pins is checked against
the uncompressed module by the sandbox.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import zlib
from collections.abc import Mapping
from typing import Any

from modelserving.api.modelserving import PluginSpec

GZIP_MAGIC = b"\x1f\x8b"


class ModuleUnavailable(Exception):
    """A Wasm plugin's module could not be fetched (missing ConfigMap or key, unreadable data)."""


def module_from_config_map(config_map: Mapping[str, Any], key: str, max_bytes: int) -> bytes:
    """The module stored under ``key`` of a ConfigMap (as the API returns it: base64 text)."""
    meta = config_map.get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace', '')}/{meta.get('name', '')}"
    binary = config_map.get("binaryData") or {}
    if key not in binary:
        if key in (config_map.get("data") or {}):
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
    """``data``, decompressed when it is gzip; refuses output past ``max_bytes`` (gzip bombs)."""
    if not data.startswith(GZIP_MAGIC):
        return data
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise ModuleUnavailable(f"{where} is not valid gzip: {exc}") from None
    if len(out) > max_bytes:
        raise ModuleUnavailable(f"{where} decompresses to more than {max_bytes} bytes")
    return out


class ConfigMapModules:
    """A ModuleResolver over ConfigMaps already at hand, by (namespace, name)."""

    def __init__(
        self,
        config_maps: Mapping[tuple[str, str], Mapping[str, Any]],
        namespace: str,
        max_bytes: int,
    ) -> None:
        self._maps = config_maps
        self._namespace = namespace
        self._max = max_bytes

    def __call__(self, spec: PluginSpec) -> bytes:
        assert spec.module is not None
        ref = spec.module.config_map_ref
        config_map = self._maps.get((self._namespace, ref.name))
        if config_map is None:
            raise ModuleUnavailable(f"ConfigMap {self._namespace}/{ref.name} not found")
        return module_from_config_map(config_map, ref.key, self._max)
