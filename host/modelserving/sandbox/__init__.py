"""The WebAssembly sandbox (wasmtime): limits, module cache, instance lifecycle.

It knows bytes in and bytes out, never Kubernetes objects: ``Sandbox.load`` checks and compiles a
module once per sha256, ``Sandbox.call`` runs one hook in a fresh instance under fuel, memory and
wall-clock limits. Every failure is a ``SandboxError`` carrying one failure class of the ABI.
One folder per runtime: ``core`` (the modelserving ABI's own modules, a fresh wasmtime instance
per call) and ``extism`` (Extism modules, in a worker process); both return ``results``.
"""

from modelserving.sandbox.cache import CompiledModule, sha256_hex
from modelserving.sandbox.errors import SandboxError
from modelserving.sandbox.logs import LogRecord
from modelserving.sandbox.module import ModuleInfo
from modelserving.sandbox.results import CallFailure, CallResult
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
