# shellcheck shell=bash
# Shared by scripts/bench-rocketmq.sh and scripts/bench-stomp.sh: settings, clean-up, and wrk runs
# against a mqtarget built from this tree, on 127.0.0.1, with a bounded duration. Source it after `cd` to
# the repository root, define on_exit (what to stop besides mqtarget) and call bench_init.
# Logs go to stderr; stdout is left for the caller's markdown table.

log() { printf '[%s +%ss] %s\n' "${BENCH_NAME:-bench}" "$SECONDS" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "${BENCH_NAME:-bench}" "$*" >&2; exit 1; }

MQT_PID=""

# bench_init CONNS WARMUP PORT TOPIC: the defaults of BENCH_CONNS, BENCH_WARMUP, BENCH_PORT and
# BENCH_TOPIC (BENCH_DURATION defaults to 10); sets CONNS DURATION WARMUP PORT TOPIC SIZE and TMP, and
# cleans up at exit.
# shellcheck disable=SC2034 # the settings are read by the sourcing script
bench_init() {
    CONNS="${BENCH_CONNS:-$1}"
    DURATION="${BENCH_DURATION:-10}"
    WARMUP="${BENCH_WARMUP:-$2}"
    PORT="${BENCH_PORT:-$3}"
    TOPIC="${BENCH_TOPIC:-$4}"
    SIZE=100
    need_wrk
    TMP="$(mktemp -d)"
    trap bench_exit EXIT
}

bench_exit() {
    local rc=$?
    if ((rc != 0)) && [[ -s "$TMP/mqtarget.log" ]]; then
        echo "--- mqtarget log (tail) ---" >&2
        tail -n 40 "$TMP/mqtarget.log" >&2
    fi
    stop_mqtarget
    on_exit
    rm -rf "$TMP"
}

# need_wrk: install wrk from Debian when missing (scripts/lib/broker.sh: one apt-get, waiting for the
# dpkg lock), else fail.
need_wrk() {
    command -v wrk >/dev/null && return
    NAME="${BENCH_NAME:-bench}"
    # shellcheck source=scripts/lib/broker.sh
    . scripts/lib/broker.sh
    ensure_packages wrk
}

# start_mqtarget URL ARGS...: build mqtarget, start it with ARGS on 127.0.0.1:$PORT and wait until URL
# answers 2xx (at most 30 s).
start_mqtarget() {
    local url="$1"
    shift
    log "building and starting mqtarget on 127.0.0.1:$PORT"
    go build -o "$TMP/mqtarget" ./cmd/mqtarget
    "$TMP/mqtarget" -http.addr "127.0.0.1:$PORT" -log.level warn "$@" >"$TMP/mqtarget.log" 2>&1 &
    MQT_PID=$!
    local deadline=$((SECONDS + 30))
    until curl -fsS -o /dev/null "$url" 2>/dev/null; do
        kill -0 "$MQT_PID" 2>/dev/null || { cat "$TMP/mqtarget.log" >&2; die "mqtarget exited"; }
        ((SECONDS < deadline)) || { cat "$TMP/mqtarget.log" >&2; die "mqtarget does not answer $url"; }
        sleep 0.1
    done
}

# stop_mqtarget: SIGTERM the mqtarget started here and wait for it.
stop_mqtarget() {
    if [[ -n "$MQT_PID" ]]; then
        kill "$MQT_PID" 2>/dev/null || true
        wait "$MQT_PID" 2>/dev/null || true
        MQT_PID=""
    fi
}

# cpu_ticks PID: user+system CPU time of PID so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# wrk_run N URL: a WARMUP-second run (discarded), then a DURATION-second one with -cN. Prints
# "RPS AVG P50 P99 NON2XX SOCKET_ERRORS CPU_US" (latencies as wrk prints them; CPU_US: mqtarget's CPU
# time per request of the measured run, in microseconds).
wrk_run() {
    local n="$1" url="$2" t out="$TMP/wrk-$1.out" before after
    t=$((n < 2 ? n : 2))
    wrk -t"$t" -c"$n" -d"${WARMUP}s" "$url" >/dev/null
    before=$(cpu_ticks "$MQT_PID")
    wrk -t"$t" -c"$n" -d"${DURATION}s" --latency "$url" >"$out"
    after=$(cpu_ticks "$MQT_PID")
    awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '
        /^ +Latency / && !lat { avg = $2; lat = 1 }
        /^ +50% / { p50 = $2 }
        /^ +99% / { p99 = $2 }
        /^Requests:|requests in/ { if ($1 ~ /^[0-9]+$/) total = $1 }
        /^Requests\/sec:/ { rps = $2 }
        /Non-2xx or 3xx responses:/ { non2xx = $NF }
        /Socket errors:/ { gsub(/,/, ""); sock = $4 + $6 + $8 + $10 }
        END { printf "%d %s %s %s %d %d %.0f\n", rps, avg, p50, p99, non2xx, sock, (total ? ticks / hz * 1e6 / total : 0) }' "$out"
}

# hop_rps N: wrk -cN on mqtarget's /healthz, the HTTP hop alone at the same N; prints its req/s for
# latency_ceiling.
hop_rps() {
    log "N=$1: wrk -c$1 on /healthz (the HTTP hop alone)"
    wrk_run "$1" "http://127.0.0.1:$PORT/healthz" | awk '{ print $1 }'
}

# latency_ceiling HOP_RPS DIRECT_RPS: the highest mqtarget/direct ratio a run can reach when every request
# adds the HTTP hop to the direct client's latency and the broker answers as fast as for the direct
# client. N closed-loop clients have mean latency N / rate (Little's law), so the direct client's is
# N/DIRECT_RPS, the hop's N/HOP_RPS (wrk on /healthz at the same N), and the ceiling is
# (N/DIRECT_RPS) / (N/DIRECT_RPS + N/HOP_RPS) = HOP_RPS / (HOP_RPS + DIRECT_RPS).
latency_ceiling() {
    awk -v h="$1" -v d="$2" 'BEGIN { if (h + d > 0) printf "%.2f", h / (h + d); else printf "-" }'
}

# ratio A B: A/B with two decimals ("-" when B is 0).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }
