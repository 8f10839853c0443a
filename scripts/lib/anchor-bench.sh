# shellcheck shell=bash
# The anchor benchmarks' library (scripts/bench-{stomp,rocketmq,nsq,kafka,amqp,nats,mqtt}.sh, issue #21
# item 2): settings checked with exit 2 naming the flag, a mqtarget built from this tree on 127.0.0.1,
# a clean-up trap, and the tail comparison every anchor prints: for each N, a direct client of the
# broker (a cmd/bench-* program over cmd/internal/closedloop: every latency in a histogram, p50 / p99 /
# p99.9), wrk -cN on mqtarget's /send1 and wrk -cN on the floor (the same direct client behind bare chi
# + net/http: what the same libraries give with nothing else), in the order direct, mqtarget, floor,
# floor, mqtarget, direct (A-B-B-A pairs), each run to a fresh destination when the script gives one
# (so no run pays for an earlier run's backlog and a broker slowing as it fills hits all alike), then
# wrk -cN on /healthz (the HTTP hop alone). CPU time per message is counted for every process: the
# client (direct client or wrk), mqtarget or the floor, and the broker (BROKER_PIDS, broker_pids_in). Source it after `cd` to the repository root, then:
#
#   BENCH_NAME=bench-x; source scripts/lib/anchor-bench.sh
#   on_exit() { ...stop what the script started... }     # called by the EXIT trap
#   bench_init PORT TOPIC "$@"                            # flags and BENCH_* settings; TMP, trap
#   direct_cmd() { CMD=("$TMP/bench-x" -c "$1" -topic "$2"); }  # N DEST: the direct client's command
#   send_url() { echo "http://127.0.0.1:$PORT/send1?broker=x&topic=$1&size=$SIZE"; }  # DEST
#   start_mqtarget URL ARGS...
#   tails_runs                                            # every N, A-B-B-A, then the hop
#   tails_table "direct client name"                      # the markdown tables on stdout
#
# Logs go to stderr; stdout is left for the caller's markdown table.

log() { printf '[%s +%ss] %s\n' "${BENCH_NAME:-bench}" "$SECONDS" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "${BENCH_NAME:-bench}" "$*" >&2; exit 1; }
# usage_error FLAG MESSAGE: a bad setting; exit 2 naming it.
usage_error() { printf '[%s] %s: %s (see --help)\n' "${BENCH_NAME:-bench}" "$1" "$2" >&2; exit 2; }

MQT_PID=""
# Bounds of the settings: every run is bounded by them.
readonly BENCH_MAX_SECONDS=600 BENCH_MAX_CONNS=1000

# check_int FLAG VALUE MIN MAX: VALUE is a whole number in MIN..MAX, else exit 2 naming FLAG.
check_int() {
    if ! [[ "$2" =~ ^[0-9]{1,9}$ ]] || (("$2" < $3 || "$2" > $4)); then
        usage_error "$1" "must be a whole number in $3..$4, got '$2'"
    fi
}

# check_port VAR: $VAR is a TCP port (1024..65535), else exit 2 naming VAR.
check_port() { check_int "$1" "${!1}" 1024 65535; }

# bench_usage: the script's header comment (from line 2 to `set -euo`).
bench_usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

# bench_init PORT TOPIC ARGS...: the settings, from the flags in ARGS over the BENCH_* environment over
# the defaults (N: 1 4 16; 10 s measured, 3 s warm-up; mqtarget on PORT; destinations named TOPIC-...):
#   -c, --conns "N..."   (BENCH_CONNS)     -d, --duration S (BENCH_DURATION)
#   -w, --warmup S       (BENCH_WARMUP)    -p, --port P     (BENCH_PORT)     --topic T (BENCH_TOPIC)
#   --broker-warmup S    (BENCH_BROKER_WARMUP [10]): an unrecorded direct run at the largest N before
#                        the first measured one, so that run 1 does not pay for a cold broker (a JVM's JIT)
#   BENCH_ORDER          the order of tails_runs' runs (see there)
# Sets CONNS DURATION WARMUP PORT TOPIC SIZE RUN_ORDER TMP and COMMAND (the command line as run), and
# cleans up at exit. Bad settings exit 2 naming the flag.
# shellcheck disable=SC2034 # the settings are read by the sourcing script
bench_init() {
    CONNS="${BENCH_CONNS:-1 4 16}"
    DURATION="${BENCH_DURATION:-10}"
    WARMUP="${BENCH_WARMUP:-3}"
    BROKER_WARMUP="${BENCH_BROKER_WARMUP:-10}"
    PORT="${BENCH_PORT:-$1}"
    TOPIC="${BENCH_TOPIC:-$2}"
    SIZE=100
    shift 2
    COMMAND="$0${*:+ $*}"
    while (($#)); do
        case "$1" in
            -c | --conns | -d | --duration | -w | --warmup | --broker-warmup | -p | --port | --topic)
                (($# >= 2)) || usage_error "$1" "needs a value" ;;
        esac
        case "$1" in
            -c | --conns) CONNS="$2"; shift ;;
            -d | --duration) DURATION="$2"; shift ;;
            -w | --warmup) WARMUP="$2"; shift ;;
            --broker-warmup) BROKER_WARMUP="$2"; shift ;;
            -p | --port) PORT="$2"; shift ;;
            --topic) TOPIC="$2"; shift ;;
            -h | --help) bench_usage; exit 0 ;;
            *) usage_error "$1" "unknown option" ;;
        esac
        shift
    done
    check_int "--duration (BENCH_DURATION)" "$DURATION" 1 "$BENCH_MAX_SECONDS"
    check_int "--warmup (BENCH_WARMUP)" "$WARMUP" 0 "$BENCH_MAX_SECONDS"
    check_int "--broker-warmup (BENCH_BROKER_WARMUP)" "$BROKER_WARMUP" 0 "$BENCH_MAX_SECONDS"
    check_int "--port (BENCH_PORT)" "$PORT" 1024 65535
    [[ -n "$CONNS" ]] || usage_error "--conns (BENCH_CONNS)" "no N given"
    local n
    for n in $CONNS; do check_int "--conns (BENCH_CONNS)" "$n" 1 "$BENCH_MAX_CONNS"; done
    [[ "$TOPIC" =~ ^[A-Za-z0-9_-]{1,100}$ ]] || usage_error "--topic (BENCH_TOPIC)" "letters, digits, - and _ only (1..100), got '$TOPIC'"
    # The runs of every N (tails_runs), checked here so a bad BENCH_ORDER stops before a broker starts.
    RUN_ORDER="direct send1 floor floor send1 direct"
    if [[ ${BENCH_FLOOR:-1} == 0 ]]; then RUN_ORDER="direct send1 send1 direct"; fi
    if [[ -n ${BENCH_ORDER:-} ]]; then
        local want got
        want="$(tr ' ' '\n' <<<"$RUN_ORDER" | sort | tr '\n' ' ')"
        got="$(tr -s ' ' '\n' <<<"$BENCH_ORDER" | grep . | sort | tr '\n' ' ')"
        [[ "$got" == "$want" ]] || usage_error BENCH_ORDER "must be the runs ${want% } in some order, got '$BENCH_ORDER'"
        RUN_ORDER="$BENCH_ORDER"
    fi
    need_tools
    TMP="$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-${BENCH_NAME:-bench}.XXXXXX")"
    : >"$TMP/rows"
    trap bench_exit EXIT
    trap 'exit 130' INT TERM
}

bench_exit() {
    local rc=$?
    if ((rc != 0)) && [[ -s "$TMP/mqtarget.log" ]]; then
        echo "--- mqtarget log (tail) ---" >&2
        tail -n 40 "$TMP/mqtarget.log" >&2
    fi
    stop_mqtarget
    if declare -F on_exit >/dev/null; then on_exit || true; fi
    rm -rf "$TMP"
}

# need_tools: wrk and curl from Debian when missing (scripts/lib/broker.sh: one apt-get, waiting for the
# dpkg lock), go on PATH.
need_tools() {
    command -v go >/dev/null || die "go is required (it builds mqtarget and the direct client)"
    local missing=() t
    for t in wrk curl; do command -v "$t" >/dev/null || missing+=("$t"); done
    ((${#missing[@]})) || return 0
    (
        # shellcheck disable=SC2034 # NAME is broker.sh's log prefix
        NAME="${BENCH_NAME:-bench}"
        # shellcheck source=scripts/lib/broker.sh
        . scripts/lib/broker.sh
        ensure_packages "${missing[@]}"
    )
}

# build_go NAME PKG: go build PKG into $TMP/NAME (once).
build_go() {
    [[ -x "$TMP/$1" ]] && return 0
    log "building $2"
    go build -o "$TMP/$1" "$2"
}

# start_mqtarget URL ARGS...: start mqtarget (built from this tree) with ARGS on 127.0.0.1:$PORT and wait
# until URL answers 2xx (at most BENCH_MQTARGET_TIMEOUT [60] s).
start_mqtarget() {
    local url="$1" deadline=$((SECONDS + ${BENCH_MQTARGET_TIMEOUT:-60}))
    shift
    stop_mqtarget
    build_go mqtarget ./cmd/mqtarget
    # another process on the port would answer the readiness check in our mqtarget's place
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then die "127.0.0.1:$PORT is taken already: choose another with --port"; fi
    log "starting mqtarget on 127.0.0.1:$PORT${*:+ with $*}" 2>&1 | sed -E 's#(://[^:/@ ]*:)[^@ ]*@#\1***@#g' >&2
    "$TMP/mqtarget" -http.addr "127.0.0.1:$PORT" -log.level warn "$@" >"$TMP/mqtarget.log" 2>&1 &
    MQT_PID=$!
    until curl -fsS -o /dev/null "$url" 2>/dev/null; do
        kill -0 "$MQT_PID" 2>/dev/null || { cat "$TMP/mqtarget.log" >&2; die "mqtarget exited"; }
        ((SECONDS < deadline)) || { cat "$TMP/mqtarget.log" >&2; die "mqtarget does not answer $url: $(curl -sS "$url" 2>&1)"; }
        sleep 0.1
    done
    kill -0 "$MQT_PID" 2>/dev/null || { cat "$TMP/mqtarget.log" >&2; die "mqtarget exited"; }
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
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# broker_pids_in DIR: sets BROKER_PIDS to the processes of the broker started with its data in DIR:
# those its script's PID files (*.pid under DIR) name, and their descendants (a start wrapper's JVM or
# Erlang VM). Call it once the broker is ready.
broker_pids_in() {
    local roots
    roots="$(find "$1" -maxdepth 3 -name '*.pid' -exec cat {} + 2>/dev/null | tr -s ' \n' ' ')"
    BROKER_PIDS="$(ps -e -o pid=,ppid= | awk -v roots="$roots" '
        { parent[$1] = $2 }
        END {
            n = split(roots, r, " "); for (i = 1; i <= n; i++) if (r[i] in parent) keep[r[i]] = 1
            do { more = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; more = 1 } } while (more)
            for (p in keep) printf "%s ", p }')"
    [[ -n $BROKER_PIDS ]] || log "no running broker process found from the PID files under $1: no broker CPU column"
    log "broker processes (CPU counted per message): ${BROKER_PIDS:-none}"
}

# broker_ticks: user+system CPU ticks so far of the broker's processes, BROKER_PIDS (the script sets it
# once its broker runs; unset: none counted, and the tables show no broker column values).
broker_ticks() {
    local p t=0
    for p in ${BROKER_PIDS:-}; do
        if [[ -r /proc/$p/stat ]]; then t=$((t + $(cpu_ticks "$p"))); fi
    done
    echo "$t"
}

# wrk_tail N URL [PID]: wrk -cN on URL for WARMUP seconds (discarded), then DURATION seconds measured with
# scripts/wrk/bench.lua. Prints the direct clients' result line (closedloop.Result.String), from wrk's
# own latency histogram (1 µs precision), with errors = non-2xx answers + socket errors; cpu_us =
# the CPU time per request of the server under test (PID, default mqtarget's) over the measured run, client_us = wrk's, broker_us = the broker's
# (BROKER_PIDS) over the same run.
wrk_tail() {
    local n="$1" url="$2" pid="${3:-$MQT_PID}" t out before after b0 b1 TIMEFORMAT='%3U %3S'
    t=$((n < 2 ? n : 2))
    if ((WARMUP > 0)); then
        wrk -t"$t" -c"$n" -d"${WARMUP}s" "$url" >/dev/null || die "wrk warm-up on $url failed"
    fi
    before=$(cpu_ticks "$pid") b0=$(broker_ticks)
    # `time` reports wrk's own CPU (the load generator's share of the 2 cores) into wrk.time
    { time timeout $((DURATION + 60)) wrk -t"$t" -c"$n" -d"${DURATION}s" -s scripts/wrk/bench.lua "$url" >"$TMP/wrk.out" 2>&1; } 2>"$TMP/wrk.time" ||
        die "wrk on $url failed: $(cat "$TMP/wrk.out")"
    after=$(cpu_ticks "$pid") b1=$(broker_ticks)
    out="$(<"$TMP/wrk.out")"
    grep -m1 '^BENCH ' <<<"$out" | awk -v ticks=$((after - before)) -v bticks=$((b1 - b0)) -v hz="$(getconf CLK_TCK)" \
        -v wrkcpu="$(awk '{ print $1 + $2 }' "$TMP/wrk.time")" -v brokers="${BROKER_PIDS:-}" '
        { for (i = 2; i <= NF; i++) { split($i, p, "="); f[p[1]] = p[2] } }
        END {
            secs = f["duration_us"] / 1e6
            bad = f["non2xx"] + f["connect"] + f["read"] + f["write"] + f["timeout"]
            printf "rate=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f failed=%d sent=%d cpu_us=%.0f",
                (secs ? f["ok"] / secs : 0), f["p50_us"] / 1e3, f["p99_us"] / 1e3, f["p999_us"] / 1e3, f["max_us"] / 1e3,
                bad, f["ok"], (f["requests"] ? ticks / hz * 1e6 / f["requests"] : 0)
            if (f["requests"]) {
                printf " client_us=%.1f", wrkcpu * 1e6 / f["requests"]
                if (brokers != "") printf " broker_us=%.1f", bticks / hz * 1e6 / f["requests"]
            }
            printf "\n" }'
}

# direct_tail N DEST [SECONDS]: the command the script's direct_cmd N DEST puts in CMD, with the common
# flags (measuring SECONDS, default DURATION), bounded in time; prints its result line (it must start
# with rate=), with broker_us = the broker's CPU per message (BROKER_PIDS; its CPU per second over the
# client's whole run, warm-up included, divided by the measured rate).
direct_tail() {
    local line CMD=() secs="${3:-$DURATION}" b0 b1 t0 t1
    direct_cmd "$1" "$2"
    b0=$(broker_ticks) t0=$EPOCHREALTIME
    line="$(timeout $((WARMUP + secs + 120)) "${CMD[@]}" -size "$SIZE" -d "${secs}s" -warmup "${WARMUP}s")" ||
        die "the direct client failed at N=$1 (destination $2)"
    b1=$(broker_ticks) t1=$EPOCHREALTIME
    [[ "$line" == rate=* ]] || die "the direct client printed '$line', not a result line"
    if [[ -n ${BROKER_PIDS:-} ]]; then
        line+="$(awk -v l="$line" -v bt=$((b1 - b0)) -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" 'BEGIN {
            n = split(l, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); f[p[1]] = p[2] }
            if (f["rate"] > 0 && t1 > t0) printf " broker_us=%.1f", bt / hz / (t1 - t0) * 1e6 / f["rate"] }')"
    fi
    echo "$line"
}

# record N RUN CLIENT LINE: one row of the results.
record() {
    echo "n=$1 run=$2 client=$3 $4" >>"$TMP/rows"
    log "N=$1 run $2 $3: $4"
}

# dest N RUN: the run's destination: fresh per run (TOPIC-nN-RUN) unless BENCH_FRESH=0 (then TOPIC).
dest() {
    if [[ "${BENCH_FRESH:-1}" == 0 ]]; then echo "$TOPIC"; else echo "$TOPIC-n$1-$2"; fi
}

# floor_tail N DEST: the floor row: the direct client's session served over bare chi + net/http
# (closedloop -http, the same libraries as mqtarget and nothing else) on 127.0.0.1:FLOOR_PORT, wrk_tail
# on its /send1 (CPU counted for the floor's process), then stopped. BENCH_FLOOR=0 leaves it out.
floor_tail() {
    local CMD=() pid deadline=$((SECONDS + 120)) line
    direct_cmd "$1" "$2"
    if (exec 3<>"/dev/tcp/127.0.0.1/$FLOOR_PORT") 2>/dev/null; then die "127.0.0.1:$FLOOR_PORT (the floor) is taken already: choose another --port"; fi
    "${CMD[@]}" -size "$SIZE" -http "127.0.0.1:$FLOOR_PORT" >"$TMP/floor.log" 2>&1 &
    pid=$!
    # (this runs in the caller's command substitution: a failing step ends it, and the floor with it;
    # the PID is expanded now, as the local is gone by the time the subshell exits)
    # shellcheck disable=SC2064
    trap "kill $pid 2>/dev/null || true" EXIT
    until curl -fsS -o /dev/null "http://127.0.0.1:$FLOOR_PORT/healthz" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || { cat "$TMP/floor.log" >&2; die "the floor exited"; }
        ((SECONDS < deadline)) || { kill "$pid"; cat "$TMP/floor.log" >&2; die "the floor does not answer on 127.0.0.1:$FLOOR_PORT"; }
        sleep 0.1
    done
    line="$(wrk_tail "$1" "http://127.0.0.1:$FLOOR_PORT/send1" "$pid")"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    trap - EXIT
    echo "$line"
}

# tails_runs: for each N, in the order direct, mqtarget, floor, floor, mqtarget, direct (each pair
# A-B-B-A: direct_tail; wrk_tail on send_url; floor_tail; each to dest N RUN, with before_run N RUN DEST
# first when the script defines it), then the hop (wrk_tail on /healthz). With BENCH_FLOOR=0: direct,
# mqtarget, mqtarget, direct. BENCH_ORDER="..." runs the same runs in another order (e.g.
# "direct floor send1 send1 floor direct", to tell a run's place in the order from its side); it must
# hold each of them as often as the default does, else exit 2.
tails_runs() {
    local n run d line top=0 order
    read -r -a order <<<"$RUN_ORDER"
    FLOOR_PORT=$((PORT + 9))
    if ((BROKER_WARMUP > 0)); then
        for n in $CONNS; do if ((n > top)); then top=$n; fi; done
        log "warming the broker up: the direct client at N=$top for $BROKER_WARMUP s, not recorded"
        line="$(direct_tail "$top" "$(dest "$top" warm)" "$BROKER_WARMUP")"
        log "warm-up: $line"
    fi
    for n in $CONNS; do
        for run in "${!order[@]}"; do
            d="$(dest "$n" $((run + 1)))"
            if declare -F before_run >/dev/null; then before_run "$n" $((run + 1)) "$d"; fi
            case ${order[run]} in
                direct) line="$(direct_tail "$n" "$d")" ;;
                send1) line="$(wrk_tail "$n" "$(send_url "$d")")" ;;
                floor) line="$(floor_tail "$n" "$d")" ;;
            esac
            record "$n" $((run + 1)) "${order[run]}" "$line"
        done
        line="$(wrk_tail "$n" "http://127.0.0.1:$PORT/healthz")"
        record "$n" $((${#order[@]} + 1)) healthz "$line"
    done
}

# tails_table DIRECT_NAME: the runs as a markdown table (in the order run); then per N the target of
# issue #21, p99(/send1) <= p99(direct) + p99(/healthz) + 1 ms, each /send1 run judged against the
# direct run beside it (the first against the first, the second against the second), with p99.9 and
# the throughput ratios beside (to the direct client and to the floor); then where the CPU goes per
# message on each side (each side's two runs averaged): the direct client and the broker; wrk, the floor
# and the broker; wrk, mqtarget and the broker; with mqtarget's /send1 less the floor's (the overhead
# mqtarget can change) and less its /healthz, and the cores all of them kept busy. When both sides are
# CPU-bound on the same cores the throughput ratio is the inverse ratio of the totals; when neither
# is, it is the ratio of the latencies (N senders, each waiting for its answer).
tails_table() {
    awk -v direct="$1" '
    function kv(    i, p) { delete f; for (i = 1; i <= NF; i++) { split($i, p, "="); f[p[1]] = p[2] } }
    function us(k) { return (k in f) ? f[k] "µs" : "-" }
    function mean(a, b) { return (a == "" || b == "") ? "" : (a + b) / 2 }
    function show(x) { return x == "" ? "-" : sprintf("%.1f", x) }
    function sum3(a, b, c) { return (a == "" || b == "" || c == "") ? "" : a + b + c }
    function cores(r, t) { return t == "" ? "-" : sprintf("%.2f", r * t / 1e6) }
    function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2f", a / b) }
    BEGIN {
        name["direct"] = direct; name["send1"] = "mqtarget `/send1` (wrk)"; name["healthz"] = "mqtarget `/healthz` (wrk, the hop)"
        name["floor"] = "floor: the direct client behind bare chi + net/http `/send1` (wrk)"
    }
    {
        kv(); n = f["n"]; c = f["client"]
        if (!(n in seen)) { seen[n] = 1; ns[++nn] = n }
        k = ++cnt[n, c] # the first or second run of this client at this N
        rows[++nr] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n, f["run"], name[c], f["rate"],
            f["p50_ms"], f["p99_ms"], f["p999_ms"], f["max_ms"], f["failed"], us("client_us"),
            ("cpu_us" in f) && c != "direct" ? f["cpu_us"] "µs" : "-", us("broker_us"))
        p99[n, c, k] = f["p99_ms"]; p999[n, c, k] = f["p999_ms"]; rate[n, c, k] = f["rate"]
        cl[n, c, k] = ("client_us" in f) ? f["client_us"] : ""; br[n, c, k] = ("broker_us" in f) ? f["broker_us"] : ""
        sv[n, c, k] = ("cpu_us" in f) && c != "direct" ? f["cpu_us"] : ""
    }
    END {
        print "| N | run | client | msg/s | p50 ms | p99 ms | p99.9 ms | max ms | errors | client CPU/msg | server CPU/req (mqtarget, floor) | broker CPU/msg |"
        print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        for (i = 1; i <= nr; i++) print rows[i]
        print ""
        print "| N | direct p99 (1st / 2nd) | `/send1` p99 (1st / 2nd) | `/healthz` p99 | p99(`/send1`) ≤ p99(direct) + p99(hop) + 1 ms | direct p99.9 | `/send1` p99.9 | floor p99 / p99.9 | `/send1` / direct msg/s | `/send1` / floor msg/s |"
        print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        for (i = 1; i <= nn; i++) {
            n = ns[i]; met = 0
            for (k = 1; k <= 2; k++) if (p99[n, "send1", k] <= p99[n, "direct", k] + p99[n, "healthz", 1] + 1) met++
            d = rate[n, "direct", 1] + rate[n, "direct", 2]; m = rate[n, "send1", 1] + rate[n, "send1", 2]
            fl = cnt[n, "floor"] ? rate[n, "floor", 1] + rate[n, "floor", 2] : ""
            printf "| %s | %s / %s | %s / %s | %s | %s (met in %d of 2) | %s / %s | %s / %s | %s | %s | %s |\n", n,
                p99[n, "direct", 1], p99[n, "direct", 2], p99[n, "send1", 1], p99[n, "send1", 2], p99[n, "healthz", 1],
                (met == 2 ? "met" : "not met"), met, p999[n, "direct", 1], p999[n, "direct", 2], p999[n, "send1", 1], p999[n, "send1", 2],
                (cnt[n, "floor"] ? p99[n, "floor", 1] " / " p99[n, "floor", 2] " ; " p999[n, "floor", 1] " / " p999[n, "floor", 2] : "-"),
                ratio(m, d), ratio(m, fl)
        }
        print ""
        print "Where the CPU goes, µs per message (each side: its two runs averaged; cores = msg/s × total):"
        print ""
        print "| N | direct: client + broker = total (cores) | floor: wrk + floor + broker = total (cores) | mqtarget: wrk + mqtarget + broker = total (cores) | hop: wrk + mqtarget per `/healthz` | mqtarget − floor | mqtarget − `/healthz` vs direct client | total direct ÷ total mqtarget | `/send1` / direct msg/s |"
        print "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        for (i = 1; i <= nn; i++) {
            n = ns[i]
            dc = mean(cl[n, "direct", 1], cl[n, "direct", 2]); db = mean(br[n, "direct", 1], br[n, "direct", 2])
            dt = (dc == "" || db == "") ? "" : dc + db
            mw = mean(cl[n, "send1", 1], cl[n, "send1", 2]); mm = mean(sv[n, "send1", 1], sv[n, "send1", 2]); mb = mean(br[n, "send1", 1], br[n, "send1", 2])
            mt = sum3(mw, mm, mb)
            fw = fm = fb = ft = ""
            if (cnt[n, "floor"]) {
                fw = mean(cl[n, "floor", 1], cl[n, "floor", 2]); fm = mean(sv[n, "floor", 1], sv[n, "floor", 2]); fb = mean(br[n, "floor", 1], br[n, "floor", 2])
                ft = sum3(fw, fm, fb)
            }
            dr = (rate[n, "direct", 1] + rate[n, "direct", 2]) / 2; mr = (rate[n, "send1", 1] + rate[n, "send1", 2]) / 2
            fr = cnt[n, "floor"] ? (rate[n, "floor", 1] + rate[n, "floor", 2]) / 2 : 0
            printf "| %s | %s + %s = %s (%s) | %s + %s + %s = %s (%s) | %s + %s + %s = %s (%s) | %s + %s | %s | %s vs %s | %s | %s |\n", n,
                show(dc), show(db), show(dt), cores(dr, dt),
                show(fw), show(fm), show(fb), show(ft), cores(fr, ft),
                show(mw), show(mm), show(mb), show(mt), cores(mr, mt),
                show(cl[n, "healthz", 1]), show(sv[n, "healthz", 1]),
                (mm == "" || fm == "" ? "-" : sprintf("%.1f", mm - fm)),
                (mm == "" || sv[n, "healthz", 1] == "" ? "-" : sprintf("%.1f", mm - sv[n, "healthz", 1])), show(dc),
                ratio(dt, mt), ratio(mr, dr)
        }
    }' "$TMP/rows"
}

