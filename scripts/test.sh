#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need first (the
# S3-compatible test server and Helm into a cache folder outside the
# repository, Debian's chromium for the status page test), so a fresh machine
# with only Go and apt needs nothing else. Artefacts go to ./test-artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
mkdir -p "$cache/bin"
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
