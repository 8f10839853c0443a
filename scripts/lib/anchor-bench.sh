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
readonly BENCH_MAX_SECONDS=600 BENCH_MAX_CONNS=1000 BENCH_MAX_ROUNDS=20

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
#   -r, --rounds R       (BENCH_ROUNDS [1], 1..20): the runs of every N R times, each round with its
#                        own hop run, the even rounds with mqtarget's and the floor's places swapped;
#                        the tables then judge the target per pair and on each side's median p99
#   BENCH_ORDER          the order of tails_runs' runs (see there)
#   BENCH_CLIENT         the HTTP client of the /send1, floor and hop runs: wrk (the default), or load
#                        (`mqtarget load`'s closed model: a Go client, which on a small machine adds far
#                        less to a p99 than wrk does; docs/benchmarks.md)
# Sets CONNS DURATION WARMUP ROUNDS PORT TOPIC SIZE RUN_ORDER HTTP_CLIENT CLIENT_LABEL TMP and COMMAND (the command line as run), and
# cleans up at exit. Bad settings exit 2 naming the flag.
# shellcheck disable=SC2034 # the settings are read by the sourcing script
bench_init() {
    CONNS="${BENCH_CONNS:-1 4 16}"
    DURATION="${BENCH_DURATION:-10}"
    WARMUP="${BENCH_WARMUP:-3}"
    BROKER_WARMUP="${BENCH_BROKER_WARMUP:-10}"
    ROUNDS="${BENCH_ROUNDS:-1}"
    PORT="${BENCH_PORT:-$1}"
    TOPIC="${BENCH_TOPIC:-$2}"
    SIZE=100
    shift 2
    COMMAND="$0${*:+ $*}"
    while (($#)); do
        case "$1" in
            -c | --conns | -d | --duration | -w | --warmup | --broker-warmup | -r | --rounds | -p | --port | --topic)
                (($# >= 2)) || usage_error "$1" "needs a value" ;;
        esac
        case "$1" in
            -c | --conns) CONNS="$2"; shift ;;
            -d | --duration) DURATION="$2"; shift ;;
            -w | --warmup) WARMUP="$2"; shift ;;
            --broker-warmup) BROKER_WARMUP="$2"; shift ;;
            -r | --rounds) ROUNDS="$2"; shift ;;
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
    check_int "--rounds (BENCH_ROUNDS)" "$ROUNDS" 1 "$BENCH_MAX_ROUNDS"
    check_int "--port (BENCH_PORT)" "$PORT" 1024 65535
    [[ -n "$CONNS" ]] || usage_error "--conns (BENCH_CONNS)" "no N given"
    local n
    for n in $CONNS; do check_int "--conns (BENCH_CONNS)" "$n" 1 "$BENCH_MAX_CONNS"; done
    [[ "$TOPIC" =~ ^[A-Za-z0-9_-]{1,100}$ ]] || usage_error "--topic (BENCH_TOPIC)" "letters, digits, - and _ only (1..100), got '$TOPIC'"
    HTTP_CLIENT="${BENCH_CLIENT:-wrk}"
    case $HTTP_CLIENT in
        wrk) CLIENT_LABEL=wrk ;;
        load) CLIENT_LABEL="mqtarget load" ;;
        *) usage_error BENCH_CLIENT "wrk or load, got '$HTTP_CLIENT'" ;;
    esac
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

# Beside this file, not under the caller's directory: tests source this library from elsewhere.
# shellcheck source=scripts/lib/proc.sh
. "${BASH_SOURCE[0]%/*}/proc.sh" # cpu_ticks

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

# http_tail N URL [PID]: the HTTP client (BENCH_CLIENT: wrk, or mqtarget load) with N connections on URL
# for WARMUP seconds (discarded), then DURATION seconds measured. Prints the direct clients' result line
# (closedloop.Result.String), from the client's own latency histogram (1 µs precision), with errors =
# non-2xx answers + socket errors; cpu_us = the CPU time per request of the server under test (PID,
# default mqtarget's) over the measured run, client_us = the client's, broker_us = the broker's
# (BROKER_PIDS) over the same run.
http_tail() {
    if [[ $HTTP_CLIENT == load ]]; then load_tail "$@"; else wrk_tail "$@"; fi
}

# wrk_tail N URL [PID]: http_tail with wrk (scripts/wrk/bench.lua), -t min(N, 2).
wrk_tail() {
    local n="$1" url="$2" pid="${3:-$MQT_PID}" t
    t=$((n < 2 ? n : 2))
    if ((WARMUP > 0)); then
        wrk -t"$t" -c"$n" -d"${WARMUP}s" "$url" >/dev/null || die "wrk warm-up on $url failed"
    fi
    measured_run "$pid" wrk_figures wrk -t"$t" -c"$n" -d"${DURATION}s" -s scripts/wrk/bench.lua "$url"
}

# load_tail N URL [PID]: http_tail with mqtarget's own closed model (`mqtarget load -connections N`,
# the binary start_mqtarget built): a Go client, whose own share of a p99 is what net/http's client
# and the runtime add (docs/benchmarks.md: next to the server's own clock, under 1 ms where wrk's was
# 2-25 ms on the same runs).
load_tail() {
    local n="$1" url="$2" pid="${3:-$MQT_PID}"
    local cmd=("$TMP/mqtarget" load -connections "$n" -max-error-rate 1 -o csv)
    if ((WARMUP > 0)); then
        "${cmd[@]}" -duration "${WARMUP}s" "$url" >/dev/null 2>"$TMP/load.err" || die "mqtarget load warm-up on $url failed: $(tail -n 5 "$TMP/load.err")"
    fi
    measured_run "$pid" load_figures "${cmd[@]}" -duration "${DURATION}s" "$url"
}

# measured_run PID FIGURES CMD...: the client's measured run, CMD bounded by DURATION + 60 s, its output
# in $TMP/client.out; prints tail_line from FIGURES reading that output, with PID's and the broker's
# CPU over the run and the client's own (`time`: the load generator's share of the 2 cores).
measured_run() {
    local pid="$1" figures="$2" before after b0 b1 TIMEFORMAT='%3U %3S'
    shift 2
    before=$(cpu_ticks "$pid") b0=$(broker_ticks)
    { time timeout $((DURATION + 60)) "$@" >"$TMP/client.out" 2>&1; } 2>"$TMP/client.time" ||
        die "$* failed: $(tail -n 5 "$TMP/client.out")"
    after=$(cpu_ticks "$pid") b1=$(broker_ticks)
    "$figures" <"$TMP/client.out" | tail_line $((after - before)) $((b1 - b0)) "$(awk '{ print $1 + $2 }' "$TMP/client.time")"
}

# wrk_figures: wrk's output on stdin, its first BENCH line (scripts/wrk/bench.lua), as tail_line's figures.
wrk_figures() {
    awk '/^BENCH / && !seen { seen = 1; for (i = 2; i <= NF; i++) { split($i, p, "="); f[p[1]] = p[2] } }
        END { printf "secs=%s requests=%s ok=%s bad=%s p50_us=%s p99_us=%s p999_us=%s max_us=%s\n", f["duration_us"] / 1e6,
            f["requests"], f["ok"], f["non2xx"] + f["connect"] + f["read"] + f["write"] + f["timeout"],
            f["p50_us"], f["p99_us"], f["p999_us"], f["max_us"] }'
}

# load_figures: `mqtarget load -o csv` on stdin (its header line, then the row; no column holds a
# comma: by_status joins its pairs with spaces, the endpoint is a route; lines before the header, such
# as its stderr, are skipped) as tail_line's figures.
load_figures() {
    awk -F, '!hdr && /^endpoint,/ { hdr = NR; for (i = 1; i <= NF; i++) col[$i] = i; next }
        hdr && NR == hdr + 1 { printf "secs=%s requests=%s ok=%s bad=%s p50_us=%.0f p99_us=%.0f p999_us=%.0f max_us=%.0f\n", $col["duration_s"],
            $col["requests"], $col["ok"], $col["non_2xx"] + $col["errors"],
            $col["p50_ms"] * 1e3, $col["p99_ms"] * 1e3, $col["p999_ms"] * 1e3, $col["max_ms"] * 1e3 }'
}

