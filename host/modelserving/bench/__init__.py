"""``make bench`` (``python -m modelserving.bench``): measured performance figures, printed and
never asserted by tests.

``render`` times ``modelserving render`` of a 1,000-Pod ModelServing, then runs ``plugins`` (each
built-in's hook, native against WebAssembly, through the chain's step) and ``controller`` (800
Pods created against a local control plane). The benchmarks sit above the CLI in the layers and
use only the public facades (checked by import-linter).
"""
