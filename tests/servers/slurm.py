"""A throw-away Slurm cluster (Debian's Slurm 22.05 daemons) on 127.0.0.1 for the real-Slurm tests.

`SlurmServers` writes slurm.conf, gres.conf and cgroup.conf into a private directory, makes
eight fake GPU character devices (`mknod ... c 195 N`), and starts, in the foreground so every
PID is ours: munged on a private socket, slurmctld, one `slurmd -N gpu-node-XX` per node (16
nodes x 8 GPUs, each slurmd on its own loopback port) and slurmrestd with JWT auth as the
unprivileged `nobody`. `CommunicationParameters=NoInAddrAny,NoCtldInAddrAny` keeps every daemon
on loopback; timers are short so a killed slurmd's node goes DOWN in well under a minute.
Stopping cancels the jobs, waits (bounded) for them to end, then stops only the PIDs it
started, then every process still carrying this cluster's `SLURM_CONF` (slurmstepd and job
steps, which slurmd forks into their own sessions). Each daemon starts in its own session, so a
Ctrl-C or SIGTERM to pytest's process group reaches pytest alone, whose SIGTERM handler and
atexit hook stop the cluster. When pytest is SIGKILLed instead, `owner.json` in the cluster's
directory names the dead owner, and the next session reaps that cluster (`reap_stale`) before
starting its own; clusters whose owner is alive (another session's) are left alone. A missing
binary fails the test naming the package (tools/setup/slurm.sh installs
them); nothing is ever skipped. The tests run as root (munged, slurmd and mknod need it).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from integrations.slurm import Labelling, Scontrol, SlurmCluster, SlurmRest
from tests.servers.prometheus import (
    PortTaken,
    free_port,
    on_free_port,
    poll,
    port_free,
    port_span,
    port_taken,
    stop_process,
)

PACKAGES = "slurmctld slurmd slurmrestd slurm-client munge slurm-wlm-jwt-plugin"
NODES = tuple(f"gpu-node-{i:02d}" for i in range(16))
GPUS_PER_NODE = 8
PARTITIONS = {"train": NODES[:12], "infer": NODES[12:]}
RACKS = {"rack-00": NODES[:8], "rack-01": NODES[8:]}
REST_VERSIONS = ("v0.0.38", "v0.0.37")
REST_USER = "nobody"
WORKDIR_PREFIX = "gpu-oncall-slurm-"
RESUME_EVERY = 1.0
"""Seconds between two resumes of a node that `reset` finds drained or down."""
OWNER_FILE = "owner.json"
#: Slurm daemons take longer than Prometheus: node registration and slurmrestd's plugin loading.
WAIT_SECONDS = 60.0


#: The cluster's RebootProgram: a node "reboots" by its slurmd restarting with `-b` (report
#: the node rebooted), which is what slurmctld waits for after `scontrol reboot`. Run by the
#: node's slurmd, it finds that slurmd among its ancestors, then, detached, stops it and starts
#: a new one with the same environment (so `reap_cluster` still finds it). Every reboot is
#: logged to log/reboots.
FAKE_REBOOT = """#!/bin/bash
pid=$PPID
while [ "$pid" -gt 1 ]; do
  args=$(tr '\\0' ' ' < /proc/$pid/cmdline)
  case "$args" in *slurmd*" -N "*) break ;; esac
  pid=$(awk '{{print $4}}' /proc/$pid/stat)
done
node=$(echo "$args" | sed -E 's/.* -N ([^ ]+).*/\\1/')
echo "$(date +%s) $node" >> {work}/log/reboots
setsid bash -c "sleep 1; kill $pid; \\
  while [ -e /proc/$pid ] && ! grep -q ') Z' /proc/$pid/stat; do sleep 0.1; done; \\
  exec env SLURM_CONF={work}/slurm.conf {slurmd} -D -b -N $node -f {work}/slurm.conf \\
  >> {work}/log/slurmd.$node.out 2>&1" \\
  < /dev/null > /dev/null 2>&1 &
