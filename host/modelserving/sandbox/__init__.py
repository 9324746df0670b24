"""The WebAssembly sandbox (wasmtime): limits, module cache, instance lifecycle.

It knows bytes in and bytes out, never Kubernetes objects nor hooks: ``Sandbox.load`` checks and
compiles a module once per sha256 (against the ``Entrypoint``s the sandbox was given),
``Sandbox.call`` runs one exported entry point in a fresh instance under fuel, memory and
wall-clock limits. Every failure is a ``SandboxError`` carrying one failure class of the ABI.
One folder per runtime: ``core`` (the modelserving ABI's own modules, a fresh wasmtime instance
per call) and ``extism`` (Extism modules, in a worker process); both return ``results``.
"""

from modelserving.sandbox.cache import CompiledModule, sha256_hex
from modelserving.sandbox.errors import SandboxError
from modelserving.sandbox.logs import LogRecord
from modelserving.sandbox.module import FLAVOUR_EXTISM, FLAVOUR_NATIVE, Entrypoint, ModuleInfo
from modelserving.sandbox.results import CallFailure, CallResult
from modelserving.sandbox.sandbox import Sandbox, assemble_wat
from modelserving.sandbox.settings import Limits, SandboxSettings

__all__ = [
    "FLAVOUR_EXTISM",
    "FLAVOUR_NATIVE",
    "CallFailure",
    "CallResult",
    "CompiledModule",
    "Entrypoint",
    "Limits",
    "LogRecord",
    "ModuleInfo",
    "Sandbox",
    "SandboxError",
    "SandboxSettings",
    "assemble_wat",
    "sha256_hex",
]
