"""Kubernetes name rules (DNS-1123 subdomains, qualified label/annotation keys, env var names) and
resource quantities as predicates.

Used by config models (built-in plugins) to refuse values the API server would refuse later.
"""

from __future__ import annotations

import re

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def is_dns1123_label(value: str) -> bool:
    """Lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63
    characters (e.g. a namespace, or a name the modelserving CLI generates things from)."""
    return len(value) <= 63 and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """Lower-case DNS labels joined by dots, at most 253 characters (e.g. a RuntimeClass name)."""
    return 0 < len(value) <= 253 and all(_DNS1123_LABEL.fullmatch(p) for p in value.split("."))


def is_qualified_name(value: str) -> bool:
    """A label or annotation key: an optional DNS-subdomain prefix and ``/``, then a name of at
    most 63 characters."""
    prefix, slash, name = value.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.fullmatch(name))


def is_label_value(value: str) -> bool:
    """A label value: empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending
    with a letter or digit."""
    return value == "" or (len(value) <= 63 and _QUALIFIED_NAME.fullmatch(value) is not None)


_ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def is_env_var_name(value: str) -> bool:
    """A container env var name: ASCII letters, digits, '-', '.' and '_', not starting with a
    digit (the Rust SDK's ``names::is_env_var_name``)."""
    return _ENV_VAR_NAME.fullmatch(value) is not None


_QUANTITY = re.compile(
    r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)


def is_quantity(value: str) -> bool:
    """A non-negative Kubernetes resource quantity (``16Gi``, ``500m``, ``1.5``, ``2e3``): a
    decimal number, then an optional binary (Ki..Ei) or decimal (n, u, m, k..E) suffix or
    exponent; at most 64 characters. No sign: resource amounts are never negative."""
    return len(value) <= 64 and _QUANTITY.fullmatch(value) is not None
