"""Reuses a ModelServing's chain for as long as its generation and plugin list stay the same.

``ChainCache`` keeps chains by ``chain_key`` (the controller adds the resourceVersions of module
ConfigMaps), least recently used evicted; a chain is built outside the lock. It keeps one chain
per ModelServing, the latest built: a new generation, plugin list or module replaces the old
chain, so what the old one held (its plugins, their module handles) is let go at once, and
``forget`` drops a deleted ModelServing's. Chains keep module handles, not compiled code: the
module cache alone holds that in memory, within its bounds (``sandbox.cache``).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from modelserving.api.modelserving import ModelServing
from modelserving.chain.build import ModuleResolver, build_chain
from modelserving.chain.policy import PatchValidator
from modelserving.chain.run import Chain
from modelserving.plugins.registry import Registry
from modelserving.sandbox import Sandbox


def chain_key(ms: ModelServing) -> tuple[str, str, str, int | None, str]:
    """What a chain depends on: the object, its generation and its plugin list."""
    plugins = json.dumps([p.to_api() for p in ms.spec.plugins or []], sort_keys=True)
    return (ms.namespace, ms.name, ms.metadata.uid or "", ms.metadata.generation, plugins)


class ChainCache:
    """Chains by ``chain_key``, one per ModelServing, least recently used evicted past
    ``size``."""

    def __init__(
        self,
        registry: Registry | None = None,
        validator: PatchValidator | None = None,
        size: int = 256,
        modules: ModuleResolver | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self._registry = registry
        self._modules = modules
        self._sandbox = sandbox
        self._validator = validator or PatchValidator()
        self._size = size
        self._chains: OrderedDict[tuple[str | int | None, ...], Chain] = OrderedDict()
        self.builds = 0
        self._lock = threading.Lock()

    def get(
        self,
        ms: ModelServing,
        extra: tuple[str, ...] = (),
        modules: ModuleResolver | None = None,
    ) -> Chain:
        """The chain of ``ms``, built when missing. ``extra`` joins the key (the controller passes
        the resourceVersions of module ConfigMaps); ``modules`` overrides the resolver."""
        key = (*chain_key(ms), *extra)
        with self._lock:
            chain = self._chains.get(key)
            if chain is not None:
                self._chains.move_to_end(key)
                return chain
        # Built outside the lock: a cold compile must not hold up other ModelServings. The
        # previous chain stays until then (its modules are found in memory), and goes even when
        # the build fails.
        try:
            chain = build_chain(
                ms, self._registry, self._validator, modules or self._modules, self._sandbox
            )
        finally:
            with self._lock:
                for old in [k for k in self._chains if k[:2] == key[:2]]:
                    del self._chains[old]
        with self._lock:
            self.builds += 1
            self._chains[key] = chain
            while len(self._chains) > self._size:
                self._chains.popitem(last=False)
        return chain

    def __len__(self) -> int:
        with self._lock:
            return len(self._chains)

    def forget(self, namespace: str, name: str) -> None:
        """Drop every chain of one ModelServing (it was deleted)."""
        with self._lock:
            for key in [k for k in self._chains if k[0] == namespace and k[1] == name]:
                del self._chains[key]
