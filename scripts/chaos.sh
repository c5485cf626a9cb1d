#!/usr/bin/env bash
# Runs the chaos suite (e2e/chaos_*_test.go) on its own and prints each
# scenario's summary line (scenario, seed, batches, kills, retries, windows
# checked, duplicates, missing, recovery times).
#
#   scripts/chaos.sh             the short set, as CI runs it (a few minutes)
#   scripts/chaos.sh --soak      the release soak: 300 kills per random-kill
#                                scenario, the S3 twin included (tens of minutes)
#   scripts/chaos.sh -run Kafka  extra arguments go to go test
#
# Replay a failure with the seed it printed: SLUICE_CHAOS_SEED=N scripts/chaos.sh.
# Other knobs: SLUICE_CHAOS_ITERATIONS=N (kills per random-kill scenario),
# SLUICE_CHAOS_S3_FAULTS=0.2 (fraction of object-store requests faulted).
# Needs the S3-compatible test server that scripts/test.sh installs; set
# SLUICE_VERSITYGW or run scripts/test.sh once.
set -euo pipefail
cd "$(dirname "$0")/.."

timeout=15m
if [ "${1:-}" = "--soak" ]; then
  export SLUICE_CHAOS_SOAK=1
  timeout=0
  shift
fi
cache="${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}"
if [ -z "${SLUICE_VERSITYGW:-}" ] && [ -x "$cache/bin/versitygw-v1.8.0" ]; then
  export SLUICE_VERSITYGW="$cache/bin/versitygw-v1.8.0"
fi

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
status=0
SLUICE_CHAOS_SUMMARY="$summary" go test ./e2e/ -run 'TestChaos' -count=1 -timeout "$timeout" "$@" || status=$?
echo "--- chaos summaries"
cat "$summary"
exit "$status"
