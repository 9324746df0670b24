"""Turning a manifest into a valid ModelServing, or into an error that names every culprit.

``parse_model_serving`` runs the schema (pydantic) and then Kthena's semantic rules plus ours,
collecting every problem with its field path. Called by the CLI and by the controller.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from modelserving.api.crd import pruned_manifest
from modelserving.api.errors import FieldError, InvalidManifest
from modelserving.api.jsondata import find_wide_int, wide_int_reason
from modelserving.api.modelserving import DNS1035_LABEL, ModelServing

_PERCENT = re.compile(r"^[0-9]+%$")


def object_ref(manifest: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` of a raw manifest, as well as it can be read."""
    kind = manifest.get("kind") or "object"
    meta = manifest.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or "<unnamed>"
    return f"{kind} {meta.get('namespace') or 'default'}/{name}"


def format_loc(loc: Iterable[int | str]) -> str:
    """``("spec", "roles", 0, "name")`` -> ``spec.roles[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = str(part)
    return out


def pydantic_errors(exc: ValidationError) -> list[FieldError]:
    """Readable field errors from a pydantic ValidationError (paths in API names)."""
    errors: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        etype = err["type"]
        if etype == "extra_forbidden":
            msg = "unknown field"
        elif etype == "missing":
            msg = "required field is missing"
        elif etype == "value_error":
            msg = str(err["ctx"]["error"]) if "ctx" in err else err["msg"]
        else:
            msg = err["msg"]
            if etype in {"literal_error", "enum"}:
                msg += f" (got {err['input']!r})"
        errors.append(FieldError(format_loc(loc), msg))
    return errors


def scaled(value: int | str, total: int, round_up: bool) -> int | None:
    """An int-or-percent resolved against ``total``; None when it is not valid."""
    if isinstance(value, int):
        return value if value >= 0 else None
    if not _PERCENT.fullmatch(value):
        return None
    percent = int(value[:-1])
    if percent > 100:
        return None
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def semantic_errors(ms: ModelServing) -> list[FieldError]:
    """Kthena's admission rules and ours that a schema cannot express."""
    errors: list[FieldError] = []
    spec = ms.spec
    roles = spec.template.roles
    role_names = {r.name for r in roles}

    for i, role in enumerate(roles):
        path = f"spec.template.roles[{i}]"
        generated = f"{ms.name}-{spec.replicas}-{role.name}-{role.replicas}-{role.worker_replicas}"
        if len(generated) > 63 or not DNS1035_LABEL.fullmatch(generated):
            errors.append(
                FieldError(
                    "metadata.name",
                    f"generated name '{generated}' must be a DNS-1035 label of at most 63 "
                    f"characters; shorten the ModelServing name or role '{role.name}'",
                )
            )
        if role.worker_replicas > 0 and role.worker_template is None:
            errors.append(
                FieldError(
                    f"{path}.workerTemplate",
                    f"required when workerReplicas is greater than 0 (role '{role.name}')",
                )
            )
        errors.extend(_role_max_unavailable(ms, i))

    gang = spec.template.gang_policy
    if gang and gang.min_role_replicas:
        by_name = {r.name: r for r in roles}
        for name, minimum in sorted(gang.min_role_replicas.items()):
            path = f"spec.template.gangPolicy.minRoleReplicas[{name}]"
            if name not in by_name:
                errors.append(FieldError(path, f"role '{name}' does not exist in template.roles"))
            elif minimum > by_name[name].replicas:
                errors.append(
                    FieldError(
                        path,
                        f"minRoleReplicas ({minimum}) for role '{name}' cannot exceed its "
                        f"replicas ({by_name[name].replicas})",
                    )
                )

    errors.extend(_rollout_errors(ms))

    for i, plugin in enumerate(spec.plugins or []):
        if plugin.scope and plugin.scope.roles:
            unknown = [r for r in plugin.scope.roles if r not in role_names]
            if unknown:
                errors.append(
                    FieldError(
                        f"spec.plugins[{i}].scope.roles",
                        f"plugin '{plugin.name}' is scoped to unknown role(s) "
                        f"{', '.join(repr(u) for u in unknown)}; known roles: "
                        f"{', '.join(sorted(role_names))}",
                    )
                )
    return errors


