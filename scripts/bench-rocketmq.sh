#!/usr/bin/env bash
# Anchor benchmark for RocketMQ (docs/benchmarks.md): RocketMQ's own Java benchmark producer
# (org.apache.rocketmq.example.benchmark.Producer, sync sends from -w N threads) against
# wrk -cN on mqtarget's /send1?broker=rocketmq, for N in 1 4 16, one after the other in one run, against the
# same broker (broker-a of scripts/rocketmq.sh: the topic exists only there) with 100-byte messages.
# Prints a markdown table of TPS and latency side by side. All traffic stays on 127.0.0.1.
#
# Usage: scripts/bench-rocketmq.sh
# Environment (defaults in brackets):
#   BENCH_CONNS     ["1 4 16"]  N values (threads of the Java producer, connections of wrk)
#   BENCH_DURATION  [15]        measured seconds per run
#   BENCH_WARMUP    [5]         warm-up seconds per run, not measured
#   BENCH_PORT      [18080]     mqtarget's HTTP port on 127.0.0.1
#   BENCH_TOPIC     [mqtarget-bench]
# RocketMQ is started with scripts/rocketmq.sh when it is not running (and then stopped again).
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS="${BENCH_CONNS:-1 4 16}"
DURATION="${BENCH_DURATION:-15}"
WARMUP="${BENCH_WARMUP:-5}"
PORT="${BENCH_PORT:-18080}"
TOPIC="${BENCH_TOPIC:-mqtarget-bench}"
NAMESRV="127.0.0.1:${ROCKETMQ_NAMESRV_PORT:-9876}"
BROKER_ADDR="127.0.0.1:${ROCKETMQ_BROKER_A_PORT:-10911}"
SIZE=100

NAME=bench-rocketmq
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh
command -v wrk >/dev/null || ensure_packages wrk
command -v java >/dev/null || die "java not found"

TMP="$(mktemp -d)"
MQT_PID=""
JAVA_PID=""
STARTED_RMQ=0
cleanup() {
    local rc=$?
    if ((rc != 0)) && [[ -s "$TMP/mqtarget.log" ]]; then
        echo "--- mqtarget log (tail) ---" >&2
        tail -n 40 "$TMP/mqtarget.log" >&2
    fi
    if [[ -n "$JAVA_PID" ]]; then kill "$JAVA_PID" 2>/dev/null || true; fi
    if [[ -n "$MQT_PID" ]]; then
        kill "$MQT_PID" 2>/dev/null || true
        wait "$MQT_PID" 2>/dev/null || true
    fi
    if ((STARTED_RMQ == 1)); then scripts/rocketmq.sh stop || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

if ! scripts/rocketmq.sh status >/dev/null 2>&1; then
    STARTED_RMQ=1
    scripts/rocketmq.sh start
fi
BENCH_CP="$(scripts/rocketmq.sh classpath bench)"

log "topic $TOPIC on broker-a only ($BROKER_ADDR), so both producers write to the same broker"
scripts/rocketmq.sh mqadmin updateTopic -b "$BROKER_ADDR" -t "$TOPIC" -r 8 -w 8 -n "$NAMESRV" >"$TMP/topic.out" 2>&1 ||
    { cat "$TMP/topic.out" >&2; die "creating topic $TOPIC failed"; }

log "building and starting mqtarget on 127.0.0.1:$PORT"
go build -o "$TMP/mqtarget" ./cmd/mqtarget
"$TMP/mqtarget" -rocketmq.name_servers "$NAMESRV" -http.addr "127.0.0.1:$PORT" -log.level warn \
    >"$TMP/mqtarget.log" 2>&1 &
MQT_PID=$!
URL="http://127.0.0.1:$PORT/send1?broker=rocketmq&topic=$TOPIC&size=$SIZE"
for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "$URL" 2>/dev/null && break
    kill -0 "$MQT_PID" 2>/dev/null || { cat "$TMP/mqtarget.log" >&2; die "mqtarget exited"; }
    sleep 0.1
done
curl -fsS "$URL" | grep -q 'broker-a@' || die "mqtarget does not publish to broker-a: $(curl -sS "$URL")"

# java_run N: the Java producer with N threads; reports every 5 s; the first report (JIT warm-up) is
# (max(1, WARMUP/5) of them) are dropped and the next DURATION/5 averaged (TPS-weighted RT). Prints "TPS AVG_RT_MS MAX_RT_MS FAILED".
java_run() {
    local n="$1" out="$TMP/java-$1.out"
    local skip=$((WARMUP / 5 > 1 ? WARMUP / 5 : 1)) m=$((DURATION / 5 > 1 ? DURATION / 5 : 1))
    local want=$((skip + m))
    java -Xms256m -Xmx256m -Duser.home="$TMP/javahome" -cp "$BENCH_CP" \
        org.apache.rocketmq.example.benchmark.Producer -n "$NAMESRV" -w "$n" -s "$SIZE" -t "$TOPIC" -ri 5000 \
        >"$out" 2>&1 &
    JAVA_PID=$!
    local deadline=$((SECONDS + 60 + WARMUP + DURATION))
    while (($(grep -c 'Send TPS' "$out" || true) < want)); do
        kill -0 "$JAVA_PID" 2>/dev/null || { cat "$out" >&2; die "java producer exited"; }
        ((SECONDS < deadline)) || { cat "$out" >&2; die "java producer reported too little"; }
        sleep 0.2
    done
    kill "$JAVA_PID" 2>/dev/null || true
    wait "$JAVA_PID" 2>/dev/null || true
    JAVA_PID=""
    grep 'Send TPS' "$out" | tail -n +$((skip + 1)) | head -n "$m" | awk -F'|' '
        { split($2, a, ":"); split($3, m, ":"); split($4, r, ":"); split($5, f, ":")
          tps += a[2]; rt += r[2] * a[2]; if (m[2] + 0 > max) max = m[2] + 0; failed += f[2]; k++ }
        END { printf "%d %.3f %d %d\n", tps / k, (tps ? rt / tps : 0), max, failed }'
}

# wrk_run N: warm-up run (discarded), then the measured one. Prints "RPS AVG P50 P99 NON2XX".
wrk_run() {
    local n="$1" t=$(($1 < 2 ? $1 : 2)) out="$TMP/wrk-$1.out"
    wrk -t"$t" -c"$n" -d"${WARMUP}s" "$URL" >/dev/null
    wrk -t"$t" -c"$n" -d"${DURATION}s" --latency "$URL" >"$out"
    awk '
        /^ +Latency / && !lat { avg = $2; lat = 1 }
        /^ +50% / { p50 = $2 }
        /^ +99% / { p99 = $2 }
        /^Requests\/sec:/ { rps = $2 }
        /Non-2xx or 3xx responses:/ { non2xx = $NF }
        END { printf "%d %s %s %s %d\n", rps, avg, p50, p99, non2xx }' "$out"
}

echo "| N | Java Producer TPS | Java avg RT | Java max RT | mqtarget wrk req/s | wrk avg | wrk p50 | wrk p99 | failed (Java / wrk non-2xx) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for n in $CONNS; do
    log "N=$n: Java benchmark Producer -w $n"
    read -r jtps jrt jmax jfail < <(java_run "$n")
    log "N=$n: wrk -c$n"
    read -r rps avg p50 p99 non2xx < <(wrk_run "$n")
    echo "| $n | $jtps | ${jrt}ms | ${jmax}ms | $rps | $avg | $p50 | $p99 | $jfail / $non2xx |"
done
