"""Kthena's controller and ours on the same ModelServings, on one local control plane, compared
object by object; then ours takes over what Kthena made, which must change nothing.

Run by hand with a ``kthena-controller-manager`` binary built from Kthena's source. The Go
module proxy does not serve Kthena, so no fresh machine has one; "Against Kthena's running
controller" in docs/moving-from-kthena.md says how to build it:

    .venv/bin/python -m tests.differential.kthena --kthena BIN [MANIFEST.yaml ...]

With no manifests it takes every ModelServing of ``--examples DIR`` (a Kthena checkout's
``examples/``). For each ModelServing, in namespaces of its own:

1. Kthena's controller (webhook off, only its ModelServing controller) makes its objects in
   ``kthena-N``; the Pods, Services, PodGroups and the ModelServing's status are read once they
   stop changing.
2. Kthena's controller stops, ours starts (in this process), and the same ModelServing is made
   again in ``ours-N``.
3. Ours must have taken over ``kthena-N`` without deleting, re-creating or changing an object;
   and what it made in ``ours-N`` must equal what Kthena made, field by field, once both are
   normalized (:func:`normalized`: server-set identity, times, status and scheduling left out,
   the namespace's name replaced).

Every difference is printed as JSON Patch operations from Kthena's object to ours. Exit 1 when
any is found (or a step fails), 0 when all match.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from modelserving import devcluster
from modelserving.api import labels
from modelserving.api.operator import OperatorConfig
from modelserving.bench.controller import (
    create_namespace,
    install_crd,
    kthena_controller,
    running_controller,
)
from modelserving.controller.kube import (
    MODEL_SERVINGS,
    POD_GROUPS,
    PODS,
    SERVICES,
    ApiError,
    Kube,
    Resource,
    api_client,
)

KINDS: tuple[tuple[str, Resource], ...] = (
    ("Pod", PODS),
    ("Service", SERVICES),
    ("PodGroup", POD_GROUPS),
)
NODES = 8
SETTLE_QUIET_S = 5.0
"""Objects count as settled when their names and specs have not changed for this long..."""
SETTLE_TIMEOUT_S = 90.0
"""... or when this much time has passed (then the snapshot is taken anyway, with a note)."""
NS_TOKEN = "NAMESPACE"

METADATA_DROPPED = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_TOKEN_NAME = re.compile(r"\b(kube-api-access)-[a-z0-9]{5}\b")
"""The ServiceAccount admission names each Pod's token volume with a random suffix."""
POD_SPEC_DROPPED = ("nodeName",)
"""Set by the scheduler, not by a controller."""


def _replace_namespace(value: Any, namespace: str) -> Any:
    """Each whole occurrence of ``namespace`` (not inside a longer DNS label) as NS_TOKEN."""
    if isinstance(value, str):
        if namespace not in value:
            return value
        return re.sub(rf"(?<![a-z0-9-]){re.escape(namespace)}(?![a-z0-9-])", NS_TOKEN, value)
    if isinstance(value, dict):
        return {
            _replace_namespace(k, namespace): _replace_namespace(v, namespace)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_replace_namespace(v, namespace) for v in value]
    return value


