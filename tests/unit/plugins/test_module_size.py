"""Whether a module fits a ConfigMap (1 MiB), and the remedy the error gives when it does not."""

from __future__ import annotations

import base64
import random

import pytest

from modelserving.api.modelserving import PluginSpec
from modelserving.plugins.modules import (
    CONFIG_MAP_MAX_BYTES,
    ConfigMapModules,
    ModuleTooLarge,
    ModuleUnavailable,
    check_module_size,
)

MIB = 1024 * 1024


def incompressible(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def test_a_module_that_fits_gives_its_stored_size() -> None:
    assert check_module_size(b"\0asm" + bytes(1000)) == 1004
    assert check_module_size(bytes(CONFIG_MAP_MAX_BYTES)) == CONFIG_MAP_MAX_BYTES
    assert check_module_size(bytes(2 * MIB), gzipped=True) < 10_000


def test_too_large_but_compressible_says_to_gzip() -> None:
    module = bytes(CONFIG_MAP_MAX_BYTES + 1)
    with pytest.raises(ModuleTooLarge) as info:
        check_module_size(module)
    message = str(info.value)
    assert message.startswith(
        "the module is 1048577 bytes, more than a ConfigMap holds (1048576 bytes, 1 MiB): "
        "store it gzip-compressed (`modelserving plugin pack --gzip`, or `gzip -9 -n`): that is "
    )
    assert message.endswith("bytes, which fits, and the host decompresses it when it loads it")
    assert (info.value.size, info.value.stored, info.value.limit) == (
        CONFIG_MAP_MAX_BYTES + 1,
        CONFIG_MAP_MAX_BYTES + 1,
        CONFIG_MAP_MAX_BYTES,
    )


def test_too_large_even_compressed_says_to_build_a_smaller_module() -> None:
    module = incompressible(CONFIG_MAP_MAX_BYTES + 10)
    with pytest.raises(ModuleTooLarge, match=r"gzip-compressed it is still \d+ bytes: build a "):
        check_module_size(module)
    with pytest.raises(ModuleTooLarge) as info:
        check_module_size(module, gzipped=True)
    message = str(info.value)
    assert "bytes gzip-compressed, more than a ConfigMap holds (1048576 bytes, 1 MiB)" in message
    assert "even gzip-compressed it does not fit" in message
    assert "TinyGo" in message and "Rust" in message
    assert info.value.stored > CONFIG_MAP_MAX_BYTES


def test_another_limit() -> None:
    with pytest.raises(ModuleTooLarge, match=r"\(100 bytes, 9\.53674e-05 MiB\)"):
        check_module_size(incompressible(101), limit=100)


def test_an_offline_configmap_past_the_limit_is_refused_with_the_remedy() -> None:
    """ConfigMaps from files (modelserving render) are not checked by an API server: one that
    would be refused at apply time is refused here, saying what to do."""
    module = b"\0asm" + bytes(CONFIG_MAP_MAX_BYTES)
    cm = {
        "metadata": {"name": "mods", "namespace": "team-a"},
        "binaryData": {"m.wasm": base64.b64encode(module).decode()},
    }
    spec = PluginSpec.model_validate(
        {
            "name": "p",
            "type": "Wasm",
            "module": {"configMapRef": {"name": "mods", "key": "m.wasm"}, "sha256": "0" * 64},
        }
    )
    with pytest.raises(ModuleUnavailable) as info:
        ConfigMapModules({("team-a", "mods"): cm}, "team-a", 32 * MIB)(spec)
    message = str(info.value)
    assert message.startswith("ConfigMap team-a/mods would hold 1048580 bytes")
    assert "1048576 bytes (1 MiB)" in message
    assert "store it gzip-compressed" in message
