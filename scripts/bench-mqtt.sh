#!/usr/bin/env bash
# MQTT anchor benchmark (docs/benchmarks.md "Anchors with tails", issues #19 item 5 and #21 item 2): for
# each N, in the order direct, mqtarget, mqtarget, direct, against one private mosquitto
# (scripts/mosquitto.sh, its data in a temporary directory) with 100-byte messages at QoS 1, each run to a
# fresh topic (no subscriber: the broker keeps nothing, so no run pays for an earlier one):
#   - a direct paho.golang publisher (cmd/bench-mqtt: N senders on one MQTT 5 connection, each waiting for
#     its PUBACK), p50 / p99 / p99.9 from its own histogram;
#   - wrk -cN on mqtarget's /send1?broker=mqtt (200 after the PUBACK, mqtt.qos 1);
# then wrk -cN on mqtarget's /healthz, the HTTP hop alone. Prints the markdown tables on stdout (logs on
# stderr). The broker is stopped (by its PID, scripts/mosquitto.sh stop) at exit.
#
# Usage: scripts/bench-mqtt.sh [-c "1 4 16"] [-d SECONDS] [-w SECONDS] [-r ROUNDS] [-p PORT] [--topic NAME]
#   -c, --conns     N values [1 4 16]           (BENCH_CONNS)
#   -d, --duration  measured seconds per run, 1..600 [10]  (BENCH_DURATION)
#   -w, --warmup    unmeasured seconds before each run, 0..600 [3]  (BENCH_WARMUP)
#   -p, --port      mqtarget's HTTP port on 127.0.0.1 [23580]  (BENCH_PORT)
#       --topic     topic prefix; run R at N uses PREFIX-nN-R [anchor-mqtt]  (BENCH_TOPIC)
#       --broker-warmup  seconds of an unrecorded direct run at the largest N first, 0..600 [10]
#                   (BENCH_BROKER_WARMUP): run 1 does not pay for a cold broker
#   -r, --rounds    the runs of every N this many times, 1..20 [1] (BENCH_ROUNDS); the even rounds swap
#                   mqtarget's and the floor's places; the tables judge each pair and the medians
# Environment: MOSQUITTO_PORT [23583] (the private broker's port), MOSQUITTO_START_TIMEOUT,
#   MOSQUITTO_STOP_TIMEOUT (scripts/mosquitto.sh), BENCH_FRESH=0 (one topic for all runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-mqtt
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

export MOSQUITTO_PORT="${MOSQUITTO_PORT:-23583}"
check_port MOSQUITTO_PORT
STARTED=0
on_exit() { if ((STARTED)); then scripts/mosquitto.sh stop >&2; fi; }
bench_init 23580 anchor-mqtt "$@"
# mosquitto drops to its own user, which must reach its data directory below TMP
chmod 755 "$TMP"
export MOSQUITTO_DATA="$TMP/mosquitto"

log "starting a private mosquitto on 127.0.0.1:$MOSQUITTO_PORT (scripts/mosquitto.sh)"
STARTED=1
scripts/mosquitto.sh start >&2
build_go bench-mqtt ./cmd/bench-mqtt

direct_cmd() { CMD=("$TMP/bench-mqtt" -server "127.0.0.1:$MOSQUITTO_PORT" -qos 1 -c "$1" -topic "$2"); }
send_url() { echo "http://127.0.0.1:$PORT/send1?broker=mqtt&topic=$1&size=$SIZE"; }
start_mqtarget "http://127.0.0.1:$PORT/readyz" -broker mqtt -mqtt.servers "127.0.0.1:$MOSQUITTO_PORT" -mqtt.qos 1
broker_pids_in "$MOSQUITTO_DATA"
tails_runs
machine_line
echo
echo "$(scripts/mosquitto.sh probe 2>/dev/null | head -1); direct client: cmd/bench-mqtt (paho.golang Publish at QoS 1 on one connection)."
echo
tails_table "direct paho.golang publisher, QoS 1 (cmd/bench-mqtt)"
