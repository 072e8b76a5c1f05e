#!/bin/bash
# gpu-oncall's node agent on Slurm: the batch script the bot submits for `gpu_reset`, one job per
# incident and action, pinned to the node by a maintenance reservation the bot holds on it
# (exclusive, no requeue, time limit = agent.timeout_seconds; docs/slurm.md "Node agent").
# The bot sets GPU_ONCALL_ACTION, GPU_ONCALL_NODE and GPU_ONCALL_GPU (empty: every GPU).
# GPU_ONCALL_NVIDIA_SMI overrides the nvidia-smi path (slurm.agent_environment).
# Edit freely for your site (stop DCGM or a persistence daemon first, say), but keep the exit
# code: 0 means done, anything else is reported as failed with the job's state and exit code.
set -euo pipefail

smi="${GPU_ONCALL_NVIDIA_SMI:-nvidia-smi}"
if [ "$(hostname -s)" != "${GPU_ONCALL_NODE%%.*}" ] && [ -z "${SLURMD_NODENAME:-}" ]; then
  echo "gpu-oncall: running on $(hostname -s), not $GPU_ONCALL_NODE" >&2
  exit 3
fi
if [ -n "${SLURMD_NODENAME:-}" ] && [ "$SLURMD_NODENAME" != "$GPU_ONCALL_NODE" ]; then
  echo "gpu-oncall: running on $SLURMD_NODENAME, not $GPU_ONCALL_NODE" >&2
  exit 3
fi
case "$GPU_ONCALL_ACTION" in
  gpu_reset)
    if [ -n "${GPU_ONCALL_GPU:-}" ]; then
      exec "$smi" -r -i "$GPU_ONCALL_GPU"
    fi
    exec "$smi" -r
    ;;
  *)
    echo "gpu-oncall: this script runs gpu_reset, not '$GPU_ONCALL_ACTION'" >&2
    exit 2
    ;;
esac
