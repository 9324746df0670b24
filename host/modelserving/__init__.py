"""modelserving: a Kubernetes controller for Kthena-compatible ModelServing resources.

The package is layered (checked by import-linter): ``cli`` -> ``controller`` -> ``chain`` ->
``plugins`` / ``workload`` -> ``sandbox`` / ``abi`` -> ``api``.
"""

__version__ = "0.1.0"
