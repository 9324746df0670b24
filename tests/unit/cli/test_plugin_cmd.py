"""``modelserving plugin run|inspect|bench``: output, failure classes on stderr, usage errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import yaml

from modelserving.api.group import GroupRequest
from modelserving.api.hook import Hook
from modelserving.api.labels import ENTRY_LABEL, GROUP_NAME_LABEL, ROLE_ID_LABEL, ROLE_LABEL
from modelserving.api.place import PodPlace
from modelserving.cli.main import main
from modelserving.cli.plugin_request import minimal_model_serving, read_request
from modelserving.plugins.artifacts import ArtifactMissing, builtin_wasm_path
from modelserving.plugins.exports import plugin_sandbox, set_default_sandbox
from modelserving.sandbox import SandboxSettings
from tests.wasm.guests import LOG_IMPORT, guest, hook, responding, returns, wat_bytes

ADD_LABEL = {"patch": [{"op": "add", "path": "/metadata/labels/tier", "value": "gold"}]}
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "sample-0-server-0-0", "namespace": "default", "labels": {"a": "b"}},
    "spec": {"containers": [{"name": "main", "image": "nginx:1.28.0"}]},
}
DEMO_CONFIG = {"runtimeClassName": "nvidia", "annotations": {"example.com/team": "llm"}}


@pytest.fixture(autouse=True)
def private_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CLI uses the process-wide sandbox: give it a private compile cache."""
    cache = tmp_path_factory.mktemp("wasm-cache")
    set_default_sandbox(plugin_sandbox(SandboxSettings(cache_dir=cache)))
    yield
    set_default_sandbox(None)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def logging_guest(response: dict[str, Any], *hooks: str) -> bytes:
    """Logs one info line, then returns ``response`` from each hook."""
    line, data = b"hello from the guest", pack(response)
    body = f"(call $log (i32.const 1) (i32.const 512) (i32.const {len(line)})) " + returns(
        1024, len(data)
    )
    return guest(
        f'(data (i32.const 512) "{wat_bytes(line)}")',
        f'(data (i32.const 1024) "{wat_bytes(data)}")',
        *(hook(body, name) for name in hooks or ("ms_on_pod_create",)),
        imports=LOG_IMPORT,
    )


def write_module(tmp_path: Path, data: bytes, name: str = "guest.wasm") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def write_request(tmp_path: Path, doc: dict[str, Any] | None = None, name: str = "req.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc if doc is not None else {"pod": POD}))
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plugin", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_ok(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = cli(capsys, "run", *argv)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def demo_wasm_or_skip() -> None:
    try:
        builtin_wasm_path("demo-pod-tweaks.wasm")
    except ArtifactMissing as exc:
        pytest.skip(str(exc))


# --- run -------------------------------------------------------------------------------------


def test_run_applies_the_patch_and_reports_usage_and_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_module(tmp_path, logging_guest(ADD_LABEL))
    out = run_ok(capsys, module, "--hook", "on-pod-create", "--request", write_request(tmp_path))
    assert out["hook"] == "OnPodCreate"
    assert out["plugin"] == {"name": "guest", "config": None}
    assert out["patch"] == ADD_LABEL["patch"]
    assert out["pod"]["metadata"]["labels"] == {"a": "b", "tier": "gold"}
    assert out["pod"]["spec"] == POD["spec"]
    assert out["fuelConsumed"] > 0
    assert out["durationUs"] > 0
    assert out["logs"] == [{"level": "info", "message": "hello from the guest", "source": "log"}]
    assert len(out["sha256"]) == 64
    assert out["module"] == {"path": module, "builtin": None}


def test_run_takes_a_wat_file_and_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = pack(ADD_LABEL)
    wat = "\n".join(
        [
            "(module",
            '(memory (export "memory") 2)',
            '(func (export "modelserving_abi_v1"))',
            '(func (export "ms_alloc") (param i32) (result i32) (i32.const 4096))',
            f'(data (i32.const 1024) "{wat_bytes(data)}")',
            hook(returns(1024, len(data))),
            ")",
        ]
    )
    path = tmp_path / "text.wat"
    path.write_text(wat)
    argv = ["--hook", "on-pod-create", "--request", write_request(tmp_path), "--fuel", "5000"]
    out = run_ok(capsys, str(path), *argv, "--memory-mib", "8", "--timeout-ms", "100")
    assert out["plugin"]["name"] == "text"
    assert out["limits"] == {"fuel": 5000, "memoryBytes": 8 * 1024 * 1024, "timeoutMs": 100}
    assert out["pod"]["metadata"]["labels"]["tier"] == "gold"


def test_config_file_replaces_the_requests_config_and_name_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_module(tmp_path, responding(b""))
    request = write_request(
        tmp_path, {"plugin": {"name": "from-file", "config": {"old": 1}}, "pod": POD}
    )
    out = run_ok(capsys, module, "--hook", "on-pod-create", "--request", request)
    assert out["plugin"] == {"name": "from-file", "config": {"old": 1}}
    assert out["patch"] == []
    assert out["pod"] == POD
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"new": [1, 2]}))
    argv = ["--request", request, "--config", str(config), "--name", "renamed"]
    out = run_ok(capsys, module, "--hook", "on-pod-create", *argv)
    assert out["plugin"] == {"name": "renamed", "config": {"new": [1, 2]}}


