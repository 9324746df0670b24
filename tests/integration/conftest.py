"""Session fixtures running a real control plane for every test under ``tests/integration``.

- Every test in this folder gets the ``integration`` marker.
- The binaries are built (or found in the cache) once, in a thread started after collection
  while the tests of the other folders run (this folder runs last); the first integration test
  waits for it before its timeout starts, so a cold build is not charged to a test's timeout.
- ``cluster`` (session): a control plane in the session's temp folder (not ``.cluster/``, so a
  developer's ``make cluster-up`` is untouched), with kubeconfig, admin ``ApiClient`` and
  kubectl. Its processes die with pytest. After a session with failures the component logs are
  kept and their folder is printed in the summary.
- Under pytest-xdist (``make test`` runs this folder with ``-n 2 --dist loadfile``) each worker
  is a session of its own, with its own control plane; a worker's kept logs are handed to the
  controlling process, which prints them all.
- ``namespace`` (per test): a fresh namespace whose ``default`` ServiceAccount exists.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from modelserving import devcluster

HERE = Path(__file__).parent.resolve()
_BINARIES = pytest.StashKey[dict[str, Path]]()
_BUILD_ERROR = pytest.StashKey[str]()
_BUILD = pytest.StashKey["_Build"]()
_KEPT_LOGS = pytest.StashKey[Path]()
_WORKERS_KEPT_LOGS = pytest.StashKey[list[Path]]()
_WORKER_OUTPUT_KEY = "devcluster_kept_logs"
"""The key of ``workeroutput`` under which an xdist worker names the logs it kept."""


def _is_integration(item: pytest.Item) -> bool:
    return HERE in Path(item.path).resolve().parents


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_integration(item):
            item.add_marker(pytest.mark.integration)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the binaries (when not cached) while the other tests run.

    ``testpaths`` puts this folder last, so a cold build (minutes) overlaps the unit and wasm
    tests, which leave a core idle; ``make test`` starts it even earlier, in the background, and
    this build then only waits for that one (the build's file lock).
    """
    if session.config.option.collectonly or not any(map(_is_integration, session.items)):
        return
    if devcluster.cached_binaries() is not None:
        return
    reporter: Any = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("devcluster: building the control plane meanwhile (first run: minutes)")
    session.config.stash[_BUILD] = _Build()


class _Build(threading.Thread):
    """``devcluster.build_all`` in a thread; ``result()`` waits for it."""

    def __init__(self) -> None:
        super().__init__(name="devcluster-build", daemon=True)
        self.started_at = time.monotonic()
        self.binaries: dict[str, Path] | None = None
        self.error: str | None = None
        self.start()

    def run(self) -> None:
        try:
            self.binaries = devcluster.build_all(quiet=True)
        except devcluster.BuildError as error:
            self.error = str(error)

    def result(self) -> dict[str, Path]:
        self.join()
        if self.binaries is None:
            raise devcluster.BuildError(self.error or "the build thread ended without binaries")
        return self.binaries


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Before the first integration test, and before its timeout starts, wait for the build."""
    stash = item.config.stash
    build = stash.get(_BUILD, None)
    if build is not None and _is_integration(item):
        del stash[_BUILD]
        reporter: Any = item.config.pluginmanager.get_plugin("terminalreporter")
        waited = time.monotonic()
        try:
            stash[_BINARIES] = build.result()
        except devcluster.BuildError as error:
            stash[_BUILD_ERROR] = str(error)
        if reporter is not None:
            reporter.write_line(
                f"devcluster: build finished {time.monotonic() - build.started_at:.0f}s after "
                f"it started (waited {time.monotonic() - waited:.0f}s for it)"
            )
    yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker: hand the folder of the logs it kept to the controlling process."""
    output = getattr(session.config, "workeroutput", None)
    kept = session.config.stash.get(_KEPT_LOGS, None)
    if output is not None and kept is not None:
        output[_WORKER_OUTPUT_KEY] = str(kept)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """In the controlling process of xdist: collect the logs a worker kept."""
    kept = getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT_KEY)
    if kept is not None:
        node.config.stash.setdefault(_WORKERS_KEPT_LOGS, []).append(Path(kept))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    kept = [config.stash[_KEPT_LOGS]] if _KEPT_LOGS in config.stash else []
    for folder in kept + config.stash.get(_WORKERS_KEPT_LOGS, []):
        terminalreporter.write_line(f"devcluster: control plane logs kept in {folder}")


@dataclass(frozen=True)
class Cluster:
    """A running control plane and an admin client for it."""

    state: devcluster.ClusterState
    api_client: Any
    """A ``kubernetes.client.ApiClient`` authenticated as the admin (``system:masters``)."""

    @property
    def kubeconfig(self) -> Path:
        return self.state.kubeconfig

    @property
    def kubectl(self) -> Path:
        return self.state.kubectl

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api_client)


@pytest.fixture(scope="session")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    stash = request.config.stash
    if _BUILD_ERROR in stash:
        pytest.fail(f"the dev cluster could not be built: {stash[_BUILD_ERROR]}", pytrace=False)
    binaries = stash.get(_BINARIES, None) or devcluster.build_all(quiet=True)
    directory = tmp_path_factory.getbasetemp() / "devcluster"
    try:
        state = devcluster.up(directory, binaries=binaries, die_with_parent=True, timeout=90)
    except devcluster.ClusterError as error:
        devcluster.down(directory, keep_logs=True)
        stash[_KEPT_LOGS] = directory / "logs"
        pytest.fail(f"the dev cluster did not start: {error}", pytrace=False)
    api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(state.kubeconfig)
    )
    try:
        yield Cluster(state, api_client)
    finally:
        api_client.close()
        failed = request.session.testsfailed > 0
        devcluster.down(directory, keep_logs=failed)
        if failed:
            stash[_KEPT_LOGS] = directory / "logs"


def wait_for(what: str, check: Any, timeout: float = 60.0, interval: float = 0.2) -> Any:
    """Poll ``check()`` until it returns something truthy; fail naming ``what`` after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace for one test (deleted afterwards without waiting)."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{secrets.token_hex(3)}"
    core = cluster.core
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    def has_default_sa() -> bool:
        accounts = core.list_namespaced_service_account(
            name, field_selector="metadata.name=default"
        )
        return bool(accounts.items)

    wait_for(f"ServiceAccount default in {name}", has_default_sa, timeout=30)
    yield name
    core.delete_namespace(name)
