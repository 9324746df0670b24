"""The core WebAssembly runtime: a module of the modelserving ABI (its own ``ms_alloc`` and hook
exports, ``modelserving.log`` and WASI imports) called in a fresh wasmtime instance per call
(``call``)."""