WIDE = "integer 1180591620717411303424 is outside the 64-bit range (-9223372036854775808 to "


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_config_integer_beyond_64_bits_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """No request can carry it (msgpack): refused as the controller refuses such a config,
    exit 1 with one line naming the file and the field, never a traceback."""
    module = write_module(tmp_path, responding(b""))
    config = tmp_path / "config.yaml"
    config.write_text(f"a:\n  b: {2**70}\n")
    hook = ["--hook", "on-pod-create"] if command == "run" else []
    argv = [command, module, *hook, "--request", write_request(tmp_path), "--config", str(config)]
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (1, "")
    assert err == f"error: {config}: config.a.b: {WIDE}18446744073709551615)\n"


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"plugin": {"config": [0, 2**70]}, "pod": POD}, "plugin.config[1]"),
        ({"pod": {**POD, "spec": {"x": {"y": 2**70}}}}, "pod.spec.x.y"),
        ({"pod": POD, "modelServing": {"spec": {"replicas": 2**70}}}, "modelServing.spec.replicas"),
    ],
    ids=["plugin-config", "pod", "model-serving"],
)
def test_a_request_integer_beyond_64_bits_names_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict[str, Any], field: str
) -> None:
    module = write_module(tmp_path, responding(b""))
    request = write_request(tmp_path, doc)
    code, out, err = cli(capsys, "run", module, "--hook", "on-pod-create", "--request", request)
    assert (code, out) == (1, "")
    assert err == f"error: {request}: {field}: {WIDE}18446744073709551615)\n"


def test_on_pod_ready_returns_the_given_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_module(tmp_path, responding(pack({}), ("ms_on_pod_ready",)))
    out = run_ok(capsys, module, "--hook", "on-pod-ready", "--request", write_request(tmp_path))
    assert out["hook"] == "OnPodReady"
    assert out["patch"] == []
    assert out["pod"] == POD


