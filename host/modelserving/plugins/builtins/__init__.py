"""The built-in plugins shipped with modelserving, one module each."""

from modelserving.plugins.base import Builtin
from modelserving.plugins.builtins import demo_pod_tweaks

BUILTINS: tuple[Builtin, ...] = (demo_pod_tweaks.BUILTIN,)

__all__ = ["BUILTINS"]
