"""The WebAssembly sandbox (wasmtime): limits, module cache, instance lifecycle."""