def _rollout_errors(ms: ModelServing) -> list[FieldError]:
    errors: list[FieldError] = []
    strategy = ms.spec.rollout_strategy
    rollout_type = strategy.type if strategy else "ServingGroupRollingUpdate"
    if ms.spec.recovery_policy == "ServingGroupRecreate" and rollout_type == "RoleRollingUpdate":
        errors.append(
            FieldError(
                "spec.rolloutStrategy.type",
                "RoleRollingUpdate cannot be combined with recoveryPolicy ServingGroupRecreate",
            )
        )
    config = strategy.rolling_update_configuration if strategy else None
    if config is None:
        return errors
    path = "spec.rolloutStrategy.rollingUpdateConfiguration"
    if rollout_type == "RoleRollingUpdate":
        errors.append(
            FieldError(path, "only valid when rolloutStrategy.type is ServingGroupRollingUpdate")
        )
        return errors
    max_unavailable = scaled(config.max_unavailable, ms.spec.replicas, round_up=False)
    if max_unavailable is None:
        errors.append(
            FieldError(
                f"{path}.maxUnavailable", "must be a non-negative integer or a percent 0-100%"
            )
        )
    elif max_unavailable == 0:
        errors.append(
            FieldError(
                f"{path}.maxUnavailable",
                f"resolves to 0 for {ms.spec.replicas} replicas; it must allow at least one",
            )
        )
    if config.partition is not None and scaled(config.partition, ms.spec.replicas, True) is None:
        errors.append(
            FieldError(f"{path}.partition", "must be a non-negative integer or a percent 0-100%")
        )
    return errors


def _role_max_unavailable(ms: ModelServing, index: int) -> list[FieldError]:
    """A role's ``partition`` and ``maxUnavailable``, as Kthena's webhook checks them: the
    partition is only for RoleRollingUpdate; maxUnavailable (defaulted to 1 by the CRD) is
    checked only there and ignored otherwise."""
    role = ms.spec.template.roles[index]
    path = f"spec.template.roles[{index}]"
    strategy = ms.spec.rollout_strategy
    role_rolling = strategy is not None and strategy.type == "RoleRollingUpdate"
    errors: list[FieldError] = []
    if role.partition is not None:
        if scaled(role.partition, role.replicas, round_up=True) is None:
            errors.append(
                FieldError(
                    f"{path}.partition", "must be a non-negative integer or a percent 0-100%"
                )
            )
        if not role_rolling:
            errors.append(
                FieldError(
                    f"{path}.partition", "only valid when rolloutStrategy.type is RoleRollingUpdate"
                )
            )
    if not role_rolling:
        return errors
    where = f"{path}.maxUnavailable"
    value = scaled(role.max_unavailable, role.replicas, round_up=False)
    if value is None:
        errors.append(FieldError(where, "must be a non-negative integer or a percent 0-100%"))
    elif value == 0:
        errors.append(FieldError(where, "must not resolve to 0"))
    elif value > role.replicas:
        errors.append(
            FieldError(where, f"cannot be greater than the role's replicas ({role.replicas})")
        )
    return errors


def parse_model_serving(manifest: Mapping[str, Any], *, prune: bool = False) -> ModelServing:
    """Validate a raw ModelServing manifest; raise InvalidManifest listing every problem.

    Unknown fields are refused (a typo never passes silently), unless ``prune``: then they are
    dropped as the API server drops them when it stores the object (Kthena's CRD as ours)."""
    if prune:
        manifest = pruned_manifest(dict(manifest))
    ref = object_ref({**manifest, "kind": manifest.get("kind") or "ModelServing"})
    try:
        ms = ModelServing.model_validate(dict(manifest))
    except ValidationError as exc:
        raise InvalidManifest(ref, pydantic_errors(exc)) from None
    errors = semantic_errors(ms) + _wide_integer_errors(manifest)
    if errors:
        raise InvalidManifest(ms.ref, errors)
    return ms


def _wide_integer_errors(manifest: Mapping[str, Any]) -> list[FieldError]:
    """The first integer beyond 64 bits (``jsondata.INT_MIN``..``INT_MAX``), say in a Pod
    template: the API server stores none, and a plugin request could not carry it. Plugin
    configs are left to the chain, which refuses such a value naming the plugin, as it does
    every other config problem."""
    spec = manifest.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("plugins"), list):
        plugins = [{**p, "config": None} if isinstance(p, Mapping) else p for p in spec["plugins"]]
        manifest = {**manifest, "spec": {**spec, "plugins": plugins}}
    found = find_wide_int(manifest)
    if found is None:
        return []
    path, value = found
    return [FieldError(format_loc(path), wide_int_reason(value))]
