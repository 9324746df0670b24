"""Modules from ConfigMaps: the ConfigMap size check, the offline resolver's namespaces, and gzip
delivery (exactly one whole member, bounded)."""

from __future__ import annotations

import base64
import gzip
from typing import Any

import pytest

from modelserving.api.modelserving import PluginSpec
from modelserving.plugins.modules import (
    CONFIG_MAP_MAX_BYTES,
    ConfigMapModules,
    ConfigMapTooLarge,
    ModuleUnavailable,
    check_config_map_size,
    config_map_size,
    gzip_module,
    module_from_config_map,
)

DIGEST = "0" * 64


def config_map(
    binary: dict[str, Any] | None = None, data: dict[str, str] | None = None
) -> dict[str, Any]:
    cm: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "mods", "namespace": "team-a"},
    }
    if binary is not None:
        cm["binaryData"] = binary
    if data is not None:
        cm["data"] = data
    return cm


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_the_limit_is_kubernetes_one_mib() -> None:
    assert CONFIG_MAP_MAX_BYTES == 1048576


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4, 5, 1000, 4097])
def test_binary_data_counts_as_bytes_not_base64(length: int) -> None:
    """base64 text (as the API returns it, padded or not) counts decoded; keys do not count."""
    payload = bytes(range(256)) * (length // 256) + bytes(length % 256)
    assert config_map_size(config_map({"a-long-key-name.wasm": b64(payload)})) == length
    assert config_map_size(config_map({"k": payload})) == length


def test_data_and_binary_data_add_up() -> None:
    cm = config_map({"m.wasm": b64(b"\0" * 10), "n": b"\1" * 5}, {"note": "h\u00e9llo"})
    assert config_map_size(cm) == 10 + 5 + len("h\u00e9llo".encode())
    assert config_map_size(config_map()) == 0


def test_check_accepts_the_limit_and_refuses_one_byte_more() -> None:
    at_limit = config_map({"m": b"\0" * CONFIG_MAP_MAX_BYTES})
    assert check_config_map_size(at_limit) == CONFIG_MAP_MAX_BYTES
    over = config_map({"m": b"\0" * (CONFIG_MAP_MAX_BYTES - 2)}, {"x": "abc"})
    with pytest.raises(ConfigMapTooLarge) as info:
        check_config_map_size(over)
    assert info.value.size == CONFIG_MAP_MAX_BYTES + 1
    assert info.value.limit == CONFIG_MAP_MAX_BYTES
    assert str(info.value) == (
        "ConfigMap team-a/mods would hold 1048577 bytes of data and binaryData, over the "
        "1048576 bytes (1 MiB) Kubernetes allows in a ConfigMap"
    )


def test_check_takes_another_limit_and_names_a_configmap_without_namespace() -> None:
    cm = config_map({"m": b"12345"})
    del cm["metadata"]["namespace"]
    assert check_config_map_size(cm, limit=5) == 5
    with pytest.raises(ConfigMapTooLarge, match=r"^ConfigMap mods would hold 5 bytes .* 4 bytes"):
        check_config_map_size(cm, limit=4)


def wasm_spec(ref: dict[str, str]) -> PluginSpec:
    return PluginSpec.model_validate(
        {"name": "p", "type": "Wasm", "module": {"configMapRef": ref, "sha256": DIGEST}}
    )


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("binaryData", ["m.wasm"], "a list"),
        ("binaryData", "m.wasm", "a string"),
        ("data", 7, "a number"),
    ],
)
def test_a_config_map_whose_data_is_not_a_map_is_refused(field: str, value: Any, kind: str) -> None:
    """A ConfigMap from a file (render) may hold anything: one that is not a map is named as
    such, not searched as a list or a string (a key found in a string then failed as a
    TypeError)."""
    cm = {**config_map({"m.wasm": b64(b"own")}), field: value}
    with pytest.raises(
        ModuleUnavailable, match=f"ConfigMap team-a/mods {field} is not a map but {kind}$"
    ):
        module_from_config_map(cm, "m.wasm", 1024)


