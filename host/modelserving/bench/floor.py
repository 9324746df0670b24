"""``make bench``, the floor of a WebAssembly OnPodCreate, and timing calls side by side.

The floor is what any host must do for one call of a built-in's module on a Pod: msgpack the
whole request, run the module in a fresh instance with fuel, deadline and memory limits on (the
fewest wasmtime C calls: ``modelserving.sandbox.floor.RawCall``), unpack the response, and apply
its patch copy-on-write (no checks at all). ``interleaved`` times several calls in turn, one
after the other in every round, so that they share the machine's state: their ratio means more
than separate runs on a busy machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from modelserving.api.hook import Hook
from modelserving.chain import Chain
from modelserving.plugins.exports import export_name
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox.floor import RawCall
from modelserving.workload.plan import DesiredPod


class Floor:
    """One OnPodCreate of the chain's first (WebAssembly) plugin, at its floor."""

    def __init__(self, chain: Chain, desired: DesiredPod) -> None:
        plugin = chain.entries[0].plugin
        assert isinstance(plugin, WasmPlugin)
        compiled = plugin.compiled
        export = export_name(Hook.ON_POD_CREATE, compiled.info.flavour)
        self._raw = RawCall(plugin.sandbox, compiled, export, plugin.limits)
        full = chain.model_serving.to_api()
        place = desired.place
        self._request = {
            "abiVersion": plugin.abi_version,
            "hook": Hook.ON_POD_CREATE.value,
            "plugin": {"name": plugin.name, "config": plugin.config},
            "modelServing": {k: full[k] for k in ("apiVersion", "kind", "metadata", "spec")},
            "servingGroup": place.serving_group,
            "roleName": place.role_name,
            "roleId": place.role_id,
            "isEntry": place.is_entry,
        }

    def __call__(self, pod: dict[str, Any]) -> dict[str, Any]:
        request = msgpack.packb({**self._request, "pod": pod}, use_bin_type=True)
        response = msgpack.unpackb(self._raw(request), raw=False)
        for op in response.get("patch") or ():
            pod = _apply(pod, op)
        return pod


def _apply(doc: Any, op: Mapping[str, Any]) -> Any:
    """RFC 6902 add, replace or remove, copying only the maps and lists on the path."""
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"][1:].split("/")]
    root = parent = _shallow(doc)
    for token in tokens[:-1]:
        key: Any = int(token) if isinstance(parent, list) else token
        child = _shallow(parent[key])
        parent[key] = child
        parent = child
    last = tokens[-1]
    if isinstance(parent, list):
        if op["op"] == "add":
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
        elif op["op"] == "remove":
            del parent[int(last)]
        else:
            parent[int(last)] = op["value"]
    elif op["op"] == "remove":
        del parent[last]
    else:
        parent[last] = op["value"]
    return root


def _shallow(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else list(value)


def interleaved(
    calls: Mapping[str, Callable[[], object]], n: int, warmup: int = 200
) -> dict[str, list[float]]:
    """Each call's times in microseconds, sorted: ``n`` rounds, each running every call once in
    turn (after ``warmup`` untimed rounds)."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in calls}
    clock = time.perf_counter_ns
    for _ in range(n):
        for name, fn in calls.items():
            start = clock()
            fn()
            times[name].append((clock() - start) / 1000)
    for values in times.values():
        values.sort()
    return times


def p50(values: list[float]) -> float:
    return values[len(values) // 2]


def p99(values: list[float]) -> float:
    return values[int(len(values) * 0.99)]
