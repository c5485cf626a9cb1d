#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need first (the
# S3-compatible test server into a cache folder outside the repository,
# Debian's chromium for the status page test), so a fresh machine with only
# Go and apt needs nothing else. Artefacts go to ./test-artifacts.
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
# Test artefacts (the status page screenshot) land here.
export SLUICE_ARTIFACTS="${SLUICE_ARTIFACTS:-$PWD/test-artifacts}"

go vet ./...
go test -count=1 -timeout 20m "$@" ./...
