"""The shared ABI test vectors in ``abi/vectors/``: how they are made, and the check they match.

Each vector is a request (msgpack bytes) to a built-in plugin and the exact response the
reference (native Python) implementation gives, plus the failure class the host ends with when
the call fails: ``demo-pod-tweaks`` for the Pod and config hooks (ABI v1), ``hccl-ranktable``
and ``entry-address-file`` for the ServingGroup hook too (ABI v3, their files prefixed with the
plugin's name). The Python host replays them through native and WebAssembly built-ins
(tests/wasm/test_vectors.py) and the Go port (tests/wasm/test_go_plugins.py, demo-pod-tweaks'
only); the Rust and Go SDKs' tests replay them natively through the Rust built-ins and the Go
examples.

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
from modelserving.api.errors import FailureClass, ObjectRejected, PatchRejected
from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import Hook, HookRequest
from modelserving.api.modelserving import ModelServing
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain.objects import ObjectValidator
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
    plugin: str = PLUGIN
    group: GroupRequest | None = None
    version: int = 1


# --- the ServingGroup hook's vectors (ABI v3) ---------------------------------------------------

GROUP_MODEL_SERVING: dict[str, Any] = {
    **MODEL_SERVING,
    "spec": {
        "replicas": 1,
        "template": {
            "roles": [
                {
                    "name": "prefill",
                    "replicas": 2,
                    "entryTemplate": {
                        "spec": {"containers": [{"name": "engine", "image": "vllm:v0.10.0"}]}
                    },
                    "workerReplicas": 1,
                    "workerTemplate": {
                        "spec": {"containers": [{"name": "engine", "image": "vllm:v0.10.0"}]}
                    },
                }
            ]
        },
    },
}
"""Two replicas of a role of an entry and a worker: ServingGroups of four Pods."""
NPU_ANNOTATION = "ascend.kubectl.kubernetes.io/ascend-910-configuration"


def npus(*devices: tuple[str, str], server: str | None = None) -> str:
    """A device annotation as the Ascend device plugin writes it."""
    value: dict[str, Any] = {
        "pod_name": "x",
        "devices": [{"device_id": d, "device_ip": ip} for d, ip in devices],
    }
    if server is not None:
        value["server_id"] = server
    return json.dumps(value)


def member(role_id: str, index: int, pod_ip: str = "", annotation: str | None = None) -> GroupPod:
    """Pod ``index`` (0: the entry) of role replica ``role_id`` of ServingGroup llama-0, on
    node-<index> (host IP 10.0.0.<index + 1>); running once it has a Pod IP."""
    annotations = {"example.com/team": "llm"}
    if annotation is not None:
        annotations[NPU_ANNOTATION] = annotation
    return GroupPod(
        name=f"llama-0-{role_id}-{index}",
        place=PodPlace("llama-0", "prefill", role_id, index == 0),
        node=f"node-{index}",
        host_ip=f"10.0.0.{index + 1}",
        pod_ip=pod_ip,
        phase="Running" if pod_ip else "Pending",
        ready=bool(pod_ip),
        annotations=annotations,
    )


def group(*pods: GroupPod, expected: int = 4) -> GroupRequest:
    return GroupRequest(parse_model_serving(GROUP_MODEL_SERVING), "llama-0", expected, pods)


GROUP_CASES = [
    Case(
        "hccl-ranktable-group-initializing",
        "two of four Pods known (Pod IP and devices), one scheduled without an IP yet, one not "
        "there: an initializing table of two servers",
        Hook.ON_SERVING_GROUP_CHANGE,
        None,
        plugin="hccl-ranktable",
        group=group(
            member(
                "prefill-0", 0, "10.244.1.7", npus(("0", "192.168.100.1"), ("1", "192.168.100.2"))
            ),
            member("prefill-0", 1, "10.244.2.9", npus(("0", "192.168.101.1"))),
            member("prefill-1", 0, "", npus(("0", "192.168.102.1"))),
        ),
    ),
    Case(
        "hccl-ranktable-group-completed",
        "every Pod known: devices by numeric id (10 after 8), a server_id from the annotation, "
        "rank ids across servers; a custom file name and suffix",
        Hook.ON_SERVING_GROUP_CHANGE,
        {"fileName": "rank_table.json", "configMapSuffix": "hccl"},
        plugin="hccl-ranktable",
        group=group(
            member(
                "prefill-0",
                0,
                "10.244.1.7",
                npus(("10", "192.168.100.3"), ("8", "192.168.100.1"), server="172.16.0.5"),
            ),
            member("prefill-0", 1, "10.244.2.9", npus(("0", "192.168.101.1"))),
            member("prefill-1", 0, "10.244.3.4", npus(("3", "fe80::1"))),
            member("prefill-1", 1, "10.244.4.2", npus(("0", "192.168.103.1"))),
        ),
    ),
    Case(
        "hccl-ranktable-group-invalid-annotation",
        "annotations Python's json refuses (NaN, a key twice, a device id twice) or the rules "
        "refuse (a 5-digit device id, a bad IP, no devices): those Pods are not known",
        Hook.ON_SERVING_GROUP_CHANGE,
        None,
        plugin="hccl-ranktable",
        group=group(
            member(
                "prefill-0",
                0,
                "10.244.1.7",
                '{"devices": [{"device_id": "0", "device_ip": "192.168.100.1", "x": NaN}]}',
            ),
            member(
                "prefill-0",
                1,
                "10.244.2.9",
                '{"devices": [], "devices": [{"device_id": "0", "device_ip": "192.168.101.1"}]}',
            ),
            member(
                "prefill-1", 0, "10.244.3.4", npus(("1", "192.168.102.1"), ("01", "192.168.102.2"))
            ),
            member("prefill-1", 1, "10.244.4.2", npus(("10000", "192.168.103.1"))),
            member("prefill-2", 0, "10.244.5.1", npus(("0", "192.168.104.1/24"))),
            member("prefill-2", 1, "10.244.6.1", '{"devices": []}'),
            member("prefill-3", 0, "10.244.7.1", npus(("0", "192.168.105.1"))),
        ),
    ),
    Case(
        "hccl-ranktable-create",
        "OnPodCreate: the optional ConfigMap volume, its mount and RANK_TABLE_FILE",
        Hook.ON_POD_CREATE,
        {"mountPath": "/etc/hccl/"},
        pod(env=[{"name": "A", "value": "1"}]),
        plugin="hccl-ranktable",
        version=3,
    ),
    Case(
        "hccl-ranktable-validate-bad-file-name",
        "fileName must be a file name",
        Hook.VALIDATE_CONFIG,
        {"fileName": "../hccl.json"},
        failure=FailureClass.PLUGIN_ERROR,
        plugin="hccl-ranktable",
        version=3,
    ),
    Case(
        "entry-address-file-group",
        "two role replicas: the entry's IP where it has one, its DNS name where not",
        Hook.ON_SERVING_GROUP_CHANGE,
        {"configMapSuffix": "leader"},
        plugin="entry-address-file",
        group=group(
            member("prefill-0", 0, "10.244.1.7"),
            member("prefill-0", 1, "10.244.2.9"),
            member("prefill-1", 1, "10.244.4.2"),
        ),
    ),
    Case(
        "entry-address-file-create",
        "OnPodCreate: the role replica's two keys as the files address and address.json",
        Hook.ON_POD_CREATE,
        None,
        pod(),
        plugin="entry-address-file",
        version=3,
    ),
]


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


def group_request(fields: dict[str, Any]) -> GroupRequest:
    """The GroupRequest of a decoded OnServingGroupChange request."""
    serving_group = fields["servingGroup"]
    pods = tuple(
        GroupPod(
            name=p["name"],
            place=PodPlace(serving_group, p["roleName"], p["roleId"], p["isEntry"]),
            node=p["node"],
            host_ip=p["hostIP"],
            pod_ip=p["podIP"],
            phase=p["phase"],
            ready=p["ready"],
            annotations=p["annotations"],
        )
        for p in fields["pods"]
    )
    model_serving = parse_model_serving(fields["modelServing"])
    return GroupRequest(model_serving, serving_group, fields["expectedPods"], pods)


def native_response(request: bytes) -> bytes | None:
    """The native built-in's response to request bytes (the reference implementation); None
    when it refuses the config. Used to make the vectors, to replay them and for the
    differential tests. Objects (OnServingGroupChange) are encoded as a module does: none is the
    empty response."""
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
    if fields["hook"] == Hook.ON_SERVING_GROUP_CHANGE:
        try:
            objects = list(plugin.on_serving_group_change(group_request(fields)))
        except HookError as exc:
            failed: bytes = msgpack.packb({"error": str(exc)}, use_bin_type=True)
            return failed
        return msgpack.packb({"objects": objects}, use_bin_type=True) if objects else b""
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
    if case.group is not None and response:
        model_serving: ModelServing = case.group.model_serving
        try:
            ObjectValidator().check(
                msgpack.unpackb(response)["objects"],
                case.group.serving_group,
                model_serving.namespace,
            )
        except ObjectRejected:
            return FailureClass.FORBIDDEN_OBJECT
    if case.hook is Hook.ON_POD_CREATE and response:
        assert case.pod is not None
        try:
            PatchValidator().apply_patch(case.pod, msgpack.unpackb(response)["patch"])
        except PatchRejected:
            return FailureClass.FORBIDDEN_PATCH
    return None


def vector(case: Case) -> dict[str, Any]:
    model_serving = GROUP_MODEL_SERVING if case.group is not None else MODEL_SERVING
    request = encode_request(
        case.hook,
        case.plugin,
        case.config,
        model_serving if case.pod is not None or case.group is not None else None,
        WHERE if case.pod is not None else None,
        case.pod,
        version=3 if case.group is not None else case.version,
        group=case.group,
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
        "plugin": case.plugin,
        "hook": str(case.hook),
        "config": case.config,
        "request": base64.b64encode(request).decode(),
        "expect": expect,
    }


def render_all() -> dict[str, str]:
    return {f"{c.name}.json": json.dumps(vector(c), indent=2) + "\n" for c in CASES + GROUP_CASES}


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
