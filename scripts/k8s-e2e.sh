#!/usr/bin/env bash
# The chart on a real single-node Kubernetes cluster: builds the cluster's
# binaries if they are not cached (scripts/k8s.sh build, ~20 minutes of both
# cores once), brings the cluster up unless it is already up, runs
# e2e/k8s_test.go (build tag k8s) and takes the cluster down again unless
# KEEP_CLUSTER=1. A cluster that cannot come up fails the run with the reason.
#
#   scripts/k8s-e2e.sh                 both tests, on the cluster
#   scripts/k8s-e2e.sh --no-cluster    only TestChartArgsRunTheRealBinaries: the chart's
#                                      rendered arguments on real processes on loopback
set -euo pipefail
cd "$(dirname "$0")/.."
script="$PWD/scripts/k8s.sh"
eval "$("$script" env)"
started=0
cleanup() { if [ "$started" = 1 ] && [ "${KEEP_CLUSTER:-0}" != 1 ]; then "$script" down; fi; }
trap cleanup EXIT
if [ "${1:-}" = --no-cluster ]; then
  shift
  cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
  export SLUICE_VERSITYGW="${SLUICE_VERSITYGW:-$cache/bin/versitygw-v1.8.0}"
  exec go test -tags k8s -count=1 -timeout 20m -v -run TestChartArgs "$@" ./e2e
fi
# A cluster counts as up only with a Ready node: an apiserver left by a
# teardown that did not finish is taken down and brought up again.
if ! kubectl --request-timeout=5s get --raw /readyz >/dev/null 2>&1 ||
   ! kubectl --request-timeout=5s wait --for=condition=Ready node --all --timeout=10s >/dev/null 2>&1; then
  "$script" down
  "$script" deps
  "$script" build
  # down also after an up that failed half way
  started=1
  t0=$SECONDS
  "$script" up
  echo "k8s-e2e: cluster up in $((SECONDS - t0))s" >&2
fi
cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
export SLUICE_VERSITYGW="${SLUICE_VERSITYGW:-$cache/bin/versitygw-v1.8.0}"
[ -x "$SLUICE_VERSITYGW" ] || { echo "k8s-e2e: no S3 test server at $SLUICE_VERSITYGW: run scripts/test.sh once" >&2; exit 1; }
# Pods reach the host through the CNI bridge's gateway address.
export SLUICE_K8S_NODE_IP="${SLUICE_K8S_NODE_IP:-10.244.0.1}"
export SLUICE_K8S_SCRIPT="$script"
t0=$SECONDS
go test -tags k8s -count=1 -timeout 60m -v -run "TestK8s|TestChartArgs" "$@" ./e2e
echo "k8s-e2e: tests passed in $((SECONDS - t0))s" >&2