# tail_line SERVER_TICKS BROKER_TICKS CLIENT_CPU_SECONDS: the result line of http_tail from the client's
# figures on stdin (secs requests ok bad p50_us p99_us p999_us max_us as key=value).
tail_line() {
    awk -v ticks="$1" -v bticks="$2" -v clientcpu="$3" -v hz="$(getconf CLK_TCK)" -v brokers="${BROKER_PIDS:-}" '
        { for (i = 1; i <= NF; i++) { split($i, p, "="); f[p[1]] = p[2] } }
        END {
            secs = f["secs"]
            printf "rate=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f failed=%d sent=%d cpu_us=%.0f",
                (secs ? f["ok"] / secs : 0), f["p50_us"] / 1e3, f["p99_us"] / 1e3, f["p999_us"] / 1e3, f["max_us"] / 1e3,
                f["bad"], f["ok"], (f["requests"] ? ticks / hz * 1e6 / f["requests"] : 0)
            if (f["requests"]) {
                printf " client_us=%.1f", clientcpu * 1e6 / f["requests"]
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

# record N RUN CLIENT LINE [ROUND]: one row of the results (ROUND: 1 unless given).
record() {
    echo "n=$1 run=$2 round=${5:-1} client=$3 $4" >>"$TMP/rows"
    log "N=$1 run $2 $3: $4"
}

# round_order R: the runs of round R: RUN_ORDER, in the even rounds with every send1 and floor swapped,
# so that over two rounds each side takes each place once (without floor runs: RUN_ORDER every round).
round_order() {
    local w runs=()
    for w in $RUN_ORDER; do
        if (($1 % 2 == 0)) && [[ " $RUN_ORDER " == *" floor "* ]]; then
            case $w in
                send1) w=floor ;;
                floor) w=send1 ;;
            esac
        fi
        runs+=("$w")
    done
    echo "${runs[*]}"
}

# dest N RUN: the run's destination: fresh per run (TOPIC-nN-RUN) unless BENCH_FRESH=0 (then TOPIC).
dest() {
    if [[ "${BENCH_FRESH:-1}" == 0 ]]; then echo "$TOPIC"; else echo "$TOPIC-n$1-$2"; fi
}

# floor_tail N DEST: the floor row: the direct client's session served over bare chi + net/http
# (closedloop -http, the same libraries as mqtarget and nothing else) on 127.0.0.1:FLOOR_PORT, http_tail
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
    line="$(http_tail "$1" "http://127.0.0.1:$FLOOR_PORT/send1" "$pid")"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    trap - EXIT
    echo "$line"
}

# tails_runs: for each N, in the order direct, mqtarget, floor, floor, mqtarget, direct (each pair
# A-B-B-A: direct_tail; http_tail on send_url; floor_tail; each to dest N RUN, with before_run N RUN DEST
# first when the script defines it, after_run N RUN DEST after it), then the hop (http_tail on
# /healthz); ROUNDS times, in the order
# round_order gives each round (runs numbered on across rounds). With BENCH_FLOOR=0: direct,
# mqtarget, mqtarget, direct. BENCH_ORDER="..." runs the same runs in another order (e.g.
# "direct floor send1 send1 floor direct", to tell a run's place in the order from its side); it must
# hold each of them as often as the default does, else exit 2.
tails_runs() {
    local n r run i d line top=0 order
    FLOOR_PORT=$((PORT + 9))
    if ((BROKER_WARMUP > 0)); then
        for n in $CONNS; do if ((n > top)); then top=$n; fi; done
        log "warming the broker up: the direct client at N=$top for $BROKER_WARMUP s, not recorded"
        line="$(direct_tail "$top" "$(dest "$top" warm)" "$BROKER_WARMUP")"
        log "warm-up: $line"
    fi
    for n in $CONNS; do
        run=0
        for ((r = 1; r <= ROUNDS; r++)); do
            read -r -a order <<<"$(round_order "$r")"
            for i in "${!order[@]}"; do
                run=$((run + 1))
                d="$(dest "$n" "$run")"
                if declare -F before_run >/dev/null; then before_run "$n" "$run" "$d"; fi
                case ${order[i]} in
                    direct) line="$(direct_tail "$n" "$d")" ;;
                    send1) line="$(http_tail "$n" "$(send_url "$d")")" ;;
                    floor) line="$(floor_tail "$n" "$d")" ;;
                esac
                record "$n" "$run" "${order[i]}" "$line" "$r"
                if declare -F after_run >/dev/null; then after_run "$n" "$run" "$d"; fi
            done
            run=$((run + 1))
            line="$(http_tail "$n" "http://127.0.0.1:$PORT/healthz")"
            record "$n" "$run" healthz "$line" "$r"
        done
    done
}

