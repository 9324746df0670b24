"""``modelserving render``: the Pod/Service stream, --explain, and refusal of bad input."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import yaml

from modelserving.cli.main import main
from modelserving.controller.yamltext import MAX_DEPTH
from modelserving.sandbox import sha256_hex
from tests.unit.conftest import manifest, role
from tests.wasm.guests import responding

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "prefill-decode.yaml"


def write(tmp_path: Path, *docs: dict[str, Any], name: str = "ms.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def render(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["render", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_two_role_example_with_scoped_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = render(capsys, "-f", str(EXAMPLE))
    assert code == 0, err
    objects = list(yaml.safe_load_all(out))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Pod", "llama-pd-0-decode-0-0"),
        ("Pod", "llama-pd-0-decode-0-1"),
        ("Pod", "llama-pd-0-prefill-0-0"),
        ("Pod", "llama-pd-0-prefill-0-1"),
        ("Service", "llama-pd-0-decode-0-0"),
        ("Service", "llama-pd-0-prefill-0-0"),
    ]
    pods = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
    prefill_worker = pods["llama-pd-0-prefill-0-1"]
    assert prefill_worker["spec"]["runtimeClassName"] == "nvidia"
    assert prefill_worker["metadata"]["annotations"]["example.com/tier"] == "prefill"
    decode_entry = pods["llama-pd-0-decode-0-0"]
    assert "runtimeClassName" not in decode_entry["spec"]
    assert decode_entry["metadata"]["annotations"]["example.com/tier"] == "decode-entry"
    decode_worker = pods["llama-pd-0-decode-0-1"]
    assert "annotations" not in decode_worker["metadata"]
    env = [e["name"] for e in pods["llama-pd-0-prefill-0-0"]["spec"]["containers"][0]["env"]]
    assert env.count("KV_ROLE") == 1  # upserted, not appended
    applied = json.loads(
        pods["llama-pd-0-prefill-0-0"]["metadata"]["annotations"][
            "modelserving.volcano.sh/plugins-applied"
        ]
    )
    assert applied == [{"name": "demo-pod-tweaks", "runtime": "Native"}]


def test_explain_shows_each_plugins_patch(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = render(capsys, "-f", str(EXAMPLE), "--explain")
    assert code == 0
    assert "# Pod default/llama-pd-0-decode-0-1: no plugin in scope" in out
    assert "#   demo-pod-tweaks (spec.plugins[1], Native): 2 operation(s)" in out
    assert '#     {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"}' in out
    # Comments do not change the objects.
    plain = list(yaml.safe_load_all(render(capsys, "-f", str(EXAMPLE))[1]))
    assert list(yaml.safe_load_all(out)) == plain


def test_explain_shows_what_a_monitored_plugin_would_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = [
        {"name": "entry-address-file", "mode": "Monitor"},
        {"name": "hccl-ranktable", "mode": "Monitor", "config": {"container": "missing"}},
    ]
    path = write(tmp_path, manifest(plugins=plugins))
    code, out, err = render(capsys, "-f", path, "--explain")
    assert code == 0, err
    assert (
        "#   entry-address-file (spec.plugins[0], Native, mode Monitor: not applied): "
        "2 operation(s)"
    ) in out
    assert (
        "#   hccl-ranktable (spec.plugins[1], Native, mode Monitor: not applied): would fail: "
        "PluginError: plugin 'hccl-ranktable' OnPodCreate on Pod sample-0-server-0-0: the Pod "
        "has no container named 'missing'"
    ) in out
    assert "(mode Monitor: nothing blocked)" in err
    (pod,) = [o for o in yaml.safe_load_all(out) if o["kind"] == "Pod"]
    assert "volumes" not in pod["spec"]
    assert "annotations" not in pod["metadata"]


def test_the_ascend_example_mounts_each_roles_rank_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = ROOT / "examples" / "ascend-pd-disaggregation.yaml"
    code, out, err = render(capsys, "-f", str(example))
    assert code == 0, err
    pods = {o["metadata"]["name"]: o for o in yaml.safe_load_all(out) if o["kind"] == "Pod"}
    assert len(pods) == 4
    for name, pod in pods.items():
        role = "prefill" if "-prefill-" in name else "decode"
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        table = volumes[f"{role}-ranktable"]["configMap"]
        assert table["name"] == f"deepseek-pd-0-{role}-ranktable"
        assert volumes["entry-address"]["configMap"]["items"][0]["key"] == f"{role}-0"
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["RANK_TABLE_FILE"] == "/user/serverid/devindex/config/hccl.json"
        assert pod["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] == "8"


def test_multiple_files_and_default_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = manifest(name="a")
    del a["metadata"]["namespace"]
    b = manifest(name="b", roles=[role("server", workers=1)])
    code, out, err = render(
        capsys,
        "-f",
        write(tmp_path, a, name="a.yaml"),
        "-f",
        write(tmp_path, b, name="b.yaml"),
        "-n",
        "ml",
    )
    assert code == 0, err
    objects = list(yaml.safe_load_all(out))
    assert {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects} == {
        ("Pod", "ml", "a-0-server-0-0"),
        ("Pod", "team-a", "b-0-server-0-0"),
        ("Pod", "team-a", "b-0-server-0-1"),
        ("Service", "team-a", "b-0-server-0-0"),
    }


def test_other_kinds_are_noted_and_lists_flattened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [manifest(), {"kind": "Deployment", "metadata": {"name": "d"}}],
    }
    code, out, err = render(capsys, "-f", write(tmp_path, doc))
    assert code == 0
    assert "note: ignoring Deployment default/d" in err
    assert len(list(yaml.safe_load_all(out))) == 1


def test_volcano_flag_adds_pod_groups(capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "examples" / "kthena" / "multinode-ray.yaml"
    kinds = [o["kind"] for o in yaml.safe_load_all(render(capsys, "-f", str(path), "--volcano")[1])]
    assert kinds.count("PodGroup") == 2
    kinds = [o["kind"] for o in yaml.safe_load_all(render(capsys, "-f", str(path))[1])]
    assert "PodGroup" not in kinds


def test_volcano_pod_groups_as_kthena_makes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No gangPolicy needed; minResources summed; subGroupPolicy; Pods annotated."""
    requests = {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    doc = manifest(name="llm", roles=[role(replicas=2, workers=1)])
    doc["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "gpu"}
    for key in ("entryTemplate", "workerTemplate"):
        doc["spec"]["template"]["roles"][0][key]["spec"]["containers"][0].update(requests)
    code, out, _ = render(capsys, "-f", write(tmp_path, doc), "--volcano")
    assert code == 0
    objects = list(yaml.safe_load_all(out))
    (group,) = [o for o in objects if o["kind"] == "PodGroup"]
    assert group["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "2", "memory": "4Gi"},
        "queue": "gpu",
        "subGroupPolicy": [
            {
                "name": "server",
                "subGroupSize": 2,
                "minSubGroups": 2,
                "labelSelector": {
                    "matchLabels": {
                        "modelserving.volcano.sh/name": "llm",
                        "modelserving.volcano.sh/role": "server",
                    }
                },
                "matchLabelKeys": ["modelserving.volcano.sh/role-id"],
            }
        ],
    }
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 4
    for pod in pods:
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "llm-0"
        role_id = pod["metadata"]["labels"]["modelserving.volcano.sh/role-id"]
        assert pod["metadata"]["annotations"]["volcano.sh/task-spec"] == role_id


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], *docs: dict[str, Any]) -> str:
    code, out, err = render(capsys, "-f", write(tmp_path, *docs))
    assert code == 1
    assert out == ""
    assert err.startswith("error: ")
    return err