def test_run_shows_the_observations_of_a_v2_response(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    observed = pack({"observations": [{"name": "pod_ready_seconds", "seconds": 2.5}]})
    fields = [f'(data (i32.const 1024) "{wat_bytes(observed)}")']
    fields += [
        '(func (export "modelserving_abi_v2"))',
        hook(returns(1024, len(observed)), "ms_on_pod_ready"),
    ]
    module = write_module(tmp_path, guest(*fields, marker=False))
    out = run_ok(capsys, module, "--hook", "on-pod-ready", "--request", write_request(tmp_path))
    assert out["observations"] == [{"name": "pod_ready_seconds", "seconds": 2.5}]


def test_validate_config_needs_only_the_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_module(tmp_path, logging_guest({}, "ms_on_pod_create", "ms_validate_config"))
    request = write_request(tmp_path, {"plugin": {"config": {"x": 1}}})
    out = run_ok(capsys, module, "--hook", "validate-config", "--request", request)
    assert out["hook"] == "ValidateConfig"
    assert out["pod"] is None
    assert out["patch"] == []
    assert out["plugin"] == {"name": "guest", "config": {"x": 1}}
    assert out["logs"][0]["message"] == "hello from the guest"


def test_validate_config_refusal_is_a_plugin_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_module(
        tmp_path,
        responding(pack({"error": "x must be even"}), ("ms_on_pod_create", "ms_validate_config")),
    )
    request = write_request(tmp_path, {"plugin": {"name": "p", "config": {"x": 1}}})
    code, out, err = cli(capsys, "run", module, "--hook", "validate-config", "--request", request)
    assert code == 1
    assert out == ""
    assert err.splitlines()[0] == "PluginError: plugin 'p' ValidateConfig: x must be even"


ENDLESS = guest(hook("(loop $l (br $l)) (i64.const 0)"))
FAILURES = [
    pytest.param(
        ENDLESS,
        ("--fuel", "10000"),
        "FuelExhausted: plugin 'guest' OnPodCreate on Pod sample-0-server-0-0: "
        "the call ran out of fuel (10000 units)",
        id="FuelExhausted",
    ),
    pytest.param(
        guest(hook("unreachable")), (), "Trap: plugin 'guest' OnPodCreate on Pod ", id="Trap"
    ),
    pytest.param(
        guest(hook(returns(0, 0)), marker=False),
        (),
        "InvalidModule: plugin 'guest' load: no ABI marker",
        id="InvalidModule",
    ),
    pytest.param(
        responding(pack({"bogus": 1})),
        (),
        "InvalidResponse: plugin 'guest' OnPodCreate on Pod sample-0-server-0-0: "
        "unknown response key(s) 'bogus'",
        id="InvalidResponse",
    ),
    pytest.param(
        responding(pack({"error": "no GPUs for you"})),
        (),
        "PluginError: plugin 'guest' OnPodCreate on Pod sample-0-server-0-0: no GPUs for you",
        id="PluginError",
    ),
    pytest.param(
        responding(pack({"patch": [{"op": "replace", "path": "/metadata/name", "value": "x"}]})),
        (),
        "ForbiddenPatch: plugin 'guest' OnPodCreate on Pod sample-0-server-0-0: /metadata/name",
        id="ForbiddenPatch",
    ),
]


@pytest.mark.parametrize(("module", "extra", "first_line"), FAILURES)
def test_each_failure_class_leads_stderr(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    module: bytes,
    extra: tuple[str, ...],
    first_line: str,
) -> None:
    path = write_module(tmp_path, module)
    request = write_request(tmp_path)
    code, out, err = cli(
        capsys, "run", path, "--hook", "on-pod-create", "--request", request, *extra
    )
    assert code == 1
    assert out == ""
    assert err.splitlines()[0].startswith(first_line), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("response", "first"),
    [
        ({"error": "refused"}, "PluginError:"),
        ({"patch": [{"op": "remove", "path": "/metadata/uid"}]}, "ForbiddenPatch:"),
    ],
)
def test_guest_logs_follow_the_failure_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], response: dict[str, Any], first: str
) -> None:
    module = write_module(tmp_path, logging_guest(response))
    request = write_request(tmp_path)
    code, _, err = cli(capsys, "run", module, "--hook", "on-pod-create", "--request", request)
    assert code == 1
    lines = err.splitlines()
    assert lines[0].startswith(first)
    assert lines[1:] == ["  guest info (log): hello from the guest"]


