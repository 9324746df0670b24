"""Revision hashes: FNV-1 32 + safe encoding; only the role templates matter."""

from __future__ import annotations

from collections.abc import Callable

from modelserving.api import ModelServing
from modelserving.workload.revision import fnv1_32, revision, role_template_hash, safe_encode
from tests.unit.conftest import role

MakeMs = Callable[..., ModelServing]


def test_fnv1_32_known_values() -> None:
    assert fnv1_32(b"") == 0x811C9DC5
    assert fnv1_32(b"a") == 0x050C5D7E
    assert fnv1_32(b"foobar") == 0x31F0B262


def test_safe_encode_matches_kubernetes_alphabet() -> None:
    assert safe_encode("019") == "45f"
    assert set(safe_encode("1234567890")) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_revision_is_stable_and_safe(make_ms: MakeMs) -> None:
    a, b = revision(make_ms()), revision(make_ms())
    assert a == b
    assert a and set(a) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_scaling_does_not_change_revision(make_ms: MakeMs) -> None:
    base = revision(make_ms(roles=[role("server", replicas=1)]))
    assert revision(make_ms(roles=[role("server", replicas=5)])) == base
    assert revision(make_ms(roles=[role("server")], replicas=7)) == base


def test_plugins_and_scheduler_do_not_change_revision(make_ms: MakeMs) -> None:
    base = revision(make_ms())
    assert revision(make_ms(plugins=[{"name": "demo-pod-tweaks"}])) == base
    assert revision(make_ms(schedulerName="default-scheduler")) == base


def test_template_changes_change_revision(make_ms: MakeMs) -> None:
    base = revision(make_ms())
    changed = role()
    changed["entryTemplate"]["spec"]["containers"][0]["image"] = "nginx:1.29.0"
    assert revision(make_ms(roles=[changed])) != base
    assert revision(make_ms(roles=[role(workers=1)])) != base


def test_role_template_hash_is_per_role(make_ms: MakeMs) -> None:
    ms = make_ms(roles=[role("prefill", replicas=1), role("decode", replicas=3)])
    prefill, decode = ms.spec.template.roles
    assert role_template_hash(prefill) != role_template_hash(decode)
    scaled = make_ms(roles=[role("prefill", replicas=4), role("decode", replicas=3)])
    assert role_template_hash(scaled.spec.template.roles[0]) == role_template_hash(prefill)
    changed = role("decode", replicas=3)
    changed["entryTemplate"]["spec"]["containers"][0]["image"] = "nginx:1.29.0"
    other = make_ms(roles=[role("prefill", replicas=1), changed])
    assert role_template_hash(other.spec.template.roles[0]) == role_template_hash(prefill)
    assert role_template_hash(other.spec.template.roles[1]) != role_template_hash(decode)
