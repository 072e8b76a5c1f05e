#!/usr/bin/env bash
# kubectl renders the Kustomize deployment in the tests (`kubectl kustomize`, `apply
# --dry-run=server`). Debian's archive does not carry it in every release, so when it is missing
# it is built (once per machine) from its published Go module, k8s.io/kubectl, at the version of
# the test kube-apiserver, cached under ~/.cache/gpu-oncall and linked into /usr/local/bin.
set -euo pipefail
if command -v kubectl >/dev/null 2>&1; then
  echo "setup: kubectl present ($(command -v kubectl))"
  exit 0
fi
KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
[[ "$KUBE_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "setup: bad KUBE_VERSION" >&2; exit 1; }
STAGING_VERSION="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
CACHE_DIR="${GPU_ONCALL_CACHE:-$HOME/.cache/gpu-oncall}"
BINARY="$CACHE_DIR/kubectl-$KUBE_VERSION"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
if [[ ! -x "$BINARY" ]]; then
  [[ -x "$GO" ]] || { echo "setup: kubectl is missing and there is no Go to build it" >&2; exit 1; }
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/kubectl-build.XXXXXX")"
  trap 'rm -rf "$WORK"' EXIT
  echo "setup: building kubectl $KUBE_VERSION from k8s.io/kubectl@$STAGING_VERSION"
  cd "$WORK"
  printf 'module gpuoncall.local/kubectl\n\ngo 1.25\n\nrequire k8s.io/kubectl %s\n' \
    "$STAGING_VERSION" > go.mod
  cat > main.go <<'GO'
// Command kubectl is the upstream kubectl, built from its Go module.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
GO
  GOFLAGS=-mod=mod "$GO" mod tidy >&2
  mkdir -p "$CACHE_DIR"
  CGO_ENABLED=0 "$GO" build -trimpath -ldflags=-s -o "$BINARY.tmp" . >&2
  mv "$BINARY.tmp" "$BINARY"
fi
if [ "$(id -u)" -eq 0 ]; then
  ln -sf "$BINARY" /usr/local/bin/kubectl
  echo "setup: kubectl $KUBE_VERSION at /usr/local/bin/kubectl"
else
  echo "setup: kubectl built at $BINARY; run: sudo ln -sf $BINARY /usr/local/bin/kubectl" >&2
  exit 1
fi
