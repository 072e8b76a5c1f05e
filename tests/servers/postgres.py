"""A real PostgreSQL (Debian's `postgresql` package) on 127.0.0.1 for the production-storage tests.

`PostgresServer` runs `initdb` into a temporary directory and `pg_ctl start` on an ephemeral
port, listening on 127.0.0.1 only (no Unix socket outside the data directory). PostgreSQL
refuses to run as root, so when the tests run as root the server runs as the `postgres` system
user (created by the Debian package). One server per test session; each test gets its own
database (`fresh_database`). A missing binary fails the test naming the package; never a skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers.prometheus import free_port, poll

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
SYSTEM_USER = "postgres"
SUPERUSER = "oncall"


def pg_binary(name: str) -> str:
    """The newest Debian PostgreSQL's `name` (initdb, pg_ctl, psql), or fail naming the package."""
    for directory in PG_BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        pytest.fail(
            f"PostgreSQL's '{name}' not found (looked in /usr/lib/postgresql/*/bin and PATH): "
            "install Debian's package (apt-get install postgresql); .ci/run does this in CI",
            pytrace=False,
        )
    return found


@dataclass
class PostgresServer:
    """A running server; `url(db)` is the SQLAlchemy URL of one of its databases."""

    data_dir: Path
    port: int
    log_file: Path
    run_as: str | None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, *, database: str = "postgres") -> str:
        """Run one SQL command through `psql` (as the test superuser) and return its output."""
        command = [
            pg_binary("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER,
            "-d", database, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            pytest.fail(f"psql failed: {done.stderr.strip()}", pytrace=False)
        return done.stdout

    def create_database(self) -> str:
        """A new empty database; returns its name."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.psql(f'CREATE DATABASE "{name}"')
        return name

    def stop(self, *, mode: str = "fast") -> None:
        self._pg_ctl("stop", "-m", mode, "-w")

    def start(self) -> None:
        """(Re)start the server on the same port and data directory; wait until it accepts."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data_dir}"
        self._pg_ctl("start", "-w", "-t", "60", "-o", options, "-l", str(self.log_file))
        poll(self._accepts, what=f"PostgreSQL on 127.0.0.1:{self.port}")

    def _accepts(self) -> bool:
        command = [pg_binary("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)]
        return subprocess.run(command, capture_output=True, timeout=10, check=False).returncode == 0

    def _pg_ctl(self, *args: str) -> None:
        command = [pg_binary("pg_ctl"), "-D", str(self.data_dir), *args]
        done = subprocess.run(_as(self.run_as, command), capture_output=True, text=True, timeout=90)
        if done.returncode != 0:
            log = self.log_file.read_text()[-2000:] if self.log_file.exists() else ""
            pytest.fail(f"pg_ctl {args[0]} failed: {done.stderr.strip()} {log}", pytrace=False)


def _as(user: str | None, command: list[str]) -> list[str]:
    return ["runuser", "-u", user, "--", *command] if user else command


@contextmanager
def start_postgres() -> Iterator[PostgresServer]:
    """initdb + pg_ctl start in a temporary directory on a free 127.0.0.1 port; stop at exit."""
    initdb = pg_binary("initdb")
    run_as = SYSTEM_USER if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="gpu-oncall-pg-"))
    data_dir, log_file = root / "data", root / "postgres.log"
    try:
        if run_as is not None:
            entry = pwd.getpwnam(run_as)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        command = [initdb, "-D", str(data_dir), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
                   "--no-sync", "--locale=C"]  # fmt: skip
        done = subprocess.run(_as(run_as, command), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            pytest.fail(f"initdb failed: {done.stderr.strip()}", pytrace=False)
        with (data_dir / "postgresql.conf").open("a") as conf:
            # A test server: durability off (fsync) keeps the suite fast; the crash tests kill
            # the bot, not PostgreSQL, so nothing they check depends on fsync.
            conf.write("\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
            conf.write("max_connections = 200\n")
        server = PostgresServer(data_dir, free_port(), log_file, run_as)
        server.start()
        try:
            yield server
        finally:
            server.stop(mode="immediate")
    finally:
        shutil.rmtree(root, ignore_errors=True)
