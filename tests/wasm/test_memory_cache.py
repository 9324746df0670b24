"""Compiled modules in memory: bounded by their artifacts' bytes, least recently used evicted, and
an evicted module that is still in use (a live ModelServing's chain) loaded again when called."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest

from modelserving.api import PluginSpec, parse_model_serving
from modelserving.api.errors import PluginConfigError
from modelserving.api.hook import Hook
from modelserving.chain import ChainCache, build_chain
from modelserving.plugins.exports import plugin_sandbox
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import CompiledModule, Sandbox, SandboxSettings, sha256_hex
from tests.wasm.guests import responding
from tests.wasm.modules import HEADER, section

ANSWERS: tuple[bytes, ...] = (
    msgpack.packb({"patch": []}),
    msgpack.packb({"patch": None}),
    msgpack.packb({"patch": [], "error": None}),
)
MODULES = [responding(answer) for answer in ANSWERS]


def sandbox(cache_dir: Path | None, bound: int) -> Sandbox:
    return plugin_sandbox(SandboxSettings(cache_dir=cache_dir, memory_cache_max_bytes=bound))


def size(compiled: CompiledModule) -> int:
    assert compiled.native is not None
    return compiled.native.size


def answers(sb: Sandbox, compiled: CompiledModule, request: bytes, answer: bytes) -> bool:
    result = sb.call(compiled, "ms_on_pod_create", request, sb.limits())
    return result.response == answer


@pytest.fixture
def sizes(tmp_path: Path) -> list[int]:
    """The artifact size of each of MODULES (what the bound counts)."""
    sb = sandbox(tmp_path / "sizes", 1 << 30)
    return [size(sb.load(module)) for module in MODULES]


def test_memory_keeps_at_most_the_bound_and_the_least_recently_used_goes(
    tmp_path: Path, sizes: list[int]
) -> None:
    sb = sandbox(tmp_path, sizes[0] + sizes[2])
    a, b = sb.load(MODULES[0]), sb.load(MODULES[1])
    assert sb.load(MODULES[0]) is a  # a is now the most recently used
    c = sb.load(MODULES[2])
    assert b.native is None, "b, the least recently used, was evicted"
    assert a.native is not None and c.native is not None
    stats = sb.modules.stats
    assert sb.modules.memory_bytes() == stats.memory_bytes == sizes[0] + sizes[2]
    assert (stats.memory_modules, stats.memory_evicted, stats.memory_evicted_bytes) == (
        2,
        1,
        sizes[1],
    )


def test_the_module_just_loaded_stays_even_alone_over_the_bound(tmp_path: Path) -> None:
    sb = sandbox(tmp_path, 1)
    a = sb.load(MODULES[0])
    assert a.native is not None
    b = sb.load(MODULES[1])
    assert a.native is None
    assert sb.modules.memory_bytes() == size(b) > 1
    assert sb.modules.stats.memory_modules == 1


def test_an_evicted_module_frees_its_native_part_while_its_handle_is_kept(
    tmp_path: Path,
) -> None:
    sb = sandbox(tmp_path, 1)
    a = sb.load(MODULES[0])
    assert a.native is not None
    native = weakref.ref(a.native)
    sb.load(MODULES[1])
    gc.collect()
    assert native() is None, "nothing keeps the evicted module's compiled code"


def test_a_call_of_an_evicted_module_loads_it_again_from_disk(
    tmp_path: Path, request_bytes: bytes
) -> None:
    sb = sandbox(tmp_path, 1)
    a = sb.load(MODULES[0])
    b = sb.load(MODULES[1])
    hits = sb.modules.stats.disk_hits
    assert answers(sb, a, request_bytes, ANSWERS[0])
    assert (sb.modules.stats.disk_hits, sb.modules.stats.compiled) == (hits + 1, 2)
    assert a.native is not None and b.native is None
    assert answers(sb, b, request_bytes, ANSWERS[1])


def test_without_a_disk_cache_an_evicted_module_is_compiled_again_from_its_bytes(
    request_bytes: bytes,
) -> None:
    sb = sandbox(None, 1)
    a = sb.load(MODULES[0])
    sb.load(MODULES[1])
    assert answers(sb, a, request_bytes, ANSWERS[0])
    assert sb.modules.stats.compiled == 3
    assert a.source(len(MODULES[0])) == MODULES[0]


def test_loading_an_evicted_module_in_use_gives_the_same_handle_again(tmp_path: Path) -> None:
    sb = sandbox(tmp_path, 1)
    a = sb.load(MODULES[0])
    sb.load(MODULES[1])
    assert sb.load(MODULES[0]) is a
    assert a.native is not None


def test_a_count_bound_applies_too(tmp_path: Path) -> None:
    sb = sandbox(tmp_path, 1 << 30)
    sb.modules._size = 2  # what MODULES_KEPT does for many tiny modules
    loaded = [sb.load(module) for module in MODULES]
    assert [c.native is not None for c in loaded] == [False, True, True]


def resolver(module: bytes) -> Callable[[PluginSpec], bytes]:
    """What the controller's ConfigMap reader gives the chain: the module's bytes."""

    def fetch(spec: PluginSpec) -> bytes:
        return module

    return fetch


def manifest(index: int, module: bytes) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "engine", "image": "e:1"}]}}
    ref = {
        "configMapRef": {"name": f"m{index}", "key": "plugin.wasm"},
        "sha256": sha256_hex(module),
    }
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {
            "name": f"ms-{index}",
            "namespace": "team",
            "uid": f"u{index}",
            "generation": 1,
        },
        "spec": {
            "template": {
                "roles": [
                    {"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": template}
                ]
            },
            "plugins": [{"name": f"p{index}", "type": "Wasm", "module": ref}],
        },
    }


def test_a_chain_whose_module_was_evicted_still_runs(tmp_path: Path, request_bytes: bytes) -> None:
    sb = sandbox(tmp_path, 1)
    chains = ChainCache(sandbox=sb)
    built = []
    for i, module in enumerate(MODULES):
        ms = parse_model_serving(manifest(i, module))
        built.append((ms, chains.get(ms, modules=resolver(module))))
    for i, (ms, chain) in enumerate(built):
        assert chains.get(ms) is chain, "the live ModelServing keeps its chain"
        plugin = chain.entries[0].plugin
        assert isinstance(plugin, WasmPlugin)
        assert plugin.compiled.native is None or i == len(built) - 1
        reply = plugin.call_bytes(Hook.ON_POD_CREATE, request_bytes)
        assert reply.failure is None, reply.message
        assert plugin.compiled.native is not None
    assert sb.modules.stats.memory_modules == 1


def test_calls_on_several_threads_survive_evictions_by_each_other(
    tmp_path: Path, request_bytes: bytes
) -> None:
    sb = sandbox(tmp_path, 1)  # every load or call of another module evicts the one held
    loaded = [sb.load(module) for module in MODULES]
    wrong: list[str] = []

    def run(offset: int) -> None:
        for n in range(12):
            i = (n + offset) % len(loaded)
            if not answers(sb, loaded[i], request_bytes, ANSWERS[i]):
                wrong.append(f"module {i}")

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert sb.modules.stats.memory_modules == 1


def test_a_thread_waiting_to_load_a_module_keeps_its_lock_for_the_next_one(
    tmp_path: Path,
) -> None:
    """Loads of one module are one at a time: the lock the first load held stays while another
    thread waits for it (the users are counted), so a third thread queues behind that one
    instead of taking a new lock and loading the same module beside it."""
    modules = sandbox(tmp_path, 1 << 30).modules
    digest = "d" * 64
    entered = {name: threading.Event() for name in ("first", "second", "third")}
    release = {name: threading.Event() for name in ("first", "second", "third")}
    inside: list[str] = []

    def hold(name: str) -> None:
        with modules._loading_lock(digest):
            inside.append(name)
            entered[name].set()
            release[name].wait(5)
            inside.append(f"{name} out")

    def users() -> int:
        with modules._lock:
            return modules._loading.get(digest, (None, 0))[1]

    def until(check: Callable[[], bool]) -> bool:
        for _ in range(500):
            if check():
                return True
            threading.Event().wait(0.01)
        return False

    threads = {name: threading.Thread(target=hold, args=(name,)) for name in entered}
    threads["first"].start()
    assert entered["first"].wait(5)
    threads["second"].start()
    assert until(lambda: users() == 2), "the second thread waits on the first one's lock"
    release["first"].set()
    assert entered["second"].wait(5)
    threads["third"].start()
    assert until(lambda: users() == 2), "the third thread waits on the same lock"
    assert not entered["third"].wait(0.2), "the third thread loads beside the second"
    release["second"].set()
    release["third"].set()
    for thread in threads.values():
        thread.join(5)
    assert inside == ["first", "first out", "second", "second out", "third", "third out"]
    assert users() == 0 and digest not in modules._loading, "the last user removes the lock"


def test_a_plugin_error_for_a_refused_module_holds_none_of_its_bytes(tmp_path: Path) -> None:
    """The chain's error is kept as long as the ModelServing's status reports it: raised inside
    the handler of the sandbox's refusal, it kept that as its context, and with it the load's
    frames and the module's bytes."""
    refused = HEADER + section(0, b"\x03pad" + b"\0" * 1000)  # no ABI marker
    ms = parse_model_serving(manifest(0, refused))
    with pytest.raises(PluginConfigError, match="no ABI marker") as info:
        build_chain(ms, modules=resolver(refused), sandbox=sandbox(tmp_path, 1))
    assert info.value.__context__ is None and info.value.__cause__ is None
