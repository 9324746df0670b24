"""Which calls get a private copy of the Pod (``chain.step.invoke``): a plugin whose adapter
``copies_pod`` (native: it is handed Python objects it could keep or change), never one that
only serializes them (WebAssembly), for OnPodCreate and OnPodReady alike."""

from __future__ import annotations

from typing import Any

import pytest

from modelserving.api.hook import Hook, HookRequest
from modelserving.api.modelserving import PluginSpec
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain.step import ChainEntry, invoke
from modelserving.plugins.adapter import Reply, Request
from tests.unit.chain.conftest import sample_pod, two_role_manifest


class Recorder:
    """An adapter that records the Pod object each call was given."""

    runtime = "Wasm"
    digest = None
    hooks = frozenset({Hook.ON_POD_CREATE, Hook.ON_POD_READY})

    def __init__(self, copies_pod: bool) -> None:
        self.name = "recorder"
        self.copies_pod = copies_pod
        self.copies_values = copies_pod
        self.pods: list[dict[str, Any]] = []

    def call(self, hook: Hook, request: Request) -> Reply:
        assert isinstance(request, HookRequest)
        self.pods.append(request.pod)
        return Reply(patch=[]) if hook is Hook.ON_POD_CREATE else Reply()


@pytest.mark.parametrize("hook", [Hook.ON_POD_CREATE, Hook.ON_POD_READY])
@pytest.mark.parametrize("copies", [True, False])
def test_only_an_adapter_that_asks_for_it_gets_a_copy(hook: Hook, copies: bool) -> None:
    ms = parse_model_serving(two_role_manifest())
    adapter = Recorder(copies)
    entry = ChainEntry(0, PluginSpec(name="recorder"), adapter)
    pod = sample_pod()
    request = HookRequest(hook, ms, PodPlace("llm-0", "prefill", "prefill-0", True), pod)
    outcome = invoke(entry, request)
    assert outcome.failure is None
    [given] = adapter.pods
    assert given == pod
    assert (given is not pod) is copies
