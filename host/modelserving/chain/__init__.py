"""The plugin chain: built once per ModelServing generation, run per Pod with scope, failure
policy and patch validation."""

from modelserving.chain.chain import (
    CallObserver,
    CallRecord,
    Chain,
    ChainCache,
    ChainEntry,
    CreateResult,
    PluginOutcome,
    build_chain,
)
from modelserving.chain.policy import PatchValidator

__all__ = [
    "CallObserver",
    "CallRecord",
    "Chain",
    "ChainCache",
    "ChainEntry",
    "CreateResult",
    "PatchValidator",
    "PluginOutcome",
    "build_chain",
]
