"""Slurm: the Cluster port on slurmctld through slurmrestd and scontrol (the only package that
talks to Slurm; `.importlinter` keeps it so)."""

from integrations.slurm.client import ApiVersion, SlurmRest
from integrations.slurm.cluster import SlurmCluster
from integrations.slurm.records import Labelling
from integrations.slurm.scontrol import Scontrol

__all__ = ["ApiVersion", "Labelling", "Scontrol", "SlurmCluster", "SlurmRest"]
