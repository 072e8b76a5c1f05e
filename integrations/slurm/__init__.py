"""Slurm: the Cluster port on slurmctld through slurmrestd and scontrol (the only package that
talks to Slurm; `.importlinter` keeps it so)."""

from integrations.slurm.agent import SCRIPT_FILE, SlurmNodeAgent
from integrations.slurm.client import ApiVersion, SlurmRest
from integrations.slurm.cluster import SlurmCluster
from integrations.slurm.records import Labelling
from integrations.slurm.scontrol import Scontrol

__all__ = [
    "SCRIPT_FILE",
    "ApiVersion",
    "Labelling",
    "Scontrol",
    "SlurmCluster",
    "SlurmNodeAgent",
    "SlurmRest",
]
