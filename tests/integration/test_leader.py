"""Two LeaderElectors on one real Lease: one leads, the other takes over on crash or release."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from kubernetes import client

from modelserving.controller.leader import LeaderElectionConfig, LeaderElector

from .conftest import Cluster, wait_for

LEASE = "leader-test"


@dataclass
class Replica:
    """One elector with the events a controller would hold around it."""

    elector: LeaderElector
    stop: threading.Event = field(default_factory=threading.Event)
    won: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def acquire_in_background(self) -> None:
        def run() -> None:
            if self.elector.acquire(self.stop):
                self.won.set()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def start_renewing(self) -> None:
        self.threads.append(self.elector.start_renewing(self.lost.set, self.stop))

    def crash(self) -> None:
        """Stop every thread without releasing the lease."""
        self.stop.set()
        for thread in self.threads:
            thread.join(10)
            assert not thread.is_alive()


Pair = Callable[..., tuple[Replica, Replica]]


@pytest.fixture
def pair(cluster: Cluster, namespace: str) -> Iterator[Pair]:
    """Makes replicas A and B on one lease with the given timings; crashes them afterwards."""
    made: list[Replica] = []

    def make(lease_s: float, renew_s: float, retry_s: float) -> tuple[Replica, Replica]:
        for identity in ("replica-a", "replica-b"):
            config = LeaderElectionConfig(
                namespace=namespace,
                name=LEASE,
                identity=identity,
                lease_duration_s=lease_s,
                renew_deadline_s=renew_s,
                retry_period_s=retry_s,
            )
            made.append(Replica(LeaderElector(cluster.api_client, config)))
        return made[-2], made[-1]

    yield make
    for replica in made:
        replica.crash()


def lease_spec(cluster: Cluster, namespace: str) -> client.V1LeaseSpec:
    lease = client.CoordinationV1Api(cluster.api_client).read_namespaced_lease(LEASE, namespace)
    assert lease.spec is not None
    return lease.spec


def test_standby_takes_over_when_the_leader_dies(
    cluster: Cluster, namespace: str, pair: Pair
) -> None:
    a, b = pair(3.0, 2.0, 0.5)
    assert a.elector.acquire(threading.Event())
    a.start_renewing()
    assert not b.elector.try_acquire_or_renew()
    b.acquire_in_background()
    assert not b.won.wait(4.0), "B took the lease while A was renewing it"
    assert lease_spec(cluster, namespace).holder_identity == "replica-a"

    a.crash()
    wait_for("B to take over the lease of the crashed A", b.won.is_set, timeout=3.0 + 4.0)
    spec = lease_spec(cluster, namespace)
    assert spec.holder_identity == "replica-b"
    assert spec.lease_transitions == 1
    assert not a.lost.is_set()

    # A wakes from its "crash" (a long pause): past its renew deadline, it gives up at once.
    b.start_renewing()
    a.stop.clear()
    a.start_renewing()
    wait_for("A to notice it lost the lease", a.lost.is_set, timeout=3.0)
    assert not a.elector.is_leader
    assert lease_spec(cluster, namespace).holder_identity == "replica-b"


def test_release_hands_over_at_once(cluster: Cluster, namespace: str, pair: Pair) -> None:
    # A long lease: a takeover within seconds can only come from the release.
    a, b = pair(30.0, 20.0, 0.5)
    assert a.elector.acquire(threading.Event())
    a.start_renewing()
    b.acquire_in_background()
    assert not b.won.wait(1.5)

    a.crash()
    assert a.elector.release()
    assert not a.elector.is_leader
    wait_for("B to take over the released lease", b.won.is_set, timeout=2.0)
    spec = lease_spec(cluster, namespace)
    assert spec.holder_identity == "replica-b"
    assert spec.lease_transitions == 1
    assert not a.lost.is_set()
