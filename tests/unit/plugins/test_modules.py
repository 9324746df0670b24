"""Modules from ConfigMaps: the ConfigMap size check, and the offline resolver's namespaces."""

from __future__ import annotations

import base64
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
