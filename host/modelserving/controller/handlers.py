"""The kopf side of the controller: watches that feed the work queue, and running kopf.

Handlers are ``on.event`` only, so kopf writes nothing to our objects (no finalizers, no state
annotations) and keeps no diff base or progress for them; they are coroutines that only take a
lock to queue a key, so kopf calls them on its loop instead of handing each event to a thread.
kopf runs standalone because leadership is the controller's Lease. Watched:
- ModelServings: their key is queued;
- ConfigMaps: the keys of ModelServings whose plugin modules come from them are queued.

Pods and Services with the ModelServing name label, and Nodes, are watched by
``controller.watch``, not kopf: thousands of Pod events while a big ModelServing comes up, and
a heartbeat of every Node every few seconds.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import kopf

from modelserving.api import labels

if TYPE_CHECKING:
    from modelserving.controller.manager import Controller

log = logging.getLogger("modelserving.controller")


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def connection_info(api_client: Any) -> kopf.ConnectionInfo:
    """kopf's credentials taken from the ``kubernetes`` client configuration we already use."""
    cfg = api_client.configuration
    token = None
    header = cfg.get_api_key_with_prefix("authorization") if cfg.api_key else None
    if header:
        token = header.removeprefix("Bearer ").strip()
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert or None,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file or None,
        private_key_path=cfg.key_file or None,
        token=token,
    )


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: our handlers are ``on.event`` only, so nothing ever reads one.

    kopf builds an object's "essence" on every event (a deep copy of everything but metadata
    and status) to diff it for change handlers; with 800 Pods going through their phases that
    copying was the largest single CPU cost of the controller process. An empty essence skips it.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class NoProgress(kopf.ProgressStorage):
    """No handler progress to keep (``on.event`` handlers are not retried by kopf); nothing is
    written to our objects, and essences pass through uncopied."""

    def fetch(self, *, key: kopf.HandlerId, body: kopf.Body) -> kopf.ProgressRecord | None:
        return None

    def store(
        self,
        *,
        key: kopf.HandlerId,
        record: kopf.ProgressRecord,
        body: kopf.Body,
        patch: kopf.Patch,
    ) -> None:
        return None

    def purge(self, *, key: kopf.HandlerId, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence


def registry_for(controller: Controller) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(controller.api_client)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.execution.max_workers = 4
        settings.persistence.diffbase_storage = NoDiffBase()
        settings.persistence.progress_storage = NoProgress()

    @kopf.on.event(labels.GROUP, labels.VERSION, labels.PLURAL, registry=registry)
    async def model_serving(event: Mapping[str, Any], **_: Any) -> None:
        controller.model_serving_event(event.get("type"), event.get("object") or {})

    @kopf.on.event("", "v1", "configmaps", registry=registry)
    async def config_map(event: Mapping[str, Any], **_: Any) -> None:
        controller.config_map_changed(*_key(event.get("object") or {}))

    return registry


def run_kopf(
    controller: Controller, stop: threading.Event, ready: Callable[[], None] | None
) -> None:
    """Run kopf in this thread until ``stop`` is set."""
    namespaces = list(controller.config.watch_namespaces)
    ready_flag = threading.Event()
    if ready is not None:

        def announce() -> None:
            ready_flag.wait()
            if not stop.is_set():
                ready()

        threading.Thread(target=announce, name="kopf-ready", daemon=True).start()
    loop = asyncio.new_event_loop()
    try:
        kopf.run(
            loop=loop,
            registry=registry_for(controller),
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            stop_flag=stop,
            ready_flag=ready_flag,
        )
    finally:
        # kopf may stop on its own (it handles SIGINT/SIGTERM itself in the main thread); then
        # its thread waiting on ``stop`` must be released, or the interpreter cannot exit.
        stop.set()
        _close_loop(loop)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Finish what kopf left on its loop, so no connection is left to a finalizer."""
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        _abort_transports(loop)
    finally:
        loop.close()
        gc.collect()


def _abort_transports(loop: asyncio.AbstractEventLoop) -> None:
    """Abort the connections still open on ``loop`` and let their sockets close.

    A watch that kopf was reading when it was cancelled can leave its connection behind, no
    longer owned by any session; collected later, it would close its socket from a finalizer.
    A selector loop keeps its open transports (by file descriptor) in ``_transports``, which no
    public API exposes; a loop without it is left as it is.
    """
    transports = list(getattr(loop, "_transports", {}).values())
    for transport in transports:
        if transport is not None and not transport.is_closing():
            transport.abort()
    if transports:
        # abort() schedules connection_lost, which closes the socket, for the next iteration.
        loop.run_until_complete(asyncio.sleep(0))
