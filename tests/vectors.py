"""The shared ABI test vectors in ``abi/vectors/``: how they are made, and the check they match.

Each vector is a request (msgpack bytes) to a built-in plugin and the exact response the
reference (native Python) implementation gives, plus the failure class the host ends with when
the call fails. The Python host replays them through native and WebAssembly built-ins
(tests/wasm/test_vectors.py) and the Go port (tests/wasm/test_go_plugins.py); the Rust and Go
SDKs' tests replay them natively through the Rust built-ins and the Go examples.

    .venv/bin/python -m tests.vectors write   # regenerate abi/vectors/*.json
    .venv/bin/python -m tests.vectors check   # exit 1 when a file is stale (make test runs it)
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from modelserving.abi.codec import encode_request
from modelserving.api.errors import FailureClass, PatchRejected
from modelserving.api.hook import Hook, HookRequest
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.base import HookError
from modelserving.plugins.registry import default_registry

VECTORS = Path(__file__).resolve().parent.parent / "abi" / "vectors"
PLUGIN = "demo-pod-tweaks"

MODEL_SERVING: dict[str, Any] = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "llama", "namespace": "serving", "uid": "9f1c", "generation": 3},
    "spec": {
        "replicas": 1,
        "template": {
            "roles": [
                {
                    "name": "prefill",
                    "replicas": 1,
                    "entryTemplate": {
                        "spec": {"containers": [{"name": "engine", "image": "vllm:v0.10.0"}]}
                    },
                    "workerReplicas": 0,
                }
            ]
        },
    },
}
WHERE = PodPlace("llama-0", "prefill", "prefill-0", True)


def pod(
    env: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    init: bool = False,
    args: int = 0,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": "vllm:v0.10.0"}
    if env is not None:
        container["env"] = env
    if args:
        container["args"] = [f"--flag-{i}=value-{i:04d}" for i in range(args)]
    metadata: dict[str, Any] = {
        "name": "llama-0-prefill-0-0",
        "namespace": "serving",
        "labels": {"modelserving.volcano.sh/name": "llama"},
    }
    if annotations is not None:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [container]}
    if init:
        spec["initContainers"] = [{"name": "fetch", "image": "busybox:1.37", "env": []}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@dataclass
class Case:
    name: str
    description: str
    hook: Hook
    config: Any
    pod: dict[str, Any] | None = None
    failure: FailureClass | None = None
    notes: list[str] = field(default_factory=list)


FULL = {
    "runtimeClassName": "nvidia",
    "annotations": {"example.com/team": "llm", "prometheus.io/scrape": "true"},
    "env": [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ],
}

CASES = [
    Case(
        "create-full-config",
        "runtime class, annotations and env on a bare Pod",
        Hook.ON_POD_CREATE,
        FULL,
        pod(),
    ),
    Case(
        "create-empty-config",
        "nil config: no change, an empty response",
        Hook.ON_POD_CREATE,
        None,
        pod(),
    ),
    Case(
        "create-env-upsert",
        "an existing name is replaced in place, its duplicates removed, new names appended",
        Hook.ON_POD_CREATE,
        {
            "env": [
                {"name": "B", "value": "new"},
                {"name": "C", "value": "3"},
                {"name": "B", "value": "newest"},
            ]
        },
        pod(
            env=[
                {"name": "A", "value": "1"},
                {"name": "B", "value": "old"},
                {"name": "B", "value": "dup"},
                {"name": "D", "value": "4"},
            ]
        ),
    ),
    Case(
        "create-annotations-merge",
        "annotations merged one key at a time into an existing map; '/' in keys escaped",
        Hook.ON_POD_CREATE,
        {"annotations": {"example.com/tier": "1", "plain": "2"}},
        pod(annotations={"existing": "x", "plain": "old"}),
    ),
    Case(
        "create-init-containers",
        "env goes to every container and initContainer",
        Hook.ON_POD_CREATE,
        {"env": [{"name": "X", "value": "1"}]},
        pod(init=True),
    ),
    Case(
        "create-large-pod",
        "a Pod of about 10 KB",
        Hook.ON_POD_CREATE,
        FULL,
        pod(env=[{"name": f"VAR_{i}", "value": "v" * 24} for i in range(40)], args=300),
    ),
    Case(
        "create-protected-annotation",
        "the guest patches a protected annotation: the host's patch policy refuses it",
        Hook.ON_POD_CREATE,
        {"annotations": {"modelserving.volcano.sh/name": "hijack"}},
        pod(),
        FailureClass.FORBIDDEN_PATCH,
    ),
    Case("validate-full-config", "a valid config: empty response", Hook.VALIDATE_CONFIG, FULL),
    Case("validate-nil-config", "no config at all is valid", Hook.VALIDATE_CONFIG, None),
    Case(
        "validate-unknown-field",
        "unknown fields are refused",
        Hook.VALIDATE_CONFIG,
        {"runtimeClass": "nvidia"},
        failure=FailureClass.PLUGIN_ERROR,
    ),
    Case(
        "validate-bad-runtime-class",
        "runtimeClassName must be a DNS-1123 subdomain",
        Hook.VALIDATE_CONFIG,
        {"runtimeClassName": "Not_Valid"},
        failure=FailureClass.PLUGIN_ERROR,
    ),
    Case(
        "validate-bad-env-name",
        "env names follow Kubernetes' rule",
        Hook.VALIDATE_CONFIG,
        {"env": [{"name": "1-bad name"}]},
        failure=FailureClass.PLUGIN_ERROR,
    ),
    Case(
        "validate-wrong-type",
        "types are strict: a number is not a string",
        Hook.VALIDATE_CONFIG,
        {"annotations": {"a": 1}},
        failure=FailureClass.PLUGIN_ERROR,
    ),
    Case(
        "validate-bad-annotation-key",
        "annotation keys must be qualified names",
        Hook.VALIDATE_CONFIG,
        {"annotations": {"-bad-": "x"}},
        failure=FailureClass.PLUGIN_ERROR,
    ),
]


def native_response(request: bytes) -> bytes | None:
    """The native built-in's response to request bytes (the reference implementation); None
    when it refuses the config. Used to make the vectors, to replay them and for the
    differential tests."""
    fields = msgpack.unpackb(request)
    name = fields["plugin"]["name"]
    builtin = default_registry().get(name)
    assert builtin is not None
    try:
        config = builtin.config_model.model_validate(fields["plugin"]["config"] or {})
    except ValueError:
        return None
    if fields["hook"] == Hook.VALIDATE_CONFIG:
        return b""
    plugin: Any = builtin.factory(name, config)
    hook_request = HookRequest(
        hook=Hook(fields["hook"]),
        model_serving=parse_model_serving(fields["modelServing"]),
        place=PodPlace(
            fields["servingGroup"], fields["roleName"], fields["roleId"], fields["isEntry"]
        ),
        pod=fields["pod"],
    )
    try:
        if hook_request.hook == Hook.ON_POD_READY:
            observed = plugin.on_pod_ready(hook_request) or []
            if fields["abiVersion"] < 2 or not observed:
                return b""  # v1: the guest writes observe lines instead
            found = [{"name": o.name, "seconds": float(o.seconds)} for o in observed]
            packed: bytes = msgpack.packb({"observations": found}, use_bin_type=True)
            return packed
        ops = plugin.on_pod_create(hook_request)
    except HookError as exc:
        error: bytes = msgpack.packb({"error": str(exc)}, use_bin_type=True)
        return error
    return msgpack.packb({"patch": list(ops)}, use_bin_type=True) if ops else b""


def host_failure(case: Case, response: bytes | None) -> FailureClass | None:
    """The class the host ends with for the reference response (None: success)."""
    if response is None:
        return FailureClass.PLUGIN_ERROR
    if case.hook is Hook.ON_POD_CREATE and response:
        assert case.pod is not None
        try:
            PatchValidator().apply_patch(case.pod, msgpack.unpackb(response)["patch"])
        except PatchRejected:
            return FailureClass.FORBIDDEN_PATCH
    return None


def vector(case: Case) -> dict[str, Any]:
    request = encode_request(
        case.hook,
        PLUGIN,
        case.config,
        MODEL_SERVING if case.pod is not None else None,
        WHERE if case.pod is not None else None,
        case.pod,
    )
    response = native_response(request)
    failure = host_failure(case, response)
    if failure != case.failure:
        raise AssertionError(
            f"vector {case.name}: expected {case.failure}, the host gives {failure}"
        )
    expect: dict[str, Any] = {}
    if response is not None:
        expect["response"] = base64.b64encode(response).decode()
    if failure is not None:
        expect["failure"] = str(failure)
    return {
        "name": case.name,
        "description": case.description,
        "plugin": PLUGIN,
        "hook": str(case.hook),
        "config": case.config,
        "request": base64.b64encode(request).decode(),
        "expect": expect,
    }


def render_all() -> dict[str, str]:
    return {f"{c.name}.json": json.dumps(vector(c), indent=2) + "\n" for c in CASES}


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "check"
    files = render_all()
    if mode == "write":
        VECTORS.mkdir(parents=True, exist_ok=True)
        for stale in VECTORS.glob("*.json"):
            if stale.name not in files:
                stale.unlink()
        for name, text in files.items():
            (VECTORS / name).write_text(text)
        print(f"wrote {len(files)} vectors to {VECTORS}")
        return 0
    problems = [
        n for n, t in files.items() if not (VECTORS / n).is_file() or (VECTORS / n).read_text() != t
    ]
    problems += [p.name for p in VECTORS.glob("*.json") if p.name not in files]
    if problems:
        print(
            f"abi/vectors is stale ({', '.join(sorted(problems))}); run `make vectors`",
            file=sys.stderr,
        )
        return 1
    print(f"abi/vectors: {len(files)} vectors up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
