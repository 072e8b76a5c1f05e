#!/usr/bin/env bash
# The Debian packages the tests run for real: Prometheus, promtool and Alertmanager, PostgreSQL,
# headless Chromium, etcd (under the test kube-apiserver), the Slurm daemons with munge, and
# kubectl (Kustomize rendering). Idempotent: installs only what is missing. As root it installs;
# otherwise it prints the one command to run and exits 1.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
  make
  prometheus                 # prometheus + promtool
  prometheus-alertmanager
  postgresql                 # initdb / pg_ctl under /usr/lib/postgresql/*/bin
  chromium                   # headless page tests
  etcd-server                # the test control plane's store
  openssl                    # its certificates
  slurmctld slurmd slurmrestd slurm-client munge slurm-wlm-jwt-plugin
)
missing=()
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: Debian packages present (${#packages[@]})"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: run: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: Debian packages installed"
