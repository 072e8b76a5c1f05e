"""Fixtures for the real-Slurm tests: one throw-away cluster per session (tests/servers/slurm.py),
reset to idle before each test, and a SlurmCluster pointed at its slurmrestd with an operator
(root) token and at `scontrol` with the cluster's own slurm.conf."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from integrations.slurm import Labelling, Scontrol, SlurmCluster, SlurmRest
from tests.servers.slurm import SlurmServers, start_slurm

LABELLING = Labelling(domain_features={"rack-": "gpu-oncall.io/rack"})


@pytest.fixture(scope="session")
def slurm_servers() -> Iterator[SlurmServers]:
    with start_slurm() as servers:
        yield servers


@pytest.fixture
def slurm(slurm_servers: SlurmServers) -> SlurmServers:
    """The session's cluster, idle: no jobs, no drains, no comments."""
    slurm_servers.reset()
    return slurm_servers


def make_slurm_cluster(
    servers: SlurmServers, *, user: str = "root", token: str | None = None, **options: object
) -> SlurmCluster:
    http = httpx.Client(base_url=servers.rest_url, timeout=10.0)
    rest = SlurmRest(http, user=user, token=token or servers.token(user))
    scontrol = Scontrol(environ=servers.env, conf=str(servers.conf))
    return SlurmCluster(rest, scontrol, labelling=LABELLING, **options)  # type: ignore[arg-type]


@pytest.fixture
def cluster(slurm: SlurmServers) -> Iterator[SlurmCluster]:
    adapter = make_slurm_cluster(slurm)
    yield adapter
    adapter.close()
