#!/usr/bin/env bash
# AMQP 0-9-1 (RabbitMQ) anchor benchmark (docs/benchmarks.md "Anchors with tails", issues #19 item 5 and
# #21 item 2): one private RabbitMQ node (scripts/rabbitmq.sh, its data in a temporary directory),
# persistent 100-byte messages to durable queues, publisher confirms on.
#   1. For each N, in the order direct, mqtarget, mqtarget, direct, each run to a fresh queue (nobody
#      consumes, so no run pays for an earlier run's backlog):
#      - a direct amqp091-go publisher (cmd/bench-amqp: N senders, a confirm-mode channel each, waiting
#        for the confirm), p50 / p99 / p99.9 from its own histogram;
#      - wrk -cN on mqtarget's /send1?broker=amqp (200 on the confirm);
#      then wrk -cN on mqtarget's /healthz, the HTTP hop alone.
#   2. RabbitMQ's own PerfTest (Maven Central com.rabbitmq:perf-test, fetched by mvn into the cache) at the
#      same N: N producers, no consumer, --confirm 1 (one unconfirmed publish each: the same closed loop),
#      persistent, to a fresh queue; its per-second confirm latency percentiles (PerfTest reports no
#      p99.9 and no whole-run percentile: the table gives the median of its per-second medians and the
#      worst per-second 99th).
# Prints the markdown tables on stdout (logs on stderr). The node is stopped (scripts/rabbitmq.sh stop,
# by its PID) at exit.
#
# Usage: scripts/bench-amqp.sh [-c "1 4 16"] [-d SECONDS] [-w SECONDS] [-r ROUNDS] [-p PORT] [--topic NAME]
#   -c, --conns     N values [1 4 16]           (BENCH_CONNS)
#   -d, --duration  measured seconds per run, 1..600 [10]  (BENCH_DURATION)
#   -w, --warmup    unmeasured seconds before each run, 0..600 [3]  (BENCH_WARMUP)
#   -p, --port      mqtarget's HTTP port on 127.0.0.1 [23780]  (BENCH_PORT)
#       --topic     queue prefix; run R at N uses PREFIX-nN-R [anchor-amqp]  (BENCH_TOPIC)
#       --broker-warmup  seconds of an unrecorded direct run at the largest N first, 0..600 [10]
#                   (BENCH_BROKER_WARMUP): run 1 does not pay for a cold broker
#   -r, --rounds    the runs of every N this many times, 1..20 [1] (BENCH_ROUNDS); the even rounds swap
#                   mqtarget's and the floor's places; the tables judge each pair and the medians
# Environment: the private node's RABBITMQ_NODE_PORT [23772], RABBITMQ_STOMP_PORT [23713],
#   RABBITMQ_DIST_PORT [23773], RABBITMQ_EPMD_PORT [23769], RABBITMQ_NODENAME [mqtbench@localhost],
#   RABBITMQ_START_TIMEOUT, RABBITMQ_STOP_TIMEOUT (scripts/rabbitmq.sh); BENCH_PERFTEST_VERSION [2.22.1];
#   BENCH_FRESH=0 (one queue for all runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-amqp
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

export RABBITMQ_NODE_PORT="${RABBITMQ_NODE_PORT:-23772}" RABBITMQ_STOMP_PORT="${RABBITMQ_STOMP_PORT:-23713}" \
    RABBITMQ_DIST_PORT="${RABBITMQ_DIST_PORT:-23773}" RABBITMQ_EPMD_PORT="${RABBITMQ_EPMD_PORT:-23769}" \
    RABBITMQ_NODENAME="${RABBITMQ_NODENAME:-mqtbench@localhost}" \
    RABBITMQ_LOGIN="${RABBITMQ_LOGIN:-mqtarget}" RABBITMQ_PASSCODE="${RABBITMQ_PASSCODE:-mqtarget}"
