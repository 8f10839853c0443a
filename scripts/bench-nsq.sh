#!/usr/bin/env bash
# NSQ tail anchor (docs/benchmarks.md "Anchors with tails", issue #21 item 2; run by scripts/bench.sh
# unless --no-tails): for each N, in the order direct, mqtarget, mqtarget, direct, against one private
# nsqd (scripts/nsqd.sh, its data in a temporary directory) with 100-byte messages, each run to a fresh
# topic (nobody consumes; nsqd keeps them in memory, so no run pays for an earlier one's backlog):
#   - a direct go-nsq client (cmd/bench-nsq: a Producer per sender, Publish waiting for OK), p50 / p99 /
#     p99.9 from its own histogram;
#   - wrk -cN on mqtarget's /send1?broker=nsq (200 on nsqd's OK);
# then wrk -cN on mqtarget's /healthz, the HTTP hop alone. Prints the markdown tables on stdout (logs on
# stderr). nsqd is stopped (by its PID, scripts/nsqd.sh stop) at exit.
#
# Usage: scripts/bench-nsq.sh [-c "1 4 16"] [-d SECONDS] [-w SECONDS] [-r ROUNDS] [-p PORT] [--topic NAME]
#   -c, --conns     N values [1 4 16]           (BENCH_CONNS)
#   -d, --duration  measured seconds per run, 1..600 [10]  (BENCH_DURATION)
#   -w, --warmup    unmeasured seconds before each run, 0..600 [3]  (BENCH_WARMUP)
#   -p, --port      mqtarget's HTTP port on 127.0.0.1 [23280]  (BENCH_PORT)
#       --topic     topic prefix; run R at N uses PREFIX-nN-R [anchor-nsq]  (BENCH_TOPIC)
#       --broker-warmup  seconds of an unrecorded direct run at the largest N first, 0..600 [10]
#                   (BENCH_BROKER_WARMUP): run 1 does not pay for a cold broker
#   -r, --rounds    the runs of every N this many times, 1..20 [1] (BENCH_ROUNDS); the even rounds swap
#                   mqtarget's and the floor's places; the tables judge each pair and the medians
# Environment: NSQD_TCP_PORT [23250], NSQD_HTTP_PORT [23251] (the private nsqd's ports),
#   NSQD_START_TIMEOUT, NSQD_STOP_TIMEOUT (scripts/nsqd.sh), BENCH_FRESH=0 (one topic for all runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-nsq
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

export NSQD_TCP_PORT="${NSQD_TCP_PORT:-23250}" NSQD_HTTP_PORT="${NSQD_HTTP_PORT:-23251}"
export NSQD_MEM_QUEUE_SIZE="${NSQD_MEM_QUEUE_SIZE:-1000000}" # a run's messages stay in memory
check_port NSQD_TCP_PORT
check_port NSQD_HTTP_PORT
STARTED=0
on_exit() { if ((STARTED)); then scripts/nsqd.sh stop >&2; fi; }
bench_init 23280 anchor-nsq "$@"
export NSQD_DATA="$TMP/nsqd"

log "starting a private nsqd on 127.0.0.1:$NSQD_TCP_PORT (scripts/nsqd.sh)"
STARTED=1
scripts/nsqd.sh start >&2
build_go bench-nsq ./cmd/bench-nsq

direct_cmd() { CMD=("$TMP/bench-nsq" -nsqd "127.0.0.1:$NSQD_TCP_PORT" -c "$1" -topic "$2"); }
send_url() { echo "http://127.0.0.1:$PORT/send1?broker=nsq&topic=$1&size=$SIZE"; }
start_mqtarget "http://127.0.0.1:$PORT/readyz" -broker nsq -nsq.hosts "127.0.0.1:$NSQD_TCP_PORT"
broker_pids_in "$NSQD_DATA"
tails_runs
machine_line
echo
echo "nsqd $("$(scripts/nsqd.sh build)" --version 2>/dev/null | awk '{print $2}'); direct client: cmd/bench-nsq (go-nsq, a Producer per sender)."
echo
tails_table "direct go-nsq client (cmd/bench-nsq)"
