#!/usr/bin/env bash
# Runs Sluice's tests.
#
#   scripts/test.sh            the whole suite, as CI runs it (.ci/run): installs
#                              what the tests need first (the S3-compatible test
#                              server, Helm and Prometheus into a cache folder
#                              outside the repository, Debian's chromium and
#                              protoc), then every test, then the chart on a real
#                              single-node Kubernetes cluster (root only)
#   scripts/test.sh --quick    the fast loop: unit and datadriven tests
#                              (go test -short): no S3 server, no broker, no
#                              process, no browser, nothing installed
#   scripts/test.sh --plan     says what the whole suite would install, run and
#                              skip on this machine, and why; runs nothing
#
# Arguments after the mode go to `go test` (e.g. --quick -run TestX).
#
# Outside CI, what this machine cannot run (the real-cluster test when not
# root; a Debian package when there is neither root nor passwordless sudo)
# is skipped, said loudly at the start and at the end. Under CI=true
# nothing is skipped: a missing requirement fails the run with the reason.
# Artefacts go to ./test-artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
case "${1:-}" in
  --quick) mode=quick; shift ;;
  --plan) mode=plan; shift ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac

ci=false
if [ "${CI:-}" = true ]; then ci=true; fi
uid=$(id -u)
cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
t0=$SECONDS