def test_run_builtin_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo_wasm_or_skip()
    request = write_request(tmp_path, {"plugin": {"config": DEMO_CONFIG}, "pod": POD})
    out = run_ok(capsys, "demo-pod-tweaks", "--hook", "on-pod-create", "--request", request)
    assert out["module"] == {"path": None, "builtin": "demo-pod-tweaks"}
    assert out["plugin"]["name"] == "demo-pod-tweaks"
    assert out["pod"]["spec"]["runtimeClassName"] == "nvidia"
    assert out["pod"]["metadata"]["annotations"] == {"example.com/team": "llm"}


def test_run_on_pod_ready_lists_the_observations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = {
        **POD,
        "metadata": {**POD["metadata"], "creationTimestamp": "2026-11-24T10:00:00Z"},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T10:01:01Z"}
            ]
        },
    }
    request = write_request(tmp_path, {"pod": pod})
    out = run_ok(capsys, "ready-reporter", "--hook", "on-pod-ready", "--request", request)
    assert out["observations"] == [{"name": "pod_ready_seconds", "seconds": 61.0}]
    # the built-in speaks ABI v2: the observation is in its response, not an observe line
    assert not any(line["message"].startswith("observe ") for line in out["logs"])
    not_ready = write_request(tmp_path, {"pod": POD}, name="not-ready.yaml")
    out = run_ok(capsys, "ready-reporter", "--hook", "on-pod-ready", "--request", not_ready)
    assert out["observations"] == []
    assert out["logs"][0]["message"].startswith("cannot measure readiness of Pod ")


# --- request defaults ------------------------------------------------------------------------


def test_request_defaults_come_from_the_pod_labels(tmp_path: Path) -> None:
    labels = {
        GROUP_NAME_LABEL: "llama-3",
        ROLE_LABEL: "decode",
        ROLE_ID_LABEL: "decode-1",
    }
    pod = {**POD, "metadata": {"name": "w", "labels": labels}}
    request = read_request(
        write_request(tmp_path, {"pod": pod}), Hook.ON_POD_CREATE, "stem", None, None
    )
    assert request.where == PodPlace("llama-3", "decode", "decode-1", False)
    assert request.name == "stem"
    assert request.config is None
    assert request.model_serving_api()["metadata"]["name"] == "plugin-test"
    pod["metadata"]["labels"] = {**labels, ENTRY_LABEL: "true"}
    request = read_request(
        write_request(tmp_path, {"pod": pod, "isEntry": False}), Hook.ON_POD_CREATE, "s", None, None
    )
    assert request.where is not None and request.where.is_entry is False


def test_request_defaults_without_labels(tmp_path: Path) -> None:
    request = read_request(write_request(tmp_path), Hook.ON_POD_READY, "stem", None, None)
    assert request.where == PodPlace("plugin-test-0", "server", "server-0", True)
    assert minimal_model_serving().spec.template.roles[0].name == "server"
    odd = {**POD, "metadata": {"name": "p", "labels": ["not", "a", "map"]}}
    request = read_request(
        write_request(tmp_path, {"pod": odd}), Hook.ON_POD_CREATE, "s", None, None
    )
    assert request.where == PodPlace("plugin-test-0", "server", "server-0", True)


# --- inspect ---------------------------------------------------------------------------------


def test_inspect_describes_the_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = write_module(tmp_path, logging_guest({}, "ms_on_pod_create", "ms_validate_config"))
    code, out, err = cli(capsys, "inspect", module)
    assert code == 0, err
    info = json.loads(out)
    assert info["path"] == module
    assert info["builtin"] is None
    assert info["abiVersion"] == 1
    assert info["flavour"] == "modelserving"
    assert info["hooks"] == ["OnPodCreate", "ValidateConfig"]
    assert info["imports"] == ["modelserving.log"]
    assert "ms_alloc" in info["exports"]
    assert info["size"] == Path(module).stat().st_size
    assert len(info["sha256"]) == 64


def test_inspect_refused_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = write_module(tmp_path, b"not wasm at all")
    code, out, err = cli(capsys, "inspect", module)
    assert code == 1
    assert out == ""
    assert err.startswith("InvalidModule: plugin 'guest' load: not a WebAssembly module")