"""


def slurm_binary(name: str) -> str:
    """The absolute path of a Slurm/munge binary, or fail (never skip) naming the packages."""
    path = shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/usr/bin") / name) if p.exists()), None
    )
    if path is None:
        pytest.fail(
            f"'{name}' not found: install Debian's Slurm packages ({PACKAGES}) with "
            "tools/setup/slurm.sh; .ci/run does this in CI",
            pytrace=False,
        )
    return path


def free_port_range(count: int) -> int:
    """The first of `count` consecutive ports nothing listens on (one slurmd each), all in
    this worker's slice (`port_span`)."""
    high = port_span()[1]
    for _ in range(50):
        base = free_port()
        if base + count < high and all(port_free(base + i) for i in range(count)):
            return base
    pytest.fail(f"no {count} consecutive free ports on 127.0.0.1", pytrace=False)


@dataclass
class SlurmServers:
    """The running cluster: its config, its REST URL, and the moves tests make on it."""

    workdir: Path
    ctld_port: int = field(default_factory=free_port)
    rest_port: int = 0
    """Picked as slurmrestd starts (`_start_slurmrestd`)."""
    slurmd_base: int = field(default_factory=lambda: free_port_range(len(NODES)))
    munged: subprocess.Popen[bytes] | None = None
    slurmctld: subprocess.Popen[bytes] | None = None
    slurmd: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    slurmrestd: subprocess.Popen[bytes] | None = None

    @property
    def conf(self) -> Path:
        return self.workdir / "slurm.conf"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's CLI: this cluster's config, no ambient token."""
        env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
        return env | {"SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True) -> str:
        """Run a Slurm CLI command (scontrol, sbatch, squeue...) against this cluster."""
        done = subprocess.run(
            [slurm_binary(argv[0]), *argv[1:]],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if check and done.returncode != 0:
            pytest.fail(f"{' '.join(argv)} failed: {done.stderr.strip()}", pytrace=False)
        return done.stdout

    def token(self, user: str = "root", *, lifespan: int = 3600) -> str:
        """A JWT for `user`, minted by root (`scontrol token`)."""
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan}")
        return out.strip().partition("SLURM_JWT=")[2]

    def submit(
        self,
        *,
        node: str,
        name: str,
        gpus: int = GPUS_PER_NODE,
        requeue: bool = True,
        user: str = "nobody",
        nodes: int = 1,
    ) -> str:
        """Start a sleeping job holding `gpus` GPUs per node on `node` (a host list); its id."""
        out = self.run(
            "sbatch",
            "--parsable",
            f"--uid={user}",
            f"--job-name={name}",
            f"--nodelist={node}",
            f"--nodes={nodes}",
            f"--gres=gpu:h100:{gpus}",
            "--requeue" if requeue else "--no-requeue",
            "--chdir=/tmp",
            "--output=/dev/null",
            "--wrap=sleep 3600",
        )
        job = out.strip().split(";")[0]
        poll(
            lambda: self.job_state(job) == "RUNNING",
            what=f"job {job} running on {node}",
            detail=lambda: self._pending(job, node),
        )
        return job

    def _pending(self, job: str, node: str) -> str:
        """Why `job` is not running yet: its state and reason, the node's state, and the end of
        slurmctld's log (a job the scheduler's pass after its submit skips waits for the next
        periodic pass)."""
        said = self.run("squeue", "-h", "-j", job, "-o", "%T %r", check=False).strip()
        return (
            f"job {said or 'gone'}; {node} {self.node_state(node)}; slurmctld's log ends:\n"
            f"{self._output('slurmctld', 1500)}"
        )

    def job_state(self, job: str) -> str:
        out = self.run("squeue", "-h", "-j", job, "-o", "%T", check=False)
        return out.strip() or "GONE"

    def node_state(self, node: str) -> str:
        """`sinfo`'s long state of one node (idle, mixed, drained, down*, ...)."""
        return self.run("sinfo", "-h", "-N", "-n", node, "-o", "%T").strip().splitlines()[0]

    def drain(self, node: str, reason: str) -> None:
        """A drain by someone else (an admin, LBNL NHC), through scontrol as root."""
        self.run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        """A person's RESUME (scontrol as root)."""
        self.run("scontrol", "update", f"nodename={node}", "state=resume")

    def reset(self) -> None:
        """Back to an idle cluster between tests: cancel every job, resume every drain."""
        self._controller_answers()
        self.run("scancel", "--full", "--user=nobody", check=False)
        self.run("scancel", "--full", "--user=root", check=False)
        poll(lambda: not self.run("squeue", "-h", "-o", "%i").strip(), what="jobs to end")
        running = slurmd_nodes(self.conf)
        for node in NODES:
            if node not in running:  # killed by a test, or a fake reboot that did not come back
                self.start_slurmd(node)
        self.run("scontrol", "update", f"nodename={','.join(NODES)}", "comment=", check=False)
        for line in self.run("scontrol", "-o", "show", "reservation", check=False).splitlines():
            name = line.partition("ReservationName=")[2].split(" ", 1)[0]
            if name:
                self.run("scontrol", "delete", f"reservationname={name}", check=False)
        resumed: dict[str, float] = {}

        def resumed_idle() -> bool:
            """Resume each drained or down node (again, at most once a second: a node whose
            slurmd was just restarted can be marked down again, not responding yet, after a
            first resume, and would stay down), cancelling a reboot still pending on it
            (`@`: a resume leaves it pending), then whether every node is idle."""
            for node, state in self.states().items():
                stale = time.monotonic() - resumed.get(node, -RESUME_EVERY) >= RESUME_EVERY
                if not stale or state == "idle":
                    continue
                if "@" in state:
                    resumed[node] = time.monotonic()
                    self.run("scontrol", "cancel_reboot", node, check=False)
                if "drain" in state or "down" in state:
                    resumed[node] = time.monotonic()
                    self.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
            return self._all_idle()

        def left() -> str:
            busy = {node: state for node, state in self.states().items() if state != "idle"}
            return f"not idle: {busy}; slurmctld's log ends:\n{self._output('slurmctld', 1500)}"

        poll(resumed_idle, what="every node idle", seconds=WAIT_SECONDS, detail=left)

    def controller_lost(self) -> str:
        """How the session's slurmctld was lost (`exited with -6`, `stopped answering`); ""
        while it runs and answers `scontrol ping`."""
        process = self.slurmctld
        if process is not None and process.poll() is not None:
            return f"exited with {process.returncode}"
        if process is None or "is UP" not in self.run("scontrol", "ping", check=False):
            return "stopped answering"
        return ""

    def _controller_answers(self) -> None:
        """If slurmctld exited or stopped answering pings since the last test, start it again
        (with a clean state) so the session's later tests have a cluster, and fail this test
        with the lost controller's exit status and the end of its output (one CI run lost it
        partway through: every later Slurm test of that worker failed on `squeue`)."""
        how = self.controller_lost()
        if not how:
            return
        said = self._output("slurmctld", 4000) or "(none)"  # read before a restart replaces it
        process = self.slurmctld
        if process is not None and process.poll() is None:
            process.kill()
        stop_process(process)
        self._start_slurmctld()
        pytest.fail(
            f"the session's slurmctld {how} before this test (started again); its output "
            f"ended:\n{said}",
            pytrace=False,
        )

    def kill_slurmd(self, node: str) -> None:
        """SIGKILL one node's slurmd (a crashed node); `reset` starts it again."""
        process = self.slurmd.pop(node)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    # --- bring-up -------------------------------------------------------------------------

    def start(self) -> SlurmServers:
        if os.geteuid() != 0:
            pytest.fail(
                "the Slurm tests run as root (munged, slurmd and mknod of the fake GPUs need it)",
                pytrace=False,
            )
        self._write_config()
        self._start_munged()
        self._start_slurmctld()
        for node in NODES:
            self.start_slurmd(node)
        poll(
            self._all_idle,
            what=f"16 idle nodes (logs: {self.workdir / 'log'})",
            seconds=WAIT_SECONDS,
        )
        self._start_slurmrestd()
        return self

    def start_slurmd(self, node: str) -> None:
        """Start `node`'s slurmd. The one started before, if any, is waited for first: a fake
        reboot leaves it a zombie of ours (its new slurmd is detached), and a `Popen` dropped
        unwaited warns, as an error, in whichever test the collector then runs."""
        stop_process(self.slurmd.pop(node, None))
        (self.workdir / "spool" / node).mkdir(parents=True, exist_ok=True)
        self.slurmd[node] = self._spawn(
            [slurm_binary("slurmd"), "-D", "-N", node, "-f", str(self.conf)], f"slurmd.{node}"
        )

    def stop(self) -> None:
        """Cancel the jobs (their slurmstepd are not our children), then stop our PIDs."""
        if self.slurmctld is not None and self.slurmctld.poll() is None:
            self.run("scancel", "--full", "--user=nobody", check=False)
            self.run("scancel", "--full", "--user=root", check=False)
            deadline = time.monotonic() + 30
            while self.run("squeue", "-h", "-o", "%i", check=False).strip():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        processes = [self.slurmrestd, *self.slurmd.values(), self.slurmctld, self.munged]
        self.slurmrestd, self.slurmd, self.slurmctld, self.munged = None, {}, None, None
        for process in processes:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in processes:
            stop_process(process)
        reap_cluster(self.conf)

    def _write_config(self) -> None:
        work = self.workdir
        for sub in ("log", "state", "spool", "dev", "munge"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        (work / "munge").chmod(0o755)
        for index in range(GPUS_PER_NODE):
            device = work / "dev" / f"nvidia{index}"
            if not device.exists():
                os.mknod(device, 0o666 | 0o020000, os.makedev(195, index))
        key = work / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        jwt = work / "jwt.key"
        jwt.write_bytes(os.urandom(32))
        jwt.chmod(0o600)
        self.conf.write_text(self._slurm_conf())
        (work / "gres.conf").write_text(
            f"NodeName={_hostlist(NODES)} Name=gpu Type=h100 "
            f"File={work}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n"
        )
        (work / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n")
        reboot = work / "reboot"
        reboot.write_text(FAKE_REBOOT.format(work=work, slurmd=slurm_binary("slurmd")))
        reboot.chmod(0o755)

    def _slurm_conf(self) -> str:
        work = self.workdir
        lines = [
            "ClusterName=oncall",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={work}/munge/munge.socket.2,cred_expire=10",
            "AuthAltTypes=auth/jwt",
            f"AuthAltParameters=jwt_key={work}/jwt.key",
            "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny",
            f"StateSaveLocation={work}/state",
            f"SlurmdSpoolDir={work}/spool/%n",
            f"SlurmctldPidFile={work}/slurmctld.pid",
            f"SlurmdPidFile={work}/spool/%n/slurmd.pid",
            f"SlurmctldLogFile={work}/log/slurmctld.log",
            f"SlurmdLogFile={work}/log/slurmd.%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            # A batch job starts at the scheduler's pass after its submit (batch_sched_delay, ~3
            # s); one that pass skips waited for the periodic passes, 30 s (backfill) and 60 s
            # (main) by default, as long as the tests' polls. Every 5 s here instead.
            "SchedulerParameters=bf_interval=5,sched_interval=5",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "SlurmdParameters=config_overrides",
            "SlurmdTimeout=30",
            "SlurmctldTimeout=30",
            "MessageTimeout=5",
            "ReturnToService=2",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=300",
            "JobRequeue=1",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"RebootProgram={work}/reboot",
            "ResumeTimeout=30",
        ]
        port = self.slurmd_base
        for rack, nodes in RACKS.items():
            lines.append(
                f"NodeName={_hostlist(nodes)} NodeHostname=localhost NodeAddr=127.0.0.1 "
                f"Port=[{port}-{port + len(nodes) - 1}] CPUs=64 RealMemory=1000 "
                f"Gres=gpu:h100:{GPUS_PER_NODE} Feature=h100,{rack} State=UNKNOWN"
            )
            port += len(nodes)
        for name, nodes in PARTITIONS.items():
            default = "YES" if name == "train" else "NO"
            lines.append(
                f"PartitionName={name} Nodes={_hostlist(nodes)} Default={default} "
                "MaxTime=INFINITE State=UP"
            )
        return "\n".join(lines) + "\n"

    def _spawn(self, argv: Sequence[str], name: str) -> subprocess.Popen[bytes]:
        log = (self.workdir / "log" / f"{name}.out").open("wb")
        with log:
            return subprocess.Popen(  # in the cluster's directory: a crash's core dump too
                argv,
                cwd=self.workdir,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _start_munged(self) -> None:
        munge = self.workdir / "munge"
        self.munged = self._spawn(
            [
                slurm_binary("munged"),
                "--foreground",
                "--force",
                f"--key-file={munge / 'munge.key'}",
                f"--socket={munge / 'munge.socket.2'}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={munge / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ],
            "munged",
        )
        poll(lambda: (munge / "munge.socket.2").exists(), what="munged's socket")

    def _start_slurmctld(self) -> None:
        self.slurmctld = self._spawn(
            [slurm_binary("slurmctld"), "-D", "-c", "-f", str(self.conf)], "slurmctld"
        )

        def pinged() -> bool:
            self._alive(self.slurmctld, "slurmctld")
            out = self.run("scontrol", "ping", check=False)
            return "is UP" in out

        poll(pinged, what="slurmctld to answer scontrol ping", seconds=WAIT_SECONDS)

    def _start_slurmrestd(self) -> None:
        """Start slurmrestd on a port picked as it starts (`on_free_port`: picked again when
        another process took it first)."""

        def start(port: int) -> None:
            self.rest_port = port
            self.slurmrestd = self._spawn(self._rest_argv(), "slurmrestd")
            try:
                self._wait_rest()
            except PortTaken:
                stop_process(self.slurmrestd)
                raise

        on_free_port(start, what="slurmrestd")

    def _rest_argv(self) -> list[str]:
        return [
            slurm_binary("setpriv"),
            f"--reuid={REST_USER}",
            "--regid=nogroup",
            "--clear-groups",
            "env",
            "SLURM_JWT=daemon",
            slurm_binary("slurmrestd"),
            "-a",
            "rest_auth/jwt",
            "-s",
            ",".join(f"openapi/{v}" for v in REST_VERSIONS),
            f"127.0.0.1:{self.rest_port}",
        ]

    def _wait_rest(self) -> None:
        """Until slurmrestd answers a ping; PortTaken when it exited unable to bind."""
        token = self.token()
        log = self.workdir / "log" / "slurmrestd.out"
        with httpx.Client(base_url=self.rest_url, timeout=5.0) as http:

            def answers() -> bool:
                process = self.slurmrestd
                if port_taken(process, log):
                    raise PortTaken(self._output("slurmrestd", 2000))
                self._alive(process, "slurmrestd")
                headers = {"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token}
                try:
                    return http.get(f"/slurm/{REST_VERSIONS[0]}/ping", headers=headers).is_success
                except httpx.TransportError:
                    return False

            poll(answers, what=f"slurmrestd on {self.rest_url}", seconds=WAIT_SECONDS)

    def states(self) -> dict[str, str]:
        """Every node's `sinfo` long state (idle, mixed, drained, down*, ...)."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        return dict(line.split() for line in out.splitlines() if line.strip())

    def _all_idle(self) -> bool:
        self._alive(self.slurmctld, "slurmctld")
        states = self.states()
        return len(states) == len(NODES) and set(states.values()) == {"idle"}

    def _alive(self, process: subprocess.Popen[bytes] | None, name: str) -> None:
        if process is not None and process.poll() is not None:
            pytest.fail(
                f"{name} exited with {process.returncode}: {self._output(name, 2000)}",
                pytrace=False,
            )

    def _output(self, name: str, chars: int) -> str:
        """The last `chars` of what daemon `name` wrote (`log/<name>.out`: its log lines, and
        whatever it said on stderr, an assertion's message included); empty before any."""
        out = self.workdir / "log" / f"{name}.out"
        return out.read_text(errors="replace")[-chars:] if out.exists() else ""


def _hostlist(nodes: Sequence[str]) -> str:
    """`gpu-node-[00-07]` for consecutive gpu-node names (the fixture's own, always so)."""
    first, last = nodes[0].rsplit("-", 1)[1], nodes[-1].rsplit("-", 1)[1]
    return f"gpu-node-[{first}-{last}]"


LABELLING = Labelling(domain_features={"rack-": "gpu-oncall.io/rack"})


def make_slurm_cluster(
    servers: SlurmServers, *, user: str = "root", token: str | None = None, **options: Any
) -> SlurmCluster:
    """A SlurmCluster on this cluster: its slurmrestd with `user`'s token (root: an operator),
    and scontrol with its slurm.conf."""
    http = httpx.Client(base_url=servers.rest_url, timeout=10.0)
    rest = SlurmRest(http, user=user, token=token or servers.token(user))
    scontrol = Scontrol(environ=servers.env, conf=str(servers.conf))
    return SlurmCluster(rest, scontrol, labelling=LABELLING, **options)


@contextmanager
def start_slurm() -> Iterator[SlurmServers]:
    """A cluster for the duration of the block. Its directory is world-readable (slurmrestd
    runs as `nobody` and reads slurm.conf), so it lives outside pytest's 0700 tmp_path. Stale
    clusters of killed sessions are reaped first; this one is stopped on exit, on SIGTERM, and
    at interpreter exit, whichever comes first."""
    reap_stale()
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    workdir.chmod(0o755)
    (workdir / OWNER_FILE).write_text(json.dumps(identity(os.getpid())))
    servers = SlurmServers(workdir)
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            servers.stop()
            shutil.rmtree(workdir, ignore_errors=True)

    atexit.register(stop)
    restore = _stop_on_sigterm()
    try:
        yield servers.start()
    finally:
        stop()
        atexit.unregister(stop)
        restore()


def _stop_on_sigterm() -> Callable[[], None]:
    """Turn SIGTERM (`timeout`, a CI runner) into KeyboardInterrupt so the `finally` that stops
    the cluster runs; a handler someone else installed is kept. Returns the undo."""
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        return lambda: None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def identity(pid: int) -> dict[str, int | str]:
    """A process's pid and start time (field 22 of /proc/PID/stat): a reused pid differs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return {"pid": pid, "started": ""}
    return {"pid": pid, "started": stat.rsplit(")", 1)[1].split()[19]}


def reap_stale(tmp: Path | None = None) -> list[Path]:
    """Stop the clusters whose owning pytest has died (its `owner.json` names a pid that is gone
    or reused) and delete their directories. A directory without `owner.json` is not ours to
    judge and is left alone. Returns the directories reaped."""
    reaped = []
    for owner in sorted(Path(tmp or tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*/{OWNER_FILE}")):
        try:
            recorded = json.loads(owner.read_text())
        except (OSError, ValueError):
            continue
        if identity(int(recorded.get("pid", 0))) == recorded:
            continue  # its session is still running
        reap_cluster(owner.parent / "slurm.conf")
        shutil.rmtree(owner.parent, ignore_errors=True)
        reaped.append(owner.parent)
    return reaped


def cluster_processes(conf: Path) -> Iterator[Path]:
    """The `/proc/<pid>` of every process (but this one) whose environment has
    `SLURM_CONF=<conf>`: the fixture starts every daemon and job with it, and slurmd passes it
    on to slurmstepd and the job's steps, so these are exactly one cluster's processes."""
    wanted = f"SLURM_CONF={conf}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if wanted in (proc / "environ").read_bytes().split(b"\0"):
                yield proc
        except OSError:
            continue


def slurmd_nodes(conf: Path) -> set[str]:
    """The nodes whose slurmd runs, of the cluster configured by `conf` (ours, or one a fake
    reboot started detached): `slurmd ... -N <node>`, not a zombie."""
    nodes = set()
    for proc in cluster_processes(conf):
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if not args or not args[0].endswith(b"slurmd") or b"-N" not in args:
                continue
            if (proc / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue
        except (OSError, IndexError):
            continue
        at = args.index(b"-N")
        if at + 1 < len(args):
            nodes.add(args[at + 1].decode())
    return nodes


def reap_cluster(conf: Path) -> list[int]:
    """SIGKILL every process of the cluster configured by `conf` (`cluster_processes`).
    Returns the pids killed."""
    killed = []
    for proc in cluster_processes(conf):
        try:
            os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue
        killed.append(int(proc.name))
    return killed
