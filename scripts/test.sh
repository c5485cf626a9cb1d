#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need first (the
# S3-compatible test server and Helm into a cache folder outside the
# repository, Debian's chromium for the status page test), so a fresh machine
# with only Go and apt needs nothing else. Artefacts go to ./test-artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
mkdir -p "$cache/bin"

# The chart on a real single-node Kubernetes cluster (scripts/k8s-e2e.sh)
# runs after the main suite. Its binaries (Kubernetes, etcd, CoreDNS: about
# 25 minutes of a niced build, once; cached under $cache/k8s) build in the
# background from here on, while the other tools install and the suite
# runs. Under CI=true the cluster test always runs: a cluster that cannot be
# built or brought up fails the run with the reason. Outside CI,
# SLUICE_SKIP_K8S=1 skips it (said loudly at the start and the end).
k8s_mode=run
if [ "${SLUICE_SKIP_K8S:-0}" = 1 ]; then
  if [ "${CI:-}" = true ]; then
    echo "test.sh: SLUICE_SKIP_K8S=1 is refused under CI=true: CI runs the real-cluster test" >&2
    exit 1
  fi
  k8s_mode=skip
fi
k8s_skip_banner() {
  echo "########################################################################" >&2
  echo "# SLUICE_SKIP_K8S=1: the real-cluster test (helm install on Kubernetes,  #" >&2
  echo "# scripts/k8s-e2e.sh) is SKIPPED. CI runs it; run it before you push.    #" >&2
  echo "########################################################################" >&2
}
k8s_build_pid=""
k8s_build_log="$cache/k8s-build.log"
if [ "$k8s_mode" = run ]; then
  # The cluster needs root: containerd, iptables, mounts, network namespaces.
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: the real-cluster test needs root (containerd, iptables, mounts); run as root, or set SLUICE_SKIP_K8S=1 outside CI" >&2
    exit 1
  fi
  # apt first, in the foreground: the installs below use apt too.
  ./scripts/k8s.sh deps
  # Its own process group (setsid), so an early exit stops the whole build.
  setsid nice -n 19 ./scripts/k8s.sh build-cluster >"$k8s_build_log" 2>&1 &
  k8s_build_pid=$!
  trap '[ -n "$k8s_build_pid" ] && kill -- -"$k8s_build_pid" 2>/dev/null; true' EXIT
  echo "test.sh: building the cluster's binaries in the background (pid $k8s_build_pid, log $k8s_build_log)" >&2
else
  k8s_skip_banner
fi
VERSITYGW_VERSION=v1.8.0
gw="$cache/bin/versitygw-$VERSITYGW_VERSION"
# progress reads `go install -v` output and prints a line every so often,
# so the one-time install (about five minutes) is not silent; the full
# output goes to $1 and is shown if the install fails.
progress() {
  local log=$1 start=$SECONDS dl=0 n=0 line
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    case "$line" in
      "go: downloading "*)
        dl=$((dl + 1))
        if (( dl % 20 == 1 )); then echo "  versitygw: downloading modules ($dl so far, $((SECONDS - start))s)" >&2; fi ;;
      *)
        n=$((n + 1))
        if (( n % 100 == 0 )); then echo "  versitygw: compiled $n packages ($((SECONDS - start))s)" >&2; fi ;;
    esac
  done
  echo "  versitygw: done: $dl modules downloaded, $n packages compiled in $((SECONDS - start))s" >&2
}

if [ ! -x "$gw" ]; then
  echo "installing the S3 test server versitygw $VERSITYGW_VERSION into $cache/bin (once: it downloads and compiles its dependencies, about five minutes)" >&2
  tmp=$(mktemp -d)
  if ! GOBIN="$tmp" GOFLAGS=-mod=mod go install -v "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" 2>&1 | progress "$tmp/install.log"; then
    echo "installing versitygw failed; the last lines of its output:" >&2
    tail -n 30 "$tmp/install.log" >&2
    exit 1
  fi
  mv "$tmp/versitygw" "$gw"
  rm -rf "$tmp"
fi
export SLUICE_VERSITYGW="$gw"
HELM_VERSION=v3.22.0
helm="$cache/bin/helm-$HELM_VERSION"
if [ ! -x "$helm" ]; then
  echo "installing helm $HELM_VERSION into $cache/bin (a few minutes, once)" >&2
  tmp=$(mktemp -d)
  # the version flags a release build sets (else `helm version` says v3.22 and
  # offline renders assume Kubernetes 1.20)
  GOBIN="$tmp" GOFLAGS=-mod=mod go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$tmp/helm" "$helm"
  rmdir "$tmp"
fi
export SLUICE_HELM="$helm"

# Headless Chromium for the status page test (Debian's package). Under
# CI=true the test fails when it is missing rather than skipping.
if [ -z "${SLUICE_CHROMIUM:-}" ]; then
  if ! command -v chromium >/dev/null 2>&1; then
    echo "installing Debian's chromium for the status page test (once)" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
  fi
  SLUICE_CHROMIUM="$(command -v chromium)"
  export SLUICE_CHROMIUM
fi
# protoc (Debian's protobuf-compiler, the pinned 3.21.12) for the check that
# the committed generated code matches proto/*.proto. Under CI=true that
# test fails when protoc is missing rather than skipping.
if ! command -v protoc >/dev/null 2>&1; then
  echo "installing Debian's protobuf-compiler for the generated-code check (once)" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq protobuf-compiler >/dev/null
fi
# Test artefacts (the status page screenshot) land here.
export SLUICE_ARTIFACTS="${SLUICE_ARTIFACTS:-$PWD/test-artifacts}"

go vet ./...
go test -count=1 -timeout 20m "$@" ./...
# deploy/ is its own module (the chart tests and the image tool): k8s.io/api
# and go-containerregistry stay out of the binaries' build.
(cd deploy && go vet ./... && go test -count=1 -timeout 10m "$@" ./...)

if [ "$k8s_mode" = skip ]; then
  k8s_skip_banner
  exit 0
fi
start=$SECONDS
if ! wait "$k8s_build_pid"; then
  k8s_build_pid=""
  echo "test.sh: building the cluster's binaries failed; the last lines of $k8s_build_log:" >&2
  tail -n 40 "$k8s_build_log" >&2
  exit 1
fi
k8s_build_pid=""
echo "test.sh: the cluster's binaries are ready (waited $((SECONDS - start))s after the suite)" >&2
# Brings the cluster up, runs e2e/k8s_test.go (build tag k8s) and takes the
# cluster down; it fails with the reason when the cluster cannot come up.
./scripts/k8s-e2e.sh
