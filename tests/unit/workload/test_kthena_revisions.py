"""Our revision and role-template-hash values equal Kthena's, checked against Kthena's own code.

``tests/data/kthena-revision/vectors.json`` holds, for Kthena's example and test manifests and
for cases written here, the values Kthena's hashing gives them after Kthena's CRD defaulted
them (computed by ``tests/kthena-revision`` with Kthena's Go types and go-spew; regenerate with
``make kthena-revision KTHENA_CRD=...``). Each vector is replayed three ways: the renderer alone
on the roles as Kthena's API server stored them; our CRD defaults applied to the manifest as
written; and the whole path the controller takes (manifest -> API models -> revision).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modelserving.api import parse_model_serving
from modelserving.api.podspec_defaults import apply_pod_spec_defaults
from modelserving.workload.revision import (
    revision,
    role_json_hash,
    role_template_hash,
    roles_revision,
)

VECTORS_FILE = Path(__file__).resolve().parents[2] / "data" / "kthena-revision" / "vectors.json"
VECTORS: list[dict[str, Any]] = json.loads(VECTORS_FILE.read_text())["vectors"]
IDS = [v["id"] for v in VECTORS]


def _hashes(roles: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    return roles_revision(roles), {r["name"]: role_json_hash(r) for r in roles}


def _defaulted(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest's roles with our CRD's Pod template defaults applied."""
    roles = []
    for role in manifest["spec"]["template"]["roles"]:
        role = dict(role)
        for key in ("entryTemplate", "workerTemplate"):
            template = role.get(key)
            if isinstance(template, dict) and isinstance(template.get("spec"), dict):
                role[key] = {**template, "spec": apply_pod_spec_defaults(template["spec"])}
        roles.append(role)
    return roles


def test_the_vectors_cover_kthena_and_crafted_cases() -> None:
    assert len(VECTORS) >= 60
    assert sum(i.startswith("kthena-") for i in IDS) >= 25
    assert sum(i.startswith("random-") for i in IDS) >= 20
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_rendering_of_stored_roles_gives_kthenas_values(vector: dict[str, Any]) -> None:
    assert _hashes(vector["defaultedRoles"]) == (vector["revision"], vector["roleTemplateHashes"])


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_our_crd_defaults_give_kthenas_values(vector: dict[str, Any]) -> None:
    roles = _defaulted(vector["manifest"])
    assert _hashes(roles) == (vector["revision"], vector["roleTemplateHashes"])


# The random walk's Pod templates are not valid Pods (containers without names, ...).
MANIFESTS = [v for v in VECTORS if not v["id"].startswith("random-")]


@pytest.mark.parametrize("vector", MANIFESTS, ids=[v["id"] for v in MANIFESTS])
def test_the_controllers_path_gives_kthenas_values(vector: dict[str, Any]) -> None:
    # Every manifest Kthena's API accepts is accepted; a field neither CRD knows (Kthena's
    # booster fixture puts topologySpreadConstraints under spec) is pruned, as the API server
    # prunes it on the way into storage.
    ms = parse_model_serving(vector["manifest"], prune=True)
    assert revision(ms) == vector["revision"]
    assert {r.name: role_template_hash(r) for r in ms.spec.template.roles} == vector[
        "roleTemplateHashes"
    ]


def _vector(case_id: str) -> dict[str, Any]:
    return next(v for v in VECTORS if v["id"] == case_id)


@pytest.mark.parametrize(
    ("written", "spelled_out"),
    [
        ("crafted-defaults/port-implicit", "crafted-defaults/port-explicit"),
        ("crafted-defaults/probes-implicit", "crafted-defaults/probes-explicit"),
    ],
)
def test_a_spelled_out_default_does_not_change_the_revision(written: str, spelled_out: str) -> None:
    a, b = _vector(written), _vector(spelled_out)
    assert a["revision"] == b["revision"]  # Kthena's own values agree
    ms_a = parse_model_serving(a["manifest"])
    ms_b = parse_model_serving(b["manifest"])
    assert revision(ms_a) == revision(ms_b) == a["revision"]


def test_replicas_and_rollout_knobs_are_not_hashed() -> None:
    base, knobs = (
        _vector("crafted-defaults/port-implicit"),
        _vector("crafted-defaults/scaled-and-rollout-knobs"),
    )
    assert base["revision"] == knobs["revision"]
    assert _hashes(_defaulted(knobs["manifest"])) == (base["revision"], base["roleTemplateHashes"])


def test_a_real_change_changes_the_revision() -> None:
    implicit, udp = _vector("crafted-defaults/port-implicit"), _vector("crafted-defaults/port-udp")
    assert implicit["revision"] != udp["revision"]
    assert revision(parse_model_serving(udp["manifest"])) == udp["revision"]


def test_empty_and_absent_lists_hash_apart_as_in_go() -> None:
    empty, absent = (
        _vector("crafted-fields/empty-lists-and-maps"),
        _vector("crafted-fields/absent-lists-and-maps"),
    )
    assert empty["revision"] != absent["revision"]
    assert _hashes(_defaulted(empty["manifest"]))[0] == empty["revision"]