def test_inspect_builtin(capsys: pytest.CaptureFixture[str]) -> None:
    demo_wasm_or_skip()
    code, out, err = cli(capsys, "inspect", "demo-pod-tweaks")
    assert code == 0, err
    info = json.loads(out)
    assert info["builtin"] == "demo-pod-tweaks"
    assert "OnPodCreate" in info["hooks"]


# --- bench -----------------------------------------------------------------------------------

BENCH_KEYS = {"p50Us", "p99Us", "meanUs", "meanFuel", "iterations", "runtime"}


def test_bench_wasm_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = write_module(tmp_path, responding(pack(ADD_LABEL)))
    argv = ["--request", write_request(tmp_path), "--iterations", "5"]
    code, out, err = cli(capsys, "bench", module, *argv)
    assert code == 0, err
    result = json.loads(out)
    assert result.keys() >= BENCH_KEYS
    assert result["runtime"] == "wasm"
    assert result["iterations"] == 5
    assert result["meanFuel"] > 0
    assert 0 < result["p50Us"] <= result["p99Us"]


def test_bench_native_builtin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = write_request(tmp_path, {"plugin": {"config": DEMO_CONFIG}, "pod": POD})
    argv = ["--request", request, "--runtime", "native", "--iterations", "5"]
    code, out, err = cli(capsys, "bench", "demo-pod-tweaks", *argv)
    assert code == 0, err
    result = json.loads(out)
    assert result.keys() >= BENCH_KEYS
    assert result["runtime"] == "native"
    assert result["meanFuel"] is None
    assert result["hook"] == "OnPodCreate"


def test_bench_native_invalid_model_serving_falls_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {"modelServing": {"kind": "ModelServing"}, "pod": POD}
    argv = ["--request", write_request(tmp_path, doc), "--runtime", "native", "--iterations", "2"]
    code, out, err = cli(capsys, "bench", "demo-pod-tweaks", *argv)
    assert code == 0, err
    assert "minimal ModelServing" in err
    assert json.loads(out)["iterations"] == 2


def test_bench_native_refused_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = write_request(tmp_path, {"plugin": {"config": {"bogus": 1}}, "pod": POD})
    argv = ["--request", request, "--runtime", "native", "--iterations", "2"]
    code, _, err = cli(capsys, "bench", "demo-pod-tweaks", *argv)
    assert code == 1
    assert err.startswith("PluginError: plugin 'demo-pod-tweaks' ValidateConfig: config.bogus")


