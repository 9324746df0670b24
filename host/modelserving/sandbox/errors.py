"""The sandbox's one error: a failure class of the ABI contract and a message.

The sandbox knows nothing of plugins or Pods; the plugin adapter adds the plugin name, the hook
and the Pod when it turns a ``SandboxError`` into a ``PluginFailure``.
"""

from __future__ import annotations

from modelserving.api.errors import FailureClass


class SandboxError(Exception):
    """A module was refused or a call failed, with exactly one failure class."""

    def __init__(self, failure_class: FailureClass, message: str) -> None:
        self.failure_class = failure_class
        self.message = message
        super().__init__(f"{failure_class}: {message}")


def invalid_module(message: str) -> SandboxError:
    return SandboxError(FailureClass.INVALID_MODULE, message)
