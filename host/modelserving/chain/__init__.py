"""The plugin chain: built once per ModelServing generation (``build``), run per Pod (``run``)
one plugin step at a time (``step.invoke``: scope, failure policy, patch validation, timing),
reused while the generation and plugin list stay the same (``cache``)."""

from modelserving.chain.build import ModuleResolver, build_chain
from modelserving.chain.cache import ChainCache
from modelserving.chain.policy import PatchValidator
from modelserving.chain.run import CallObserver, CallRecord, Chain, CreateResult
from modelserving.chain.step import ChainEntry, Outcome, invoke

__all__ = [
    "CallObserver",
    "CallRecord",
    "Chain",
    "ChainCache",
    "ChainEntry",
    "CreateResult",
    "ModuleResolver",
    "Outcome",
    "PatchValidator",
    "build_chain",
    "invoke",
]
