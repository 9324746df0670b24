"""What runs in a container: the fields a plugin could use to take over a privileged container
without touching its privileges.

Privileges are compared by container name (``modelserving.chain.pss``), so a plugin that leaves
a privileged container's ``securityContext`` alone passes that comparison whatever else it does
to the container. Yet replacing its image, command or arguments, setting ``LD_PRELOAD`` or
``BASH_ENV`` in its env, mounting a volume over its ``/bin``, or adding an ``exec`` probe or
lifecycle hook runs the plugin's code with the container's privileges. ``changes`` lists, for
the containers it is given, each such field that differs between the template and the patched
Pod; ``modelserving.chain.policy.PatchValidator`` picks the containers (those the template
grants what the policy would not let a plugin add) and decides. This module knows no policy.

Nor is what runs only the container's own: a privileged container that executes a file from an
emptyDir an init container fills, or reads its configuration from a volume a sidecar writes,
runs whatever the writer put there. ``shared_volumes`` follows this from the containers it is
given: the volumes they mount (but hostPath volumes, which have controls of their own, and the
types the kubelet mounts read-only) are theirs, a container that mounts one of them writable
writes them, and what such a writer mounts is its in turn; ``new_writers`` lists the containers
of the patched Pod that write such a volume and did not in the template.

What runs: ``image``, ``command``, ``args``, ``workingDir``, ``env``, ``envFrom``,
``volumeMounts`` and ``volumeDevices`` (with the definition of each volume they name),
``lifecycle``, and the ``exec`` handler of each probe; and, for the Pod, ``shareProcessNamespace``
(another container would see, and could signal, the privileged container's processes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from modelserving.api.hook import PatchOperation
from modelserving.chain import pss
from modelserving.chain.jsonpatch import split_tokens
from modelserving.chain.shapes import as_list, as_map

RUNS = (
    "image",
    "command",
    "args",
    "workingDir",
    "env",
    "envFrom",
    "volumeMounts",
    "volumeDevices",
    "lifecycle",
)
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_READ_CONTAINER_FIELDS = frozenset({*RUNS, *PROBES, "name"})
_READ_SPEC_FIELDS = frozenset({"volumes", "shareProcessNamespace", *pss.CONTAINER_KINDS})


ALWAYS_READ_ONLY = frozenset({"configMap", "secret", "downwardAPI", "projected", "image"})
"""Volume types the kubelet mounts read-only whatever a mount says: no container writes them."""


class Shared(NamedTuple):
    """The volumes that feed the containers ``shared_volumes`` was given, and who writes them.

    ``volumes``: each such volume and the container it is protected for (one that mounts it);
    ``writers``: each other container that writes one of them, and the first it writes;
    ``roots``: for each of both kinds of container, the given container it leads to."""

    volumes: dict[str, str]
    writers: dict[str, str]
    roots: dict[str, str]
    aliases: dict[str, str] = {}  # noqa: RUF012 - never changed: a new map for every Shared
    """Each volume of ``volumes`` its container does not mount itself, and the one of the same
    storage it mounts."""

    def chain(self, volume: str, through: str | None = None) -> str:
        """``volume 'tools' that container 'agent' mounts``, through the writers between (``volume
        'tools2', the storage of volume 'tools' that ...`` for another name of its storage: a
        volume of ``aliases``, or ``through``, a patched Pod's name for ``volume``)."""
        reader = self.volumes[volume]
        mounted = self.aliases.get(volume, volume)
        named = volume if through is None else through
        text = f"volume {named!r} that {reader} mounts"
        if named != mounted:
            text = f"volume {named!r}, the storage of volume {mounted!r} that {reader} mounts"
        if reader in self.writers:
            text += f", which writes {self.chain(self.writers[reader])}"
        return text


class Writer(NamedTuple):
    """A container of the patched Pod that writes ``volume`` and did not in the template: new
    (``added``; ``path`` is the container) or given a writable mount (``path`` is the mount).
    ``through``: the name it mounts, when that is another volume of the same storage."""

    subject: str
    volume: str
    path: str
    added: bool
    through: str | None = None


class Change(NamedTuple):
    """A field of what ``subject`` runs that the patch changed, at ``path`` (patched Pod)."""

    subject: str
    field: str
    path: str


def may_change(op: PatchOperation) -> bool:
    """Whether ``op`` can change what a container runs: False for paths ``changes`` does not read
    (metadata, scheduling fields, a container's resources, ports or securityContext...); a
    property test checks this."""
    if op["op"] == "test":
        return False
    tokens = split_tokens(op["path"])
    if len(tokens) < 2:
        return True
    if tokens[0] != "spec" or tokens[1] not in _READ_SPEC_FIELDS:
        return False
    if tokens[1] in pss.CONTAINER_KINDS:
        return len(tokens) < 4 or tokens[3] in _READ_CONTAINER_FIELDS
    return True


def containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, str, int, Mapping[str, Any]]]:
    """``(subject, kind, index, container)`` of every container, as ``pss`` names them."""
    for kind, _, i, container in pss.containers_of(as_map(pod.get("spec"))):
        yield pss.container_subject(kind, container), kind, i, container


