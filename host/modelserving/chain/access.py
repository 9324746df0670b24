"""What a Pod can reach besides its Pod Security privileges: Secrets, service-account
credentials, CSI drivers, other workloads' volume claims, and a node chosen by name. The
comparison is the one of ``modelserving.chain.pss``.

``access_facts`` lists them as facts of the Pod, one per ``(control, subject, what)``, e.g.
``("secrets", "the Pod", "references Secret 'db'")``; ``weakenings(before, after)`` returns the
facts of the patched Pod that the template (the Pod before the patch) does not have, as
``pss.Weakening``s. ``modelserving.chain.policy.PatchValidator`` decides with the operator's
PatchPolicy which of them a plugin may add; this module knows no policy.

All facts are the Pod's: whatever container a Secret or a token is mounted in, the kubelet
fetches it for the Pod, so giving a container of the Pod a credential the template already
references is no new access. A plugin may not:

- reference a Secret the template does not (a ``secret`` volume or projected source, a volume's
  ``secretRef``, ``secretName`` or ``nodePublishSecretRef``, an env ``secretKeyRef``, an
  ``envFrom`` ``secretRef``, an ``imagePullSecrets`` entry: the container cannot read the last,
  but the Pod then pulls images with credentials the template did not use);
- give the Pod a credential of its ServiceAccount: a projected ``serviceAccountToken`` (per
  audience), a projected ``podCertificate``, ``automountServiceAccountToken`` no longer false (or
  true where it was unset: the ServiceAccount could opt out);
- mount an inline ``csi`` volume of a driver and ``volumeAttributes`` the template does not have
  (the Secrets Store driver fetches external secrets, cert-manager's issues certificates, the
  SPIFFE driver hands out the Workload API: each a credential the template did not give);
- use a PersistentVolumeClaim the template does not (another workload's data), or fill an
  ``ephemeral`` volume from a ``dataSource`` / ``dataSourceRef`` (a clone of another claim, a
  snapshot) or bind it to a PersistentVolume by ``volumeName`` where the template does not;
- change the ServiceAccount the Pod runs as (``serviceAccountName``, or the deprecated
  ``serviceAccount``; unset is ``default``);
- bind the Pod to a node (``nodeName``: the scheduler, and so taints, do not apply).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from modelserving.api.hook import PatchOperation
from modelserving.chain import pss
from modelserving.chain.jsonpatch import split_tokens
from modelserving.chain.shapes import as_list, as_map

SECRETS = "secrets"
CREDENTIALS = "serviceAccountCredentials"
SERVICE_ACCOUNT = "serviceAccount"
NODE_NAME = "nodeName"
CSI_DRIVERS = "csiDrivers"
CLAIMS = "claims"

CONTROLS: dict[str, pss.Control] = {
    SECRETS: pss.Control("Secrets"),
    CSI_DRIVERS: pss.Control("CSI Drivers"),
    CLAIMS: pss.Control("Volume Claims"),
    CREDENTIALS: pss.Control("Service Account Credentials"),
    SERVICE_ACCOUNT: pss.Control("Service Account"),
    NODE_NAME: pss.Control("Node Name"),
}

THE_POD = pss.THE_POD
_VOLUME_SECRET_KEYS = ("secretRef", "nodePublishSecretRef")  # {name: ...} in a volume source
_READ_SPEC_FIELDS = frozenset(
    {
        "volumes",
        "imagePullSecrets",
        "automountServiceAccountToken",
        "serviceAccountName",
        "serviceAccount",
        "nodeName",
    }
)
_READ_CONTAINER_FIELDS = frozenset({"name", "env", "envFrom"})


def may_change(op: PatchOperation) -> bool:
    """Whether ``op`` can change what ``access_facts`` finds: False for paths it does not read
    (metadata, scheduling fields, a container's image, command or resources...); a property test
    checks this."""
    if op["op"] == "test":
        return False
    tokens = split_tokens(op["path"])
    if len(tokens) < 2:
        return True
    if tokens[0] != "spec":
        return False
    if tokens[1] in pss.CONTAINER_KINDS:
        if len(tokens) < 4:
            return True
        if tokens[3] == "env":
            return _env_may_reference(op, tokens)
        return tokens[3] in _READ_CONTAINER_FIELDS
    volumes = volumes_put(op)
    if volumes is not None:
        return _volumes_may_reach(volumes)
    return tokens[1] in _READ_SPEC_FIELDS


def volumes_put(op: PatchOperation) -> Any:
    """For an ``add`` or ``replace`` of the Pod's volumes or of one volume, what it puts there:
    the list as given, or a list of the one volume; None for any other operation (whatever
    its value, so the answer's being None depends on the name and path alone)."""
    if op["op"] not in ("add", "replace"):
        return None
    tokens = split_tokens(op["path"])
    if len(tokens) not in (2, 3) or tokens[0] != "spec" or tokens[1] != "volumes":
        return None
    value = op.get("value")
    return value if len(tokens) == 2 else [value]


def plain_volumes(volumes: Any) -> bool:
    """Whether ``volumes_put`` gave a list of maps (anything else is judged the worst way)."""
    return isinstance(volumes, list) and all(isinstance(v, dict) for v in volumes)


def _volumes_may_reach(volumes: Any) -> bool:
    """Whether volumes put into a Pod (``volumes_put``) reference what ``access_facts`` reads:
    a Secret, a credential, a CSI driver, a claim. Anything but a list of maps is judged as if
    it did."""
    if not plain_volumes(volumes):
        return True
    for volume in volumes:
        found: dict[pss.Key, pss.Fact] = {}
        _volume(volume, "", found)
        if found:
            return True
    return False


def reads_value(op: PatchOperation) -> bool:
    """Whether ``may_change(op)`` depends on the operation's value, not only on its name and
    path (an ``add`` or ``replace`` in a container's ``env``, of the Pod's volumes or one
    volume; a removal's answer is its path's)."""
    if op["op"] not in ("add", "replace"):
        return False
    tokens = split_tokens(op["path"])
    if len(tokens) < 2 or tokens[0] != "spec":
        return False
    if volumes_put(op) is not None:
        return True
    return len(tokens) >= 4 and tokens[1] in pss.CONTAINER_KINDS and tokens[3] == "env"


def _env_may_reference(op: PatchOperation, tokens: tuple[str, ...]) -> bool:
    """Whether an operation in a container's ``env`` can make it reference a Secret: only by
    putting a ``valueFrom`` there, or by changing one. Removing a variable or the whole list
    takes references away (facts are keyed by the Secret, so no new one appears), but a removal
    inside a ``valueFrom`` can change the Secret it names (its ``name`` gone: a reference to
    None); a variable with a plain ``value``, or one whose ``valueFrom`` is a map without a
    ``secretKeyRef`` (a field, a resource, a ConfigMap key), references nothing."""
    if op["op"] == "remove":
        return len(tokens) >= 6 and tokens[5] == "valueFrom"
    if op["op"] not in ("add", "replace"):
        return False
    value = op.get("value")
    if len(tokens) == 4:  # the whole list
        return not isinstance(value, list) or any(_may_hold_value_from(v) for v in value)
    if len(tokens) == 5:  # one variable
        return _may_hold_value_from(value)
    return tokens[5] == "valueFrom"  # a field of one variable: its name or value reference nothing


def _may_hold_value_from(var: Any) -> bool:
    if not isinstance(var, Mapping) or "valueFrom" not in var:
        return False
    value_from = var["valueFrom"]
    return not isinstance(value_from, Mapping) or "secretKeyRef" in value_from


def weakenings(before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterator[pss.Weakening]:
    """The facts of ``after`` that ``before`` does not have, in the Pod's order."""
    return weakenings_between(facts_of(before), facts_of(after))


def weakenings_between(before: AccessFacts, after: AccessFacts) -> Iterator[pss.Weakening]:
    """``weakenings`` of two Pods' facts."""
    old = before.facts
    for (control, subject, what), (path, value) in after.facts.items():
        if (control, subject, what) not in old:
            yield pss.Weakening(control, subject, what, path, value, False)


@dataclass(slots=True)
class AccessFacts:
    """The facts of one Pod, and its parts (by place) for ``facts_of(..., reuse=)``."""

    facts: dict[pss.Key, pss.Fact]
    parts: dict[tuple[str, int], pss.Part]


def access_facts(pod: Mapping[str, Any]) -> dict[pss.Key, pss.Fact]:
    """Every fact of ``pod``: identity first, then volumes, containers and image pull Secrets. A
    fact's value is the name the policy's lists judge (a Secret, a ServiceAccount, a CSI driver,
    a claim or the source of one), None when it is not a string."""
    return facts_of(pod).facts


def facts_of(pod: Mapping[str, Any], reuse: AccessFacts | None = None) -> AccessFacts:
    """``access_facts`` with its parts. ``reuse``: the facts of a Pod ``pod`` shares objects
    with; as in ``pss.pod_facts``, a part (the identity fields, a volume, a container's env, the
    image pull Secrets) whose objects are the same there, at the same place, takes its facts
    from there: the result is the same as without ``reuse``, in the same order; ``reuse`` itself
    when every part is taken so."""
    old = reuse.parts if reuse is not None else {}
    taken = 0  # parts taken from ``reuse``
    parts: dict[tuple[str, int], pss.Part] = {}
    spec = as_map(pod.get("spec"))
    out: dict[pss.Key, pss.Fact] = {}
    inputs = tuple(spec.get(f) for f in _IDENTITY_FIELDS)
    part = old.get(_IDENTITY_PART)
    if part is None or not part.same(inputs):
        part = pss.Part(inputs, {})
        _identity(dict(zip(_IDENTITY_FIELDS, inputs, strict=True)), part.facts)
    else:
        taken += 1
    parts[_IDENTITY_PART] = part
    out.update(part.facts)
    for i, volume in enumerate(as_list(spec.get("volumes"))):
        part = old.get(("volumes", i))
        if part is None or part.inputs[0] is not volume:
            part = pss.Part((volume,), {})
            _volume(as_map(volume), f"/spec/volumes/{i}", part.facts)
        else:
            taken += 1
        parts["volumes", i] = part
        _merge(out, part.facts)
    for kind in pss.CONTAINER_KINDS:
        for i, container in enumerate(as_list(spec.get(kind))):
            container = as_map(container)
            inputs = (container.get("env"), container.get("envFrom"))
            part = old.get((kind, i))
            if part is None or not part.same(inputs):
                part = pss.Part(inputs, {})
                _container(inputs[0], inputs[1], f"/spec/{kind}/{i}", part.facts)
            else:
                taken += 1
            parts[kind, i] = part
            _merge(out, part.facts)
    refs = spec.get("imagePullSecrets")
    part = old.get(_PULL_PART)
    if part is None or part.inputs[0] is not refs:
        part = pss.Part((refs,), {})
        for i, ref in enumerate(as_list(refs)):
            _secret(as_map(ref).get("name"), f"/spec/imagePullSecrets/{i}", part.facts)
    else:
        taken += 1
    parts[_PULL_PART] = part
    _merge(out, part.facts)
    if reuse is not None and taken == len(parts) == len(old):
        return reuse  # every part the same objects: the same facts
    return AccessFacts(out, parts)


_IDENTITY_PART = ("identity", 0)
_PULL_PART = ("imagePullSecrets", 0)
_IDENTITY_FIELDS = (
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
)
"""The fields of the Pod's spec ``_identity`` is given."""


def _merge(out: dict[pss.Key, pss.Fact], facts: dict[pss.Key, pss.Fact]) -> None:
    """Facts of a later part: a fact already found keeps its first place and path."""
    for key, fact in facts.items():
        out.setdefault(key, fact)


def _identity(spec: Mapping[str, Any], out: dict[pss.Key, pss.Fact]) -> None:
    field, account = "serviceAccountName", spec.get("serviceAccountName")
    if account in (None, ""):
        field, account = "serviceAccount", spec.get("serviceAccount")
    if account in (None, ""):
        field, account = "serviceAccountName", "default"
    out[SERVICE_ACCOUNT, THE_POD, f"runs as ServiceAccount {account!r}"] = (
        f"/spec/{field}",
        _name(account),
    )
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        what = "mounts its ServiceAccount's API token unless the ServiceAccount opts out"
        out[CREDENTIALS, THE_POD, f"{what} (automountServiceAccountToken is not set)"] = (
            "/spec/automountServiceAccountToken",
            None,
        )
    elif automount is not False:
        out[CREDENTIALS, THE_POD, "mounts its ServiceAccount's API token"] = (
            "/spec/automountServiceAccountToken",
            None,
        )
    node = spec.get("nodeName")
    if node not in (None, ""):
        what = f"is bound to node {node!r} (the scheduler and taints do not apply)"
        out[NODE_NAME, THE_POD, what] = ("/spec/nodeName", None)


def _volume(volume: Mapping[str, Any], path: str, out: dict[pss.Key, pss.Fact]) -> None:
    for kind, source in volume.items():
        source = as_map(source)
        if kind == "projected":
            for item in as_list(source.get("sources")):
                _projection(as_map(item), path, out)
            continue
        if "secretName" in source:  # secret, azureFile
            _secret(source.get("secretName"), path, out)
        for key in _VOLUME_SECRET_KEYS:  # csi, cephfs, flexVolume, iscsi, rbd, scaleIO...
            if key in source:
                _secret(as_map(source.get(key)).get("name"), path, out)
        if kind == "csi":
            _csi(source, path, out)
        elif kind == "persistentVolumeClaim":
            name = source.get("claimName")
            what = f"uses PersistentVolumeClaim {name!r}"
            out.setdefault((CLAIMS, THE_POD, what), (path, _name(name)))
        elif kind == "ephemeral":
            _ephemeral(as_map(as_map(source.get("volumeClaimTemplate")).get("spec")), path, out)


def _csi(source: Mapping[str, Any], path: str, out: dict[pss.Key, pss.Fact]) -> None:
    """One fact per (driver, volumeAttributes): the attributes choose what the driver hands out
    (a SecretProviderClass, a certificate's names and issuer)."""
    driver, attributes = source.get("driver"), source.get("volumeAttributes")
    what = f"mounts an inline CSI volume of driver {driver!r}"
    if attributes:
        what += f" with volumeAttributes {json.dumps(attributes, sort_keys=True, default=str)}"
    out.setdefault((CSI_DRIVERS, THE_POD, what), (path, _name(driver)))


def _ephemeral(claim: Mapping[str, Any], path: str, out: dict[pss.Key, pss.Fact]) -> None:
    """What an ephemeral volume's claim starts from: a data source (another claim to clone, a
    snapshot, a populator's object) or a PersistentVolume named by ``volumeName``. The
    ``dataSource`` and ``dataSourceRef`` of one claim naming the same object are one fact."""
    for field in ("dataSource", "dataSourceRef"):
        if field not in claim:
            continue
        ref = as_map(claim.get(field))
        kind, group, name = ref.get("kind"), ref.get("apiGroup"), ref.get("name")
        source = f"{kind} {name!r}" if not group else f"{kind} ({group}) {name!r}"
        if ref.get("namespace"):
            source += f" of namespace {ref.get('namespace')!r}"
        what = f"fills an ephemeral volume from {source}"
        out.setdefault((CLAIMS, THE_POD, what), (path, _name(name)))
    if claim.get("volumeName") not in (None, ""):
        name = claim.get("volumeName")
        what = f"binds an ephemeral volume to PersistentVolume {name!r}"
        out.setdefault((CLAIMS, THE_POD, what), (path, _name(name)))


def _projection(item: Mapping[str, Any], path: str, out: dict[pss.Key, pss.Fact]) -> None:
    if "secret" in item:
        _secret(as_map(item.get("secret")).get("name"), path, out)
    if "serviceAccountToken" in item:
        audience = as_map(item.get("serviceAccountToken")).get("audience")
        aim = f"audience {audience!r}" if audience else "the Kubernetes API"
        what = f"projects a token of its ServiceAccount for {aim}"
        out.setdefault((CREDENTIALS, THE_POD, what), (path, None))
    if "podCertificate" in item:
        signer = as_map(item.get("podCertificate")).get("signerName")
        what = f"projects a certificate of its identity signed by {signer!r}"
        out.setdefault((CREDENTIALS, THE_POD, what), (path, None))


def _container(env: Any, env_from: Any, base: str, out: dict[pss.Key, pss.Fact]) -> None:
    """The Secrets a container's ``env`` and ``envFrom`` reference."""
    for j, var in enumerate(as_list(env)):
        # most variables have a value: the test is kept to a dict lookup
        value_from = var.get("valueFrom") if type(var) is dict else as_map(var).get("valueFrom")
        if value_from is None:
            continue
        value_from = as_map(value_from)
        if "secretKeyRef" in value_from:
            name = as_map(value_from.get("secretKeyRef")).get("name")
            _secret(name, f"{base}/env/{j}", out)
    for j, source in enumerate(as_list(env_from)):
        source = as_map(source)
        if "secretRef" in source:
            _secret(as_map(source.get("secretRef")).get("name"), f"{base}/envFrom/{j}", out)


def _secret(name: Any, path: str, out: dict[pss.Key, pss.Fact]) -> None:
    """One fact per Secret, wherever the Pod references it (its path: the first reference)."""
    out.setdefault((SECRETS, THE_POD, f"references Secret {name!r}"), (path, _name(name)))


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) else None
