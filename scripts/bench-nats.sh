#!/usr/bin/env bash
# NATS JetStream anchor benchmark (docs/benchmarks.md "Anchors with tails", issues #19 item 5 and #21
# item 2): for each N, in the order direct, mqtarget, mqtarget, direct, against one private nats-server
# (scripts/nats.sh, JetStream on, its data in a temporary directory) with 100-byte messages, each run to
# a fresh subject and stream:
#   - a direct nats.go JetStream publisher (cmd/bench-nats: N senders on one connection, each waiting
#     for its PubAck), p50 / p99 / p99.9 from its own histogram;
#   - wrk -cN on mqtarget's /send1?broker=nats (200 after the PubAck);
# then wrk -cN on mqtarget's /healthz, the HTTP hop alone. Prints the markdown tables on stdout (logs on
# stderr). The server is stopped (by its PID, scripts/nats.sh stop) at exit.
#
# Usage: scripts/bench-nats.sh [-c "1 4 16"] [-d SECONDS] [-w SECONDS] [-r ROUNDS] [-p PORT] [--topic NAME]
#   -c, --conns     N values [1 4 16]           (BENCH_CONNS)
#   -d, --duration  measured seconds per run, 1..600 [10]  (BENCH_DURATION)
#   -w, --warmup    unmeasured seconds before each run, 0..600 [3]  (BENCH_WARMUP)
#   -p, --port      mqtarget's HTTP port on 127.0.0.1 [23480]  (BENCH_PORT)
#       --topic     subject prefix; run R at N uses PREFIX-nN-R [anchor-nats]  (BENCH_TOPIC)
#       --broker-warmup  seconds of an unrecorded direct run at the largest N first, 0..600 [10]
#                   (BENCH_BROKER_WARMUP): run 1 does not pay for a cold broker
#   -r, --rounds    the runs of every N this many times, 1..20 [1] (BENCH_ROUNDS); the even rounds swap
#                   mqtarget's and the floor's places; the tables judge each pair and the medians
# Environment: NATS_PORT [23422], NATS_MONITOR_PORT [23482] (the private server's ports),
#   NATS_START_TIMEOUT, NATS_STOP_TIMEOUT (scripts/nats.sh), NATS_MAX_STORE [8G] (every run's stream
#   keeps its messages: 1G, nats.sh's default, is near what -r 3 stores), BENCH_FRESH=0 (one subject
#   for all runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-nats
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

export NATS_PORT="${NATS_PORT:-23422}" NATS_MONITOR_PORT="${NATS_MONITOR_PORT:-23482}"
check_port NATS_PORT
check_port NATS_MONITOR_PORT
STARTED=0
on_exit() { if ((STARTED)); then scripts/nats.sh stop >&2; fi; }
bench_init 23480 anchor-nats "$@"
export NATS_DATA="$TMP/nats" NATS_MAX_STORE="${NATS_MAX_STORE:-8G}"

log "starting a private nats-server on 127.0.0.1:$NATS_PORT (scripts/nats.sh)"
STARTED=1
scripts/nats.sh start >&2
build_go bench-nats ./cmd/bench-nats

direct_cmd() { CMD=("$TMP/bench-nats" -server "127.0.0.1:$NATS_PORT" -c "$1" -topic "$2"); }
send_url() { echo "http://127.0.0.1:$PORT/send1?broker=nats&topic=$1&size=$SIZE"; }
start_mqtarget "http://127.0.0.1:$PORT/readyz" -broker nats -nats.servers "127.0.0.1:$NATS_PORT"
broker_pids_in "$NATS_DATA"
tails_runs
machine_line
echo
echo "$("$(scripts/nats.sh build)" --version 2>/dev/null | head -1); direct client: cmd/bench-nats (nats.go jetstream.Publish on one connection)."
echo
tails_table "direct nats.go JetStream publisher (cmd/bench-nats)"
