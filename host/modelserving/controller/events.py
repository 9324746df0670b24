"""Posts core/v1 Events about ModelServing objects and their Pods, like client-go's recorder.

The controller's reconciler calls ``EventRecorder.record`` from its worker threads. As with
client-go's correlator, repeats are folded and floods are cut:

- the same (involved object, type, reason, message) seen again within ``AGGREGATE_WINDOW``
  seconds bumps the existing Event's ``count`` and ``lastTimestamp`` (a merge patch) instead of
  creating another Event; the last ``CACHE_SIZE`` such keys are remembered;
- each involved object may emit ``SPAM_BURST`` events at once, then one per
  ``SPAM_REFILL_SECONDS`` (a token bucket, like ``EventSourceObjectSpamFilter``); the rest are
  dropped and counted in ``dropped``.

Events are best effort: an API failure is logged as a warning and never raised.
"""

from __future__ import annotations

import logging
import secrets
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kubernetes.client.exceptions import ApiException

from modelserving.controller.kube import JSON, MERGE_PATCH, ApiError, Kube, Resource

EVENTS = Resource("", "v1", "events")
log = logging.getLogger(__name__)

EVENT_TYPES: Final = frozenset({"Normal", "Warning"})
MAX_MESSAGE: Final = 1024
"""Characters; a longer message is cut and ends with an ellipsis."""
AGGREGATE_WINDOW: Final = 600.0
"""Seconds since an Event was last bumped during which a repeat patches it."""
CACHE_SIZE: Final = 4096
SPAM_BURST: Final = 25
SPAM_REFILL_SECONDS: Final = 300.0
REQUEST_TIMEOUT: Final = 10.0
"""Seconds an Event request may take: a slow API server must not hold the workers long."""
_MAX_NAME: Final = 253
_SUFFIX_LEN: Final = 1 + 16

_Key = tuple[str, str, str, str]


@dataclass
class _Posted:
    """An Event already in the API server, for aggregation."""

    name: str
    namespace: str
    count: int
    last: float