def test_unknown_plugin_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(tmp_path, capsys, manifest(plugins=[{"name": "gpu-magic"}]))
    assert "spec.plugins[0] (plugin 'gpu-magic')" in err
    assert "no built-in plugin has this name (known: accelerator, demo-pod-tweaks, " in err


def test_unknown_config_field_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = manifest(plugins=[{"name": "demo-pod-tweaks", "config": {"runtimeClass": "nvidia"}}])
    err = refused(tmp_path, capsys, doc)
    assert "plugin 'demo-pod-tweaks'" in err
    assert "config.runtimeClass: unknown field" in err


def test_lower_case_target_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = manifest(plugins=[{"name": "demo-pod-tweaks", "scope": {"target": "worker"}}])
    err = refused(tmp_path, capsys, doc)
    assert "ModelServing team-a/sample is invalid" in err
    assert "spec.plugins[0].scope.target" in err


def test_unsupported_type_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(
        tmp_path, capsys, manifest(plugins=[{"name": "demo-pod-tweaks", "type": "Webhook"}])
    )
    assert "spec.plugins[0].type" in err


def test_missing_worker_template_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = role("server", workers=1)
    del r["workerTemplate"]
    err = refused(tmp_path, capsys, manifest(roles=[r]))
    assert "spec.template.roles[0].workerTemplate" in err


