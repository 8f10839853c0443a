#!/usr/bin/env bash
# The closed model of `mqtarget load` against wrk and hey (issue #17, item 4): one mqtarget on 127.0.0.1
# with its embedded nsqd, and in every pass each generator for the same duration with the same number of
# connections against the same URL, the order rotated every pass. Target and generator share the
# machine's cores, so a generator that costs more CPU per request leaves less to the target: the table
# has each generator's 2xx per second, its ratio to wrk's in the same pass, the generator's own CPU per
# request and the target's.
#
# Usage: scripts/load-vs-wrk.sh [options]
#   -d, --duration D      per run, at most 60s [5s]
#   -c, --connections N   connections of every generator, at most 1000 [50]
#   -p, --passes N        passes, at most 5 [2]
#   -e, --endpoint P      path and query loaded [/send1?size=100]
#       --port N          mqtarget's HTTP port on 127.0.0.1 [18091]
# Environment: MQTARGET_CACHE (where hey is installed, ~/.cache/mqtarget by default).
# Needs go, curl, jq and wrk (Debian package wrk); hey v0.1.4 is installed with `go install`.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=5s
CONNS=50
PASSES=2
ENDPOINT="/send1?size=100"
PORT=18091
readonly HEY_VERSION=v0.1.4
CACHE="${MQTARGET_CACHE:-$HOME/.cache/mqtarget}"

NAME=load-vs-wrk
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh # log, die
# shellcheck source=scripts/lib/proc.sh
. scripts/lib/proc.sh # cpu_ticks, wrk_2xx

while (($#)); do
    case $1 in
    -d | --duration) DURATION=$2; shift 2 ;;
    -c | --connections) CONNS=$2; shift 2 ;;
    -p | --passes) PASSES=$2; shift 2 ;;
    -e | --endpoint) ENDPOINT=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
if ! [[ $DURATION =~ ^([1-9][0-9]?)s$ ]] || ((BASH_REMATCH[1] > 60)); then die "--duration: whole seconds 1s..60s, got $DURATION"; fi
SECS=${BASH_REMATCH[1]}
if ! [[ $CONNS =~ ^[1-9][0-9]{0,3}$ ]] || ((CONNS > 1000)); then die "--connections: 1..1000, got $CONNS"; fi
[[ $PASSES =~ ^[1-5]$ ]] || die "--passes: 1..5, got $PASSES"
if ! [[ $PORT =~ ^[1-9][0-9]{3,4}$ ]] || ((PORT > 65535)); then die "--port: 1024..65535, got $PORT"; fi
[[ $ENDPOINT == /* ]] || die "--endpoint: a path starting with /, got $ENDPOINT"
for c in go curl jq wrk; do command -v "$c" >/dev/null || die "$c is needed"; done

HEY="$CACHE/bin/hey"
if ! [[ -x $HEY ]]; then
    log "installing hey $HEY_VERSION into $CACHE/bin"
    mkdir -p "$CACHE/bin"
    GOBIN="$CACHE/bin" GOFLAGS="" go install "github.com/rakyll/hey@$HEY_VERSION"
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-load-vs-wrk.XXXXXX")"
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
"$TMP/mqtarget" -http.addr "127.0.0.1:$PORT" -log.level warn -echo.enabled=false >"$TMP/mqtarget.log" 2>&1 &
MQT_PID=$!
BASE="http://127.0.0.1:$PORT"
for ((i = 0; ; i++)); do
    curl -fsS -o /dev/null "$BASE/readyz" 2>/dev/null && break
    kill -0 "$MQT_PID" 2>/dev/null || die "mqtarget exited: $(tail -n 5 "$TMP/mqtarget.log")"
    ((i < 100)) || die "mqtarget not ready after 10 s"
    sleep 0.1
done
URL="$BASE$ENDPOINT"
TICK=$(getconf CLK_TCK)

# cpu_s FILE: the CPU seconds (user + system) of the shell's finished children in `times` output.
cpu_s() { awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' "$1"; }

# Each run appends: tool pass ok duration_s generator_cpu_s target_cpu_s
run() { # tool pass
    local t0 ok
    t0=$(cpu_ticks "$MQT_PID")
    times >"$TMP/times0" # in this shell, not a subshell: its children are the generators
    case $1 in
    wrk)
        wrk -t2 -c"$CONNS" -d"$DURATION" "$URL" >"$TMP/out"
        ok=$(wrk_2xx "$TMP/out") ;;
    hey)
        "$HEY" -z "$DURATION" -c "$CONNS" "$URL" >"$TMP/out"
        ok=$(awk '/^ *\[2[0-9][0-9]\]/ {n += $2} END {print n + 0}' "$TMP/out") ;;
    mqtarget)
        "$TMP/mqtarget" load -connections "$CONNS" -duration "$DURATION" -max-error-rate 1 -o json "$URL" >"$TMP/out" 2>"$TMP/err" ||
            die "mqtarget load: $(cat "$TMP/err")"
        ok=$(jq -r .ok "$TMP/out") ;;
    esac
    times >"$TMP/times1"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$ok" "$SECS" "$(awk -v a="$(cpu_s "$TMP/times0")" -v b="$(cpu_s "$TMP/times1")" 'BEGIN {print b - a}')" \
        "$(awk -v a="$t0" -v b="$(cpu_ticks "$MQT_PID")" -v t="$TICK" 'BEGIN {print (b - a) / t}')" >>"$TMP/rows"
}

log "warm-up: 2 s with each"
wrk -t2 -c"$CONNS" -d2s "$URL" >/dev/null
"$HEY" -z 2s -c "$CONNS" "$URL" >/dev/null
"$TMP/mqtarget" load -connections "$CONNS" -duration 2s -o json "$URL" >/dev/null 2>&1 || true
: >"$TMP/rows"
TOOLS=(wrk mqtarget hey)
for ((p = 1; p <= PASSES; p++)); do
    for ((i = 0; i < 3; i++)); do
        tool=${TOOLS[(i + p - 1) % 3]}
        log "pass $p: $tool, $CONNS connections for $DURATION"
        run "$tool" "$p"
    done
done

printf '\n%s, %s connections, %s per run, %s passes, %d cores, load average %s; %s\n\n' "$URL" "$CONNS" "$DURATION" "$PASSES" \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)"
printf '| pass | generator | 2xx/s | × wrk | generator CPU µs/req | target CPU µs/req |\n'
printf '|--:|---|--:|--:|--:|--:|\n'
awk -F'\t' '
    { tool[NR] = $1; pass[NR] = $2; ok[NR] = $3; rate[NR] = $3 / $4; gen[NR] = $5; tgt[NR] = $6
      if ($1 == "wrk") wrk[$2] = $3 / $4 }
    END { for (i = 1; i <= NR; i++) printf "| %s | %s | %.0f | %.2f | %.1f | %.1f |\n", pass[i],
        (tool[i] == "mqtarget" ? "mqtarget load" : tool[i]), rate[i], rate[i] / wrk[pass[i]],
        ok[i] ? 1e6 * gen[i] / ok[i] : 0, ok[i] ? 1e6 * tgt[i] / ok[i] : 0 }' "$TMP/rows" | sort -t'|' -k2,2n -s
