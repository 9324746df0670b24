"""The WebAssembly sandbox (wasmtime): limits, module cache, instance lifecycle.

It knows bytes in and bytes out, never Kubernetes objects: ``Sandbox.load`` checks and compiles a
module once per sha256, ``Sandbox.call`` runs one hook in a fresh instance under fuel, memory and
wall-clock limits. Every failure is a ``SandboxError`` carrying one failure class of the ABI.
"""

from modelserving.sandbox.cache import CompiledModule, sha256_hex
from modelserving.sandbox.call import CallFailure, CallResult
from modelserving.sandbox.errors import SandboxError
from modelserving.sandbox.logs import LogRecord
from modelserving.sandbox.module import ModuleInfo
from modelserving.sandbox.sandbox import (
    Sandbox,
    assemble_wat,
    default_sandbox,
    set_default_sandbox,
)
from modelserving.sandbox.settings import Limits, SandboxSettings

__all__ = [
    "CallFailure",
    "CallResult",
    "CompiledModule",
    "Limits",
    "LogRecord",
    "ModuleInfo",
    "Sandbox",
    "SandboxError",
    "SandboxSettings",
    "assemble_wat",
    "default_sandbox",
    "set_default_sandbox",
    "sha256_hex",
]