# tails_table DIRECT_NAME: the runs as a markdown table (in the order run); then per N the target of
# issue #21, p99(/send1) <= p99(direct) + p99(/healthz) + 1 ms, each /send1 run judged against the
# direct run beside it (the first against the first, the second against the second, and so on over
# the rounds) and its round's hop, then on the medians of each side's p99s (of every run, the hop's of
# every round), the floor's median judged against the same bound, with p99.9 and the throughput ratios
# beside (to the direct client and to the floor); then where the CPU goes per
# message on each side (each side's runs averaged): the direct client and the broker; wrk, the floor
# and the broker; wrk, mqtarget and the broker; with mqtarget's /send1 less the floor's (the overhead
# mqtarget can change) and less its /healthz, and the cores all of them kept busy. When both sides are
# CPU-bound on the same cores the throughput ratio is the inverse ratio of the totals; when neither
# is, it is the ratio of the latencies (N senders, each waiting for its answer).
tails_table() {
    awk -v direct="$1" -v client="${CLIENT_LABEL:-wrk}" '
    function kv(    i, p) { delete f; for (i = 1; i <= NF; i++) { split($i, p, "="); f[p[1]] = p[2] } }
    function us(k) { return (k in f) ? f[k] "µs" : "-" }
    function show(x) { return x == "" ? "-" : sprintf("%.1f", x) }
    function sum3(a, b, c) { return (a == "" || b == "" || c == "") ? "" : a + b + c }
    function cores(r, t) { return t == "" ? "-" : sprintf("%.2f", r * t / 1e6) }
    function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2f", a / b) }
    # avg(A, N, C): the mean of the values A[N, C, k], "" when one is missing
    function avg(a, n, c,    k, t) {
        if (!cnt[n, c]) return ""
        for (k = 1; k <= cnt[n, c]; k++) { if (a[n, c, k] == "") return ""; t += a[n, c, k] }
        return t / cnt[n, c]
    }
    # list(A, N, C): the values A[N, C, k] of every run k of C at N, " / " between
    function list(a, n, c,    k, s) { s = ""; for (k = 1; k <= cnt[n, c]; k++) s = s (k > 1 ? " / " : "") a[n, c, k]; return s }
    # median(A, N, C): the median of the values A[N, C, k]
    function median(a, n, c,    k, j, m, t, v) {
        m = cnt[n, c]
        for (k = 1; k <= m; k++) {
            t = a[n, c, k] + 0
            for (j = k - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    BEGIN {
        name["direct"] = direct; name["send1"] = "mqtarget `/send1` (" client ")"; name["healthz"] = "mqtarget `/healthz` (" client ", the hop)"
        name["floor"] = "floor: the direct client behind bare chi + net/http `/send1` (" client ")"
    }
    {
        kv(); n = f["n"]; c = f["client"]
        if (!(n in seen)) { seen[n] = 1; ns[++nn] = n }
        k = ++cnt[n, c] # the first or second run of this client at this N
        rows[++nr] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n, f["run"], name[c], f["rate"],
            f["p50_ms"], f["p99_ms"], f["p999_ms"], f["max_ms"], f["failed"], us("client_us"),
            ("cpu_us" in f) && c != "direct" ? f["cpu_us"] "µs" : "-", us("broker_us"))
        p99[n, c, k] = f["p99_ms"]; p999[n, c, k] = f["p999_ms"]; rate[n, c, k] = f["rate"]
        rnd[n, c, k] = ("round" in f) ? f["round"] : 1 # a hop run per round: its k is the round
        cl[n, c, k] = ("client_us" in f) ? f["client_us"] : ""; br[n, c, k] = ("broker_us" in f) ? f["broker_us"] : ""
        sv[n, c, k] = ("cpu_us" in f) && c != "direct" ? f["cpu_us"] : ""
    }
    END {
        print "| N | run | client | msg/s | p50 ms | p99 ms | p99.9 ms | max ms | errors | client CPU/msg | server CPU/req (mqtarget, floor) | broker CPU/msg |"
        print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        for (i = 1; i <= nr; i++) print rows[i]
        print ""
        print "| N | direct p99 (each run) | `/send1` p99 (each run) | `/healthz` p99 (each round) | p99(`/send1`) ≤ p99(direct) + p99(hop) + 1 ms, per pair | direct p99.9 | `/send1` p99.9 | floor p99 ; p99.9 | `/send1` / direct msg/s | `/send1` / floor msg/s | the same on the medians of the p99s: `/send1` ≤ direct + hop + 1 | the floor, its median against that bound |"
        print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        for (i = 1; i <= nn; i++) {
            n = ns[i]; met = 0; d = m = fl = 0
            for (k = 1; k <= cnt[n, "send1"]; k++) {
                if (p99[n, "send1", k] <= p99[n, "direct", k] + p99[n, "healthz", rnd[n, "send1", k]] + 1) met++
                m += rate[n, "send1", k]
            }
            for (k = 1; k <= cnt[n, "direct"]; k++) d += rate[n, "direct", k]
            for (k = 1; k <= cnt[n, "floor"]; k++) fl += rate[n, "floor", k]
            if (!cnt[n, "floor"]) fl = ""
            bound = median(p99, n, "direct") + median(p99, n, "healthz") + 1
            printf "| %s | %s | %s | %s | %s (met in %d of %d) | %s | %s | %s | %s | %s | %.3f ≤ %.3f + %.3f + 1: %s | %s |\n", n,
                list(p99, n, "direct"), list(p99, n, "send1"), list(p99, n, "healthz"),
                (met == cnt[n, "send1"] ? "met" : "not met"), met, cnt[n, "send1"], list(p999, n, "direct"), list(p999, n, "send1"),
                (cnt[n, "floor"] ? list(p99, n, "floor") " ; " list(p999, n, "floor") : "-"),
                ratio(m, d), ratio(m, fl),
                median(p99, n, "send1"), median(p99, n, "direct"), median(p99, n, "healthz"), (median(p99, n, "send1") <= bound ? "met" : "not met"),
                (cnt[n, "floor"] ? sprintf("%.3f: %s", median(p99, n, "floor"), median(p99, n, "floor") <= bound ? "met" : "not met") : "-")
        }
        print ""
        print "Where the CPU goes, µs per message (each side: its runs averaged; cores = msg/s × total):"
        print ""
        print "| N | direct: client + broker = total (cores) | floor: " client " + floor + broker = total (cores) | mqtarget: " client " + mqtarget + broker = total (cores) | hop: " client " + mqtarget per `/healthz` | mqtarget − floor | mqtarget − `/healthz` vs direct client | total direct ÷ total mqtarget | `/send1` / direct msg/s |"
        print "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        for (i = 1; i <= nn; i++) {
            n = ns[i]
            dc = avg(cl, n, "direct"); db = avg(br, n, "direct")
            dt = (dc == "" || db == "") ? "" : dc + db
            mw = avg(cl, n, "send1"); mm = avg(sv, n, "send1"); mb = avg(br, n, "send1")
            mt = sum3(mw, mm, mb)
            fw = fm = fb = ft = ""
            if (cnt[n, "floor"]) {
                fw = avg(cl, n, "floor"); fm = avg(sv, n, "floor"); fb = avg(br, n, "floor")
                ft = sum3(fw, fm, fb)
            }
            dr = avg(rate, n, "direct"); mr = avg(rate, n, "send1")
            fr = cnt[n, "floor"] ? avg(rate, n, "floor") : 0
            printf "| %s | %s + %s = %s (%s) | %s + %s + %s = %s (%s) | %s + %s + %s = %s (%s) | %s + %s | %s | %s vs %s | %s | %s |\n", n,
                show(dc), show(db), show(dt), cores(dr, dt),
                show(fw), show(fm), show(fb), show(ft), cores(fr, ft),
                show(mw), show(mm), show(mb), show(mt), cores(mr, mt),
                show(avg(cl, n, "healthz")), show(avg(sv, n, "healthz")),
                (mm == "" || fm == "" ? "-" : sprintf("%.1f", mm - fm)),
                (mm == "" || avg(sv, n, "healthz") == "" ? "-" : sprintf("%.1f", mm - avg(sv, n, "healthz"))), show(dc),
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
