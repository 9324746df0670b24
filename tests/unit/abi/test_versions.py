"""abi/versions.py declares each ABI version once; the markers, the response keys and each hook's
lowest version derive from it, and the hook table and the version table name the same hooks."""

from __future__ import annotations

import pytest

from modelserving.abi.contract import RESPONSE_KEYS
from modelserving.abi.shape import MARKERS
from modelserving.abi.versions import SINCE, VERSIONS, since
from modelserving.api.hook import HOOK_SPECS, Hook


def test_versions_are_numbered_from_one_without_gaps() -> None:
    assert [v.number for v in VERSIONS] == list(range(1, len(VERSIONS) + 1))


def test_every_hook_is_introduced_by_exactly_one_version() -> None:
    introduced = [hook for v in VERSIONS for hook in v.hooks]
    assert sorted(introduced) == sorted(spec.hook.value for spec in HOOK_SPECS)
    assert len(introduced) == len(set(introduced))


def test_no_version_adds_a_response_key_twice() -> None:
    added = [key for v in VERSIONS for key in v.response_keys]
    assert len(added) == len(set(added))


def test_the_derived_tables_are_those_of_versions_1_to_3() -> None:
    assert MARKERS == {
        "modelserving_abi_v1": 1,
        "modelserving_abi_v2": 2,
        "modelserving_abi_v3": 3,
    }
    assert RESPONSE_KEYS == {
        1: ("patch", "error"),
        2: ("patch", "error", "observations"),
        3: ("patch", "error", "observations", "objects"),
    }
    assert SINCE == {
        Hook.ON_POD_CREATE: 1,
        Hook.ON_POD_READY: 1,
        Hook.VALIDATE_CONFIG: 1,
        Hook.ON_SERVING_GROUP_CHANGE: 3,
    }


def test_a_hook_no_version_introduces_is_named() -> None:
    assert since(Hook.ON_SERVING_GROUP_CHANGE) == 3
    with pytest.raises(LookupError, match="no ABI version introduces the hook OnPodEvict"):
        since("OnPodEvict")
