"""Builders for the chain and patch-policy tests: a sample Pod, a two-role ModelServing, and a
``Registry`` of small scripted test plugins that record every call they get."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from modelserving.api import HookRequest, ModelServing, PatchOperation, parse_model_serving
from modelserving.api.hook import Hook
from modelserving.api.labels import (
    API_VERSION,
    LABEL_PREFIX,
    NAME_LABEL,
    ROLE_LABEL,
)
from modelserving.plugins import Builtin, HookError, PluginConfig, PodPatch, Registry
from modelserving.workload.plan import DesiredPod, plan

PodFactory = Callable[[], dict[str, Any]]


def sample_pod() -> dict[str, Any]:
    """A generated-looking Pod: controller labels and annotation, env, an init container, a volume
    and a Pod-level ``runAsNonRoot: true``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llm-0-server-0-0",
            "namespace": "team-a",
            "uid": "pod-uid-1",
            "labels": {NAME_LABEL: "llm", ROLE_LABEL: "server", "app": "llm"},
            "annotations": {LABEL_PREFIX + "note": "controller", "team": "a"},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "ModelServing",
                    "name": "llm",
                    "uid": "uid-1",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "securityContext": {"runAsNonRoot": True},
            "containers": [
                {
                    "name": "engine",
                    "image": "vllm/vllm-openai:v0.10.0",
                    "command": ["vllm", "serve"],
                    "env": [{"name": "A", "value": "1"}],
                    "ports": [{"containerPort": 8000}],
                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "initContainers": [
                {"name": "fetch", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}
            ],
            "volumes": [{"name": "cache", "emptyDir": {}}],
            "schedulerName": "volcano",
            "nodeSelector": {"gpu": "a100"},
        },
    }


@pytest.fixture
def pod() -> dict[str, Any]:
    return sample_pod()


@pytest.fixture
def make_pod() -> PodFactory:
    """For hypothesis tests, which must not share one fixture value between examples."""
    return sample_pod


# --- ModelServing with two roles and workers -------------------------------------------------


