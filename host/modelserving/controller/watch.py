"""A lean list-and-watch of the ModelServings' Pods and Services, and of the Nodes, in a thread.

kopf watches ModelServings and ConfigMaps. The Pods are another matter: 800 of them turning
Ready bring thousands of events, and kopf's machinery around each one (causes, handler
invocation, its logging context) was the larger half of the controller's CPU while a big
ModelServing came up. ``Watch`` reads the same event stream (objects with the ModelServing name
label) and hands each object straight to the controller, which keeps it in its cache and queues
the ModelServing. Nodes too: every Node's heartbeat is an event every few seconds, whatever
the ModelServings do.

- It lists first, then watches from the list's resourceVersion, with bookmarks; a watch the
  server ends is resumed from the last resourceVersion seen.
- When that version is too old (410 Gone), it lists again, and ``relisted`` is called so that
  every ModelServing lists its objects again on its next pass (a deletion missed in between
  would otherwise stay in the cache).
- Errors are retried after a pause (1 s, doubling to 30 s); ``stop`` ends it within a second or
  two (the open response is shut down).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from modelserving.controller.kube import ApiError, Kube, Resource, loads

log = logging.getLogger("modelserving.controller")

WATCH_TIMEOUT_S = 300
"""The server ends a watch after this long; it is then resumed."""
MAX_PAUSE_S = 30.0

Handler = Callable[[str, Mapping[str, Any]], None]


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): list again."""


class Watch:
    """Lists and watches ``res`` with ``selector`` in ``namespace`` (None: every namespace)."""

    def __init__(
        self,
        kube: Kube,
        res: Resource,
        selector: str,
        namespace: str | None,
        handler: Handler,
        relisted: Callable[[], None] | None = None,
        listed: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.kube = kube
        self.res = res
        self.selector = selector
        self.namespace = namespace
        self.handler = handler
        self.relisted = relisted
        self.listed = listed
        """Called with every object of a list after the first, once each was handled: what
        is not among them was deleted while the watch was gone."""
        self.events = 0
        self.lists = 0
        self._stop = threading.Event()
        self._response: Any = None
        self._lock = threading.Lock()
        where = namespace or "all namespaces"
        self._thread = threading.Thread(
            target=self._run, name=f"watch-{res.plural}-{where}", daemon=True
        )

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed
                response.shutdown()
        self._thread.join(timeout=10)

    # --- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        pause = 1.0
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
                pause = 1.0
            except Gone:
                version = None
            except Exception as exc:  # an outage: try again, never stop watching
                if self._stop.is_set():
                    return
                log.warning(
                    "watch of %s: %s (again in %.0f s)", self.res.plural, _describe(exc), pause
                )
                self._stop.wait(pause)
                pause = min(pause * 2, MAX_PAUSE_S)

    def _list(self) -> str:
        items, version = self.kube.list_at(self.res, self.namespace, self.selector)
        self.lists += 1
        if self.lists > 1 and self.relisted is not None:
            self.relisted()
        for obj in items:
            self.handler("ADDED", obj)
        if self.lists > 1 and self.listed is not None:
            self.listed(items)
        return version

    def _watch(self, version: str) -> str:
        """Read one watch until the server ends it; the last resourceVersion seen."""
        query = {
            "watch": "1",
            "labelSelector": self.selector,
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_TIMEOUT_S),
        }
        raw = self.kube.stream(self.res, self.namespace, query, WATCH_TIMEOUT_S + 30)
        with self._lock:
            self._response = raw
        try:
            for line in raw:
                if self._stop.is_set():
                    break
                if line.strip():
                    version = self._event(loads(line), version)
        finally:
            with self._lock:
                self._response = None
            raw.release_conn()
        return version

    def _event(self, event: Mapping[str, Any], version: str) -> str:
        kind = str(event.get("type") or "")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiError(int(obj.get("code") or 0), "WATCH", self.res.plural, str(obj))
        seen = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind != "BOOKMARK":
            self.events += 1
            self.handler(kind, obj)
        return seen


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"