def normalized(kind: str, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``obj`` without what the API server, the scheduler and the Nodes set (identity, times,
    status, the Node, a Service's cluster IPs unless headless), the owner references' UIDs, and
    with every occurrence of its namespace's name replaced by ``NAMESPACE``."""
    out = json.loads(json.dumps(obj))
    out.pop("status", None)
    out = json.loads(_TOKEN_NAME.sub(r"\1-RANDOM", json.dumps(out)))
    meta = out.get("metadata") or {}
    for key in METADATA_DROPPED:
        meta.pop(key, None)
    for ref in meta.get("ownerReferences") or []:
        ref.pop("uid", None)
    spec = out.get("spec") or {}
    if kind == "Pod":
        for key in POD_SPEC_DROPPED:
            spec.pop(key, None)
    elif kind == "Service" and spec.get("clusterIP") != "None":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    return dict(_replace_namespace(out, namespace))


def status_normalized(status: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A ModelServing's status without its conditions (compared by :func:`compare_status`)."""
    out = json.loads(json.dumps(status or {}))
    out.pop("conditions", None)
    return dict(_replace_namespace(out, namespace))


Snapshot = dict[tuple[str, str], dict[str, Any]]
"""(kind, name) -> the object as read."""


def snapshot(kube: Kube, namespace: str) -> Snapshot:
    found: Snapshot = {}
    for kind, res in KINDS:
        if kind == "PodGroup" and not kube.has_resource(res):
            continue
        for obj in kube.list(res, namespace):
            found[(kind, obj["metadata"]["name"])] = obj
    return found


def _shape(snap: Snapshot, namespace: str) -> str:
    """What settling waits on: the objects' normalized forms (not their status)."""
    return json.dumps(
        sorted((k, normalized(k[0], v, namespace)) for k, v in snap.items()), sort_keys=True
    )


def settled(kube: Kube, namespace: str, name: str) -> tuple[Snapshot, dict[str, Any], bool]:
    """The namespace's objects and the ModelServing's status once the objects have not changed
    for SETTLE_QUIET_S and the status has seen the ModelServing's generation; whether that
    happened before SETTLE_TIMEOUT_S."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last, since = "", time.monotonic()
    while True:
        snap = snapshot(kube, namespace)
        ms = kube.get(MODEL_SERVINGS, namespace, name) or {}
        status = ms.get("status") or {}
        shape = _shape(snap, namespace) + json.dumps(status_normalized(status, namespace))
        now = time.monotonic()
        if shape != last:
            last, since = shape, now
        observed = status.get("observedGeneration") == (ms.get("metadata") or {}).get("generation")
        if snap and observed and now - since >= SETTLE_QUIET_S:
            return snap, status, True
        if now > deadline:
            return snap, status, False
        time.sleep(0.5)


@dataclass
class Case:
    """One ModelServing of a manifest, and what each step found."""

    source: str
    body: dict[str, Any]
    index: int
    notes: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    def namespace(self, who: str) -> str:
        return f"{who}-{self.index}"


def _patch_lines(prefix: str, a: Any, b: Any) -> list[str]:
    """``prefix: op {path, value...}`` for each JSON Patch operation from ``a`` to ``b``."""
    return [
        f"{prefix}: {op['op']} "
        + json.dumps({k: v for k, v in op.items() if k != "op"}, sort_keys=True)
        for op in jsonpatch.make_patch(a, b).patch
    ]


def compare(
    theirs: Snapshot,
    their_ns: str,
    ours: Snapshot,
    our_ns: str,
) -> list[str]:
    """Each difference between two snapshots, normalized, as one line."""
    lines: list[str] = []
    for key in sorted(theirs.keys() | ours.keys()):
        kind, name = key
        if key not in ours:
            lines.append(f"{kind} {name}: made by Kthena only")
            continue
        if key not in theirs:
            lines.append(f"{kind} {name}: made by ours only")
            continue
        a = normalized(kind, theirs[key], their_ns)
        b = normalized(kind, ours[key], our_ns)
        lines += _patch_lines(f"{kind} {name}", a, b)
    return lines


def compare_status(
    theirs: dict[str, Any], their_ns: str, ours: dict[str, Any], our_ns: str
) -> list[str]:
    """The status fields, and each condition Kthena reports: ours must have it with the same
    status. Reasons and messages are not compared, and conditions only ours has
    (``UpdateInProgress``, ``PluginsReady``, ``Available`` False while Kthena has none yet)
    are allowed: docs/moving-from-kthena.md lists them."""
    a, b = status_normalized(theirs, their_ns), status_normalized(ours, our_ns)
    lines = _patch_lines("ModelServing status", a, b)
    mine = {c.get("type"): c.get("status") for c in ours.get("conditions") or []}
    for cond in theirs.get("conditions") or []:
        kind, value = cond.get("type"), cond.get("status")
        if mine.get(kind) != value:
            lines.append(
                f"ModelServing condition {kind}: Kthena {value}, ours {mine.get(kind, 'absent')}"
            )
    return lines


def taken_over(before: Snapshot, after: Snapshot, namespace: str) -> list[str]:
    """What ours changed in the objects Kthena made: a deletion, a re-creation (another UID) or
    a change of anything but status."""
    lines: list[str] = []
    for key in sorted(before.keys() | after.keys()):
        kind, name = key
        if key not in after:
            lines.append(f"takeover: {kind} {name} deleted")
            continue
        if key not in before:
            lines.append(f"takeover: {kind} {name} made by ours")
            continue
        if before[key]["metadata"]["uid"] != after[key]["metadata"]["uid"]:
            lines.append(f"takeover: {kind} {name} re-created")
            continue
        a = normalized(kind, before[key], namespace)
        b = normalized(kind, after[key], namespace)
        lines += _patch_lines(f"takeover: {kind} {name}", a, b)
    return lines


def model_servings(paths: Iterable[Path]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == labels.KIND:
                yield str(path), doc


def cases_of(paths: Iterable[Path]) -> list[Case]:
    return [Case(src, body, i) for i, (src, body) in enumerate(model_servings(paths), start=1)]


def _create(kube: Kube, case: Case, who: str) -> None:
    namespace = case.namespace(who)
    create_namespace(kube, namespace)
    body = json.loads(json.dumps(case.body))
    body["metadata"] = {"name": case.name, "namespace": namespace}
    kube.create(MODEL_SERVINGS, namespace, body)


def _dump(folder: Path | None, case: Case, who: str, snap: Snapshot, status: Any) -> None:
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    objects = {f"{kind}/{name}": obj for (kind, name), obj in sorted(snap.items())}
    text = json.dumps({"status": status, "objects": objects}, indent=1, sort_keys=True)
    (folder / f"{case.index:02d}-{case.name}-{who}.json").write_text(text)


def _scaled(body: dict[str, Any], replicas: int) -> dict[str, Any]:
    return {"spec": {"replicas": replicas}}


def _new_image(body: dict[str, Any]) -> dict[str, Any]:
    """A merge patch giving the first role's entry Pods another image: a rolling update."""
    roles = json.loads(json.dumps(body["spec"]["template"]["roles"]))
    container = roles[0]["entryTemplate"]["spec"]["containers"][0]
    container["image"] = str(container.get("image", "nginx")).split("@")[0] + "-differential"
    return {"spec": {"template": {"roles": roles}}}


def _patching(
    make: Callable[[dict[str, Any]], dict[str, Any]],
) -> Callable[[Kube, Case, str], None]:
    """A step that merge-patches the ModelServing with ``make(case.body)``."""

    def step(kube: Kube, case: Case, who: str) -> None:
        kube.merge_patch(MODEL_SERVINGS, case.namespace(who), case.name, make(case.body))

    return step


def victim(case: Case, pods: Iterable[str]) -> str | None:
    """The Pod the "delete a Pod" step deletes: the last by name of the first ServingGroup (a
    worker where its last role has workers), the same name on both sides."""
    first = sorted(p for p in pods if p.startswith(f"{case.name}-0-"))
    return first[-1] if first else None


def _delete_pod(kube: Kube, case: Case, who: str) -> None:
    namespace = case.namespace(who)
    name = victim(case, (o["metadata"]["name"] for o in kube.list(PODS, namespace)))
    if name is None:
        raise LookupError(f"no Pod of ServingGroup {case.name}-0 in {namespace}")
    kube.delete(PODS, namespace, name)


STEPS: tuple[tuple[str, Callable[[Kube, Case, str], None]], ...] = (
    ("create", _create),
    ("scale up", _patching(lambda body: _scaled(body, int(body["spec"].get("replicas", 1)) + 1))),
    ("rolling update", _patching(_new_image)),
    ("delete a Pod", _delete_pod),
    ("scale down", _patching(lambda body: _scaled(body, 1))),
)
"""What each controller is taken through, and compared after: the ModelServing as written, one
ServingGroup more, a new image in the first role's entry template, one Pod of the first
ServingGroup deleted (recovery), and one ServingGroup. After each step but the first, the
objects each controller re-created in it (the same name, another UID) are compared too."""


def replaced(before: Snapshot, after: Snapshot) -> set[tuple[str, str]]:
    """The objects of ``before`` that ``after`` holds under the same name with another UID."""
    return {
        key
        for key, obj in after.items()
        if key in before and before[key]["metadata"]["uid"] != obj["metadata"]["uid"]
    }


def compare_replaced(
    theirs: tuple[Snapshot, Snapshot], ours: tuple[Snapshot, Snapshot]
) -> list[str]:
    """Each object one controller re-created in a step and the other did not."""
    a, b = replaced(*theirs), replaced(*ours)
    return [f"{kind} {name}: re-created by Kthena only" for kind, name in sorted(a - b)] + [
        f"{kind} {name}: re-created by ours only" for kind, name in sorted(b - a)
    ]


def _step(kube: Kube, case: Case, who: str, step: int) -> None:
    """Carry out ``STEPS[step]`` on the case's ModelServing in ``who``'s namespace."""
    STEPS[step][1](kube, case, who)


def _through_steps(
    kube: Kube, cases: list[Case], who: str, steps: int, dump: Path | None
) -> dict[tuple[int, int], tuple[Snapshot, dict[str, Any]]]:
    """Every case through ``steps`` steps (all cases take each step together, then settle)."""
    seen: dict[tuple[int, int], tuple[Snapshot, dict[str, Any]]] = {}
    for step in range(steps):
        for case in cases:
            if case.notes:
                continue
            try:
                _step(kube, case, who, step)
            except ApiError as exc:
                case.notes.append(f"{STEPS[step][0]}: refused by the API server: {exc}")
            except LookupError as exc:
                case.notes.append(f"{STEPS[step][0]}: {exc}")
        for case in cases:
            if case.notes:
                continue
            snap, status, done = settled(kube, case.namespace(who), case.name)
            if not done:
                case.notes.append(f"{STEPS[step][0]}: {who}'s objects did not settle")
            seen[(case.index, step)] = (snap, status)
            _dump(dump, case, f"{step}-{who}", snap, status)
    return seen


def run(
    kthena: Path,
    cases: list[Case],
    say: Callable[[str], None] = print,
    dump: Path | None = None,
    steps: int = len(STEPS),
) -> bool:
    """Every case through both controllers on one fresh control plane; whether all matched."""
    binaries = devcluster.cached_binaries() or devcluster.build_all(quiet=True)
    with tempfile.TemporaryDirectory(prefix="modelserving-differential-") as tmp:
        directory = Path(tmp) / "cluster"
        state = devcluster.up(directory, nodes=NODES, binaries=binaries, die_with_parent=True)
        client = api_client(str(state.kubeconfig), pool_size=24)
        try:
            kube = Kube(client)
            install_crd(kube)
            with kthena_controller(kthena, state.kubeconfig):
                theirs = _through_steps(kube, cases, "kthena", steps, dump)
            made = sum(len(theirs[(c.index, 0)][0]) for c in cases if (c.index, 0) in theirs)
            say(f"Kthena's controller made {made} objects for {len(cases)} ModelServings")
            config = OperatorConfig.model_validate({"leaderElection": {"enabled": False}})
            with running_controller(client, config):
                ours = _through_steps(kube, cases, "ours", steps, dump)
                for case in cases:
                    for step in range(steps):
                        if (case.index, step) not in theirs or (case.index, step) not in ours:
                            continue
                        (a, a_status), (b, b_status) = (
                            theirs[case.index, step],
                            ours[case.index, step],
                        )
                        k_ns, o_ns = case.namespace("kthena"), case.namespace("ours")
                        found = compare(a, k_ns, b, o_ns) + compare_status(
                            a_status, k_ns, b_status, o_ns
                        )
                        if step and (case.index, step - 1) in theirs:
                            found += compare_replaced(
                                (theirs[case.index, step - 1][0], a),
                                (ours[case.index, step - 1][0], b),
                            )
                        case.differences += [f"{STEPS[step][0]}: {line}" for line in found]
                    last = (case.index, steps - 1)
                    if last in theirs:
                        again, _status, _done = settled(kube, case.namespace("kthena"), case.name)
                        case.differences += taken_over(
                            theirs[last][0], again, case.namespace("kthena")
                        )
        finally:
            client.close()
            devcluster.down(directory)
    return report(cases, say)


def report(cases: list[Case], say: Callable[[str], None] = print) -> bool:
    clean = True
    for case in cases:
        head = f"{case.source}: ModelServing {case.name}"
        if not case.differences and not case.notes:
            say(f"{head}: same objects, taken over unchanged")
            continue
        clean = False
        say(f"{head}:")
        for line in case.notes + case.differences:
            say(f"  {line}")
    return clean


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential.kthena")
    parser.add_argument("--kthena", type=Path, required=True, help="kthena-controller-manager")
    parser.add_argument("--examples", type=Path, help="a folder of manifests (searched deeply)")
    parser.add_argument("--dump", type=Path, help="write each side's objects here as JSON")
    parser.add_argument(
        "--steps",
        type=int,
        default=len(STEPS),
        choices=range(1, len(STEPS) + 1),
        help=f"how many of: {', '.join(name for name, _ in STEPS)} (default all)",
    )
    parser.add_argument("manifests", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = list(args.manifests)
    if args.examples:
        paths += sorted(args.examples.rglob("*.yaml"))
    cases = cases_of(paths)
    if not cases:
        parser.error("no ModelServing in the manifests given")
    logging.getLogger("kopf").setLevel(logging.ERROR)
    return 0 if run(args.kthena.resolve(), cases, dump=args.dump, steps=args.steps) else 1


if __name__ == "__main__":
    sys.exit(main())
