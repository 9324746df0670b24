"""``modelserving plugin pack``: the ConfigMap, the spec.plugins entry, gzip, the pinned sha256 as
the controller checks it, the ConfigMap size limit, refused modules and usage errors."""

from __future__ import annotations

import base64
import gzip
import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from modelserving.api.errors import FailureClass, PluginConfigError
from modelserving.api.modelserving import PluginSpec
from modelserving.cli.main import main
from modelserving.plugins.exports import plugin_sandbox, set_default_sandbox
from modelserving.plugins.modules import CONFIG_MAP_MAX_BYTES, module_from_config_map
from modelserving.sandbox import Sandbox, SandboxSettings
from tests.unit.cli.packing import controller_chain, model_serving, parse_pack, rendered_pod
from tests.wasm.guests import MARKER, guest, hook, responding, returns, wat_bytes

ADD_LABEL = {"patch": [{"op": "add", "path": "/metadata/labels/tier", "value": "gold"}]}
MAX_MODULE = 32 * 1024 * 1024


@pytest.fixture
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """The CLI uses the process-wide sandbox: give it a private compile cache."""
    box = plugin_sandbox(SandboxSettings(cache_dir=tmp_path_factory.mktemp("wasm-cache")))
    set_default_sandbox(box)
    yield box
    set_default_sandbox(None)


def labeller() -> bytes:
    return responding(msgpack.packb(ADD_LABEL, use_bin_type=True))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plugin", "pack", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def pack_ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    assert err == ""
    return out


def write(tmp_path: Path, data: bytes, name: str = "labeller.wasm") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def padded(size: int, compressible: bool) -> bytes:
    """A valid plugin module of at least ``size`` bytes (a data segment of zeros, or of random
    bytes that gzip cannot shrink)."""
    payload = bytes(size) if compressible else random.Random(7).randbytes(size)
    pages = (2 * 65536 + size) // 65536 + 1
    return guest(
        f'(data (i32.const 131072) "{wat_bytes(payload)}")',
        hook(returns(0, 0)),
        memory=f'(memory (export "memory") {pages})',
    )


# --- the manifest ----------------------------------------------------------------------------


def test_prints_a_configmap_and_the_plugin_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    module = labeller()
    out = pack_ok(capsys, write(tmp_path, module), "--name", "tier-labeller")
    config_map, entry = parse_pack(out, tmp_path)
    digest = hashlib.sha256(module).hexdigest()
    assert config_map == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tier-labeller"},
        "binaryData": {"tier-labeller.wasm": base64.b64encode(module).decode()},
    }
    assert entry == {
        "name": "tier-labeller",
        "type": "Wasm",
        "module": {
            "configMapRef": {"name": "tier-labeller", "key": "tier-labeller.wasm"},
            "sha256": digest,
        },
        "config": {},
        "failurePolicy": "Fail",
    }
    PluginSpec.model_validate(entry)  # a valid spec.plugins entry as it stands
    assert out.startswith("---\n# modelserving plugin pack: module tier-labeller, ")
    assert f"{len(module)} bytes (stored uncompressed), sha256\n# {digest}.\n" in out
    assert "kubectl apply --server-side -f FILE" in out
    assert "#     # limits: {fuel: 100000000, memoryMiB: 64, timeoutMs: 250}  # optional\n" in out


def test_namespace_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    argv = ["--name", "tl", "--namespace", "plugins", "--key", "tl-v2.wasm"]
    out = pack_ok(capsys, write(tmp_path, labeller()), *argv)
    config_map, entry = parse_pack(out, tmp_path)
    assert config_map["metadata"] == {"name": "tl", "namespace": "plugins"}
    assert list(config_map["binaryData"]) == ["tl-v2.wasm"]
    assert entry["module"]["configMapRef"] == {
        "name": "tl",
        "key": "tl-v2.wasm",
        "namespace": "plugins",
    }
    assert "in namespace plugins (other namespaces' ModelServings need it in" in out