def changes(
    before: Mapping[str, Any], after: Mapping[str, Any], subjects: Sequence[str]
) -> Iterator[Change]:
    """For each of ``subjects`` (containers of ``before``), the fields of what it runs that differ
    in ``after``; a container ``after`` no longer has runs nothing. Then ``shareProcessNamespace``
    when it is newly set (named after the first subject)."""
    if not subjects:
        return
    spec_b, spec_a = as_map(before.get("spec")), as_map(after.get("spec"))
    if spec_b is spec_a:
        return
    old = {s: c for s, _, _, c in containers(before) if s in subjects}
    vols_b, vols_a = _by_name(spec_b.get("volumes")), _by_name(spec_a.get("volumes"))
    same_volumes = spec_b.get("volumes") is spec_a.get("volumes")
    for subject, kind, i, new in containers(after):  # a subject names its kind too
        was = old.get(subject)
        if was is None or (was is new and same_volumes):
            continue
        base = f"/spec/{kind}/{i}"
        for field in RUNS:
            if not _same(was.get(field), new.get(field)):
                yield Change(subject, field, f"{base}/{field}")
        for probe in PROBES:
            if not _same(_exec(was, probe), _exec(new, probe)):
                yield Change(subject, f"{probe} exec", f"{base}/{probe}")
        for name in _mounted(new):
            j, volume = vols_a.get(name, (-1, None))
            if j >= 0 and not _same(vols_b.get(name, (-1, None))[1], volume):
                yield Change(subject, f"volume {name!r}", f"/spec/volumes/{j}")
    if _set(spec_a.get("shareProcessNamespace")) and not _set(spec_b.get("shareProcessNamespace")):
        yield Change(subjects[0], "process namespace", "/spec/shareProcessNamespace")


def shared_volumes(pod: Mapping[str, Any], subjects: Sequence[str]) -> Shared:
    """The volumes of ``pod`` that ``subjects`` (containers of ``pod``) mount, the containers
    that write them, the volumes those mount, and so on (``Shared``). Not hostPath volumes nor
    those of ``ALWAYS_READ_ONLY`` types."""
    spec = as_map(pod.get("spec"))
    open_ = {
        name: storage(as_map(volume))
        for name, (_, volume) in _by_name(spec.get("volumes")).items()
        if _writable_type(as_map(volume))
    }
    listed = list(containers(pod))
    volumes: dict[str, str] = {}
    aliases: dict[str, str] = {}
    writers: dict[str, str] = {}
    roots = {s: s for s in subjects}
    readers = set(subjects)
    while readers:
        for subject, _, _, container in listed:
            if subject in readers:
                for name in _mounted(container):
                    if name in open_:
                        volumes.setdefault(name, subject)
                        # another volume of the same storage is the same files
                        key = open_[name]
                        for other, other_key in open_.items():
                            if key is not None and other_key == key and other not in volumes:
                                volumes[other] = subject
                                aliases[other] = name
        readers = set()
        for subject, _, _, container in listed:
            if subject in roots:
                continue
            for _, _, name in _writes(container, volumes):
                writers[subject] = name
                roots[subject] = roots[volumes[name]]
                readers.add(subject)
                break
    return Shared(volumes, writers, roots, aliases)