def test_too_many_pods_refused_before_any_is_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(tmp_path, capsys, manifest(roles=[role("server", workers=2)], replicas=2**31 - 1))
    assert "team-a/sample" in err
    assert "spec asks for 6,442,450,941 Pods (2,147,483,647 ServingGroups x 3 Pods)" in err
    assert "the limit is 100,000 (operator setting maxPodsPerModelServing)" in err


def test_bad_role_name_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(tmp_path, capsys, manifest(roles=[role("Prefill")]))
    assert "spec.template.roles[0].name: role name 'Prefill'" in err


LABEL_PATCH = msgpack.packb(
    {"patch": [{"op": "add", "path": "/metadata/labels/wasm", "value": "yes"}]}
)


def wasm_plugin(data: bytes, key: str = "p.wasm") -> dict[str, Any]:
    return {
        "name": "labeller",
        "type": "Wasm",
        "module": {"configMapRef": {"name": "mods", "key": key}, "sha256": sha256_hex(data)},
    }


def modules_config_map(data: bytes, key: str = "p.wasm") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "mods", "namespace": "team-a"},
        "binaryData": {key: base64.b64encode(data).decode()},
    }


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_wasm_plugin_module_from_a_config_map_in_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], compress: bool
) -> None:
    module = responding(LABEL_PATCH)
    stored = gzip.compress(module) if compress else module
    path = write(tmp_path, manifest(plugins=[wasm_plugin(module)]), modules_config_map(stored))
    code, out, _ = render(capsys, "-f", path)
    assert code == 0
    pods = [d for d in yaml.safe_load_all(out) if d["kind"] == "Pod"]
    assert pods
    assert all(p["metadata"]["labels"]["wasm"] == "yes" for p in pods)


def test_a_module_from_another_namespace_needs_plugin_namespaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the controller reads it: a ConfigMap outside the ModelServing's namespace only when
    the operator configuration lists that namespace (``pluginNamespaces``)."""
    module = responding(LABEL_PATCH)
    plugin = wasm_plugin(module)
    plugin["module"]["configMapRef"]["namespace"] = "shared"
    shared = modules_config_map(module)
    shared["metadata"]["namespace"] = "shared"
    path = write(tmp_path, manifest(plugins=[plugin]), shared)
    err = refused(tmp_path, capsys, manifest(plugins=[plugin]), shared)
    assert (
        "ConfigMap shared/mods is outside the ModelServing's namespace and shared is not an "
        "allowed plugin namespace (pluginNamespaces: none)"
    ) in err
    config = tmp_path / "operator.yaml"
    config.write_text("pluginNamespaces: [shared]\n")
    code, out, _ = render(capsys, "--config", str(config), "-f", path)
    assert code == 0
    pods = [d for d in yaml.safe_load_all(out) if d["kind"] == "Pod"]
    assert pods and all(p["metadata"]["labels"]["wasm"] == "yes" for p in pods)


def test_wasm_plugin_without_its_config_map_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(tmp_path, capsys, manifest(plugins=[wasm_plugin(responding(LABEL_PATCH))]))
    assert "module.configMapRef: ConfigMap team-a/mods not found" in err


def test_wasm_plugin_with_a_wrong_digest_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = responding(LABEL_PATCH)
    plugin = {
        **wasm_plugin(module),
        "module": {**wasm_plugin(module)["module"], "sha256": "0" * 64},
    }
    err = refused(tmp_path, capsys, manifest(plugins=[plugin]), modules_config_map(module))
    assert "module: InvalidModule: sha256 mismatch" in err


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda packed: packed[:-3], "the data ends before the gzip stream does (truncated)"),
        (lambda packed: packed + b"\n", "1 byte(s) after the end of the gzip stream (data; "),
        (
            lambda packed: packed + gzip.compress(b"x"),
            "byte(s) after the end of the gzip stream (a second gzip member; ",
        ),
    ],
    ids=["truncated", "trailing-newline", "second-member"],
)
def test_a_broken_gzip_module_is_refused_as_not_valid_gzip(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: Callable[[bytes], bytes],
    words: str,
) -> None:
    """The pin is the uncompressed module's: the gzip is refused before any digest check."""
    module = responding(LABEL_PATCH)
    stored = damage(gzip.compress(module))
    doc = manifest(plugins=[wasm_plugin(module)])
    err = refused(tmp_path, capsys, doc, modules_config_map(stored))
    assert err.count("\n") == 1
    assert err.startswith(
        "error: ModelServing team-a/sample: spec.plugins[0] (plugin 'labeller'): "
        "module.configMapRef: ConfigMap team-a/mods key p.wasm is not valid gzip: "
    )
    assert words in err
    assert "sha256" not in err


