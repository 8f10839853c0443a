#!/usr/bin/env bash
# mqtarget's test command (README, .ci/run): installs what is missing, starts the real brokers on
# 127.0.0.1, then runs gofmt, go vet and every test with the race detector.
#
# NSQ: a real nsqd is built from the Go module proxy (scripts/nsqd.sh); the integration tests start and
# stop nsqd processes themselves, on free loopback ports.
# STOMP: Artemis, ActiveMQ Classic and RabbitMQ (STOMP plugin) are fetched and started by
# scripts/artemis.sh, scripts/activemq.sh and scripts/rabbitmq.sh (in the background, while gofmt and
# go vet run) and stopped on exit; their integration tests stop, freeze and restart them through the
# same scripts.
# RocketMQ: scripts/rocketmq.sh fetches RocketMQ (Maven) and starts a name server and two brokers on
# 127.0.0.1 (in the background too); TestRocketMQ stops, freezes and restarts broker-a through it.
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
# RocketMQ and Artemis are fetched with Maven and run on Java; install both from Debian when missing.
missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || { echo "test.sh: install ${missing[*]} (apt-get)" >&2; exit 1; }
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
java -version 2>&1 | sed -n 1p # sed, not head: it reads everything, so no SIGPIPE under pipefail
mvn -v 2>/dev/null | sed -n 1p

step "brokers"
MQTARGET_NSQD_BIN="$(scripts/nsqd.sh build)"
export MQTARGET_NSQD_BIN MQTARGET_INTEGRATION=1
"$MQTARGET_NSQD_BIN" --version

# Brokers started by scripts are stopped on exit, whatever happens.
started=()
declare -A starting=() # broker -> PID of its start command running in the background
cleanup() {
    local b
    for b in "${!starting[@]}"; do
        wait "${starting[$b]}" 2>/dev/null || true # let a start finish (it is bounded) so stop finds its PID
    done
    for b in "${started[@]}"; do
        scripts/"$b".sh stop || echo "test.sh: stopping $b failed" >&2
    done
}
trap cleanup EXIT
# start_broker_bg NAME [restart]: start a broker in the background (output in
# $MQTARGET_CACHE/NAME-start.log); with restart, one already running is stopped first, so it runs with
# the settings exported here. wait_broker NAME waits for it and fails when it failed.
start_broker_bg() {
    started+=("$1")
    {
        if [[ ${2:-} == restart ]]; then scripts/"$1".sh stop; fi
        scripts/"$1".sh start
    } >"$MQTARGET_CACHE/$1-start.log" 2>&1 &
    starting[$1]=$!
}
wait_broker() {
    local rc=0
    wait "${starting[$1]}" || rc=$?
    unset "starting[$1]"
    cat "$MQTARGET_CACHE/$1-start.log"
    if ((rc != 0)); then
        echo "test.sh: starting $1 failed" >&2
        exit 1
    fi
}

# STOMP: Apache Artemis (scripts/artemis.sh), ActiveMQ Classic (scripts/activemq.sh) and RabbitMQ
# (scripts/rabbitmq.sh), started while the checks below run. All get one login, so TestSTOMPMixed can
# point mqtarget at Artemis and ActiveMQ at once.
export ARTEMIS_LOGIN="${ARTEMIS_LOGIN:-mqtarget}" ARTEMIS_PASSCODE="${ARTEMIS_PASSCODE:-mqtarget}"
export ACTIVEMQ_LOGIN="$ARTEMIS_LOGIN" ACTIVEMQ_PASSCODE="$ARTEMIS_PASSCODE"
export RABBITMQ_LOGIN="$ARTEMIS_LOGIN" RABBITMQ_PASSCODE="$ARTEMIS_PASSCODE"
start_broker_bg artemis restart # a running instance may have another login
start_broker_bg activemq restart
start_broker_bg rabbitmq restart
artemis_dir="$(realpath -m -- "${ARTEMIS_DATA:-$MQTARGET_CACHE/artemis-instance}")"
activemq_dir="$(realpath -m -- "${ACTIVEMQ_DATA:-$MQTARGET_CACHE/activemq-instance}")"
rabbitmq_dir="$(realpath -m -- "${RABBITMQ_DATA:-$MQTARGET_CACHE/rabbitmq-instance}")"
export MQTARGET_ARTEMIS_STOMP="127.0.0.1:${ARTEMIS_STOMP_PORT:-61613}" \
    MQTARGET_ARTEMIS_LOGIN="$ARTEMIS_LOGIN" MQTARGET_ARTEMIS_PASSCODE="$ARTEMIS_PASSCODE" \
    MQTARGET_ARTEMIS_PIDFILE="$artemis_dir/mqtarget-broker.pid"
export MQTARGET_ACTIVEMQ_STOMP="127.0.0.1:${ACTIVEMQ_STOMP_PORT:-61614}" \
    MQTARGET_ACTIVEMQ_LOGIN="$ACTIVEMQ_LOGIN" MQTARGET_ACTIVEMQ_PASSCODE="$ACTIVEMQ_PASSCODE" \
    MQTARGET_ACTIVEMQ_PIDFILE="$activemq_dir/mqtarget-broker.pid"
export MQTARGET_RABBITMQ_STOMP="127.0.0.1:${RABBITMQ_STOMP_PORT:-61615}" \
    MQTARGET_RABBITMQ_LOGIN="$RABBITMQ_LOGIN" MQTARGET_RABBITMQ_PASSCODE="$RABBITMQ_PASSCODE" \
    MQTARGET_RABBITMQ_PIDFILE="$rabbitmq_dir/mqtarget-broker.pid"

# RocketMQ: name server 127.0.0.1:9876 with broker-a and broker-b (scripts/rocketmq.sh).
# Its JVMs start next to the STOMP brokers' on small CI machines: allow more than the 120 s default.
export ROCKETMQ_START_TIMEOUT="${ROCKETMQ_START_TIMEOUT:-240}"
start_broker_bg rocketmq
export MQTARGET_ROCKETMQ_NAMESRV="127.0.0.1:${ROCKETMQ_NAMESRV_PORT:-9876}"

step "gofmt"
unformatted="$(gofmt -l cmd config handlers internal publishers)"
if [[ -n "$unformatted" ]]; then
    echo "gofmt would change:" >&2
    echo "$unformatted" >&2
    exit 1
fi

step "go vet"
go vet ./...

step "STOMP brokers"
wait_broker artemis
wait_broker activemq
wait_broker rabbitmq

step "RocketMQ"
wait_broker rocketmq

step "go test -race"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -race -count=1 -timeout 20m ${GO_TEST_FLAGS:-} ./...