def new_writers(
    before: Mapping[str, Any], after: Mapping[str, Any], shared: Shared
) -> Iterator[Writer]:
    """The containers of ``after`` that write a volume of ``shared`` (from ``shared_volumes`` of
    ``before``) and are neither one it was given nor a writer in ``before``."""
    if not shared.volumes:
        return
    old = {s for s, _, _, _ in containers(before)}
    # the patched Pod's volumes of another name that store in what a shared volume stores in
    # (a second volume of the same claim): writing one writes the other
    kept = _by_name(as_map(before.get("spec")).get("volumes"))
    stores: dict[tuple[str, ...], str] = {}
    for name in shared.volumes:
        key = storage(as_map(kept[name][1])) if name in kept else None
        if key is not None:
            stores.setdefault(key, name)
    targets = {name: name for name in shared.volumes}
    if stores:
        for name, (_, volume) in _by_name(as_map(after.get("spec")).get("volumes")).items():
            key = storage(as_map(volume)) if name not in targets else None
            if key is not None and key in stores and _writable_type(as_map(volume)):
                targets[name] = stores[key]
    for subject, kind, i, container in containers(after):
        if subject in shared.roots:
            continue
        for field, j, name in _writes(container, targets):
            through = None if targets[name] == name else name
            if subject in old:
                yield Writer(
                    subject, targets[name], f"/spec/{kind}/{i}/{field}/{j}", False, through
                )
            else:
                yield Writer(subject, targets[name], f"/spec/{kind}/{i}", True, through)
            break


def _writes(
    container: Mapping[str, Any], volumes: Mapping[str, str]
) -> Iterator[tuple[str, int, str]]:
    """``(field, index, volume)`` of each mount of ``container`` that writes one of ``volumes``:
    a volumeMount without ``readOnly: true``, any volumeDevice (a raw block device)."""
    for field in ("volumeMounts", "volumeDevices"):
        for j, mount in enumerate(as_list(container.get(field))):
            mount = as_map(mount)
            name = mount.get("name")
            writable = field == "volumeDevices" or mount.get("readOnly") is not True
            if writable and isinstance(name, str) and name in volumes:
                yield field, j, name


PER_VOLUME = frozenset({"emptyDir", "ephemeral", "gitRepo"})
"""Volume types whose storage is the volume's own, made for it: no other volume names it."""


def storage(volume: Mapping[str, Any]) -> tuple[str, ...] | None:
    """What a volume stores its files in, as far as another volume of another name may store in
    the same place; None for a volume whose storage is its own (``PER_VOLUME``). A claim is
    known by its name; an inline CSI volume by its driver (what its attributes name is the
    driver's to say), any other type by the type alone (an NFS export, a cloud disk...: two
    volumes of the type may name one place, or one inside the other). So two volumes of one
    storage are always taken as one; two of another may be too."""
    kinds = sorted(k for k in volume if k != "name")
    if not kinds or any(k in PER_VOLUME for k in kinds):
        return None
    if kinds == ["persistentVolumeClaim"]:
        return (
            "persistentVolumeClaim",
            str(as_map(volume["persistentVolumeClaim"]).get("claimName")),
        )
    if kinds == ["csi"]:
        return ("csi", str(as_map(volume["csi"]).get("driver")))
    return tuple(kinds)


def _writable_type(volume: Mapping[str, Any]) -> bool:
    kinds = [k for k in volume if k != "name"]
    return bool(kinds) and not any(k == "hostPath" or k in ALWAYS_READ_ONLY for k in kinds)


def _exec(container: Mapping[str, Any], probe: str) -> Any:
    return as_map(container.get(probe)).get("exec")


def _mounted(container: Mapping[str, Any]) -> list[str]:
    names = []
    for field in ("volumeMounts", "volumeDevices"):
        for mount in as_list(container.get(field)):
            name = as_map(mount).get("name")
            if isinstance(name, str):
                names.append(name)
    return names


def _by_name(volumes: Any) -> dict[str, tuple[int, Any]]:
    """Volumes by name, each with its index (the first of a name: the validator keeps them
    unique)."""
    out: dict[str, tuple[int, Any]] = {}
    for i, volume in enumerate(as_list(volumes)):
        name = as_map(volume).get("name")
        if isinstance(name, str):
            out.setdefault(name, (i, volume))
    return out


def _same(a: Any, b: Any) -> bool:
    """JSON equality (so true is not 1)."""
    if a is b:
        return True
    if type(a) is str and type(b) is str:
        return a == b
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _set(flag: Any) -> bool:
    return flag is not None and flag is not False