def test_bench_builtin_wasm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo_wasm_or_skip()
    request = write_request(tmp_path, {"plugin": {"config": DEMO_CONFIG}, "pod": POD})
    code, out, err = cli(
        capsys, "bench", "demo-pod-tweaks", "--request", request, "--iterations", "3"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["runtime"] == "wasm"
    assert result["meanFuel"] > 0


def test_bench_failure_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = write_module(tmp_path, ENDLESS)
    argv = ["--request", write_request(tmp_path), "--iterations", "2", "--fuel", "1000"]
    code, out, err = cli(capsys, "bench", module, *argv)
    assert code == 1
    assert out == ""
    assert err.startswith("FuelExhausted: plugin 'guest' OnPodCreate")


# --- usage errors ----------------------------------------------------------------------------


def usage_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    module = write_module(tmp_path, responding(b""))
    good = write_request(tmp_path)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("pod: [unclosed\n")
    create = ["--hook", "on-pod-create"]
    return [
        (["run", module, *create, "--request", str(tmp_path / "nope.yaml")], "cannot read"),
        (["run", module, *create, "--request", str(bad_yaml)], "not valid YAML"),
        (["run", "no-such-plugin", *create, "--request", good], "no built-in plugin"),
        (["inspect", str(tmp_path / "missing.wasm")], "no such file"),
        (["run", module, *create, "--request", write_request(tmp_path, {}, "e.yaml")], "pod is"),
        (
            ["run", module, *create, "--request", write_request(tmp_path, {"pods": 1}, "u.yaml")],
            "unknown request field(s) pods",
        ),
        (
            ["run", module, *create, "--request", good, "--config", str(bad_yaml)],
            "not valid YAML",
        ),
        (
            ["run", module, "--hook", "on-pod-ready", "--request", good],
            "does not export ms_on_pod_ready",
        ),
        (["bench", module, "--request", good, "--runtime", "native"], "needs a built-in"),
    ]


def test_usage_errors_exit_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, fragment in usage_cases(tmp_path):
        code, out, err = cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert out == ""
        assert err.startswith("error: "), err
        assert fragment in err, (fragment, err)
        assert "Traceback" not in err


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plugin", "run", "x.wasm", "--hook", "on-pod-delete", "--request", "r.yaml"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["plugin", "bench", "x.wasm", "--request", "r.yaml", "--iterations", "0"])
    assert exc.value.code == 2


def test_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plugin", "--help"])
    out = capsys.readouterr().out
    for name in ("run", "inspect", "bench"):
        assert name in out


# --- the ServingGroup hook -----------------------------------------------------------------------

GROUP_PODS = [
    {"name": "llm-0-server-0-0", "roleName": "server", "roleId": "server-0", "isEntry": True},
    {"name": "llm-0-server-0-1", "roleName": "server", "roleId": "server-0", "isEntry": False},
]


def group_guest(response: dict[str, Any]) -> bytes:
    data = pack(response)
    return guest(
        f'(data (i32.const 1024) "{wat_bytes(data)}")',
        '(func (export "modelserving_abi_v3"))',
        hook(returns(1024, len(data)), "ms_on_serving_group_change"),
        marker=False,
    )


def test_run_calls_the_group_hook_and_prints_the_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wanted = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "llm-0-t"}}
    module = write_module(tmp_path, group_guest({"objects": [wanted]}))
    request = write_request(tmp_path, {"servingGroup": "llm-0", "pods": GROUP_PODS})
    out = run_ok(capsys, module, "--hook", "on-serving-group-change", "--request", request)
    assert out["hook"] == "OnServingGroupChange"
    assert out["objects"] == [
        {**wanted, "metadata": {"name": "llm-0-t", "labels": {}, "annotations": {}}, "data": {}}
    ]
    assert "pod" not in out
    assert out["fuelConsumed"] > 0


def test_a_group_request_file_names_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_module(tmp_path, group_guest({}))
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "no pods": ({"servingGroup": "g"}, "pods is missing or not a list"),
        "not a map": ({"pods": [1]}, "pods[0] must be a map"),
        "unknown key": ({"pods": [{"name": "a", "ip": "x"}]}, "pods[0]: unknown field(s) ip"),
        "wrong type": ({"pods": [{"name": "a", "ready": "yes"}]}, "pods[0].ready must be a bool"),
        "no name": ({"pods": [{"roleName": "r"}]}, "pods[0] needs a name"),
        "expectedPods": ({"pods": [], "expectedPods": -1}, "expectedPods must be a whole number"),
    }
    cases["a Pod hook's field"] = ({"pod": POD, "pods": []}, "unknown request field(s) pod")
    for case, (doc, message) in cases.items():
        request = write_request(tmp_path, doc, f"{case.replace(' ', '-')}.yaml")
        code, _, err = cli(
            capsys, "run", module, "--hook", "on-serving-group-change", "--request", request
        )
        assert code == 2, case
        assert message in err, (case, err)


def test_the_group_request_defaults(tmp_path: Path) -> None:
    path = write_request(tmp_path, {"pods": [{"name": "x"}]})
    request = read_request(path, Hook.ON_SERVING_GROUP_CHANGE, "p", None, None)
    built = request.hook_request(Hook.ON_SERVING_GROUP_CHANGE, minimal_model_serving())
    assert isinstance(built, GroupRequest)
    assert (built.serving_group, built.expected_pods) == ("plugin-test-0", 1)
    assert built.pods[0].place == PodPlace("plugin-test-0", "server", "server-0", True)
