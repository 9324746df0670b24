"""``inference-engine``: what an inference engine's Pods need besides its image and command.

On every Pod (entry and worker), in this order, in the configured container (default: the first):

1. env from the downward API, each appended unless the container has a var of that name:
   ``POD_IP`` (``status.podIP``), ``POD_NAME`` (``metadata.name``), ``POD_NAMESPACE``
   (``metadata.namespace``), and for vLLM ``VLLM_HOST_IP`` (``status.podIP``);
2. shared memory: the volume ``dshm`` (``emptyDir`` in ``Memory``, ``sizeLimit`` when ``shmSize``
   is set) unless a volume of that name exists, and its mount at ``/dev/shm`` unless a mount
   there exists (NCCL and the engines' worker processes exchange tensors through /dev/shm, and a
   container runtime gives it 64 MiB).

On the entry Pod only (the engines serve HTTP from the first node; the workers of a multi-node
role run e.g. ``ray start --block``):

3. the port ``http`` unless a port has that number or that name;
4. a ``startupProbe`` (``httpGet`` on the health path every 10 s, for ``startupTimeoutSeconds``)
   and a ``readinessProbe`` (every 5 s, 3 failures), each only when the container has none.

Config (camelCase, unknown fields refused):
  engine                 required: vllm | sglang | trt-llm
  port                   int 1..65535; default 8000 (vllm, trt-llm), 30000 (sglang)
  healthPath             starts with '/', no whitespace, at most 256 characters; "/health"
  startupTimeoutSeconds  int 10..86400; 1800
  container              the container to configure, by name; default the first
  shmSize                a quantity: the shared memory's sizeLimit; default none

The Rust twin (``plugins-src/builtins/inference-engine``) accepts the same configs and gives
byte-identical patches and errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from modelserving.api.hook import HookRequest, PatchOperation
from modelserving.plugins.base import Builtin, HookError, PluginConfig, Quantity
from modelserving.plugins.podedit import Key, PodEdit, int_field, str_field

NAME = "inference-engine"
DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000, "trt-llm": 8000}
DEFAULT_HEALTH_PATH = "/health"
MAX_HEALTH_PATH = 256
PORT_NAME = "http"
STARTUP_PERIOD_SECONDS = 10
READINESS_PERIOD_SECONDS = 5
READINESS_FAILURE_THRESHOLD = 3

Engine = Literal["vllm", "sglang", "trt-llm"]

_FIELD_ENV = (
    ("POD_IP", "status.podIP"),
    ("POD_NAME", "metadata.name"),
    ("POD_NAMESPACE", "metadata.namespace"),
)
_VLLM_ENV = (("VLLM_HOST_IP", "status.podIP"),)


def is_whitespace(char: str) -> bool:
    """Python's ``str.isspace`` (which the Rust twin spells as ``char::is_whitespace`` plus the
    separators U+001C..U+001F)."""
    return char.isspace()


def health_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be the probes' path (None when it can)."""
    if not path.startswith("/"):
        return f"'{path}' does not start with '/'"
    if any(is_whitespace(c) for c in path):
        return "the path contains whitespace"
    if len(path) > MAX_HEALTH_PATH:
        return f"the path has {len(path)} characters, more than {MAX_HEALTH_PATH}"
    return None


class InferenceEngineConfig(PluginConfig):
    engine: Engine
    port: int | None = Field(default=None, ge=1, le=65535)
    health_path: str = DEFAULT_HEALTH_PATH
    startup_timeout_seconds: int = Field(default=1800, ge=10, le=86400)
    container: str | None = None
    shm_size: Quantity | None = None

    @field_validator("health_path")
    @classmethod
    def _health_path(cls, path: str) -> str:
        problem = health_path_problem(path)
        if problem is not None:
            raise ValueError(problem)
        return path


def field_env(name: str, field_path: str) -> dict[str, Any]:
    """An env var from the downward API."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


class InferenceEngine:
    """The plugin instance for one PluginSpec entry."""

    def __init__(self, name: str, config: InferenceEngineConfig) -> None:
        self.name = name
        self.engine = config.engine
        self.port = config.port if config.port is not None else DEFAULT_PORTS[config.engine]
        self.health_path = config.health_path
        self.startup_timeout_seconds = config.startup_timeout_seconds
        self.container = config.container
        self.shm_size = config.shm_size

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        edit = PodEdit(request.pod)
        index = edit.container(self.container)
        self._add_env(edit, index)
        edit.add_shared_memory(index, self.shm_size)
        container: list[Key] = ["spec", "containers", index]
        if request.is_entry:
            self._add_port(edit, container)
            self._add_probes(edit, container)
        return edit.ops

    def _add_env(self, edit: PodEdit, container: int) -> None:
        wanted = _FIELD_ENV + (_VLLM_ENV if self.engine == "vllm" else ())
        for name, field_path in wanted:
            edit.add_env(container, field_env(name, field_path))

    def _add_port(self, edit: PodEdit, container: list[Key]) -> None:
        """The ``http`` port, unless the engine's port or the name is taken. A port named
        ``http`` on another number, with the engine's port not declared at all, is refused when
        a probe is still to be added: it would probe a port nothing declares, and the name
        cannot be used twice."""
        ports = edit.get([*container, "ports"])
        items = ports if isinstance(ports, list) else []
        declared = any(int_field(port, "containerPort") == self.port for port in items)
        named = any(str_field(port, "name") == PORT_NAME for port in items)
        probes = ("startupProbe", "readinessProbe")
        adds_probe = any(edit.get([*container, probe]) is None for probe in probes)
        if named and not declared and adds_probe:
            raise HookError(
                f"the container has a port named '{PORT_NAME}' that is not the engine's "
                f"port {self.port} (the probes would miss the server); set the plugin's "
                "port to it, or rename that port"
            )
        edit.append_unless(
            [*container, "ports"],
            {"name": PORT_NAME, "containerPort": self.port, "protocol": "TCP"},
            lambda port: (
                int_field(port, "containerPort") == self.port
                or str_field(port, "name") == PORT_NAME
            ),
        )

    def _add_probes(self, edit: PodEdit, container: list[Key]) -> None:
        http_get = {"path": self.health_path, "port": self.port}
        startup_failures = -(-self.startup_timeout_seconds // STARTUP_PERIOD_SECONDS)
        edit.put_if_absent(
            [*container, "startupProbe"],
            {
                "httpGet": http_get,
                "periodSeconds": STARTUP_PERIOD_SECONDS,
                "failureThreshold": startup_failures,
            },
        )
        edit.put_if_absent(
            [*container, "readinessProbe"],
            {
                "httpGet": http_get,
                "periodSeconds": READINESS_PERIOD_SECONDS,
                "failureThreshold": READINESS_FAILURE_THRESHOLD,
            },
        )


def _make(name: str, config: Any) -> InferenceEngine:
    return InferenceEngine(name, config)


BUILTIN = Builtin(
    name=NAME,
    config_model=InferenceEngineConfig,
    factory=_make,
    summary="Ports, health probes, downward-API env and shared memory for vLLM, SGLang, TRT-LLM.",
    hooks=frozenset({"on_pod_create"}),
    wasm_module="inference-engine.wasm",
    reads_pod_only=True,
)
