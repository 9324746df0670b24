"""Lease-based leader election, so that of several controller replicas only one acts at a time.

The controller's ``run`` builds a :class:`LeaderElector`, waits in :meth:`LeaderElector.acquire`
before it starts to reconcile, keeps the lease with :meth:`LeaderElector.start_renewing` and
exits when its ``on_lost`` callback fires; on a clean shutdown it stops renewing and calls
:meth:`LeaderElector.release` so that a standby replica takes over at once instead of after the
lease expires.

The semantics follow client-go's ``leaderelection`` on a ``coordination.k8s.io/v1`` Lease:

- a lease whose holder is empty, or whose ``renewTime + leaseDurationSeconds`` has passed, may be
  taken; taking it from another holder increments ``leaseTransitions`` and sets ``acquireTime``;
- every write is a create or a replace with the ``resourceVersion`` that was read, so of two
  candidates racing for an expired lease only one wins (the other gets 409 Conflict);
- the leader renews every ``retry_period_s`` and gives up (``on_lost``) when no renewal has
  succeeded for ``renew_deadline_s``, which is shorter than the lease duration, so it stops
  acting before anyone else may start; it also gives up at once when it sees the lease held by
  another identity;
- releasing clears the holder and sets ``leaseDurationSeconds`` to 1.

Expiry is judged by the lease's own ``renewTime`` against this process's clock, so the replicas'
clocks must agree to well within the difference between lease duration and renew deadline.
Needs the verbs get, create and update on ``leases`` in the lease's namespace.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from urllib3.exceptions import HTTPError

logger = logging.getLogger(__name__)

DEFAULT_LEASE_NAME = "modelserving-controller"
_JITTER = 0.2
"""``acquire`` waits between ``retry_period_s`` and ``(1 + _JITTER) * retry_period_s``."""

Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``); injectable for tests."""


def default_identity() -> str:
    """``<hostname>_<random hex>``: unique per process even for replicas sharing a hostname."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the lease lives, who we are, and the timings (as in client-go, in seconds)."""

    namespace: str
    name: str = DEFAULT_LEASE_NAME
    identity: str = field(default_factory=default_identity)
    lease_duration_s: float = 15.0
    """How long a lease stays valid after its last renewal (written rounded up to a second)."""
    renew_deadline_s: float = 10.0
    """How long the leader keeps trying to renew before it gives up leadership."""
    retry_period_s: float = 2.0
    """Time between two attempts to acquire or renew."""

    def __post_init__(self) -> None:
        for what in ("namespace", "name", "identity"):
            if not getattr(self, what):
                raise ValueError(f"leader election: {what} must not be empty")
        if not (self.lease_duration_s > self.renew_deadline_s > self.retry_period_s > 0):
            raise ValueError(
                "leader election: timings must satisfy lease_duration_s > renew_deadline_s > "
                f"retry_period_s > 0 (got lease_duration_s={self.lease_duration_s}, "
                f"renew_deadline_s={self.renew_deadline_s}, "
                f"retry_period_s={self.retry_period_s})"
            )


class MicroTime(dt.datetime):
    """A UTC datetime that goes on the wire as a Kubernetes MicroTime.

    The client serialises datetimes with ``isoformat()``, which drops the fraction when the
    microseconds are zero; the API server parses MicroTime with a fixed six-digit fraction and
    refuses such a value with 400 Bad Request. The client's models keep datetime subclasses, so
    every time this module writes is a ``MicroTime``.
    """

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        utc = self.astimezone(dt.UTC) if self.tzinfo is not None else self
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    @classmethod
    def at(cls, seconds: float) -> MicroTime:
        """The instant ``seconds`` after the epoch."""
        return cls.fromtimestamp(seconds, tz=dt.UTC)

    @classmethod
    def of(cls, value: dt.datetime) -> MicroTime:
        """The same instant (a naive ``value`` is taken as UTC)."""
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return cls.combine(aware.date(), aware.timetz())