def two_role_manifest(plugins: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Roles ``prefill`` (entry + 1 worker) and ``decode`` (entry + 2 workers), one group."""

    def role(name: str, workers: int) -> dict[str, Any]:
        return {
            "name": name,
            "replicas": 1,
            "entryTemplate": {"spec": {"containers": [{"name": "engine", "image": "e:1"}]}},
            "workerReplicas": workers,
            "workerTemplate": {"spec": {"containers": [{"name": "engine", "image": "e:1"}]}},
        }

    spec: dict[str, Any] = {"template": {"roles": [role("prefill", 1), role("decode", 2)]}}
    if plugins is not None:
        spec["plugins"] = plugins
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "llm", "namespace": "team-a", "uid": "uid-1", "generation": 1},
        "spec": spec,
    }


MsFactory = Callable[..., ModelServing]


@pytest.fixture
def two_role_ms() -> MsFactory:
    """``two_role_ms(plugins, name=..., generation=...)`` -> a validated two-role ModelServing."""

    def make(
        plugins: list[dict[str, Any]] | None = None,
        name: str = "llm",
        generation: int = 1,
    ) -> ModelServing:
        manifest = two_role_manifest(copy.deepcopy(plugins))
        manifest["metadata"]["name"] = name
        manifest["metadata"]["generation"] = generation
        return parse_model_serving(manifest)

    return make


def desired_pods(ms: ModelServing) -> dict[str, DesiredPod]:
    """Every Pod of ``ms`` by name, e.g. ``llm-0-decode-0-2``."""
    return {d.name: d for group in plan(ms) for d in group.pods()}


# --- scripted test plugins -------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One hook call a test plugin received."""

    hook: Hook
    plugin: str
    tag: str
    pod: str
    group: str
    role: str
    role_id: str
    is_entry: bool
    annotations: dict[str, str]


CallLog = list[Call]


def _record(log: CallLog, plugin: str, tag: str, request: HookRequest) -> None:
    annotations = dict(request.pod.get("metadata", {}).get("annotations") or {})
    log.append(
        Call(
            request.hook,
            plugin,
            tag,
            request.pod_name,
            request.serving_group,
            request.role_name,
            request.role_id,
            request.is_entry,
            annotations,
        )
    )


class TagConfig(PluginConfig):
    tag: str = "x"


class FailConfig(PluginConfig):
    mode: Literal["hook-error", "crash", "forbidden", "malformed", "noop"] = "hook-error"


class Annotate:
    """``example.com/<tag>: <plugin>`` on every Pod, via PodPatch."""

    def __init__(self, name: str, tag: str, log: CallLog) -> None:
        self.name, self.tag, self.log = name, tag, log

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        _record(self.log, self.name, self.tag, request)
        return PodPatch(request.pod).merge_annotations({f"example.com/{self.tag}": self.name}).ops


class Label:
    """``example.com/<tag>: "yes"`` label on every Pod."""

    def __init__(self, name: str, tag: str, log: CallLog) -> None:
        self.name, self.tag, self.log = name, tag, log

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        _record(self.log, self.name, self.tag, request)
        return PodPatch(request.pod).merge_labels({f"example.com/{self.tag}": "yes"}).ops


class Fail:
    """Fails OnPodCreate in the configured way (or does nothing, for ``noop``)."""

    def __init__(self, name: str, mode: str, log: CallLog) -> None:
        self.name, self.mode, self.log = name, mode, log

    def on_pod_create(self, request: HookRequest) -> Any:
        _record(self.log, self.name, self.mode, request)
        if self.mode == "hook-error":
            raise HookError("no GPU left")
        if self.mode == "crash":
            raise RuntimeError("boom")
        if self.mode == "forbidden":
            return [{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}]
        if self.mode == "malformed":
            return {"op": "add"}
        return []


class Mutate:
    """Changes the Pod it was given in place (which it must not do) and returns no patch."""

    def __init__(self, name: str, log: CallLog) -> None:
        self.name, self.log = name, log

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        _record(self.log, self.name, "", request)
        _scribble(request.pod)
        return []


def _scribble(pod: dict[str, Any]) -> None:
    pod["metadata"]["name"] = "hijacked"
    pod["metadata"].setdefault("annotations", {})["example.com/scribbled"] = "yes"
    pod["spec"]["containers"][0]["image"] = "evil:1"


class Watch:
    """OnPodReady only: records, then fails as configured (``noop``: succeeds)."""

    def __init__(self, name: str, mode: str, log: CallLog) -> None:
        self.name, self.mode, self.log = name, mode, log

    def on_pod_ready(self, request: HookRequest) -> None:
        _record(self.log, self.name, self.mode, request)
        _scribble(request.pod)
        if self.mode == "hook-error":
            raise HookError("not warmed up")
        if self.mode == "crash":
            raise ValueError("bad gauge")


def scripted_registry(log: CallLog) -> Registry:
    """``annotate``, ``label``, ``fail``, ``mutate`` and ``watch``, all recording into ``log``."""
    create, ready = frozenset({"on_pod_create"}), frozenset({"on_pod_ready"})
    plugins: list[tuple[str, type[PluginConfig], Callable[[str, Any], object], frozenset[str]]] = [
        ("annotate", TagConfig, lambda name, cfg: Annotate(name, cfg.tag, log), create),
        ("label", TagConfig, lambda name, cfg: Label(name, cfg.tag, log), create),
        ("fail", FailConfig, lambda name, cfg: Fail(name, cfg.mode, log), create),
        ("mutate", TagConfig, lambda name, cfg: Mutate(name, log), create),
        ("watch", FailConfig, lambda name, cfg: Watch(name, cfg.mode, log), ready),
    ]
    registry = Registry()
    for name, config, factory, hooks in plugins:
        registry.register(Builtin(name, config, factory, summary=name, hooks=hooks))
    return registry


@pytest.fixture
def log() -> CallLog:
    return []


@pytest.fixture
def registry(log: CallLog) -> Registry:
    return scripted_registry(log)
