"""The validator judges Pods with values of any JSON type: a value of the wrong type is never a
crash (the chain would report a validator bug), but a refusal or a fact like any other."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from modelserving.api.errors import PatchRejected
from modelserving.api.policy import PatchPolicy, PathRule
from modelserving.chain.policy import PatchValidator

TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {
        "volumes": [{"name": "h", "hostPath": {"path": "/models", "type": "Directory"}}],
        "containers": [
            {
                "name": "engine",
                "image": "vllm:1",
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "h", "mountPath": "/models", "readOnly": True}],
            }
        ],
    },
}
OPEN = PatchPolicy(allowed_paths=[PathRule(path="/**")], allow_host_path=True)


@pytest.mark.parametrize("memo", [True, False])
@pytest.mark.parametrize("kind", [{"x": 1}, ["Directory"]])
def test_a_host_path_type_that_is_no_string_is_judged_not_a_crash(memo: bool, kind: Any) -> None:
    """A hostPath ``type`` that is a map or a list (unhashable) in the template, or written by
    the patch: the volume is not inert, and a change to what runs in the privileged container
    that mounts it is a takeover."""
    validator = PatchValidator(OPEN, memo=memo)
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["volumes"][0]["hostPath"]["type"] = kind
    image = [{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}]
    with pytest.raises(PatchRejected, match="privileged"):
        validator.apply(template, image)
    retype = [{"op": "replace", "path": "/spec/volumes/0/hostPath/type", "value": kind}]
    with pytest.raises(PatchRejected, match="changes the volume 'h'"):
        validator.apply(TEMPLATE, retype)  # allowHostPath: the new hostPath fact is allowed
