"""The `scontrol` seam: the calls no served REST version has (requeue everywhere; drain and
resume on Slurm 22.05, whose REST node has no update), run as a subprocess.

The environment is the process's own minus `SLURM_JWT`: with it set, every Slurm CLI call
(even root's) runs as the token's user, so a token meant for slurmrestd would silently change
who drains nodes. Failures become `integrations.errors` naming the command and what to fix;
arguments are a list, never a shell string, and every value was validated by the caller.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence

from integrations.errors import ClusterError, ClusterForbidden, NodeNotFound

SCRUBBED = ("SLURM_JWT",)
#: How slurmctld refuses a non-operator (22.05 says "Invalid user id" to an update).
REFUSALS = ("access/permission denied", "access denied", "invalid user id")
Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class JobGone(ClusterError):
    """The job is no longer known to slurmctld (finished and purged, or never existed)."""

    retryable = False


class Scontrol:
    """Runs `scontrol` (at `path`) with a scrubbed environment and a timeout."""

    def __init__(
        self,
        path: str = "scontrol",
        *,
        conf: str | None = None,
        timeout_seconds: float = 20.0,
        environ: Mapping[str, str] | None = None,
        runner: Runner = subprocess.run,
    ) -> None:
        self.path, self.timeout, self._run = path, timeout_seconds, runner
        self.calls = 0  # processes started (bench/slurm_calls.py reads it)
        base = dict(os.environ if environ is None else environ)
        self.env = {k: v for k, v in base.items() if k not in SCRUBBED}
        if conf:
            self.env["SLURM_CONF"] = conf

    def update_node(self, node: str, **fields: str) -> None:
        """`scontrol update nodename=N key=value ...` (state=drain reason=..., state=resume)."""
        args = [f"nodename={node}", *(f"{k}={v}" for k, v in fields.items())]
        self.run(["update", *args], node=node)

    def requeue(self, job: str) -> None:
        """`scontrol requeue JOBID` (JobGone when slurmctld no longer knows it)."""
        self.run(["requeue", job], job=job)

    def run(self, args: Sequence[str], *, node: str = "", job: str = "") -> str:
        """One call; stdout on success, a translated error otherwise."""
        argv = [self.path, *args]
        shown = " ".join(["scontrol", *args])
        self.calls += 1
        try:
            done = self._run(
                argv,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ClusterError(
                f"scontrol not found at '{self.path}': install slurm-client or set "
                "GPU_ONCALL_SLURM__SCONTROL to its path"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"'{shown}' timed out after {self.timeout:.0f}s") from exc
        if done.returncode == 0:
            return str(done.stdout)
        raise translate(shown, str(done.stderr).strip(), node=node, job=job)


def translate(shown: str, stderr: str, *, node: str, job: str) -> ClusterError:
    """scontrol's error text -> the error tree (its exit code is 1 for everything)."""
    lowered = stderr.lower()
    if "invalid node name" in lowered and node:
        return NodeNotFound(node)
    if ("invalid job id" in lowered or "already completing or completed" in lowered) and job:
        return JobGone(f"job {job} is gone: {stderr}")
    if any(text in lowered for text in REFUSALS):
        return ClusterForbidden(
            f"'{shown}' was refused: the bot's Unix user is not a Slurm operator (it must be "
            "root, SlurmUser, or AdminLevel=Operator in sacctmgr); slurmctld said: " + stderr
        )
    if "unable to contact slurm controller" in lowered or "connection refused" in lowered:
        error = ClusterError(f"'{shown}': slurmctld unreachable: {stderr}")
        return error
    return ClusterError(f"'{shown}' failed: {stderr or 'no message'}")