for v in RABBITMQ_NODE_PORT RABBITMQ_STOMP_PORT RABBITMQ_DIST_PORT RABBITMQ_EPMD_PORT; do check_port "$v"; done
PERFTEST_VERSION="${BENCH_PERFTEST_VERSION:-2.22.1}"
[[ "$PERFTEST_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || usage_error BENCH_PERFTEST_VERSION "a version like 2.22.1, got '$PERFTEST_VERSION'"
command -v java >/dev/null || die "java not found (PerfTest runs on it)"
STARTED=0
PT_PID=""
on_exit() {
    if [[ -n "$PT_PID" ]]; then kill "$PT_PID" 2>/dev/null || true; fi
    if ((STARTED)); then scripts/rabbitmq.sh stop >&2; fi
}
bench_init 23780 anchor-amqp "$@"
export RABBITMQ_DATA="$TMP/rabbitmq"
# shellcheck disable=SC2031 # MQTARGET_CACHE is the caller's (broker.sh sets it only in need_tools' subshell)
PT_LIB="$(maven_lib "${MQTARGET_CACHE:-$HOME/.cache/mqtarget}/perf-test-$PERFTEST_VERSION" "com.rabbitmq:perf-test:$PERFTEST_VERSION")"

log "starting a private RabbitMQ node $RABBITMQ_NODENAME, AMQP on 127.0.0.1:$RABBITMQ_NODE_PORT (scripts/rabbitmq.sh)"
STARTED=1
scripts/rabbitmq.sh start >&2
AMQP_URL="amqp://$RABBITMQ_LOGIN:$RABBITMQ_PASSCODE@127.0.0.1:$RABBITMQ_NODE_PORT/"
# the Java client reads the empty path after the port as the vhost "" (refused: 530 vhost not found)
PT_URL="${AMQP_URL}%2F"
build_go bench-amqp ./cmd/bench-amqp

direct_cmd() { CMD=("$TMP/bench-amqp" -url "$AMQP_URL" -c "$1" -topic "$2"); }
send_url() { echo "http://127.0.0.1:$PORT/send1?broker=amqp&topic=$1&size=$SIZE"; }
# after_run N RUN QUEUE: delete the run's queue (nobody consumes it): the node's memory limit would
# otherwise block publishing part way through a pass (it did at -r 3, N = 16: "low on memory").
after_run() {
    [[ "${BENCH_FRESH:-1}" != 0 ]] || return 0
    scripts/rabbitmq.sh ctl delete_queue "$3" >/dev/null 2>&1 || log "could not delete queue $3"
}
start_mqtarget "http://127.0.0.1:$PORT/readyz" -broker amqp -amqp.urls "$AMQP_URL"
broker_pids_in "$RABBITMQ_DATA"
tails_runs

# --- 2. PerfTest ----------------------------------------------------------------------------------------
# perftest N: PerfTest for WARMUP + DURATION seconds; prints "RATE P50 P99 UNIT" over the measured
# seconds (its per-second lines after the warm-up): the mean sent rate, the median of the per-second
# median confirm latencies and the worst per-second 99th.
perftest() {
    local n="$1" out="$TMP/perftest-$1.out"
    java -Xms64m -Xmx256m -cp "$PT_LIB/*" com.rabbitmq.perf.PerfTest -h "$PT_URL" -x "$n" -y 0 -c 1 -s "$SIZE" \
        -f persistent -u "$TOPIC-perftest-n$n" -ad false -z $((WARMUP + DURATION)) >"$out" 2>&1 &
    PT_PID=$!
    if ! timeout $((WARMUP + DURATION + 120)) tail --pid="$PT_PID" -f /dev/null; then
        log "PerfTest at N=$n did not end in time"
        kill "$PT_PID" 2>/dev/null || true
    fi
    if ! wait "$PT_PID"; then
        PT_PID=""
        tail -n 20 "$out" >&2
        log "PerfTest at N=$n failed (its row says so; the tails above are kept)"
        echo "- - - -"
        return 0
    fi
    PT_PID=""
    # a line (PerfTest's DefaultPrintStreamMetricsFormatter): "id: test-..., time 3.000 s, sent: 1234 msg/s,
    # confirmed: 1234 msg/s, nacked: 0 msg/s, ..., min/median/75th/95th/99th confirm latency: 100/200/300/400/500 µs"
    awk -v skip="$WARMUP" '
        /time [0-9.]+ s, sent: / && /confirm latency/ {
            match($0, /time [0-9.]+ s/); t = substr($0, RSTART + 5, RLENGTH - 7) + 0
            if (t < skip + 0.5) next # the report at ~skip s covers the warm-up
            match($0, /sent: [0-9.]+/); rate += substr($0, RSTART + 6, RLENGTH - 6); k++
            s = $0; sub(/.*confirm latency:? */, "", s); split(s, w, " "); split(w[1], l, "/"); unit = w[2]
            med[k] = l[2] + 0; if (l[5] + 0 > worst) worst = l[5] + 0
        }
        END {
            if (!k) { print "- - - -"; exit }
            for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (med[j] < med[i]) { x = med[i]; med[i] = med[j]; med[j] = x }
            printf "%.0f %s %s %s\n", rate / k, med[int((k + 1) / 2)], worst, unit
        }' "$out"
}
: >"$TMP/perftest"
for n in $CONNS; do
    log "N=$n: PerfTest -x $n -y 0 --confirm 1"
    perftest "$n" >"$TMP/pt.res" # not in a subshell: cleanup must see PT_PID
    read -r prate pp50 pp99 unit <"$TMP/pt.res"
    log "N=$n: PerfTest: $prate msg/s, median confirm latency $pp50 $unit, worst per-second p99 $pp99 $unit"
    echo "$n $prate $pp50 $pp99 $unit" >>"$TMP/perftest"
done

machine_line
echo
echo "RabbitMQ $(scripts/rabbitmq.sh ctl version 2>/dev/null || echo '?'); direct client: cmd/bench-amqp (amqp091-go, a confirm-mode channel per sender); PerfTest $PERFTEST_VERSION."
echo
tails_table "direct amqp091-go publisher with confirms (cmd/bench-amqp)"
echo
echo "RabbitMQ PerfTest $PERFTEST_VERSION at the same N (one run each, after the runs above; N producers, no consumer, --confirm 1, persistent):"
echo
echo "| N | PerfTest msg/s | confirm latency: median of per-second medians | worst per-second 99th |"
echo "| --- | --- | --- | --- |"
awk '{ printf "| %s | %s | %s %s | %s %s |\n", $1, $2, $3, $5, $4, $5 }' "$TMP/perftest"
