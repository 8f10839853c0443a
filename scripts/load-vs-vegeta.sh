#!/usr/bin/env bash
# `mqtarget load` against vegeta's CLI (issue #16, item 10): one mqtarget on 127.0.0.1 with its embedded
# nsqd, and at each rate (open model) first one then the other for the same duration against the same
# URL, the order swapped every pass. Prints a Markdown table of p50/p99 in milliseconds: mqtarget load's
# latency_ms (from the intended send time), service_ms (from the actual send, what vegeta shows) and
# lag_ms (intended → actual: the generator's own lateness), and vegeta's latency (from its actual send),
# with the requests each sent and their 2xx.
#
# Usage: scripts/load-vs-vegeta.sh [options]
#   -d, --duration D   per run, at most 60s [10s]
#   -r, --rates "R…"   requests per second, each at most 20000 [200 2000 10000]
#   -p, --passes N     passes over the rates, at most 5 [2]
#   -e, --endpoint P   path and query loaded [/send1?size=100]
#       --port N       mqtarget's HTTP port on 127.0.0.1 [18090]
# Environment: MQTARGET_CACHE (where vegeta is installed, ~/.cache/mqtarget by default).
# Needs go, curl and jq; vegeta v12.13.0 is installed with `go install` into $MQTARGET_CACHE/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=10s
RATES="200 2000 10000"
PASSES=2
ENDPOINT="/send1?size=100"
PORT=18090
readonly VEGETA_VERSION=v12.13.0
CACHE="${MQTARGET_CACHE:-$HOME/.cache/mqtarget}"

NAME=load-vs-vegeta
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh # log, die

while (($#)); do
    case $1 in
    -d | --duration) DURATION=$2; shift 2 ;;
    -r | --rates) RATES=$2; shift 2 ;;
    -p | --passes) PASSES=$2; shift 2 ;;
    -e | --endpoint) ENDPOINT=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
if ! [[ $DURATION =~ ^([1-9][0-9]?)s$ ]] || ((BASH_REMATCH[1] > 60)); then die "--duration: whole seconds 1s..60s, got $DURATION"; fi
[[ $PASSES =~ ^[1-5]$ ]] || die "--passes: 1..5, got $PASSES"
if ! [[ $PORT =~ ^[1-9][0-9]{3,4}$ ]] || ((PORT > 65535)); then die "--port: 1024..65535, got $PORT"; fi
[[ $ENDPOINT == /* ]] || die "--endpoint: a path starting with /, got $ENDPOINT"
[[ -n $RATES ]] || die "--rates: at least one rate"
for r in $RATES; do
    if ! [[ $r =~ ^[1-9][0-9]{0,4}$ ]] || ((r > 20000)); then die "--rates: each 1..20000, got $r"; fi
done
for c in go curl jq; do command -v "$c" >/dev/null || die "$c is needed"; done

VEGETA="$CACHE/bin/vegeta"
if ! "$VEGETA" -version 2>/dev/null | grep -q "$VEGETA_VERSION"; then
    log "installing vegeta $VEGETA_VERSION into $CACHE/bin"
    mkdir -p "$CACHE/bin"
    GOBIN="$CACHE/bin" GOFLAGS="" go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-load-vs-vegeta.XXXXXX")"
MQT_PID=
cleanup() {
    local rc=$?
    if [[ -n $MQT_PID ]]; then
        kill "$MQT_PID" 2>/dev/null || true
        wait "$MQT_PID" 2>/dev/null || true
    fi
    if ((rc != 0)) && [[ -s $TMP/mqtarget.log ]]; then tail -n 30 "$TMP/mqtarget.log" >&2; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_in_use "$PORT" && die "port $PORT on 127.0.0.1 is in use (--port)"
log "building mqtarget"
go build -o "$TMP/mqtarget" ./cmd/mqtarget
"$TMP/mqtarget" -http.addr "127.0.0.1:$PORT" -log.level warn >"$TMP/mqtarget.log" 2>&1 &
MQT_PID=$!
BASE="http://127.0.0.1:$PORT"
for ((i = 0; ; i++)); do
    curl -fsS -o /dev/null "$BASE/readyz" 2>/dev/null && break
    kill -0 "$MQT_PID" 2>/dev/null || die "mqtarget exited: $(tail -n 5 "$TMP/mqtarget.log")"
    ((i < 100)) || die "mqtarget not ready after 10 s"
    sleep 0.1
done
URL="$BASE$ENDPOINT"
printf 'GET %s\n' "$URL" >"$TMP/targets"

# The runs write one line each: tool rate pass p50 p99 service_p50 service_p99 lag_p50 lag_p99 requests ok
run_mqtarget() { # rate pass
    "$TMP/mqtarget" load -rate "$1" -duration "$DURATION" -max-error-rate 1 -o json "$URL" >"$TMP/m.json" 2>"$TMP/m.err" || true
    jq -r --arg r "$1" --arg p "$2" '["mqtarget", $r, $p, .latency_ms.p50, .latency_ms.p99, .service_ms.p50, .service_ms.p99,
        .lag_ms.p50, .lag_ms.p99, .requests, .ok, (.not_sent // 0)] | @tsv' "$TMP/m.json" >>"$TMP/rows" ||
        die "mqtarget load at $1/s: $(cat "$TMP/m.err")"
}
run_vegeta() { # rate pass
    "$VEGETA" attack -targets "$TMP/targets" -rate "$1/s" -duration "$DURATION" -timeout 10s >"$TMP/v.bin"
    "$VEGETA" report -type json "$TMP/v.bin" |
        jq -r --arg r "$1" --arg p "$2" '["vegeta", $r, $p, .latencies["50th"] / 1e6, .latencies["99th"] / 1e6, "", "", "", "",
            .requests, (.status_codes["200"] // 0), ""] | @tsv' >>"$TMP/rows"
}

log "warm-up: 2 s at 500/s with each"
"$TMP/mqtarget" load -rate 500 -duration 2s -o json "$URL" >/dev/null 2>&1 || true
"$VEGETA" attack -targets "$TMP/targets" -rate 500/s -duration 2s >/dev/null
: >"$TMP/rows"
for ((p = 1; p <= PASSES; p++)); do
    for r in $RATES; do
        log "pass $p, $r/s for $DURATION"
        if ((p % 2)); then run_mqtarget "$r" "$p"; run_vegeta "$r" "$p"; else run_vegeta "$r" "$p"; run_mqtarget "$r" "$p"; fi
    done
done

printf '\n%s, %s per run, %s passes, %d cores, load average %s; %s\n\n' "$URL" "$DURATION" "$PASSES" "$(nproc)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)"
printf '| rate/s | pass | tool | p50 ms | p99 ms | service p50 | service p99 | lag p50 | lag p99 | requests | 2xx | not sent |\n'
printf '|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n'
sort -t$'\t' -k2,2n -k3,3n -k1,1 "$TMP/rows" | awk -F'\t' '
    function v(x) { return x == "" ? "-" : x }
    { printf "| %s | %s | %s | %.3f | %.3f | %s | %s | %s | %s | %s | %s | %s |\n", $2, $3,
        ($1 == "mqtarget" ? "mqtarget load (latency from due)" : "vegeta"), $4, $5, v($6), v($7), v($8), v($9), $10, $11, v($12) }'
