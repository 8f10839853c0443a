#!/usr/bin/env bash
# RocketMQ anchor benchmark (docs/benchmarks.md "Anchors with tails", issue #21 item 2; the throughput
# anchor of issue #8 item 4): against one private RocketMQ (scripts/rocketmq.sh: a name server and two
# brokers, data in a temporary directory; the topic exists only on broker-a, so every producer writes to
# the same broker), 100-byte messages, one topic for all runs (a commit log does not slow as it fills;
# the order alternates instead):
#   1. For each N, in the order direct, mqtarget, mqtarget, direct:
#      - a direct rocketmq-client-go producer (cmd/bench-rmqdirect -mode client: N senders, SendSync,
#        no retries), p50 / p99 / p99.9 from its own histogram;
#      - wrk -cN on mqtarget's /send1?broker=rocketmq (rocketmq.client native, the default);
#      then wrk -cN on mqtarget's /healthz, the HTTP hop alone.
#   2. RocketMQ's own Java benchmark Producer (org.apache.rocketmq.example.benchmark.Producer, sync sends
#      from -w N threads) at the same N: its throughput and average RT (it reports no percentiles, which
#      is why the direct client above is the Go one).
# Prints the markdown tables on stdout (logs on stderr). RocketMQ is stopped (scripts/rocketmq.sh stop,
# by its PIDs) at exit unless MQTARGET_ROCKETMQ_NAMESRV names one to use as it is.
#
# Usage: scripts/bench-rocketmq.sh [-c "1 4 16"] [-d SECONDS] [-w SECONDS] [-r ROUNDS] [-p PORT] [--topic NAME]
#   -c, --conns     N values [1 4 16]           (BENCH_CONNS)
#   -d, --duration  measured seconds per run, 1..600 [10]  (BENCH_DURATION)
#   -w, --warmup    unmeasured seconds before each run, 0..600 [3]  (BENCH_WARMUP)
#   -p, --port      mqtarget's HTTP port on 127.0.0.1 [23880]  (BENCH_PORT)
#       --topic     the topic [anchor-rocketmq]  (BENCH_TOPIC)
#       --broker-warmup  seconds of an unrecorded direct run at the largest N first, 0..600 [10]
#                   (BENCH_BROKER_WARMUP): run 1 does not pay for a cold broker
#   -r, --rounds    the runs of every N this many times, 1..20 [1] (BENCH_ROUNDS); the even rounds swap
#                   mqtarget's and the floor's places; the tables judge each pair and the medians
# Environment: MQTARGET_ROCKETMQ_NAMESRV (a running name server host:port to use instead); the private
#   one's ROCKETMQ_NAMESRV_PORT [23876], ROCKETMQ_BROKER_A_PORT [23911], ROCKETMQ_BROKER_B_PORT [23921]
#   (each broker also uses port-2 and port+1), ROCKETMQ_START_TIMEOUT, ROCKETMQ_STOP_TIMEOUT
#   (scripts/rocketmq.sh); BENCH_JAVA=0 skips the Java Producer.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-rocketmq
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

command -v java >/dev/null || die "java not found"
export ROCKETMQ_NAMESRV_PORT="${ROCKETMQ_NAMESRV_PORT:-23876}" ROCKETMQ_BROKER_A_PORT="${ROCKETMQ_BROKER_A_PORT:-23911}" \
    ROCKETMQ_BROKER_B_PORT="${ROCKETMQ_BROKER_B_PORT:-23921}"
for v in ROCKETMQ_NAMESRV_PORT ROCKETMQ_BROKER_A_PORT ROCKETMQ_BROKER_B_PORT; do check_port "$v"; done
export BENCH_FRESH=0 # one topic, created on broker-a only
JAVA_PID=""
STARTED_RMQ=0
on_exit() {
    if [[ -n "$JAVA_PID" ]]; then kill "$JAVA_PID" 2>/dev/null || true; fi
    if ((STARTED_RMQ == 1)); then scripts/rocketmq.sh stop >&2 || true; fi
}
bench_init 23880 anchor-rocketmq "$@"

if [[ -n "${MQTARGET_ROCKETMQ_NAMESRV:-}" ]]; then
    NAMESRV="$MQTARGET_ROCKETMQ_NAMESRV"
    log "using the RocketMQ of name server $NAMESRV"
else
    NAMESRV="127.0.0.1:$ROCKETMQ_NAMESRV_PORT"
    export ROCKETMQ_DATA="$TMP/rocketmq"
    log "starting a private RocketMQ, name server $NAMESRV (scripts/rocketmq.sh)"
    STARTED_RMQ=1
    scripts/rocketmq.sh start >&2
fi
BENCH_CP="$(scripts/rocketmq.sh classpath bench)"
BROKER_ADDR="$(scripts/rocketmq.sh mqadmin clusterList -n "$NAMESRV" 2>/dev/null |
    awk '$2 == "broker-a" && $3 == "0" { print $4; exit }')"
[[ -n "$BROKER_ADDR" ]] || die "no master of broker-a registered in $NAMESRV"

log "topic $TOPIC on broker-a only ($BROKER_ADDR), so every producer writes to the same broker"
scripts/rocketmq.sh mqadmin updateTopic -b "$BROKER_ADDR" -t "$TOPIC" -r 8 -w 8 -n "$NAMESRV" >"$TMP/topic.out" 2>&1 ||
    { cat "$TMP/topic.out" >&2; die "creating topic $TOPIC failed"; }
