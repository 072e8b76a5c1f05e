"""Slurm: the Cluster port on slurmctld through slurmrestd and scontrol (the only package that
talks to Slurm; `.importlinter` keeps it so)."""

from integrations.slurm.agent import SCRIPT_FILE, SlurmNodeAgent
from integrations.slurm.client import ApiVersion, SlurmRest
from integrations.slurm.cluster import SlurmCluster
from integrations.slurm.records import Labelling
from integrations.slurm.scontrol import Scontrol
from integrations.slurm.turns import NodeTurns, check_turns_file

__all__ = [
    "SCRIPT_FILE",
    "ApiVersion",
    "Labelling",
    "NodeTurns",
    "Scontrol",
    "SlurmCluster",
    "SlurmNodeAgent",
    "SlurmRest",
    "check_turns_file",
]
