#!/usr/bin/env bash
# STOMP anchor benchmark (docs/benchmarks.md, issue #8 item 5): a direct Go client
# (cmd/bench-stompanchor: go-stomp's stomp.Dial + Send with a receipt, one connection per sender)
# against wrk -cN on mqtarget's /send1?broker=stomp, both publishing 100-byte messages to the same
# Artemis, for each N one after the other. Prints a markdown table with the ratio mqtarget / direct
# client on stdout (logs on stderr) and exits 0. All traffic stays on 127.0.0.1.
#
# Usage: scripts/bench-stomp.sh
# Environment (defaults in brackets):
#   BENCH_CONNS        ["1 4 16 50"]  N values (anchor senders, wrk connections)
#   BENCH_DURATION     [10]           measured seconds per run
#   BENCH_WARMUP       [3]            warm-up seconds per run, not measured
#   BENCH_PORT         [18081]        mqtarget's HTTP port on 127.0.0.1
#   BENCH_TOPIC        [mqtarget-stomp-bench]  queue both publish to (/queue/NAME)
#   ARTEMIS_STOMP_PORT [61613]  ARTEMIS_LOGIN [artemis]  ARTEMIS_PASSCODE [artemis]  ARTEMIS_DATA
#       the Artemis of scripts/artemis.sh to use; it is started (and stopped again at the end) when no
#       broker runs there.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench-stomp
# shellcheck source=scripts/lib/anchor-bench.sh
source scripts/lib/anchor-bench.sh

STARTED_ARTEMIS=0
on_exit() { if ((STARTED_ARTEMIS == 1)); then scripts/artemis.sh stop >&2 || true; fi; }
bench_init "1 4 16 50" 3 18081 mqtarget-stomp-bench
STOMP_ADDR="127.0.0.1:${ARTEMIS_STOMP_PORT:-61613}"
export ARTEMIS_LOGIN="${ARTEMIS_LOGIN:-artemis}" ARTEMIS_PASSCODE="${ARTEMIS_PASSCODE:-artemis}"

if ! scripts/artemis.sh status >/dev/null 2>&1; then
    log "no Artemis on $STOMP_ADDR: starting one (scripts/artemis.sh)"
    STARTED_ARTEMIS=1
    scripts/artemis.sh start >&2
fi

log "building the anchor (cmd/bench-stompanchor)"
go build -o "$TMP/stompanchor" ./cmd/bench-stompanchor
URL="http://127.0.0.1:$PORT/send1?broker=stomp&topic=$TOPIC&size=$SIZE"
start_mqtarget "$URL" -broker stomp -stomp.hosts "$STOMP_ADDR" \
    -stomp.login "$ARTEMIS_LOGIN" -stomp.passcode "$ARTEMIS_PASSCODE"

# drain: empty the queue, so that no run pays for Artemis paging what earlier runs left (no consumer
# reads during the runs, and past its global-max-size Artemis pages to disk).
drain() {
    local got
    got=$(timeout 150 "$TMP/stompanchor" -drain -addr "$STOMP_ADDR" -login "$ARTEMIS_LOGIN" -passcode "$ARTEMIS_PASSCODE" \
        -dest "/queue/$TOPIC" -d 120s) || die "draining /queue/$TOPIC failed"
    log "drained $got messages"
}

drain
echo "| N | direct Go client msg/s | direct p50 | direct p99 | mqtarget /send1 req/s | wrk p50 | wrk p99 | mqtarget CPU/req | ratio mqtarget/direct | /healthz req/s | latency ceiling | errors (direct / wrk non-2xx / wrk socket) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for n in $CONNS; do
    log "N=$n: direct client, $n senders"
    read -r arps ap50 ap99 aerr _ < <(timeout $((WARMUP + DURATION + 60)) "$TMP/stompanchor" -addr "$STOMP_ADDR" -login "$ARTEMIS_LOGIN" \
        -passcode "$ARTEMIS_PASSCODE" -dest "/queue/$TOPIC" -c "$n" -size "$SIZE" \
        -d "${DURATION}s" -warmup "${WARMUP}s")
    drain
    log "N=$n: wrk -c$n on /send1"
    read -r rps _ p50 p99 non2xx sock mcpu < <(wrk_run "$n" "$URL")
    drain
    hrps=$(hop_rps "$n")
    echo "| $n | $arps | ${ap50}ms | ${ap99}ms | $rps | $p50 | $p99 | ${mcpu}µs | $(ratio "$rps" "$arps") | $hrps | $(latency_ceiling "$hrps" "$arps") | $aerr / $non2xx / $sock |"
done
