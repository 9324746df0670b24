"""LeaderElector against an in-memory CoordinationV1Api with resourceVersion checks."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from modelserving.controller.leader import LeaderElectionConfig, LeaderElector, MicroTime

NS = "ns"
LEASE = "modelserving-controller"
T0 = 1_800_000_000.0


class Clock:
    """A settable clock; ``tick`` seconds pass on every read of the lease."""

    def __init__(self, now: float = T0) -> None:
        self.now = now
        self.tick = 0.0

    def __call__(self) -> float:
        return self.now


class FakeCoordination:
    """Leases stored as deep copies; replace checks resourceVersion like the API server."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.leases: dict[tuple[str, str], Any] = {}
        self.version = 0
        self.fail_with: int | None = None
        self.before_write: Callable[[], None] | None = None
        self.writes: list[dict[str, Any]] = []

    def _check(self) -> None:
        if self.fail_with is not None:
            raise client.ApiException(status=self.fail_with, reason="injected")

    def _store(self, namespace: str, body: Any) -> Any:
        with client.ApiClient() as api:
            self.writes.append(api.sanitize_for_serialization(body))
        self.version += 1
        stored = body.model_copy(deep=True)
        stored.metadata.resource_version = str(self.version)
        stored.metadata.namespace = namespace
        self.leases[(namespace, stored.metadata.name)] = stored
        return stored.model_copy(deep=True)

    def read_namespaced_lease(self, name: str, namespace: str, **_: Any) -> Any:
        self.clock.now += self.clock.tick
        self._check()
        lease = self.leases.get((namespace, name))
        if lease is None:
            raise client.ApiException(status=404, reason="Not Found")
        return lease.model_copy(deep=True)

    def create_namespaced_lease(self, namespace: str, body: Any, **_: Any) -> Any:
        self._check()
        if self.before_write is not None:
            self.before_write()
        if (namespace, body.metadata.name) in self.leases:
            raise client.ApiException(status=409, reason="AlreadyExists")
        return self._store(namespace, body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: Any, **_: Any) -> Any:
        self._check()
        if self.before_write is not None:
            self.before_write()
        current = self.leases.get((namespace, name))
        if current is None:
            raise client.ApiException(status=404, reason="Not Found")
        if body.metadata.resource_version != current.metadata.resource_version:
            raise client.ApiException(status=409, reason="Conflict")
        return self._store(namespace, body)

    def spec(self) -> Any:
        return self.leases[(NS, LEASE)].spec

    def put(self, holder: str, renewed: float, duration: int = 15, transitions: int = 3) -> None:
        when = dt.datetime.fromtimestamp(renewed, tz=dt.UTC)
        spec = client.V1LeaseSpec(
            holder_identity=holder,
            lease_duration_seconds=duration,
            acquire_time=when,
            renew_time=when,
            lease_transitions=transitions,
        )
        self._store(NS, client.V1Lease(metadata=client.V1ObjectMeta(name=LEASE), spec=spec))


def config(identity: str = "me", **timings: float) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        namespace=NS,
        identity=identity,
        lease_duration_s=timings.get("lease_duration_s", 15.0),
        renew_deadline_s=timings.get("renew_deadline_s", 10.0),
        retry_period_s=timings.get("retry_period_s", 2.0),
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api(clock: Clock) -> FakeCoordination:
    return FakeCoordination(clock)


def elector(api: FakeCoordination, identity: str = "me", **timings: float) -> LeaderElector:
    return LeaderElector(None, config(identity, **timings), clock=api.clock, coordination=api)


def test_config_defaults_and_identity() -> None:
    one, two = LeaderElectionConfig(namespace=NS), LeaderElectionConfig(namespace=NS)
    assert one.name == LEASE
    assert (one.lease_duration_s, one.renew_deadline_s, one.retry_period_s) == (15, 10, 2)
    assert one.identity != two.identity
    assert "_" in one.identity


@pytest.mark.parametrize(
    "timings",
    [
        {"lease_duration_s": 10.0, "renew_deadline_s": 10.0},
        {"renew_deadline_s": 2.0, "retry_period_s": 2.0},
        {"retry_period_s": 0.0},
        {"lease_duration_s": 5.0, "renew_deadline_s": 10.0},
    ],
)
def test_config_rejects_bad_timings(timings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="lease_duration_s > renew_deadline_s > retry_period_s"):
        config("me", **timings)