@pytest.mark.parametrize("runtime", ["Wasm", "Native"])
def test_a_config_integer_beyond_64_bits_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runtime: str
) -> None:
    """msgpack carries -2^63 to 2^64-1; past that the config is refused, naming the field,
    whichever runtime would run the plugin (a config must mean the same to both)."""
    module = responding(LABEL_PATCH)
    plugin: dict[str, Any] = (
        {**wasm_plugin(module), "config": {"a": {"b": 2**70}}}
        if runtime == "Wasm"
        else {"name": "demo-pod-tweaks", "config": {"annotations": {"b": 2**70}}}
    )
    err = refused(tmp_path, capsys, manifest(plugins=[plugin]), modules_config_map(module))
    field = "config.a.b" if runtime == "Wasm" else "config.annotations.b"
    assert err == (
        f"error: ModelServing team-a/sample: spec.plugins[0] (plugin '{plugin['name']}'): "
        f"{field}: integer 1180591620717411303424 is outside the 64-bit range "
        "(-9223372036854775808 to 18446744073709551615)\n"
    )


def test_the_64_bit_bounds_themselves_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = responding(LABEL_PATCH)
    plugin = {**wasm_plugin(module), "config": {"a": [-(2**63), 2**64 - 1]}}
    path = write(tmp_path, manifest(plugins=[plugin]), modules_config_map(module))
    code, _, err = render(capsys, "-f", path)
    assert code == 0, err


def test_a_template_integer_beyond_64_bits_is_refused_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = responding(LABEL_PATCH)
    doc = manifest(plugins=[wasm_plugin(module)])
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["x-count"] = 2**70
    err = refused(tmp_path, capsys, doc, modules_config_map(module))
    assert "Traceback" not in err
    assert (
        "spec.template.roles[0].entryTemplate.spec.x-count: integer 1180591620717411303424 "
        "is outside the 64-bit range"
    ) in err


def test_not_yaml_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1, 2\n")
    code, _, err = render(capsys, "-f", str(path))
    assert code == 1
    assert f"error: {path}: not valid YAML" in err


def test_missing_file_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = render(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert code == 1
    assert "cannot read" in err


def test_no_model_serving_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(
        tmp_path, capsys, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    )
    assert "no ModelServing" in err


def test_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "modelserving"
    done = subprocess.run(
        [str(script), "render", "-f", str(EXAMPLE)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "kind: Pod" in done.stdout
    bad = write(tmp_path, manifest(plugins=[{"name": "nope"}]))
    done = subprocess.run(
        [str(script), "render", "-f", bad], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert "plugin 'nope'" in done.stderr


def render_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes
) -> tuple[str, str]:
    """Render a file written verbatim; expect refusal; return (path, stderr)."""
    path = tmp_path / "ms.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    code, out, err = render(capsys, "-f", str(path))
    assert (code, out) == (1, ""), err
    assert err.startswith("error: ")
    return str(path), err


@pytest.mark.parametrize("kind", ["[1]", "{a: 1}"])
def test_kind_of_wrong_type_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    text = yaml.safe_dump(manifest()) + f"---\nkind: {kind}\nmetadata: {{name: x}}\n"
    path, err = render_text(tmp_path, capsys, text)
    assert err.startswith(f"error: {path}: document 2: kind must be a string, not a ")


@pytest.mark.parametrize("items", ["", "items:\n", "items: text\n"])
def test_list_without_items_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], items: str
) -> None:
    path, err = render_text(tmp_path, capsys, f"apiVersion: v1\nkind: List\n{items}")
    assert err.startswith(f"error: {path}: document 1: a List needs items to be a list of objects")


def test_list_item_not_a_map_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [manifest(), 7]})
    path, err = render_text(tmp_path, capsys, text)
    assert err == f"error: {path}: document 1, items[1] is not a map but a number\n"