class LeaderElector:
    """Acquires, renews and releases one Lease for one identity.

    Thread-safe: the renewing thread and the caller's :meth:`release` never interleave, and no
    renewal happens after a release (until the next :meth:`acquire`).
    """

    def __init__(
        self,
        api_client: Any,
        config: LeaderElectionConfig,
        clock: Clock = time.time,
        coordination: Any = None,
    ) -> None:
        """``coordination`` defaults to ``CoordinationV1Api(api_client)`` (tests pass a fake)."""
        self.config = config
        self._clock = clock
        self._api: Any = (
            coordination if coordination is not None else client.CoordinationV1Api(api_client)
        )
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._is_leader = False
        self._lost_to: str | None = None
        """The other holder seen by the last attempt, if any."""
        self._last_renewal: float | None = None

    @property
    def is_leader(self) -> bool:
        """True from a successful acquire or renewal until leadership is lost or released."""
        return self._is_leader

    @property
    def lease(self) -> str:
        """``namespace/name`` of the lease, for messages."""
        return f"{self.config.namespace}/{self.config.name}"

    def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lease; True if we hold it now. Never raises."""
        with self._lock:
            return self._attempt(deadline=None)

    def acquire(self, stop: threading.Event) -> bool:
        """Try every retry period until we lead (True) or ``stop`` is set (False)."""
        self._released.clear()
        logger.info("waiting for leadership of lease %s as %s", self.lease, self.config.identity)
        while not stop.is_set():
            if self.try_acquire_or_renew():
                logger.info(
                    "acquired leadership of lease %s as %s", self.lease, self.config.identity
                )
                return True
            period = self.config.retry_period_s * (1 + random.uniform(0, _JITTER))
            stop.wait(period)
        return False

    def renew_loop(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew every retry period until ``stop`` is set or :meth:`release` is called.

        Calls ``on_lost()`` once, then returns, when no renewal has succeeded for the renew
        deadline, when the lease is seen held by another identity, or when renewing fails
        unexpectedly (so a leader never keeps acting without its lease).
        """
        try:
            lost = self._renew_until_lost(stop)
        except Exception:
            logger.exception("renewing lease %s failed unexpectedly", self.lease)
            self._is_leader = False
            lost = True
        if not lost:
            return
        try:
            on_lost()
        except Exception:
            logger.exception("the on_lost callback of lease %s failed", self.lease)

    def start_renewing(
        self, on_lost: Callable[[], None], stop: threading.Event | None = None
    ) -> threading.Thread:
        """Run :meth:`renew_loop` in a started daemon thread (``stop`` defaults to a new one)."""
        thread = threading.Thread(
            target=self.renew_loop,
            args=(stop or threading.Event(), on_lost),
            name=f"lease-renew-{self.config.name}",
            daemon=True,
        )
        thread.start()
        return thread

    def release(self) -> bool:
        """Hand the lease back if we hold it, so that others can take it at once.

        Stops any renewing thread from renewing again. Errors are logged and ignored; True if
        the lease was handed back.
        """
        with self._lock:
            self._released.set()
            self._is_leader = False
            try:
                lease = self._api.read_namespaced_lease(
                    self.config.name, self.config.namespace, _request_timeout=self._timeout(None)
                )
                if _spec(lease).holder_identity != self.config.identity:
                    return False
                now = MicroTime.at(self._clock())
                lease.spec = client.V1LeaseSpec(
                    holder_identity="",
                    lease_duration_seconds=1,
                    acquire_time=now,
                    renew_time=now,
                    lease_transitions=_spec(lease).lease_transitions or 0,
                )
                self._api.replace_namespaced_lease(
                    self.config.name,
                    self.config.namespace,
                    lease,
                    _request_timeout=self._timeout(None),
                )
            except (client.ApiException, HTTPError, OSError, ValueError) as e:
                logger.warning("could not release lease %s: %s", self.lease, _describe(e))
                return False
            logger.info("released lease %s as %s", self.lease, self.config.identity)
            return True

    def _renew_until_lost(self, stop: threading.Event) -> bool:
        """True when leadership was lost, False when told to stop."""
        last = self._last_renewal if self._last_renewal is not None else self._clock()
        while not stop.wait(self.config.retry_period_s):
            deadline = last + self.config.renew_deadline_s
            with self._lock:
                if self._released.is_set():
                    return False
                renewed = self._clock() < deadline and self._attempt(deadline)
            if renewed:
                last = self._clock()
                continue
            if self._lost_to is not None:
                logger.warning(
                    "lost leadership of lease %s: now held by %s", self.lease, self._lost_to
                )
            elif self._clock() >= deadline:
                logger.warning(
                    "lost leadership of lease %s: not renewed for %.1fs",
                    self.lease,
                    self.config.renew_deadline_s,
                )
            else:
                continue
            self._is_leader = False
            return True
        return False

    def _attempt(self, deadline: float | None) -> bool:
        """One read and at most one write; the caller holds ``_lock``."""
        self._lost_to = None
        try:
            won = self._read_and_write(deadline)
        except client.ApiException as e:
            if e.status == 409:
                logger.debug("lease %s: lost a race (409 Conflict)", self.lease)
            else:
                logger.warning("lease %s: %s", self.lease, _describe(e))
            return False
        except (HTTPError, OSError, ValueError) as e:
            logger.warning("lease %s: %s", self.lease, _describe(e))
            return False
        if won:
            self._is_leader = True
            self._last_renewal = self._clock()
        return won

    def _read_and_write(self, deadline: float | None) -> bool:
        name, namespace = self.config.name, self.config.namespace
        try:
            lease = self._api.read_namespaced_lease(
                name, namespace, _request_timeout=self._timeout(deadline)
            )
        except client.ApiException as e:
            if e.status != 404:
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=name, namespace=namespace),
                spec=self._new_spec(previous=None),
            )
            self._api.create_namespaced_lease(
                namespace, body, _request_timeout=self._timeout(deadline)
            )
            return True
        spec = _spec(lease)
        holder = spec.holder_identity or ""
        if holder and holder != self.config.identity and self._is_valid(spec):
            self._is_leader = False
            self._lost_to = holder
            return False
        lease.spec = self._new_spec(previous=spec)
        self._api.replace_namespaced_lease(
            name, namespace, lease, _request_timeout=self._timeout(deadline)
        )
        return True

    def _new_spec(self, previous: Any) -> Any:
        """The spec we write: renewed if we held the lease, taken over otherwise."""
        now = MicroTime.at(self._clock())
        duration = max(1, math.ceil(self.config.lease_duration_s))
        if previous is None:
            return client.V1LeaseSpec(
                holder_identity=self.config.identity,
                lease_duration_seconds=duration,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            )
        transitions = previous.lease_transitions or 0
        ours = previous.holder_identity == self.config.identity
        acquired = previous.acquire_time if ours and previous.acquire_time else now
        return client.V1LeaseSpec(
            holder_identity=self.config.identity,
            lease_duration_seconds=duration,
            acquire_time=MicroTime.of(acquired),
            renew_time=now,
            lease_transitions=transitions if ours else transitions + 1,
            preferred_holder=previous.preferred_holder,
            strategy=previous.strategy,
        )

    def _is_valid(self, spec: Any) -> bool:
        """Whether the lease's holder may still count on it (by its own duration)."""
        if spec.renew_time is None:
            return False
        duration = spec.lease_duration_seconds or math.ceil(self.config.lease_duration_s)
        renewed: dt.datetime = MicroTime.of(spec.renew_time)
        return renewed.timestamp() + duration > self._clock()

    def _timeout(self, deadline: float | None) -> float:
        """Per-request timeout: what is left until ``deadline``, at most the renew deadline."""
        limit = self.config.renew_deadline_s
        if deadline is None:
            return limit
        return min(limit, max(0.1, deadline - self._clock()))


def _spec(lease: Any) -> Any:
    return lease.spec if lease.spec is not None else client.V1LeaseSpec()


def _describe(error: BaseException) -> str:
    if isinstance(error, client.ApiException):
        return f"API error {error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"