@dataclass
class _Bucket:
    tokens: float
    updated: float


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cut(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    return message[: MAX_MESSAGE - 1] + "…"


def _reference(obj: Mapping[str, Any]) -> dict[str, str]:
    """The involvedObject of an Event about ``obj`` (its JSON); ValueError without a name."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    if not ref["name"] or not ref["kind"]:
        raise ValueError("an Event needs an involved object with a kind and metadata.name")
    return {key: str(value) for key, value in ref.items() if value}


def _describe(error: Exception) -> str:
    if isinstance(error, ApiException):
        return f"{error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"


class EventsApi:
    """The two calls of CoreV1Api the recorder makes, as plain JSON requests: importing the
    generated CoreV1Api costs the controller about 80 MB of memory."""

    def __init__(self, api_client: Any) -> None:
        self._kube = Kube(api_client)

    def create_namespaced_event(self, namespace: str, body: dict[str, Any], **_: Any) -> None:
        self._call("POST", EVENTS.path(namespace), body, JSON)

    def patch_namespaced_event(
        self, name: str, namespace: str, body: dict[str, Any], **_: Any
    ) -> None:
        self._call("PATCH", EVENTS.path(namespace, name), body, MERGE_PATCH)

    def _call(self, method: str, path: str, body: dict[str, Any], content_type: str) -> None:
        try:
            self._kube.request(method, path, body, content_type=content_type)
        except ApiError as exc:
            raise ApiException(status=exc.status, reason=exc.reason) from None


class EventRecorder:
    """Records Events for the controller; thread-safe, never raises on API failures.

    ``core`` defaults to ``EventsApi(api_client)``; tests pass a fake with
    ``create_namespaced_event`` and ``patch_namespaced_event``. ``clock`` gives epoch seconds.
    """

    def __init__(
        self,
        api_client: Any,
        component: str = "modelserving-controller",
        host: str | None = None,
        clock: Callable[[], float] = time.time,
        core: Any = None,
    ) -> None:
        # Any: the fakes of the unit tests stand in for CoreV1Api, which accepts dict bodies.
        self._core: Any = core if core is not None else EventsApi(api_client)
        self._component = component
        self._host = host if host is not None else socket.gethostname()
        self._clock = clock
        self._lock = threading.Lock()
        self._posted: OrderedDict[_Key, _Posted] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self.dropped = 0
        """Events refused by the spam guard."""

    def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Post (or bump) an Event about ``obj``, the involved object's JSON.

        ValueError when ``type_`` is not Normal or Warning or ``obj`` has no kind or name.
        """
        if type_ not in EVENT_TYPES:
            raise ValueError(f"event type {type_!r} is not one of {sorted(EVENT_TYPES)}")
        ref = _reference(obj)
        message = _cut(message)
        source = ref.get("uid") or "/".join(
            ref.get(k, "") for k in ("apiVersion", "kind", "namespace", "name")
        )
        key = (source, type_, reason, message)
        # One lock across the API call: repeats of a key are bumped in order, so counts never
        # go backwards; REQUEST_TIMEOUT bounds how long other workers wait.
        with self._lock:
            now = self._clock()
            if not self._allow(source, now):
                self.dropped += 1
                log.debug(
                    "event dropped by the spam guard: %s %s/%s %s: %s",
                    ref["kind"], ref.get("namespace", ""), ref["name"], reason, message,
                )  # fmt: skip
                return
            posted = self._posted.get(key)
            if posted is not None and now - posted.last <= AGGREGATE_WINDOW:
                self._posted.move_to_end(key)
                if self._patch(posted, now, ref):
                    return
            self._create(key, ref, type_, reason, message, now)

    def _allow(self, source: str, now: float) -> bool:
        """Take a token from ``source``'s bucket, refilled one per SPAM_REFILL_SECONDS."""
        bucket = self._buckets.get(source)
        if bucket is None:
            bucket = self._buckets[source] = _Bucket(tokens=SPAM_BURST, updated=now)
            if len(self._buckets) > CACHE_SIZE:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(source)
            refill = max(0.0, now - bucket.updated) / SPAM_REFILL_SECONDS
            bucket.tokens = min(float(SPAM_BURST), bucket.tokens + refill)
            bucket.updated = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _patch(self, posted: _Posted, now: float, ref: Mapping[str, str]) -> bool:
        """Bump an Event; False when it is gone (404) and a new one must be created."""
        body = {"count": posted.count + 1, "lastTimestamp": _timestamp(now)}
        try:
            self._core.patch_namespaced_event(
                posted.name,
                posted.namespace,
                body,
                _content_type="application/merge-patch+json",
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status == 404:
                return False
            self._warn("patch", posted.name, ref, error)
            return True
        except Exception as error:
            self._warn("patch", posted.name, ref, error)
            return True
        posted.count += 1
        posted.last = now
        return True

    def _create(
        self,
        key: _Key,
        ref: Mapping[str, str],
        type_: str,
        reason: str,
        message: str,
        now: float,
    ) -> None:
        # Events about cluster-scoped objects live in "default", as client-go puts them.
        namespace = ref.get("namespace") or "default"
        name = f"{ref['name'][: _MAX_NAME - _SUFFIX_LEN]}.{secrets.token_hex(8)}"
        stamp = _timestamp(now)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": dict(ref),
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": self._component, "host": self._host},
            "reportingComponent": self._component,
            "reportingInstance": self._host,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self._core.create_namespaced_event(namespace, body, _request_timeout=REQUEST_TIMEOUT)
        except Exception as error:
            self._posted.pop(key, None)
            self._warn("create", name, ref, error)
            return
        self._posted[key] = _Posted(name=name, namespace=namespace, count=1, last=now)
        self._posted.move_to_end(key)
        if len(self._posted) > CACHE_SIZE:
            self._posted.popitem(last=False)

    @staticmethod
    def _warn(verb: str, name: str, ref: Mapping[str, str], error: Exception) -> None:
        log.warning(
            "could not %s Event %s about %s %s/%s: %s",
            verb, name, ref["kind"], ref.get("namespace", ""), ref["name"], _describe(error),
        )  # fmt: skip
