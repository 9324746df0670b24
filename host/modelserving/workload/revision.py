"""The revision hash of a ModelServing's roles: FNV-1 32-bit, then Kubernetes' safe encoding.

Role ``replicas`` and ``maxUnavailable`` are left out, as in Kthena, so scaling never rolls Pods;
plugins, schedulerName and gangPolicy are not part of it either. Kthena hashes a Go struct dump
that Python cannot reproduce byte for byte, so our revision strings differ from Kthena's while
following the same rule: the same roles always give the same revision.
"""

from __future__ import annotations

import json

from modelserving.api.modelserving import ModelServing, Role

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193
# k8s.io/apimachinery/pkg/util/rand: no vowels, no ambiguous characters.
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def fnv1_32(data: bytes) -> int:
    """FNV-1 (multiply, then xor), 32 bits: Go's ``hash/fnv.New32``."""
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h * _FNV32_PRIME) & 0xFFFFFFFF) ^ byte
    return h


def safe_encode(text: str) -> str:
    """Kubernetes' ``rand.SafeEncodeString``: each character mapped into a vowel-free alphabet."""
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in text)


def _hash(value: object) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return safe_encode(str(fnv1_32(canonical.encode())))


def _template_of(role: Role) -> dict[str, object]:
    return role.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"replicas", "max_unavailable"}
    )


def revision(ms: ModelServing) -> str:
    """The revision label value every Pod of this ModelServing's current template carries."""
    return _hash([_template_of(role) for role in ms.spec.template.roles])


def role_template_hash(role: Role) -> str:
    """The hash of one role's template (RoleRollingUpdate compares it per role)."""
    return _hash(_template_of(role))