def test_config_rejects_empty_namespace() -> None:
    with pytest.raises(ValueError, match="namespace must not be empty"):
        LeaderElectionConfig(namespace="")


def test_creates_missing_lease(api: FakeCoordination) -> None:
    me = elector(api)
    assert not me.is_leader
    assert me.try_acquire_or_renew()
    assert me.is_leader
    spec = api.spec()
    assert spec.holder_identity == "me"
    assert spec.lease_duration_seconds == 15
    assert spec.lease_transitions == 0
    assert spec.acquire_time == spec.renew_time == dt.datetime.fromtimestamp(T0, tz=dt.UTC)


def test_times_are_written_as_micro_time(api: FakeCoordination) -> None:
    """Whole seconds keep their six zeros, or the API server refuses the Lease."""
    assert elector(api).try_acquire_or_renew()
    spec = api.writes[-1]["spec"]
    assert spec["renewTime"] == spec["acquireTime"] == "2027-01-15T08:00:00.000000Z"
    assert MicroTime.at(T0 + 0.123456).isoformat() == "2027-01-15T08:00:00.123456Z"
    local = dt.datetime(2027, 1, 15, 9, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert MicroTime.of(local).isoformat() == "2027-01-15T08:00:00.000000Z"


def test_renews_own_lease_keeping_acquire_time(api: FakeCoordination, clock: Clock) -> None:
    me = elector(api)
    assert me.try_acquire_or_renew()
    clock.now += 5
    assert me.try_acquire_or_renew()
    spec = api.spec()
    assert spec.renew_time == dt.datetime.fromtimestamp(T0 + 5, tz=dt.UTC)
    assert spec.acquire_time == dt.datetime.fromtimestamp(T0, tz=dt.UTC)
    assert spec.lease_transitions == 0
    assert api.writes[-1]["spec"]["acquireTime"] == "2027-01-15T08:00:00.000000Z"


def test_refuses_while_another_holder_is_fresh(api: FakeCoordination, clock: Clock) -> None:
    api.put("other", renewed=T0 - 14, duration=15)
    me = elector(api)
    assert not me.try_acquire_or_renew()
    assert not me.is_leader
    assert api.spec().holder_identity == "other"
    assert len(api.writes) == 1


def test_uses_the_leases_own_duration(api: FakeCoordination) -> None:
    api.put("other", renewed=T0 - 20, duration=30)
    assert not elector(api).try_acquire_or_renew()


def test_takes_over_an_expired_lease(api: FakeCoordination) -> None:
    api.put("other", renewed=T0 - 15, duration=15, transitions=3)
    me = elector(api)
    assert me.try_acquire_or_renew()
    spec = api.spec()
    assert spec.holder_identity == "me"
    assert spec.lease_transitions == 4
    assert spec.acquire_time == spec.renew_time == dt.datetime.fromtimestamp(T0, tz=dt.UTC)


def test_conflict_means_someone_else_won(api: FakeCoordination) -> None:
    api.put("other", renewed=T0 - 60)

    def rival_writes_first() -> None:
        api.before_write = None
        api.put("rival", renewed=T0)

    api.before_write = rival_writes_first
    me = elector(api)
    assert not me.try_acquire_or_renew()
    assert not me.is_leader
    assert api.spec().holder_identity == "rival"


def test_create_race_returns_false(api: FakeCoordination) -> None:
    api.before_write = lambda: api.put("rival", renewed=T0)
    assert not elector(api).try_acquire_or_renew()


@pytest.mark.parametrize("status", [403, 500])
def test_api_errors_return_false(api: FakeCoordination, status: int) -> None:
    api.fail_with = status
    assert not elector(api).try_acquire_or_renew()


def test_connection_errors_return_false(api: FakeCoordination) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise ConnectionRefusedError("connection refused")

    api.read_namespaced_lease = refuse  # type: ignore[method-assign]
    assert not elector(api).try_acquire_or_renew()


def test_acquire_waits_until_the_lease_expires(api: FakeCoordination, clock: Clock) -> None:
    api.put("other", renewed=T0, duration=15)
    clock.tick = 1.0
    me = elector(api, lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.001)
    assert me.acquire(threading.Event())
    assert me.is_leader
    assert clock.now == pytest.approx(T0 + 15)


def test_acquire_returns_false_when_stopped(api: FakeCoordination) -> None:
    api.put("other", renewed=T0, duration=15)
    stop = threading.Event()
    stop.set()
    assert not elector(api).acquire(stop)


def lost_counter() -> tuple[list[None], Callable[[], None]]:
    calls: list[None] = []
    return calls, lambda: calls.append(None)


def test_renew_loop_gives_up_after_the_renew_deadline(api: FakeCoordination, clock: Clock) -> None:
    me = elector(api, lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.001)
    assert me.try_acquire_or_renew()
    api.fail_with = 500
    clock.tick = 0.25
    calls, on_lost = lost_counter()
    me.renew_loop(threading.Event(), on_lost)
    assert calls == [None]
    assert not me.is_leader
    assert T0 + 2 <= clock.now <= T0 + 2.5


def test_renew_loop_survives_short_failures(api: FakeCoordination, clock: Clock) -> None:
    me = elector(api, lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.001)
    assert me.try_acquire_or_renew()
    clock.tick = 0.5
    stop = threading.Event()
    reads = 0
    real_read = api.read_namespaced_lease

    def flaky_read(name: str, namespace: str, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        if reads == 40:
            stop.set()
        if reads % 3:  # two failures (1 s) between successes
            raise client.ApiException(status=503, reason="Unavailable")
        return real_read(name, namespace, **kwargs)

    api.read_namespaced_lease = flaky_read  # type: ignore[method-assign]
    calls, on_lost = lost_counter()
    me.renew_loop(stop, on_lost)
    assert calls == []
    assert me.is_leader


def test_renew_loop_gives_up_at_once_when_taken(api: FakeCoordination, clock: Clock) -> None:
    me = elector(api, lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.001)
    assert me.try_acquire_or_renew()
    api.put("other", renewed=T0)
    calls, on_lost = lost_counter()
    me.renew_loop(threading.Event(), on_lost)
    assert calls == [None]
    assert clock.now == T0


def test_renew_loop_stops_without_on_lost(api: FakeCoordination) -> None:
    me = elector(api)
    assert me.try_acquire_or_renew()
    stop = threading.Event()
    stop.set()
    calls, on_lost = lost_counter()
    me.renew_loop(stop, on_lost)
    assert calls == []
    assert me.is_leader


def test_start_renewing_runs_a_daemon_thread(api: FakeCoordination, clock: Clock) -> None:
    me = elector(api, lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.001)
    assert me.try_acquire_or_renew()
    api.fail_with = 500
    clock.tick = 1.0
    lost = threading.Event()
    thread = me.start_renewing(lost.set)
    assert thread.daemon
    assert lost.wait(5)
    thread.join(5)
    assert not thread.is_alive()


def test_release_clears_the_holder(api: FakeCoordination, clock: Clock) -> None:
    me = elector(api)
    assert me.try_acquire_or_renew()
    clock.now += 3
    assert me.release()
    assert not me.is_leader
    spec = api.spec()
    assert not spec.holder_identity
    assert spec.lease_duration_seconds == 1
    assert spec.lease_transitions == 0
    other = elector(api, identity="other")
    assert other.try_acquire_or_renew()
    assert api.spec().lease_transitions == 1


def test_release_stops_renewing(api: FakeCoordination) -> None:
    me = elector(api, lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.001)
    assert me.try_acquire_or_renew()
    assert me.release()
    calls, on_lost = lost_counter()
    me.renew_loop(threading.Event(), on_lost)
    assert calls == []
    assert not api.spec().holder_identity


def test_release_leaves_another_holders_lease(api: FakeCoordination) -> None:
    api.put("other", renewed=T0)
    assert not elector(api).release()
    assert api.spec().holder_identity == "other"


def test_release_ignores_errors(api: FakeCoordination) -> None:
    me = elector(api)
    assert me.try_acquire_or_renew()
    api.fail_with = 500
    assert not me.release()
    assert not me.is_leader