def test_gzip_roundtrip_is_deterministic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    module = padded(20_000, compressible=True)
    path = write(tmp_path, module)
    out = pack_ok(capsys, path, "--name", "zipped", "--gzip")
    config_map, entry = parse_pack(out, tmp_path)
    assert list(config_map["binaryData"]) == ["zipped.wasm.gz"]
    stored = base64.b64decode(config_map["binaryData"]["zipped.wasm.gz"])
    assert stored[:2] == b"\x1f\x8b"
    assert len(stored) < len(module) // 10
    assert gzip.decompress(stored) == module
    # the pin is the digest of the uncompressed module, not of what the ConfigMap stores
    assert entry["module"]["sha256"] == hashlib.sha256(module).hexdigest()
    assert entry["module"]["configMapRef"]["key"] == "zipped.wasm.gz"
    assert f"(stored gzip-compressed, {len(stored)} bytes)" in out
    assert pack_ok(capsys, path, "--name", "zipped", "--gzip") == out  # no name, no mtime


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_the_controller_loads_what_pack_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox, compress: bool
) -> None:
    """The ConfigMap read back as the controller reads it gives the module, its digest is the
    pin, and the chain built from the entry runs the plugin on the Pod."""
    module = labeller()
    argv = ["--name", "tier", "--namespace", "serving"] + (["--gzip"] if compress else [])
    config_map, entry = parse_pack(pack_ok(capsys, write(tmp_path, module), *argv), tmp_path)
    key = entry["module"]["configMapRef"]["key"]
    assert module_from_config_map(config_map, key, MAX_MODULE) == module
    ms = model_serving(entry, {}, namespace="serving")
    chain = controller_chain(config_map, ms, sandbox, MAX_MODULE)
    assert [e.digest for e in chain.entries] == [entry["module"]["sha256"]]
    pod = rendered_pod(ms, chain)
    assert pod["metadata"]["labels"]["tier"] == "gold"


def test_a_changed_module_no_longer_matches_the_pin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """The controller's check that pack's digest stands for: another module under the same
    ConfigMap is refused with InvalidModule until the pin is updated."""
    path = write(tmp_path, labeller())
    _, entry = parse_pack(pack_ok(capsys, path, "--name", "tier"), tmp_path)
    write(tmp_path, responding(b""))
    changed, _ = parse_pack(pack_ok(capsys, path, "--name", "tier"), tmp_path)
    with pytest.raises(PluginConfigError) as info:
        controller_chain(changed, model_serving(entry, {}), sandbox, MAX_MODULE)
    assert info.value.failure_class is FailureClass.INVALID_MODULE
    assert "sha256 mismatch" in str(info.value)


def test_a_wat_file_is_packed_assembled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    data = msgpack.packb(ADD_LABEL, use_bin_type=True)
    wat = (
        f'(module (memory (export "memory") 2) {MARKER} '
        '(func (export "ms_alloc") (param i32) (result i32) (i32.const 4096)) '
        f'(data (i32.const 1024) "{wat_bytes(data)}") {hook(returns(1024, len(data)))})'
    )
    path = tmp_path / "text.wat"
    path.write_text(wat)
    config_map, entry = parse_pack(pack_ok(capsys, str(path), "--name", "text"), tmp_path)
    stored = base64.b64decode(config_map["binaryData"]["text.wasm"])
    assert stored[:4] == b"\0asm"
    assert entry["module"]["sha256"] == hashlib.sha256(stored).hexdigest()


def test_a_builtin_is_packed_from_its_compiled_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    from modelserving.plugins.artifacts import ArtifactMissing, builtin_wasm

    try:
        module = builtin_wasm("demo-pod-tweaks.wasm")
    except ArtifactMissing as exc:
        pytest.skip(str(exc))
    _, entry = parse_pack(pack_ok(capsys, "demo-pod-tweaks", "--name", "tweaks"), tmp_path)
    assert entry["module"]["sha256"] == hashlib.sha256(module).hexdigest()


# --- the ConfigMap limit ---------------------------------------------------------------------


