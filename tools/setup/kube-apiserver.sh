#!/usr/bin/env bash
# Build (once per machine) the pinned upstream kube-apiserver the real-apiserver
# test suite runs against, and print the binary's path.
#
#   tools/setup/kube-apiserver.sh            # build or reuse, print the path
#   KUBE_VERSION=v1.36.3 tools/setup/kube-apiserver.sh
#
# The binary is built from the Go module k8s.io/kubernetes through a tiny wrapper
# module generated in a temporary directory: a main that runs
# app.NewAPIServerCommand(), with a replace line pinning every k8s.io staging
# module to its published v0.X.Y. It is cached as
# ~/.cache/gpu-oncall/kube-apiserver-$KUBE_VERSION; a cached binary that answers
# --version with the expected version is reused. Nothing is committed: the
# wrapper module and its go.sum live in the temporary directory only.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
CACHE_DIR="${GPU_ONCALL_CACHE:-$HOME/.cache/gpu-oncall}"
BINARY="$CACHE_DIR/kube-apiserver-$KUBE_VERSION"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"

say() { echo "kube-apiserver.sh: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

if [[ -x "$BINARY" ]] && "$BINARY" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"; then
    say "reusing $BINARY"
    echo "$BINARY"
    exit 0
fi

[[ -x "$GO" ]] || fail "no Go toolchain at '$GO' (install Go >= 1.25 or set GO=/path/to/go)"
[[ "$KUBE_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || fail "KUBE_VERSION '$KUBE_VERSION' is not v1.MINOR.PATCH"
MINOR="${BASH_REMATCH[1]}"
STAGING_VERSION="v0.$MINOR.${BASH_REMATCH[2]}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kube-apiserver-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
say "building kube-apiserver $KUBE_VERSION (staging modules $STAGING_VERSION) in $WORK"
started=$(date +%s)

cd "$WORK"
say "reading k8s.io/kubernetes@$KUBE_VERSION's go.mod from the module proxy"
modfile="$("$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[[ -f "$modfile" ]] || fail "could not download k8s.io/kubernetes@$KUBE_VERSION's go.mod"

# Every `k8s.io/X => ./staging/src/k8s.io/X` of upstream becomes `k8s.io/X => k8s.io/X vSTAGING`.
mapfile -t staging < <(grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$modfile" \
    | awk '{print $1}' | sort -u)
(( ${#staging[@]} > 10 )) || fail "found only ${#staging[@]} staging modules in $modfile"
say "pinning ${#staging[@]} staging modules to $STAGING_VERSION"

{
    echo "module gpuoncall.local/kubeapiserver"
    echo
    echo "go 1.25"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    for module in "${staging[@]}"; do
        echo "replace $module => $module $STAGING_VERSION"
    done
} > go.mod

cat > main.go <<'EOF'
// Command kube-apiserver is the upstream API server, built from its Go module.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
EOF

say "resolving dependencies (go mod tidy)"
GOFLAGS=-mod=mod "$GO" mod tidy >&2 || fail "go mod tidy failed"

mkdir -p "$CACHE_DIR"
say "compiling (several minutes on 2 cores, a few GB of RAM)"
version_flags="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
version_flags+=" -X k8s.io/component-base/version.gitMajor=1"
version_flags+=" -X k8s.io/component-base/version.gitMinor=$MINOR"
CGO_ENABLED=0 "$GO" build -trimpath -ldflags="-s -w $version_flags" -o "$BINARY.tmp" . >&2 \
    || fail "go build failed"
mv "$BINARY.tmp" "$BINARY"

"$BINARY" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION" \
    || fail "$BINARY --version does not say 'Kubernetes $KUBE_VERSION'"
say "built $BINARY in $(( $(date +%s) - started )) s"
echo "$BINARY"
