#!/usr/bin/env bash
# RocketMQ anchor benchmark (docs/benchmarks.md, issue #8 item 4): for each N, one after the other in one
# run, against the same broker (broker-a: the topic exists only there) with 100-byte messages:
#   1. RocketMQ's own Java benchmark Producer (org.apache.rocketmq.example.benchmark.Producer, sync sends
#      from -w N threads), the anchor;
#   2. mqtarget's RocketMQ publisher driven from Go by N goroutines without HTTP
#      (cmd/bench-rmqdirect), which splits the gap into rocketmq-client-go and the HTTP side;
#   3. wrk -cN on mqtarget's /send1?broker=rocketmq.
# Prints a markdown table with the ratios to the Java Producer on stdout (logs on stderr) and exits 0.
# All traffic stays on 127.0.0.1; every run is bounded by BENCH_WARMUP + BENCH_DURATION.
#
# Usage: scripts/bench-rocketmq.sh
# Environment (defaults in brackets):
#   BENCH_CONNS     ["1 4 16"]  N values (Java threads, Go senders, wrk connections)
#   BENCH_DURATION  [10]        measured seconds per run
#   BENCH_WARMUP    [5]         warm-up seconds per run, not measured
#   BENCH_PORT      [18080]     mqtarget's HTTP port on 127.0.0.1
#   BENCH_TOPIC     [mqtarget-bench]
#   BENCH_RMQ_CLIENTS ["native library"]  rocketmq.client values measured, one after the other per N
#       (the Go publisher with -client, mqtarget with -rocketmq.client), each beside the same Java run
#   MQTARGET_ROCKETMQ_NAMESRV   a running RocketMQ's name server (host:port) to use as it is; without it
#       the RocketMQ of scripts/rocketmq.sh (ROCKETMQ_NAMESRV_PORT, ROCKETMQ_BROKER_A_PORT, ROCKETMQ_DATA,
#       ...) is used, and started (then stopped again at the end) when it is not running.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-rocketmq
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

command -v java >/dev/null || die "java not found"
JAVA_PID=""
STARTED_RMQ=0
on_exit() {
    if [[ -n "$JAVA_PID" ]]; then kill "$JAVA_PID" 2>/dev/null || true; fi
    if ((STARTED_RMQ == 1)); then scripts/rocketmq.sh stop >&2 || true; fi
}
bench_init "1 4 16" 5 18080 mqtarget-bench

if [[ -n "${MQTARGET_ROCKETMQ_NAMESRV:-}" ]]; then
    NAMESRV="$MQTARGET_ROCKETMQ_NAMESRV"
    log "using the RocketMQ of name server $NAMESRV"
else
    NAMESRV="127.0.0.1:${ROCKETMQ_NAMESRV_PORT:-9876}"
    if ! scripts/rocketmq.sh status >/dev/null 2>&1; then
        log "no RocketMQ at $NAMESRV: starting one (scripts/rocketmq.sh)"
        STARTED_RMQ=1
        scripts/rocketmq.sh start >&2
    fi
fi
BENCH_CP="$(scripts/rocketmq.sh classpath bench)"
BROKER_ADDR="$(scripts/rocketmq.sh mqadmin clusterList -n "$NAMESRV" 2>/dev/null |
    awk '$2 == "broker-a" && $3 == "0" { print $4; exit }')"
[[ -n "$BROKER_ADDR" ]] || die "no master of broker-a registered in $NAMESRV"

log "topic $TOPIC on broker-a only ($BROKER_ADDR), so every producer writes to the same broker"
scripts/rocketmq.sh mqadmin updateTopic -b "$BROKER_ADDR" -t "$TOPIC" -r 8 -w 8 -n "$NAMESRV" >"$TMP/topic.out" 2>&1 ||
    { cat "$TMP/topic.out" >&2; die "creating topic $TOPIC failed"; }

log "building the Go sender (cmd/bench-rmqdirect)"
go build -o "$TMP/rmqdirect" ./cmd/bench-rmqdirect
URL="http://127.0.0.1:$PORT/send1?broker=rocketmq&topic=$TOPIC&size=$SIZE"
CLIENTS="${BENCH_RMQ_CLIENTS:-native library}"