build_go rmqdirect ./cmd/bench-rmqdirect

direct_cmd() { CMD=("$TMP/rmqdirect" -mode client -namesrv "$NAMESRV" -broker broker-a -c "$1" -topic "$2"); }
send_url() { echo "http://127.0.0.1:$PORT/send1?broker=rocketmq&topic=$1&size=$SIZE"; }
start_mqtarget "$(send_url "$TOPIC")" -broker rocketmq -rocketmq.name_servers "$NAMESRV"
curl -fsS "$(send_url "$TOPIC")" | grep -q 'broker-a@' || die "mqtarget does not publish to broker-a: $(curl -sS "$(send_url "$TOPIC")")"
if ((STARTED_RMQ)); then broker_pids_in "$ROCKETMQ_DATA"; fi # the name server and both brokers
tails_runs

# --- 2. the Java benchmark Producer ----------------------------------------------------------------------
# java_run N: the Java producer with N threads reporting every second; the first 2*WARMUP reports (a
# fresh JVM: start-up and JIT warm-up take longer than Go's) are dropped and the next DURATION averaged
# (RT weighted by TPS); its CPU time is sampled when the measured reports begin and end.
# Prints "TPS AVG_RT_MS FAILED CPU_US_PER_MSG".
# java_fail MESSAGE: stop the Java Producer after a failure; the tails above are kept, its row says so.
java_fail() {
    log "$1"
    kill "$JAVA_PID" 2>/dev/null || true
    wait "$JAVA_PID" 2>/dev/null || true
    JAVA_PID=""
}

java_run() {
    local n="$1" out="$TMP/java-$1.out" skip=$((2 * WARMUP)) want=$((2 * WARMUP + DURATION))
    local reports=0 t0="" t1="" deadline=$((SECONDS + 60 + 2 * WARMUP + DURATION))
    : >"$out" # exists before the polling below reads it
    java -Xms256m -Xmx256m -Duser.home="$TMP/javahome" -cp "$BENCH_CP" \
        org.apache.rocketmq.example.benchmark.Producer -n "$NAMESRV" -w "$n" -s "$SIZE" -t "$TOPIC" -ri 1000 \
        >"$out" 2>&1 &
    JAVA_PID=$!
    while ((reports < want)); do
        if ! kill -0 "$JAVA_PID" 2>/dev/null || grep -q '^Exception in thread' "$out"; then
            tail -n 20 "$out" >&2
            java_fail "the Java Producer failed at N=$n"
            return 1
        fi
        if ((SECONDS >= deadline)); then
            tail -n 20 "$out" >&2
            java_fail "the Java Producer reported too little at N=$n"
            return 1
        fi
        sleep 0.1
        reports=$(grep -c 'Send TPS' "$out" || true)
        if [[ -z "$t0" ]] && ((reports >= skip)); then t0=$(cpu_ticks "$JAVA_PID"); fi
    done
    t1=$(cpu_ticks "$JAVA_PID")
    kill "$JAVA_PID" 2>/dev/null || true
    wait "$JAVA_PID" 2>/dev/null || true
    JAVA_PID=""
    # awk picks the measured lines itself: a head ending the pipe early would kill grep with SIGPIPE,
    # which pipefail makes the function's failure
    grep 'Send TPS' "$out" |
        awk -F'|' -v skip="$skip" -v d="$DURATION" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" '
        NR <= skip || NR > skip + d { next }
        { split($2, a, ":"); split($4, r, ":"); split($5, f, ":")
          tps += a[2]; rt += r[2] * a[2]; failed += f[2]; k++ }
        END { printf "%d %.3f %d %.0f\n", (k ? tps / k : 0), (tps ? rt / tps : 0), failed, (tps ? ticks / hz * 1e6 / tps : 0) }'
}

: >"$TMP/java"
if [[ "${BENCH_JAVA:-1}" != 0 ]]; then
    for n in $CONNS; do
        log "N=$n: Java benchmark Producer -w $n"
        if java_run "$n" >"$TMP/java.res"; then # not in a subshell: cleanup must see JAVA_PID
            echo "$n $(<"$TMP/java.res")" >>"$TMP/java"
        else
            echo "$n failed - - failed" >>"$TMP/java"
        fi
    done
fi

machine_line
echo
echo "RocketMQ $(basename "$(scripts/rocketmq.sh fetch 2>/dev/null)"), topic $TOPIC on broker-a; direct client: cmd/bench-rmqdirect -mode client (rocketmq-client-go SendSync); mqtarget rocketmq.client native."
echo
tails_table "direct rocketmq-client-go producer (cmd/bench-rmqdirect -mode client)"
if [[ -s "$TMP/java" ]]; then
    echo
    echo "RocketMQ's Java benchmark Producer at the same N (after the runs above; it reports averages only):"
    echo
    echo "| N | Java Producer msg/s | avg RT | CPU/msg | failed |"
    echo "| --- | --- | --- | --- | --- |"
    awk '$2 == "failed" { printf "| %s | failed (see the log) | - | - | - |\n", $1; next }
        { printf "| %s | %s | %sms | %sµs | %s |\n", $1, $2, $3, $5, $4 }' "$TMP/java"
fi
