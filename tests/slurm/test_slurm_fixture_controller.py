"""The Slurm fixture starts a lost slurmctld again (tests/servers/slurm.py, `reset`).

Covers: slurmctld SIGKILLed between two tests: the next test's reset fails that test with the
controller's exit status and the end of its output (its log lines and stderr), having started
the controller again, so the tests after it find an idle cluster that answers.
"""

from __future__ import annotations

import signal

import pytest

from tests.servers.slurm import NODES, SlurmServers


def test_a_lost_controller_fails_one_test_with_its_output_and_is_started_again(
    slurm: SlurmServers,
) -> None:
    assert slurm.slurmctld is not None
    lost = slurm.slurmctld
    lost.send_signal(signal.SIGKILL)
    lost.wait(timeout=10)
    last_lines = (slurm.workdir / "log" / "slurmctld.out").read_text()[-300:]

    with pytest.raises(pytest.fail.Exception) as failed:
        slurm.reset()

    message = str(failed.value)
    assert "slurmctld exited with -9" in message
    assert "its output ended:\n" in message and message.endswith(last_lines)
    assert slurm.slurmctld is not lost and slurm.slurmctld.poll() is None
    assert "is UP" in slurm.run("scontrol", "ping")
    slurm.reset()  # the next test's reset: no failure, every node idle
    assert slurm.states() == dict.fromkeys(NODES, "idle")
