#!/usr/bin/env bash
# STOMP anchor benchmark (docs/benchmarks.md "Anchors with tails", issue #21 item 2; the throughput anchor
# of issue #8 item 5): for each N, in the order direct, mqtarget, mqtarget, direct, against one private
# Artemis (scripts/artemis.sh, its instance in a temporary directory) with 100-byte messages, each run to
# a fresh destination (/topic/PREFIX-nN-R by default: an address without subscribers keeps nothing, so
# the broker's state favours neither side. Queues keep every message, and a private Artemis with the
# default 512M heap starts paging every address once they hold 256 MiB, about 220 000 messages of 100 B,
# which a full run exceeds: from then on every SEND costs ~4.5 ms, for both sides):
#   - a direct go-stomp client (cmd/bench-stompanchor: one connection per sender, SEND with a receipt,
#     waiting for it), p50 / p99 / p99.9 from its own histogram;
#   - wrk -cN on mqtarget's /send1?broker=stomp (200 on the receipt);
# then wrk -cN on mqtarget's /healthz, the HTTP hop alone. Prints the markdown tables on stdout (logs on
# stderr). Artemis is stopped (by its PID, scripts/artemis.sh stop) at exit.
#
# Usage: scripts/bench-stomp.sh [-c "1 4 16"] [-d SECONDS] [-w SECONDS] [-r ROUNDS] [-p PORT] [--topic NAME]
#   -c, --conns     N values [1 4 16]           (BENCH_CONNS)
#   -d, --duration  measured seconds per run, 1..600 [10]  (BENCH_DURATION)
#   -w, --warmup    unmeasured seconds before each run, 0..600 [3]  (BENCH_WARMUP)
#   -p, --port      mqtarget's HTTP port on 127.0.0.1 [23380]  (BENCH_PORT)
#       --topic     destination name prefix [anchor-stomp]  (BENCH_TOPIC)
#       --broker-warmup  seconds of an unrecorded direct run at the largest N first, 0..600 [10]
#                   (BENCH_BROKER_WARMUP): run 1 does not pay for a cold broker
#   -r, --rounds    the runs of every N this many times, 1..20 [1] (BENCH_ROUNDS); the even rounds swap
#                   mqtarget's and the floor's places; the tables judge each pair and the medians
# Environment: BENCH_STOMP_PREFIX [/topic/] (or /queue/: read the paging note above); the private
#   broker's ARTEMIS_STOMP_PORT [23313] (ARTEMIS_CORE_PORT: STOMP port + 3), ARTEMIS_LOGIN, ARTEMIS_PASSCODE,
#   ARTEMIS_HEAP, ARTEMIS_START_TIMEOUT, ARTEMIS_STOP_TIMEOUT (scripts/artemis.sh); BENCH_FRESH=0 (one
#   destination for all runs: then the queue is drained before every run).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-stomp
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

export ARTEMIS_STOMP_PORT="${ARTEMIS_STOMP_PORT:-23313}"
export ARTEMIS_CORE_PORT="${ARTEMIS_CORE_PORT:-$((ARTEMIS_STOMP_PORT + 3))}"
export ARTEMIS_LOGIN="${ARTEMIS_LOGIN:-artemis}" ARTEMIS_PASSCODE="${ARTEMIS_PASSCODE:-artemis}"
check_port ARTEMIS_STOMP_PORT
check_port ARTEMIS_CORE_PORT
PREFIX="${BENCH_STOMP_PREFIX:-/topic/}"
[[ "$PREFIX" == /queue/ || "$PREFIX" == /topic/ ]] || usage_error BENCH_STOMP_PREFIX "/queue/ or /topic/, got '$PREFIX'"
STARTED=0
on_exit() { if ((STARTED)); then scripts/artemis.sh stop >&2; fi; }
bench_init 23380 anchor-stomp "$@"
export ARTEMIS_DATA="$TMP/artemis"
STOMP_ADDR="127.0.0.1:$ARTEMIS_STOMP_PORT"

log "starting a private Artemis, STOMP on $STOMP_ADDR (scripts/artemis.sh)"
STARTED=1
scripts/artemis.sh start >&2
build_go stompanchor ./cmd/bench-stompanchor

direct_cmd() {
    CMD=("$TMP/stompanchor" -addr "$STOMP_ADDR" -login "$ARTEMIS_LOGIN" -passcode "$ARTEMIS_PASSCODE" -c "$1" -dest "$PREFIX$2")
}
send_url() { echo "http://127.0.0.1:$PORT/send1?broker=stomp&topic=$1&size=$SIZE"; }
# before_run: with one destination for all runs (BENCH_FRESH=0) empty the queue first, so that no run
# pays for Artemis paging what earlier runs left.
before_run() {
    [[ "${BENCH_FRESH:-1}" == 0 && "$PREFIX" == /queue/ ]] || return 0
    local got
    got=$(timeout 150 "$TMP/stompanchor" -drain -addr "$STOMP_ADDR" -login "$ARTEMIS_LOGIN" -passcode "$ARTEMIS_PASSCODE" \
        -dest "$PREFIX$3" -d 120s) || die "draining $PREFIX$3 failed"
    log "drained $got messages from $PREFIX$3"
}
start_mqtarget "http://127.0.0.1:$PORT/readyz" -broker stomp -stomp.hosts "$STOMP_ADDR" -stomp.prefix "$PREFIX" \
    -stomp.login "$ARTEMIS_LOGIN" -stomp.passcode "$ARTEMIS_PASSCODE"
broker_pids_in "$ARTEMIS_DATA"
tails_runs
machine_line
echo
echo "Artemis $(basename "$(scripts/artemis.sh fetch 2>/dev/null)"), destinations $PREFIX...; direct client: cmd/bench-stompanchor (go-stomp, one connection per sender, SEND + receipt)."
echo
tails_table "direct go-stomp client (cmd/bench-stompanchor)"