# machine_line: where and when this ran, for the report.
machine_line() {
    printf 'Measured %s on %s CPUs (%s), load average %s, mqtarget %s, %s; %s s measured after %s s warm-up per run, %s s broker warm-up, %s-byte messages.\n' \
        "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(nproc)" "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
        "$(go env GOVERSION)" "$DURATION" "$WARMUP" "$BROKER_WARMUP" "$SIZE"
}

# maven_lib DIR COORDS...: fetch the Maven Central artifacts COORDS (group:artifact:version) with their
# runtime dependencies into DIR/lib (once; mvn, like scripts/kafka.sh); prints DIR/lib.
maven_lib() {
    local dir="$1" c g a v deps=""
    shift
    if [[ -f "$dir/fetched" && "$(<"$dir/fetched")" == "$*" ]]; then
        echo "$dir/lib"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found (apt-get install -y maven) to fetch $*"
    for c in "$@"; do
        IFS=: read -r g a v <<<"$c"
        deps+="<dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"
    done
    mkdir -p "$dir"
    printf '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion><groupId>mqtarget</groupId><artifactId>bench-fetch</artifactId><version>1</version><dependencies>%s</dependencies></project>\n' \
        "$deps" >"$dir/pom.xml"
    log "fetching $* (maven) into $dir"
    rm -rf "$dir/lib.tmp"
    mvn -B -q -f "$dir/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dir/lib.tmp" -DincludeScope=runtime \
        >"$dir/mvn.log" 2>&1 || { tail -n 30 "$dir/mvn.log" >&2; die "maven could not fetch $* (log: $dir/mvn.log)"; }
    rm -rf "${dir:?}/lib"
    mv "$dir/lib.tmp" "$dir/lib"
    echo "$*" >"$dir/fetched"
    echo "$dir/lib"
}
