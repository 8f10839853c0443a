#!/usr/bin/env bash
# Kafka anchor benchmark (docs/benchmarks.md "Anchors with tails", issues #18 item 6 and #21 item 2): one
# private Kafka (scripts/kafka.sh: KRaft, KAFKA_BROKERS brokers, data in a temporary directory),
# 100-byte records, acks=all.
#   1. For each N, in the order direct, mqtarget, mqtarget, direct, each run to a fresh topic (1
#      partition, records to partition 0, as mqtarget's /send1 sends them):
#      - a direct franz-go producer (cmd/bench-kafka: N senders on one client, ProduceSync, acks=all),
#        p50 / p99 / p99.9 from its own histogram;
#      - wrk -cN on mqtarget's /send1?broker=kafka (200 after the produce response);
#      then wrk -cN on mqtarget's /healthz, the HTTP hop alone.
#   2. Beside them, throughput with batching: Kafka's own org.apache.kafka.tools.ProducerPerformance (one
#      producer, --throughput -1, acks=all, via `scripts/kafka.sh tool`) and wrk -c200 on mqtarget's
#      /sendAsync?broker=kafka, each to a fresh topic.
# Prints the markdown tables on stdout (logs on stderr). Kafka is stopped (by its PIDs, scripts/kafka.sh
# stop) at exit.
#
# Usage: scripts/bench-kafka.sh [-c "1 4 16"] [-d SECONDS] [-w SECONDS] [-r ROUNDS] [-p PORT] [--topic NAME]
#   -c, --conns     N values [1 4 16]           (BENCH_CONNS)
#   -d, --duration  measured seconds per run, 1..600 [10]  (BENCH_DURATION)
#   -w, --warmup    unmeasured seconds before each run, 0..600 [3]  (BENCH_WARMUP)
#   -p, --port      mqtarget's HTTP port on 127.0.0.1 [23680]  (BENCH_PORT)
#       --topic     topic prefix; run R at N uses PREFIX-nN-R [anchor-kafka]  (BENCH_TOPIC)
#       --broker-warmup  seconds of an unrecorded direct run at the largest N first, 0..600 [10]
#                   (BENCH_BROKER_WARMUP): run 1 does not pay for a cold broker
#   -r, --rounds    the runs of every N this many times, 1..20 [1] (BENCH_ROUNDS); the even rounds swap
#                   mqtarget's and the floor's places; the tables judge each pair and the medians
# Environment: KAFKA_PORT [23692], KAFKA_CONTROLLER_PORT [23690], KAFKA_BROKERS [1], KAFKA_HEAP,
#   KAFKA_START_TIMEOUT, KAFKA_STOP_TIMEOUT (scripts/kafka.sh); BENCH_PP_RECORDS [20000 per measured
#   second]: ProducerPerformance's --num-records (it has no duration), 1..100000000; BENCH_ASYNC_CONNS
#   [200]: wrk's -c on /sendAsync; BENCH_FRESH=0 (one topic for all runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-kafka
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

export KAFKA_PORT="${KAFKA_PORT:-23692}" KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-23690}" KAFKA_BROKERS="${KAFKA_BROKERS:-1}"
check_port KAFKA_PORT
check_port KAFKA_CONTROLLER_PORT
STARTED=0
on_exit() { if ((STARTED)); then scripts/kafka.sh stop >&2; fi; }
bench_init 23680 anchor-kafka "$@"
PP_RECORDS="${BENCH_PP_RECORDS:-$((20000 * DURATION))}"
check_int BENCH_PP_RECORDS "$PP_RECORDS" 1 100000000
ASYNC_CONNS="${BENCH_ASYNC_CONNS:-200}"
check_int BENCH_ASYNC_CONNS "$ASYNC_CONNS" 1 "$BENCH_MAX_CONNS"
export KAFKA_DATA="$TMP/kafka"
check_int KAFKA_BROKERS "$KAFKA_BROKERS" 1 16
BROKERS=""
for ((k = 0; k < KAFKA_BROKERS; k++)); do BROKERS+="${BROKERS:+,}127.0.0.1:$((KAFKA_PORT + k))"; done

log "starting a private Kafka, $KAFKA_BROKERS broker(s) from 127.0.0.1:$KAFKA_PORT (scripts/kafka.sh)"
STARTED=1
scripts/kafka.sh start >&2
build_go bench-kafka ./cmd/bench-kafka

direct_cmd() { CMD=("$TMP/bench-kafka" -brokers "$BROKERS" -acks all -c "$1" -topic "$2"); }
send_url() { echo "http://127.0.0.1:$PORT/send1?broker=kafka&topic=$1&size=$SIZE"; }
start_mqtarget "http://127.0.0.1:$PORT/readyz" -broker kafka -kafka.brokers "$BROKERS" -kafka.acks all
broker_pids_in "$KAFKA_DATA"
tails_runs

# --- 2. batching: ProducerPerformance and /sendAsync at c200 -------------------------------------------
log "ProducerPerformance: $PP_RECORDS records, --throughput -1, acks=all"
pp_out="$(timeout $((DURATION * 20 + 120)) scripts/kafka.sh tool org.apache.kafka.tools.ProducerPerformance \
    --topic "$TOPIC-pp" --num-records "$PP_RECORDS" --record-size "$SIZE" --throughput -1 \
    --producer-props "bootstrap.servers=$BROKERS" acks=all 2>"$TMP/pp.err")" || { cat "$TMP/pp.err" >&2; die "ProducerPerformance failed"; }
# the last line: "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
pp_line="$(grep 'records sent' <<<"$pp_out" | tail -n 1)"
[[ -n "$pp_line" ]] || { echo "$pp_out" >&2; die "no summary line from ProducerPerformance"; }
log "ProducerPerformance: $pp_line"
log "$CLIENT_LABEL -c$ASYNC_CONNS on /sendAsync"
async_line="$(http_tail "$ASYNC_CONNS" "http://127.0.0.1:$PORT/sendAsync?broker=kafka&topic=$TOPIC-async&size=$SIZE")"
log "/sendAsync c$ASYNC_CONNS: $async_line"

machine_line
echo
echo "Kafka $(basename "$(scripts/kafka.sh fetch 2>/dev/null)"), $KAFKA_BROKERS broker(s) (KRaft); direct client: cmd/bench-kafka (franz-go ProduceSync on one client, acks=all)."
echo
tails_table "direct franz-go producer, acks=all (cmd/bench-kafka)"
echo
echo "With batching (one run each, fresh topics):"
echo
echo "| client | msg/s | p50 ms | p99 ms | p99.9 ms | max ms | errors |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
awk '
    # the number before WHAT in the summary line
    function before(what,    i) { for (i = 2; i <= NF; i++) if ($i == what) return $(i - 1); return "-" }
    { gsub(/[(),]/, ""); gsub(/ ms /, " ")
      printf "| Kafka ProducerPerformance (one producer, --throughput -1, %s records) | %.0f | %s | %s | %s | %s | - |\n",
          $1, before("records/sec"), before("50th"), before("99th"), before("99.9th."), before("max") }' <<<"$pp_line"
awk -v c="$ASYNC_CONNS" -v client="$CLIENT_LABEL" '{ for (i = 1; i <= NF; i++) { split($i, p, "="); f[p[1]] = p[2] }
        printf "| mqtarget `/sendAsync` (%s -c%s) | %s | %s | %s | %s | %s | %s |\n", client, c, f["rate"], f["p50_ms"], f["p99_ms"], f["p999_ms"], f["max_ms"], f["failed"] }' <<<"$async_line"