elapsed() {
  local s=$((SECONDS - t0))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

if [ "$mode" != plan ] && ! command -v go >/dev/null 2>&1; then
  echo "test.sh: go is not on PATH: install Go (go.mod names the version) first" >&2
  exit 1
fi

if [ "$mode" = quick ]; then
  # go test's own cache is off (-count=1), so the time printed is the time
  # the tests take, not a cache lookup.
  echo "test.sh --quick: unit and datadriven tests (go test -short): no S3 server, no broker, no process, no browser. The whole suite: scripts/test.sh" >&2
  status=0
  # e2e/ runs nothing but processes: go vet type-checks it, and linking its
  # test binary only to skip every test would cost the loop time. go vet has
  # run, so go test does not vet again (-vet=off).
  pkgs=$(go list ./... | grep -v '/e2e$')
  # shellcheck disable=SC2086
  go vet ./... && go test -short -count=1 -vet=off "$@" $pkgs &&
    (cd deploy && go vet ./... && go test -short -count=1 -vet=off "$@" ./...) || status=$?
  if [ "$status" -eq 0 ]; then
    echo "test.sh --quick: passed in $(elapsed)" >&2
  else
    echo "test.sh --quick: FAILED after $(elapsed)" >&2
  fi
  exit "$status"
fi

# skipped lists what this run leaves out, one reason each; banner prints it.
skipped=()
banner() {
  [ "${#skipped[@]}" -gt 0 ] || return 0
  echo "########################################################################" >&2
  echo "# test.sh: NOT EVERYTHING RUNS ON THIS MACHINE. SKIPPED:" >&2
  local s
  for s in "${skipped[@]}"; do echo "#   - $s" >&2; done
  echo "# CI (CI=true, as root) runs all of it; run it there before you merge." >&2
  echo "########################################################################" >&2
}
# refuse stops the run: under CI a requirement that cannot be met is a
# failure, with the reason.
refuse() {
  echo "test.sh: $*" >&2
  exit 1
}

# k8s_decision decides whether the chart runs on a real single-node
# Kubernetes cluster (scripts/k8s-e2e.sh): k8s_mode is run or skip and
# k8s_reason says why it is skipped. Under CI it is required: a reason to
# skip is refused.
k8s_decision() {
  k8s_mode=run
  k8s_reason=""
  if [ "${SLUICE_SKIP_K8S:-0}" = 1 ]; then
    $ci && refuse "SLUICE_SKIP_K8S=1 is refused under CI=true: CI runs the real-cluster test"
    k8s_mode=skip
    k8s_reason="the real-cluster test (helm install on Kubernetes, scripts/k8s-e2e.sh): SLUICE_SKIP_K8S=1"
  elif [ "$uid" -ne 0 ]; then
    $ci && refuse "the real-cluster test needs root (containerd, iptables, mounts, network namespaces) and CI=true requires it: run CI as root (this is uid $uid)"
    k8s_mode=skip
    k8s_reason="the real-cluster test (helm install on Kubernetes, scripts/k8s-e2e.sh): it needs root (containerd, iptables, mounts) and this is uid $uid"
  fi
  if [ "$k8s_mode" = skip ]; then skipped+=("$k8s_reason"); fi
}

# can_apt says whether this user can install Debian packages: as root, or
# with passwordless sudo.
sudo=""
can_apt() {
  if [ "$uid" -eq 0 ]; then sudo=""; return 0; fi
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo"; return 0; fi
  return 1
}

# apt_decision NAME PACKAGE COMMAND TEST: a Debian package a test needs.
# Sets apt_action to have (on PATH), install, or skip (outside CI, when it
# cannot be installed; the test then skips itself, saying why).
apt_decision() {
  local name=$1 pkg=$2 cmd=$3 test=$4
  if command -v "$cmd" >/dev/null 2>&1; then apt_action=have; return; fi
  if can_apt; then apt_action=install; return; fi
  $ci && refuse "$test needs $name (Debian's $pkg) and this user (uid $uid) can neither apt-get install it (not root, no passwordless sudo) nor find $cmd on PATH"
  apt_action=skip
  skipped+=("$test: $name is not installed and this user (uid $uid) cannot apt-get install $pkg (not root, no passwordless sudo)")
}

VERSITYGW_VERSION=v1.8.0
HELM_VERSION=v3.22.0
# Prometheus' server, built from its Go module: v0.316.0 builds with this Go
# (1.26) and is the version of the deploy module's rule and PromQL parser.
PROMETHEUS_VERSION=v0.316.0
gw="$cache/bin/versitygw-$VERSITYGW_VERSION"
helm="$cache/bin/helm-$HELM_VERSION"
prom="$cache/bin/prometheus-$PROMETHEUS_VERSION"

if [ -n "${SLUICE_CHROMIUM:-}" ]; then
  chromium_action=have
else
  apt_decision chromium chromium chromium "the status page tests (headless Chromium)"
  chromium_action=$apt_action
fi
apt_decision protoc protobuf-compiler protoc "the generated-code check (proto/)"
protoc_action=$apt_action
k8s_decision

if [ "$mode" = plan ]; then
  cached() { if [ -x "$1" ]; then echo "cached at $1"; else echo "to install into $1 ($2)"; fi; }
  echo "test.sh --plan: the whole suite as uid $uid, CI=${CI:-unset}, cache $cache"
  echo "  versitygw (S3 test server): $(cached "$gw" "about five minutes, once")"
  echo "  helm:                       $(cached "$helm" "a few minutes, once")"
  echo "  prometheus:                 $(cached "$prom" "about five minutes, once")"
  echo "  chromium:                   $chromium_action"
  echo "  protoc:                     $protoc_action"
  echo "  go vet and go test of the module and of deploy/: run"
  if [ "$k8s_mode" = run ]; then
    echo "  real-cluster test (scripts/k8s-e2e.sh): run (as root)"
  else
    echo "  real-cluster test (scripts/k8s-e2e.sh): SKIPPED: $k8s_reason"
  fi
  banner
  exit 0
fi

banner
mkdir -p "$cache/bin"
# At the end, pass or fail: the skips again, and the time taken.
k8s_build_pid=""
on_exit() {
  local rc=$?
  if [ -n "$k8s_build_pid" ]; then kill -- -"$k8s_build_pid" 2>/dev/null || true; fi
  banner
  if [ "$rc" -eq 0 ]; then
    echo "test.sh: passed in $(elapsed)${skipped[0]:+, with the skips above}" >&2
  else
    echo "test.sh: FAILED after $(elapsed)" >&2
  fi
}
trap on_exit EXIT

# The chart on a real single-node Kubernetes cluster (scripts/k8s-e2e.sh)
# runs after the main suite. Its binaries (Kubernetes, etcd, CoreDNS: about
# 25 minutes of a niced build, once; cached under $cache/k8s) build in the
# background from here on, while the other tools install and the suite
# runs.
k8s_build_log="$cache/k8s-build.log"
if [ "$k8s_mode" = run ]; then
  # apt first, in the foreground: the installs below use apt too.
  ./scripts/k8s.sh deps
  # Its own process group (setsid), so an early exit stops the whole build.
  setsid nice -n 19 ./scripts/k8s.sh build-cluster >"$k8s_build_log" 2>&1 &
  k8s_build_pid=$!
  echo "test.sh: building the cluster's binaries in the background (pid $k8s_build_pid, log $k8s_build_log)" >&2
fi

# progress NAME LOG reads `go install -v` output and prints a line every so
# often, so a one-time install (minutes) is not silent; the full output goes
# to LOG and is shown if the install fails.
progress() {
  local name=$1 log=$2 start=$SECONDS dl=0 n=0 line
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    case "$line" in
      "go: downloading "*)
        dl=$((dl + 1))
        if (( dl % 20 == 1 )); then echo "  $name: downloading modules ($dl so far, $((SECONDS - start))s)" >&2; fi ;;
      *)
        n=$((n + 1))
        if (( n % 100 == 0 )); then echo "  $name: compiled $n packages ($((SECONDS - start))s)" >&2; fi ;;
    esac
  done
  echo "  $name: done: $dl modules downloaded, $n packages compiled in $((SECONDS - start))s" >&2
}

