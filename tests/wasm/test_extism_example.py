"""The example Extism plugin (examples/wasm/go-team-label-extism.wasm and its TinyGo build
tinygo-team-label-extism.wasm, built by `make wasm-go` from
plugins-src/examples-go/team-label-extism: Go with github.com/extism/go-pdk and the
modelserving Go SDK) through the host: its result, and the failure classes of its calls, in
both flavours."""

from __future__ import annotations

import base64
import gzip
import hashlib
from pathlib import Path
from typing import Any

import msgpack
import pytest

from modelserving.abi.codec import encode_request
from modelserving.api.errors import PluginFailure
from modelserving.api.hook import Hook
from modelserving.api.modelserving import PluginSpec
from modelserving.api.place import PodPlace
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.exports import module_hooks
from modelserving.plugins.modules import ConfigMapModules
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from tests.wasm.conftest import sample_pod, unhurried

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "wasm"
MS = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing"}
PREFILL = PodPlace("sample-0", "prefill", "prefill-0", True)
LABEL = {"op": "add", "path": "/metadata/labels/example.com~1team", "value": "ml"}


@pytest.fixture(scope="module", params=["go", "tinygo"])
def module(request: pytest.FixtureRequest) -> bytes:
    path = EXAMPLES / f"{request.param}-team-label-extism.wasm"
    assert path.is_file(), f"{path} is missing: run `make wasm-go`"
    return path.read_bytes()


def plugin(sandbox: Sandbox, module: bytes, config: Any, **limits: int) -> WasmPlugin:
    # the longest deadline unless one is given: no test here is about time, and a Go module's
    # start-up on a loaded machine must not turn into a Timeout
    limits.setdefault("timeout_ms", sandbox.settings.max_timeout_ms)
    return WasmPlugin("team-label", config, sandbox.load(module), sandbox, sandbox.limits(**limits))


def create(config: Any, where: PodPlace = PREFILL) -> bytes:
    return encode_request(Hook.ON_POD_CREATE, "team-label", config, MS, where, sample_pod())


def failure(sandbox: Sandbox, module: bytes, config: Any, **limits: int) -> PluginFailure:
    with pytest.raises(PluginFailure) as info:
        plugin(sandbox, module, config, **limits).run(Hook.ON_POD_CREATE, create(config), "pod-0")
    return info.value


def test_it_is_an_extism_plugin_with_wasi(sandbox: Sandbox, module: bytes) -> None:
    info = sandbox.load(module).info
    assert (info.flavour, info.abi_version) == ("extism", 2)
    assert module_hooks(info) == (Hook.ON_POD_CREATE, Hook.VALIDATE_CONFIG)
    assert info.wasi  # the runtime's (which WASI functions depends on the toolchain)
    assert "modelserving.log" not in info.imports
    assert {"extism:host/env.input_load_u8", "extism:host/env.output_set"} <= set(info.imports)


def test_it_labels_the_pod(sandbox: Sandbox, module: bytes) -> None:
    outcome = plugin(sandbox, module, {"team": "ml"}).run(
        Hook.ON_POD_CREATE, create({"team": "ml"})
    )
    assert outcome.response.patch == [LABEL]
    patched, _ = PatchValidator().apply_patch(sample_pod(), outcome.response.patch)
    assert patched["metadata"]["labels"] == {"a": "b", "example.com/team": "ml"}
    assert outcome.call.response == msgpack.packb({"patch": [LABEL]})


def test_roles_it_does_not_list_are_left_alone(sandbox: Sandbox, module: bytes) -> None:
    config = {"team": "ml", "roles": ["decode"]}
    outcome = plugin(sandbox, module, config).run(Hook.ON_POD_CREATE, create(config))
    assert outcome.call.response == b""
    assert outcome.response.patch == []
    decode = PodPlace("sample-0", "decode", "decode-0", True)
    outcome = plugin(sandbox, module, config).run(Hook.ON_POD_CREATE, create(config, decode))
    assert outcome.response.patch == [LABEL]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "config.team: is required"),
        ({"team": 5}, "config.team: must be a str, got int"),
        ({"team": "Data Science"}, "config.team: 'Data Science' is not a valid label value"),
        ({"team": "ml", "roles": "prefill"}, "config.roles: must be an array, got str"),
        ({"team": "ml", "roles": [1]}, "config.roles.0: must be a str, got int"),
        ({"team": "ml", "colour": "blue"}, "config.colour: unknown field"),
    ],
)
def test_a_refused_config_is_a_plugin_error(
    sandbox: Sandbox, module: bytes, config: Any, message: str
) -> None:
    with pytest.raises(PluginFailure) as info:
        plugin(sandbox, module, config).validate_config()
    assert (info.value.failure_class, info.value.detail) == ("PluginError", message)
    # OnPodCreate reads the config again, and fails the same way (through an Extism error).
    assert (
        failure(sandbox, module, config).failure_class,
        failure(sandbox, module, config).detail,
    ) == (
        "PluginError",
        message,
    )


def test_a_valid_config_is_accepted(sandbox: Sandbox, module: bytes) -> None:
    plugin(sandbox, module, {"team": "ml", "roles": ["prefill", "decode"]}).validate_config()


@pytest.mark.parametrize(
    ("flavour", "limits", "failure_class"),
    [
        # Extism starts the instance (the Go runtime's _initialize) under the call's fuel
        ("go", {"fuel": 300_000}, "FuelExhausted"),
        # the Go runtime's initial memory alone is over 2 MiB
        ("go", {"memory_mib": 2}, "MemoryLimit"),
        # TinyGo's start-up is cheap, but not free
        ("tinygo", {"fuel": 1_000}, "FuelExhausted"),
    ],
)
def test_limits_too_small_for_the_go_runtime(
    sandbox: Sandbox, flavour: str, limits: dict[str, int], failure_class: str
) -> None:
    module = (EXAMPLES / f"{flavour}-team-label-extism.wasm").read_bytes()
    assert failure(sandbox, module, {"team": "ml"}, **limits).failure_class == failure_class


def test_it_is_delivered_gzip_compressed_in_a_configmap(sandbox: Sandbox, module: bytes) -> None:
    """It fits a ConfigMap gzip-compressed (standard Go's 2 MB must be); the pin is the
    uncompressed digest."""
    packed = gzip.compress(module, compresslevel=9, mtime=0)
    digest = hashlib.sha256(module).hexdigest()
    cm = {
        "metadata": {"name": "team-label", "namespace": "serving"},
        "binaryData": {"plugin.wasm": base64.b64encode(packed).decode()},
    }
    spec = PluginSpec.model_validate(
        {
            "name": "team-label",
            "type": "Wasm",
            "module": {
                "configMapRef": {"name": "team-label", "key": "plugin.wasm"},
                "sha256": digest,
            },
            "config": {"team": "ml"},
        }
    )
    resolve = ConfigMapModules({("serving", "team-label"): cm}, "serving", 32 * 1024 * 1024)
    compiled = sandbox.load(resolve(spec), digest)
    outcome = WasmPlugin("team-label", {"team": "ml"}, compiled, sandbox, unhurried(sandbox)).run(
        Hook.ON_POD_CREATE, create({"team": "ml"})
    )
    assert outcome.response.patch == [LABEL]