def test_too_large_without_gzip_suggests_gzip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """The size check of plugins.modules (check_module_size): the limit, the size, the remedy."""
    module = padded(CONFIG_MAP_MAX_BYTES, compressible=True)
    path = write(tmp_path, module)
    code, out, err = cli(capsys, path, "--name", "big")
    assert code == 1
    assert out == ""
    compressed = len(gzip.compress(module, 9, mtime=0))
    assert err == (
        f"error: {path}: the module is {len(module)} bytes, more than a ConfigMap holds "
        "(1048576 bytes, 1 MiB): store it gzip-compressed (`modelserving plugin pack --gzip`, "
        f"or `gzip -9 -n`): that is {compressed} bytes, which fits, and the host decompresses "
        "it when it loads it\n"
    )
    config_map, _ = parse_pack(pack_ok(capsys, path, "--name", "big", "--gzip"), tmp_path)
    assert len(base64.b64decode(config_map["binaryData"]["big.wasm.gz"])) == compressed


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_too_large_even_compressed_asks_for_a_smaller_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox, compress: bool
) -> None:
    module = padded(CONFIG_MAP_MAX_BYTES + 1000, compressible=False)
    path = write(tmp_path, module)
    code, out, err = cli(capsys, path, "--name", "big", *(["--gzip"] if compress else []))
    assert code == 1
    assert out == ""
    assert len(err.splitlines()) == 1
    stored = len(gzip.compress(module, 9, mtime=0)) if compress else len(module)
    how = f"{stored} bytes gzip-compressed" if compress else f"{stored} bytes"
    assert err.startswith(
        f"error: {path}: the module is {how}, more than a ConfigMap holds (1048576 bytes, 1 MiB): "
    )
    assert (
        "even gzip-compressed it does not fit" if compress else "gzip-compressed it is still"
    ) in err
    assert "build a smaller module" in err


def test_a_module_past_client_side_apply_gets_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    code, out, err = cli(capsys, write(tmp_path, padded(300_000, False)), "--name", "mid")
    assert code == 0
    assert out.startswith("---\n")
    assert err.startswith("note: the ConfigMap holds ")
    assert "use `kubectl apply --server-side` or `kubectl create`" in err


# --- refused modules and usage errors --------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            b"hello world",
            "InvalidModule: plugin 'bad' load: not a WebAssembly module "
            "(it starts with b'hell', not b'\\x00asm')",
            id="not-wasm",
        ),
        pytest.param(
            guest(hook(returns(0, 0)), marker=False),
            "InvalidModule: plugin 'bad' load: no ABI marker",
            id="no-marker",
        ),
        pytest.param(
            guest(hook(returns(0, 0)), imports='(import "env" "evil" (func $evil))'),
            "InvalidModule: plugin 'bad' load: import 'env.evil' (() -> ()) is not allowed",
            id="forbidden-import",
        ),
    ],
)
def test_a_refused_module_is_an_invalid_module_failure(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sandbox: Sandbox,
    data: bytes,
    message: str,
) -> None:
    code, out, err = cli(capsys, write(tmp_path, data), "--name", "bad")
    assert code == 1
    assert out == ""
    assert err.startswith(message)
    assert len(err.splitlines()) == 1


def test_a_wat_file_that_does_not_assemble(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    path = tmp_path / "broken.wat"
    path.write_text("(module (func")
    code, _, err = cli(capsys, str(path), "--name", "broken")
    assert code == 1
    assert err.startswith(f"InvalidModule: plugin 'broken' load: {path}: not valid WAT: ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--name", "Tier_Labeller"],
            "error: --name 'Tier_Labeller': a plugin name must be a DNS-1123 label: at most 63 "
            "lower-case letters, digits and '-', starting and ending with a letter or digit",
        ),
        (["--name", "x" * 64], "error: --name 'xxxx"),
        (["--name", "ok", "--namespace", "Team"], "error: --namespace 'Team': a namespace must"),
        (["--name", "ok", "--key", "a/b.wasm"], "error: --key 'a/b.wasm': a ConfigMap key is"),
        (["--name", "ok", "--key", ".."], "error: --key '..': a ConfigMap key is"),
    ],
)
def test_usage_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sandbox: Sandbox,
    argv: list[str],
    message: str,
) -> None:
    code, out, err = cli(capsys, write(tmp_path, labeller()), *argv)
    assert code == 2
    assert out == ""
    assert err.startswith(message)


def test_a_missing_module_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, str(tmp_path / "nope.wasm"), "--name", "nope")
    assert code == 2
    assert err.startswith(f"error: {tmp_path / 'nope.wasm'}: no such file, and no built-in")


def test_name_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plugin", "pack", "m.wasm"])
    assert info.value.code == 2
    assert "--name" in capsys.readouterr().err