# go_install NAME DEST BINARY PACKAGE@VERSION [go install flags...] builds a
# tool from the Go module proxy into the cache, once.
go_install() {
  local name=$1 dest=$2 bin=$3 pkg=$4
  shift 4
  [ -x "$dest" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  if ! GOBIN="$tmp" GOFLAGS=-mod=mod go install -v "$@" "$pkg" 2>&1 | progress "$name" "$tmp/install.log"; then
    echo "installing $name failed; the last lines of its output:" >&2
    tail -n 30 "$tmp/install.log" >&2
    exit 1
  fi
  mv "$tmp/$bin" "$dest"
  rm -rf "$tmp"
}

if [ ! -x "$gw" ]; then
  echo "installing the S3 test server versitygw $VERSITYGW_VERSION into $cache/bin (once: it downloads and compiles its dependencies, about five minutes)" >&2
  go_install versitygw "$gw" versitygw "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
export SLUICE_VERSITYGW="$gw"

if [ ! -x "$helm" ]; then
  echo "installing helm $HELM_VERSION into $cache/bin (a few minutes, once)" >&2
  # the version flags a release build sets (else `helm version` says v3.22 and
  # offline renders assume Kubernetes 1.20)
  go_install helm "$helm" helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
    -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37"
fi
export SLUICE_HELM="$helm"

# Prometheus for the alerting rules and dashboard test (e2e/prometheus_test.go).
# Built without its web UI's assets (they need a JavaScript build): the HTTP
# API and rule evaluation, which the test uses, work without them.
if [ ! -x "$prom" ]; then
  echo "installing the Prometheus server $PROMETHEUS_VERSION into $cache/bin (once: about five minutes)" >&2
  go_install prometheus "$prom" prometheus "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
fi
export SLUICE_PROMETHEUS="$prom"

# Headless Chromium for the status page tests (Debian's package), protoc
# (Debian's protobuf-compiler, the pinned 3.21.12) for the check that the
# committed generated code matches proto/*.proto. Under CI=true those tests
# fail when their tool is missing rather than skipping.
apt_updated=false
apt_install() {
  if ! $apt_updated; then $sudo apt-get update -qq; apt_updated=true; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
if [ "$chromium_action" = install ]; then
  echo "installing Debian's chromium for the status page tests (once)" >&2
  apt_install chromium
fi
if [ -z "${SLUICE_CHROMIUM:-}" ] && command -v chromium >/dev/null 2>&1; then
  SLUICE_CHROMIUM="$(command -v chromium)"
  export SLUICE_CHROMIUM
fi
if [ "$protoc_action" = install ]; then
  echo "installing Debian's protobuf-compiler for the generated-code check (once)" >&2
  apt_install protobuf-compiler
fi
# Test artefacts (the status page screenshots) land here.
export SLUICE_ARTIFACTS="${SLUICE_ARTIFACTS:-$PWD/test-artifacts}"

echo "test.sh: tools ready after $(elapsed); running the suite" >&2
go vet ./...
go test -count=1 -timeout 20m "$@" ./...
# deploy/ is its own module (the chart tests and the image tool): k8s.io/api
# and go-containerregistry stay out of the binaries' build.
(cd deploy && go vet ./... && go test -count=1 -timeout 10m "$@" ./...)
echo "test.sh: the suite passed after $(elapsed)" >&2

if [ "$k8s_mode" = skip ]; then
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
