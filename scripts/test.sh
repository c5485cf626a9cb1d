#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need first (the
# S3-compatible test server, Helm) into a cache folder outside the repository, so
# a fresh machine with only Go needs nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
mkdir -p "$cache/bin"
VERSITYGW_VERSION=v1.8.0
gw="$cache/bin/versitygw-$VERSITYGW_VERSION"
if [ ! -x "$gw" ]; then
  echo "installing versitygw $VERSITYGW_VERSION into $cache/bin (a few minutes, once)" >&2
  tmp=$(mktemp -d)
  GOBIN="$tmp" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
  mv "$tmp/versitygw" "$gw"
  rmdir "$tmp"
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

go vet ./...
go test -count=1 -timeout 20m "$@" ./...
# deploy/ is its own module (the chart tests and the image tool): k8s.io/api
# and go-containerregistry stay out of the binaries' build.
(cd deploy && go vet ./... && go test -count=1 -timeout 10m "$@" ./...)