@pytest.mark.parametrize("field", ["metadata", "apiVersion"])
def test_identity_fields_of_wrong_type_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    doc = manifest()
    doc[field] = [1]
    _, err = render_text(tmp_path, capsys, yaml.safe_dump(doc))
    assert "is invalid:" in err
    assert f"  - {field}: " in err


def test_not_utf8_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, err = render_text(tmp_path, capsys, b"kind: ModelServing\nmetadata: {name: \xff}\n")
    assert err.startswith(f"error: {path}: not UTF-8 text")


@pytest.mark.timeout(10)
def test_alias_bomb_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    path, err = render_text(tmp_path, capsys, yaml.safe_dump(manifest()) + "---\n" + bomb)
    assert err.startswith(f"error: {path}: YAML aliases expand to more than")
    assert "(document 2)" in err


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "a: " + "{b: " * 5_000 + "1" + "}" * 5_000 + "\n",
        "- " * 1_500 + "1\n",
        "".join(" " * i + "k:\n" for i in range(1_200)),
        "kind: A\nspec:\n  x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n",
    ],
    ids=["flow-lists-100000", "flow-maps-5000", "block-lists-1500", "block-maps-1200", "limit+1"],
)
def test_deep_nesting_refused_without_crashing(tmp_path: Path, text: str) -> None:
    # Older libyaml recursed until the interpreter died (SIGSEGV); newer libyaml refuses at
    # 1,000 levels in its own words. Either way the refusal is ours: exit 1, one line.
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "modelserving.cli.main", "render", "-f", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: {path}: maps and lists nested more than {MAX_DEPTH} ")


def test_value_json_cannot_hold_refused_with_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = manifest()
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "X", "value": b"\x00\x01"}
    ]
    path, err = render_text(tmp_path, capsys, yaml.safe_dump(doc))
    assert err.startswith(
        f"error: {path}: document 1: "
        "spec.template.roles[0].entryTemplate.spec.containers[0].env[0].value: "
        "binary data (!!binary) has no JSON form"
    )


def test_timestamps_rendered_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = manifest()
    entry = doc["spec"]["template"]["roles"][0]["entryTemplate"]
    entry["metadata"] = {"annotations": {"example.com/since": "SINCE"}}
    path = tmp_path / "ms.yaml"
    path.write_text(yaml.safe_dump(doc).replace("SINCE", "2024-01-02 03:04:05"))
    code, out, err = render(capsys, "-f", str(path))
    assert code == 0, err
    [pod] = [o for o in yaml.safe_load_all(out) if o["kind"] == "Pod"]
    assert pod["metadata"]["annotations"]["example.com/since"] == "2024-01-02 03:04:05"


def test_plugin_errors_name_the_model_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path, manifest(name="good"), name="good.yaml")
    bad = write(tmp_path, manifest(name="bad", plugins=[{"name": "nope"}]), name="bad.yaml")
    code, out, err = render(capsys, "-f", good, "-f", bad)
    assert (code, out) == (1, "")
    assert err.startswith("error: ModelServing team-a/bad: spec.plugins[0] (plugin 'nope'): ")


def test_failing_plugin_names_the_model_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = {
        "name": "demo-pod-tweaks",
        "failurePolicy": "Fail",
        "config": {"annotations": {"modelserving.volcano.sh/plugins-applied": "forged"}},
    }
    err = refused(tmp_path, capsys, manifest(plugins=[plugin]))
    assert err.startswith(
        "error: ModelServing team-a/sample: ForbiddenPatch: plugin 'demo-pod-tweaks' OnPodCreate "
        "on Pod sample-0-server-0-0: "
    )


def test_anchors_for_shared_templates_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = """
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelServing
metadata: {name: anchored, namespace: default}
spec:
  template:
    roles:
      - name: leader
        entryTemplate: &pod
          spec:
            containers: [{name: engine, image: "vllm/vllm-openai:v0.10.0"}]
        workerReplicas: 1
        workerTemplate: *pod
"""
    path = tmp_path / "anchored.yaml"
    path.write_text(text)
    code, out, err = render(capsys, "-f", str(path))
    assert code == 0, err
    pods = [o for o in yaml.safe_load_all(out) if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == [
        "anchored-0-leader-0-0",
        "anchored-0-leader-0-1",
    ]
    assert pods[1]["spec"]["containers"][0]["env"][2] == {"name": "WORKER_INDEX", "value": "1"}
    assert pods[0]["spec"]["containers"][0]["env"][2] == {"name": "WORKER_INDEX", "value": "0"}
