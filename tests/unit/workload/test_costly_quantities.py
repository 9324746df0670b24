"""Resource quantities the API server would take long over are refused before any Pod is made:
the CRD leaves Pod templates open, and a Pod with ``cpu: 1e999999999`` took the API server
more than 30 s, on every retry."""

from __future__ import annotations

from typing import Any

import pytest

from modelserving.api.validation import parse_model_serving
from modelserving.workload.plan import costly_quantity
from modelserving.workload.quantity import MAX_EXPONENT, MAX_TEXT, costly
from tests.unit.conftest import manifest, role


@pytest.mark.parametrize(
    "value",
    ["1e999999999", "1E-1001", f"1e{MAX_EXPONENT + 1}", " 2e+99999 ", "1" * (MAX_TEXT + 1)],
)
def test_costly_values(value: str) -> None:
    assert costly(value) is not None


@pytest.mark.parametrize(
    "value",
    [
        "1e3",
        f"1e{MAX_EXPONENT}",
        f"1e-{MAX_EXPONENT}",
        "500m",
        "16Gi",
        "16Ei",
        "1" * MAX_TEXT,
        "x1e9999",
        4,
        1.5e300,
        None,
        ["1e9999"],
    ],
)
def test_values_that_cost_nothing_more(value: Any) -> None:
    """Within the bounds, or no quantity at all (the API server refuses those at once)."""
    assert costly(value) is None


def _with(spec: dict[str, Any], worker: dict[str, Any] | None = None) -> Any:
    r = role("server", workers=1 if worker is not None else 0)
    r["entryTemplate"]["spec"].update(spec)
    if worker is not None:
        r["workerTemplate"]["spec"].update(worker)
    return parse_model_serving(manifest(roles=[role("a"), r]))


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (
            {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1e5000"}}}]},
            "entryTemplate.spec.containers[0].resources.limits.cpu",
        ),
        (
            {
                "initContainers": [
                    {"name": "i0"},
                    {"name": "i", "resources": {"requests": {"x": "1e5000"}}},
                ]
            },
            "entryTemplate.spec.initContainers[1].resources.requests.x",
        ),
        (
            {"resources": {"limits": {"memory": "9e9999"}}},
            "entryTemplate.spec.resources.limits.memory",
        ),
        ({"overhead": {"cpu": "9e9999"}}, "entryTemplate.spec.overhead.cpu"),
    ],
)
def test_the_first_costly_quantity_is_named_with_its_field(spec: dict[str, Any], path: str) -> None:
    why = costly_quantity(_with(spec))
    assert why is not None
    assert why.startswith(f"spec.template.roles[1].{path}: ")


def test_a_workers_quantity_is_found_and_plain_templates_pass() -> None:
    worker = {"containers": [{"name": "w", "resources": {"requests": {"cpu": "1e1001"}}}]}
    why = costly_quantity(_with({}, worker))
    place = "spec.template.roles[1].workerTemplate.spec.containers[0].resources.requests.cpu"
    assert why == f"{place}: '1e1001': an exponent beyond 1000"
    assert costly_quantity(_with({"containers": [{"name": "c", "resources": "x"}]})) is None
    assert costly_quantity(parse_model_serving(manifest())) is None
