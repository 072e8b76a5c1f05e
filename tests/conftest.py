"""Shared fixtures: isolated Settings (a SQLite file under tmp_path), shipped scenarios, and one
real PostgreSQL server per test session (each test that needs it makes its own database), and
one throw-away Slurm cluster per session for the tests that need one."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bot.config import Settings, StorageSettings
from simulator import SCENARIO_DIR
from tests.servers.postgres import PostgresServer, start_postgres
from tests.servers.slurm import SlurmServers, start_slurm

if TYPE_CHECKING:
    from tests.servers.kube_apiserver import ControlPlane
    from tests.servers.kube_real_world import RealKube

# A suite started in the background of a non-interactive shell (`make test &`) inherits SIGINT
# ignored, and so would every process it starts; the tests stop `sim serve` and `approve` with
# Ctrl-C's signal as a person would, so the processes they start get the default handling.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_stream_handler_left_on_the_root_logger() -> Iterator[None]:
    """A test that runs a command in-process (`bot.cli.main.main`) leaves the root logger a
    StreamHandler on that test's captured stderr. pytest closes the capture when the test ends,
    and a later test's background thread (a server logging its start) then hit it: "--- Logging
    error --- I/O operation on closed file" in the CI log. Removed after each test (pytest's own
    capture handlers are subclasses, kept)."""
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if type(h) is logging.StreamHandler]:
        root.removeHandler(handler)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"))


@pytest.fixture
def scenario_dir() -> Path:
    return Path(SCENARIO_DIR)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Debian's PostgreSQL on 127.0.0.1, started once for the whole session."""
    with start_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def slurm_servers() -> Iterator[SlurmServers]:
    """A throw-away Slurm cluster on 127.0.0.1 (tests/servers/slurm.py), started once for the
    whole session by the first test that needs it (tests/slurm, the Cluster contract suite)."""
    with start_slurm() as servers:
        yield servers


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The SQLAlchemy URL of a new, empty database on the session's PostgreSQL."""
    return postgres_server.url(postgres_server.create_database())


@pytest.fixture(scope="session")
def kube_control_plane() -> Iterator[ControlPlane]:
    """etcd + the pinned upstream kube-apiserver on 127.0.0.1, started once for the session
    (tests/servers/kube_apiserver.py; a missing binary fails, never skips)."""
    from tests.servers.kube_apiserver import start_control_plane  # kubernetes: only here

    with start_control_plane() as plane:
        yield plane


@pytest.fixture(scope="session")
def real_kube(
    kube_control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealKube]:
    """Admin access to the session's kube-apiserver; `real_kube.kubeconfig` is the bot's own
    ServiceAccount bound to exactly deploy/kubernetes/base/clusterrole.yaml (+ the node
    agent's Role). Tests call `real_kube.reset()` to start from an empty cluster."""
    from tests.servers.kube_real_world import RealKube

    kube = RealKube(kube_control_plane)
    kube.kubeconfig = kube.bot_kubeconfig(tmp_path_factory.mktemp("kube") / "bot.kubeconfig")
    yield kube
    kube.close()
