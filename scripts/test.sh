#!/usr/bin/env bash
# mqtarget's test command (README, .ci/run): installs what is missing, starts the real brokers on
# 127.0.0.1, then runs gofmt, go vet and every test with the race detector.
#
# NSQ: a real nsqd is built from the Go module proxy (scripts/nsqd.sh); the integration tests start and
# stop nsqd processes themselves, on free loopback ports.
#
# Environment: MQTARGET_CACHE [$HOME/.cache/mqtarget] where brokers are built and fetched;
#              GO_TEST_FLAGS extra flags for go test (e.g. "-run TestNSQ -v").
set -euo pipefail
cd "$(dirname "$0")/.."
export MQTARGET_CACHE="${MQTARGET_CACHE:-$HOME/.cache/mqtarget}"
mkdir -p "$MQTARGET_CACHE"

step() { printf '\n== %s\n' "$*"; }

step "tools"
command -v go >/dev/null || { echo "test.sh: Go 1.26 is required (https://go.dev/dl/)" >&2; exit 1; }
go version

step "brokers"
MQTARGET_NSQD_BIN="$(scripts/nsqd.sh build)"
export MQTARGET_NSQD_BIN MQTARGET_INTEGRATION=1
"$MQTARGET_NSQD_BIN" --version

# Brokers started by scripts are stopped on exit, whatever happens.
started=()
cleanup() {
    local b
    for b in "${started[@]}"; do
        scripts/"$b".sh stop || echo "test.sh: stopping $b failed" >&2
    done
}
trap cleanup EXIT
start_broker() {
    started+=("$1")
    scripts/"$1".sh start
}

step "gofmt"
unformatted="$(gofmt -l cmd config handlers internal publishers)"
if [[ -n "$unformatted" ]]; then
    echo "gofmt would change:" >&2
    echo "$unformatted" >&2
    exit 1
fi

step "go vet"
go vet ./...

step "go test -race"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -race -count=1 -timeout 20m ${GO_TEST_FLAGS:-} ./...
