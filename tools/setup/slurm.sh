#!/usr/bin/env bash
# Installs what the real-Slurm tests (tests/slurm/) need: Debian's Slurm daemons, client, munge
# and the JWT plugin. Idempotent: installs only the packages that are missing. Run as root.
# The packages' postinst "start" is refused by policy-rc.d in containers; nothing is started
# here: the tests start their own throw-away cluster on 127.0.0.1 (tests/servers/slurm.py).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(slurmctld slurmd slurmrestd slurm-client munge slurm-wlm-jwt-plugin)
missing=()
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "tools/setup/slurm.sh: ${packages[*]} already installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "tools/setup/slurm.sh: missing ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The tests run slurmrestd as `nobody` (it refuses root and SlurmUser); check it exists.
getent passwd nobody >/dev/null || { echo "tools/setup/slurm.sh: no 'nobody' user" >&2; exit 1; }
echo "tools/setup/slurm.sh: installed ${missing[*]}"
