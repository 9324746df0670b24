"""Kubernetes name predicates."""

from __future__ import annotations

import pytest

from modelserving.api.names import is_dns1123_subdomain, is_qualified_name


@pytest.mark.parametrize("value", ["nvidia", "gpu.nvidia.com", "a", "a-b.c-d"])
def test_valid_subdomains(value: str) -> None:
    assert is_dns1123_subdomain(value)


@pytest.mark.parametrize("value", ["", "Bad Name", "a_b", "-a", "a-", "a..b", "x" * 254, "a\n"])
def test_invalid_subdomains(value: str) -> None:
    assert not is_dns1123_subdomain(value)


@pytest.mark.parametrize("value", ["team", "example.com/team", "a.b/c_d.e-f", "A1"])
def test_valid_qualified_names(value: str) -> None:
    assert is_qualified_name(value)


@pytest.mark.parametrize(
    "value", ["", "bad key!", "/x", "Example.com/x", "example.com/", "x" * 64, "a/b/c", "-x"]
)
def test_invalid_qualified_names(value: str) -> None:
    assert not is_qualified_name(value)
