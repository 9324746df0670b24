"""The ABI's versions, each declared once: its number, the response keys it adds and the hooks it
introduces.

Everything that depends on a version derives from ``VERSIONS``: the markers a module may export
(``MARKERS``, checked by the sandbox through ``modelserving.abi.shape``), the keys a response may
have (``modelserving.abi.contract.RESPONSE_KEYS``) and the lowest version a module must declare to
serve a hook (``since``, given to the sandbox with each hook's export by
``modelserving.plugins.exports``). A new version is one more entry here; a released version is
frozen (abi/README.md, section 1).

Hooks are named as on the wire (``Hook``'s values). This module imports nothing of the package,
so the sandbox, which reads the markers and may not know hooks, does not import the hook table.
"""

from __future__ import annotations

from dataclasses import dataclass

MARKER_PREFIX = "modelserving_abi_v"


@dataclass(frozen=True, slots=True)
class AbiVersion:
    """One version of the ABI: ``response_keys`` and ``hooks`` are what it adds to the version
    before it (the keys a response may carry, the hooks a module may serve)."""

    number: int
    response_keys: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()

    @property
    def marker(self) -> str:
        """The export that selects this version: modelserving_abi_v<N>."""
        return f"{MARKER_PREFIX}{self.number}"


VERSIONS: tuple[AbiVersion, ...] = (
    AbiVersion(1, ("patch", "error"), ("OnPodCreate", "OnPodReady", "ValidateConfig")),
    AbiVersion(2, ("observations",)),
    AbiVersion(3, ("objects",), ("OnServingGroupChange",)),
)
"""Every version this host supports, oldest first, numbered from 1 without gaps."""

MARKERS: dict[str, int] = {v.marker: v.number for v in VERSIONS}
"""Exported marker function -> the ABI version it selects. A module that exports several markers
runs under the highest version this host supports."""

RESPONSE_KEYS: dict[int, tuple[str, ...]] = {
    v.number: tuple(key for older in VERSIONS[:i] for key in older.response_keys)
    for i, v in enumerate(VERSIONS, start=1)
}
"""The keys a response may have, by ABI version: those of every version up to it."""

SINCE: dict[str, int] = {hook: v.number for v in VERSIONS for hook in v.hooks}
"""Hook (wire name) -> the version that introduced it."""


def since(hook: str) -> int:
    """The lowest ABI version a module that serves ``hook`` must declare."""
    try:
        return SINCE[hook]
    except KeyError:
        raise LookupError(
            f"no ABI version introduces the hook {hook}: add it to a version in "
            "modelserving.abi.versions.VERSIONS (a new version, once one is released)"
        ) from None