# java_run N: the Java producer with N threads reporting every second; the first 2*WARMUP reports (a
# fresh JVM: start-up and JIT warm-up take longer than Go's) are dropped and the next DURATION averaged
# (RT weighted by TPS); its CPU time is sampled when the measured reports begin and end.
# Prints "TPS AVG_RT_MS FAILED CPU_US_PER_MSG".
java_run() {
    local n="$1" out="$TMP/java-$1.out" skip=$((2 * WARMUP)) want=$((2 * WARMUP + DURATION))
    local reports=0 t0="" t1="" deadline=$((SECONDS + 60 + 2 * WARMUP + DURATION))
    : >"$out" # exists before the polling below reads it
    java -Xms256m -Xmx256m -Duser.home="$TMP/javahome" -cp "$BENCH_CP" \
        org.apache.rocketmq.example.benchmark.Producer -n "$NAMESRV" -w "$n" -s "$SIZE" -t "$TOPIC" -ri 1000 \
        >"$out" 2>&1 &
    JAVA_PID=$!
    while ((reports < want)); do
        kill -0 "$JAVA_PID" 2>/dev/null || { cat "$out" >&2; die "java producer exited"; }
        ((SECONDS < deadline)) || { cat "$out" >&2; die "java producer reported too little"; }
        sleep 0.1
        reports=$(grep -c 'Send TPS' "$out" || true)
        if [[ -z "$t0" ]] && ((reports >= skip)); then t0=$(cpu_ticks "$JAVA_PID"); fi
    done
    t1=$(cpu_ticks "$JAVA_PID")
    kill "$JAVA_PID" 2>/dev/null || true
    wait "$JAVA_PID" 2>/dev/null || true
    JAVA_PID=""
    grep 'Send TPS' "$out" | tail -n +$((skip + 1)) | head -n "$DURATION" |
        awk -F'|' -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" '
        { split($2, a, ":"); split($4, r, ":"); split($5, f, ":")
          tps += a[2]; rt += r[2] * a[2]; failed += f[2]; k++ }
        END { printf "%d %.3f %d %.0f\n", tps / k, (tps ? rt / tps : 0), failed, (tps ? ticks / hz * 1e6 / tps : 0) }'
}

echo "| N | client | Java Producer msg/s | Java avg RT | Java CPU/msg | Go publisher msg/s (no HTTP) | Go p50 | Go CPU/msg | mqtarget /send1 req/s | wrk p50 | wrk p99 | mqtarget CPU/req | mqtarget / Java | Go publisher / Java | /healthz req/s | latency ceiling | failed (Java / Go / wrk non-2xx / wrk socket) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for n in $CONNS; do
    log "N=$n: Java benchmark Producer -w $n"
    java_run "$n" >"$TMP/java.res" # not in a subshell: cleanup must see JAVA_PID
    read -r jtps jrt jfail jcpu <"$TMP/java.res"
    for client in $CLIENTS; do
        log "N=$n: Go publisher ($client), $n senders"
        read -r grps gp50 _ gfail _ gcpu < <("$TMP/rmqdirect" -namesrv "$NAMESRV" -topic "$TOPIC" -broker broker-a -c "$n" \
            -client "$client" -size "$SIZE" -d "${DURATION}s" -warmup "${WARMUP}s")
        start_mqtarget "$URL" -rocketmq.name_servers "$NAMESRV" -rocketmq.client "$client"
        curl -fsS "$URL" | grep -q 'broker-a@' || die "mqtarget does not publish to broker-a: $(curl -sS "$URL")"
        log "N=$n: wrk -c$n on /send1 ($client)"
        read -r rps _ p50 p99 non2xx sock mcpu < <(wrk_run "$n" "$URL")
        hrps=$(hop_rps "$n")
        stop_mqtarget
        echo "| $n | $client | $jtps | ${jrt}ms | ${jcpu}µs | $grps | ${gp50}ms | ${gcpu}µs | $rps | $p50 | $p99 | ${mcpu}µs | $(ratio "$rps" "$jtps") | $(ratio "$grps" "$jtps") | $hrps | $(latency_ceiling "$hrps" "$jtps") | $jfail / $gfail / $non2xx / $sock |"
    done
done