def test_offline_resolver_reads_the_referenced_namespace() -> None:
    """configMapRef.namespace, when set, names the ConfigMap's namespace (else the
    ModelServing's), as in the controller."""
    own = config_map({"m.wasm": b64(b"own")})
    other = {**config_map({"m.wasm": b64(b"other")}), "metadata": {"name": "mods"}}
    modules = ConfigMapModules({("team-a", "mods"): own, ("shared", "mods"): other}, "team-a", 1024)
    assert modules(wasm_spec({"name": "mods", "key": "m.wasm"})) == b"own"
    assert modules(wasm_spec({"name": "mods", "key": "m.wasm", "namespace": "shared"})) == b"other"
    with pytest.raises(ModuleUnavailable, match="ConfigMap elsewhere/mods not found"):
        modules(wasm_spec({"name": "mods", "key": "m.wasm", "namespace": "elsewhere"}))


MODULE = b"\0asm\1\0\0\0" + bytes(range(256)) * 40
PACKED = gzip_module(MODULE)
NOT_GZIP = "ConfigMap team-a/mods key m.wasm.gz is not valid gzip: "


def from_config_map(stored: bytes, max_bytes: int = 1 << 20) -> bytes:
    return module_from_config_map(config_map({"m.wasm.gz": b64(stored)}), "m.wasm.gz", max_bytes)


def test_a_gzip_module_is_decompressed_and_a_plain_one_kept() -> None:
    assert from_config_map(PACKED) == MODULE
    assert from_config_map(MODULE) == MODULE


@pytest.mark.parametrize("cut", [1, 4, 8, len(PACKED) // 2, len(PACKED) - 11])
def test_a_truncated_gzip_module_is_not_valid_gzip(cut: int) -> None:
    """Cut anywhere, even only in the trailer (CRC-32 and length, so every byte of the module
    may still come out): refused as gzip, never passed on to be compared with the pin."""
    with pytest.raises(ModuleUnavailable) as info:
        from_config_map(PACKED[:-cut])
    assert str(info.value).startswith(NOT_GZIP)
    assert str(info.value).endswith("the data ends before the gzip stream does (truncated)")


@pytest.mark.parametrize(
    ("extra", "what"),
    [
        (b"garbage", "7 byte(s) after the end of the gzip stream (data; "),
        (b"\0" * 512, "512 byte(s) after the end of the gzip stream (data; "),
        (gzip.compress(b"more"), "after the end of the gzip stream (a second gzip member; "),
    ],
    ids=["garbage", "zero-padding", "second-member"],
)
def test_anything_after_the_gzip_member_is_not_valid_gzip(extra: bytes, what: str) -> None:
    with pytest.raises(ModuleUnavailable) as info:
        from_config_map(PACKED + extra)
    message = str(info.value)
    assert message.startswith(NOT_GZIP)
    assert what in message
    assert message.endswith("one member is accepted, nothing after it)")


def test_a_corrupt_gzip_module_is_not_valid_gzip() -> None:
    broken = bytearray(PACKED)
    broken[-6] ^= 0xFF  # the CRC-32
    with pytest.raises(ModuleUnavailable, match=r"is not valid gzip: .*incorrect data check"):
        from_config_map(bytes(broken))


def test_the_decompressed_size_stays_bounded() -> None:
    assert from_config_map(PACKED, max_bytes=len(MODULE)) == MODULE
    with pytest.raises(ModuleUnavailable, match=f"decompresses to more than {len(MODULE) - 1} "):
        from_config_map(PACKED, max_bytes=len(MODULE) - 1)
    bomb = gzip_module(bytes(64 << 20))  # 64 MiB of zeros in about 64 KB
    with pytest.raises(ModuleUnavailable, match="decompresses to more than 1048576 bytes"):
        from_config_map(bomb + b"garbage")  # the bound is checked first: nothing more inflated
