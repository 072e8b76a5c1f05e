"""Fixtures for the real-Slurm tests: the session's throw-away cluster (`slurm_servers`, in
tests/conftest.py) reset to idle before each test, and a SlurmCluster pointed at its slurmrestd
with an operator (root) token and at `scontrol` with the cluster's own slurm.conf."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from integrations.slurm import SlurmCluster
from tests.servers.slurm import SlurmServers, make_slurm_cluster


@pytest.fixture
def slurm(slurm_servers: SlurmServers) -> SlurmServers:
    """The session's cluster, idle: no jobs, no drains, no comments."""
    slurm_servers.reset()
    return slurm_servers


@pytest.fixture
def cluster(slurm: SlurmServers) -> Iterator[SlurmCluster]:
    adapter = make_slurm_cluster(slurm)
    yield adapter
    adapter.close()
