#!/usr/bin/env bash
# Two servers loaded at the same time (docs/benchmarks.md): on a VM whose speed changes from one run
# to the next, runs one after another mostly measure the VM; two servers under load at once see the
# same machine. Every server gets an nsqd of its own; each round loads the first server and one other
# at once, each with its own `wrk -t1 -cN -dD /send1`, in both orders of start. Printed per run: the
# first server's 2xx req/s ÷ the other's, its CPU per request ÷ the other's (the server alone, and the
# server plus its nsqd; utime+stime from /proc/PID/stat), peak RSS (VmHWM, reset per run), non-2xx;
# then the medians per pair and concurrency, and the issue #17 targets its pairs measure (send1 first:
# beside limit, seed; coalesce first: beside group). Both servers and the two wrk share the cores, so
# the req/s ratio is diluted by what every request costs the same (wrk, the kernel's loopback): the
# CPU ratios say more about the servers.
#
# With --rate, each server gets `mqtarget load -rate R` instead (the open model: R requests per second
# whatever the answers do, latency from each request's intended send): the same CPU and RSS columns,
# and the p50 / p99 / p99.9 of each side with the medians of their ratios, for tails compared at the
# same load on the same state of the machine. Closed runs give wrk's p50 and p99 (`--latency`).
#
# Servers (-s, the first is compared with each other one):
#   send1           mqtarget /send1 with its defaults
#   coalesce        mqtarget /send1 with -nsq.coalesce
#   limit group seed  cmd/bench-nsqfloor -mode limit|group|seed: the floor rows of scripts/bench.sh
#   S@gc=N          any of them with the GC target N: mqtarget's -gc_percent N (its default is 400), the
#                   floor's GOGC=N (Go's default, 100, otherwise)
#
# Usage: scripts/bench-at-once.sh [options]
#   -s, --servers "S…"  2 to 5 servers [send1 limit seed]
#   -c, --conns "N…"    wrk connections per server [50 200]
#       --rate "R…"     the open model instead, at each R requests per second per server (1..100000)
#   -r, --rounds N      rounds per pair and concurrency, each in both orders, at most 10 [3]
#   -d, --duration D    measured per run, whole seconds, at most 60s [5s] (after a 1 s warm-up)
#       --port-base N   listen on 127.0.0.1 ports N up (3 per server) [18170]
# Environment: MQTARGET_CACHE (where scripts/nsqd.sh builds nsqd). Needs go, curl, wrk.
set -euo pipefail
cd "$(dirname "$0")/.."

SERVERS="send1 limit seed"
CONNS="50 200"
RATES=""
ROUNDS=3
DURATION=5s
PORT_BASE=18170

NAME=bench-at-once
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh # log, die, usage, port_in_use, await
# shellcheck source=scripts/lib/proc.sh
. scripts/lib/proc.sh # cpu_ticks, wrk_2xx

# flag_error MESSAGE: a bad option; exit 2 naming it.
flag_error() {
    log "ERROR: $* (see --help)"
    exit 2
}
while (($#)); do
    case $1 in
    -s | --servers | -c | --conns | --rate | -r | --rounds | -d | --duration | --port-base)
        (($# >= 2)) || flag_error "$1: needs a value" ;;&
    -s | --servers) SERVERS=$2; shift 2 ;;
    -c | --conns) CONNS=$2 CONNS_SET=1; shift 2 ;;
    --rate) RATES=$2; shift 2 ;;
    -r | --rounds) ROUNDS=$2; shift 2 ;;
    -d | --duration) DURATION=$2; shift 2 ;;
    --port-base) PORT_BASE=$2; shift 2 ;;
    -h | --help) usage ;;
    *) flag_error "unknown option $1" ;;
    esac
done
read -r -a SV <<<"$SERVERS"
((${#SV[@]} >= 2 && ${#SV[@]} <= 5)) || flag_error "--servers: 2 to 5, got '$SERVERS'"
declare -A SEEN
for s in "${SV[@]}"; do
    case ${s%@gc=*} in
    send1 | coalesce | limit | group | seed) ;;
    *) flag_error "--servers: unknown server $s (send1, coalesce, limit, group, seed; each optionally @gc=N)" ;;
    esac
    if [[ $s == *@gc=* ]]; then
        g=${s#*@gc=}
        if ! [[ $g =~ ^[1-9][0-9]{0,5}$ ]] || ((g > 100000)); then flag_error "--servers: $s: the GC target 1..100000"; fi
    fi
    [[ -z ${SEEN[$s]:-} ]] || flag_error "--servers: $s given twice"
    SEEN[$s]=1
done
# CS: the load points, connections (closed model) or rates (--rate, open model).
if [[ -n $RATES ]]; then
    [[ -z ${CONNS_SET:-} ]] || flag_error "--rate: not with -c/--conns (the open model has no connection count)"
    read -r -a CS <<<"$RATES"
    ((${#CS[@]} >= 1)) || flag_error "--rate: at least one value"
    for c in "${CS[@]}"; do
        if ! [[ $c =~ ^[1-9][0-9]{0,5}$ ]] || ((c > 100000)); then flag_error "--rate: each 1..100000, got $c"; fi
    done
    POINT=rate
else
    read -r -a CS <<<"$CONNS"
    ((${#CS[@]} >= 1)) || flag_error "--conns: at least one value"
    for c in "${CS[@]}"; do
        if ! [[ $c =~ ^[1-9][0-9]{0,3}$ ]] || ((c > 1000)); then flag_error "--conns: each 1..1000, got $c"; fi
    done
    POINT=-c
fi
if ! [[ $ROUNDS =~ ^[1-9][0-9]?$ ]] || ((ROUNDS > 10)); then flag_error "--rounds: 1..10, got $ROUNDS"; fi
if ! [[ $DURATION =~ ^([1-9][0-9]?)s$ ]] || ((BASH_REMATCH[1] > 60)); then flag_error "--duration: whole seconds 1s..60s, got $DURATION"; fi
if ! [[ $PORT_BASE =~ ^[1-9][0-9]{3,4}$ ]] || ((PORT_BASE > 32750)); then flag_error "--port-base: 1024..32750, got $PORT_BASE"; fi
for c in go curl wrk; do command -v "$c" >/dev/null || die "$c is needed"; done
for ((p = PORT_BASE; p < PORT_BASE + 3 * ${#SV[@]}; p++)); do
    port_in_use "$p" && die "port $p on 127.0.0.1 is in use (--port-base)"
done

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-bench-at-once.XXXXXX")"
PIDS=()
cleanup() {
    local rc=$? pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((rc != 0)); then tail -n 5 "$TMP"/*.log >&2 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building nsqd (scripts/nsqd.sh build), mqtarget and cmd/bench-nsqfloor"
NSQD_BIN="$(scripts/nsqd.sh build)"
go build -o "$TMP/mqtarget" ./cmd/mqtarget
go build -o "$TMP/bench-nsqfloor" ./cmd/bench-nsqfloor

declare -A PID NPID URL NHTTP
for i in "${!SV[@]}"; do
    s=${SV[i]} port=$((PORT_BASE + 3 * i)) f=$TMP/$i
    tcp=127.0.0.1:$port NHTTP[$s]=127.0.0.1:$((port + 1)) addr=127.0.0.1:$((port + 2))
    mkdir "$f.nsqd"
    "$NSQD_BIN" --tcp-address="$tcp" --http-address="${NHTTP[$s]}" --data-path="$f.nsqd" \
        --mem-queue-size=1000000 >"$f.nsqd.log" 2>&1 &
    PIDS+=($!)
    NPID[$s]=$!
    await 10 "${NPID[$s]}" "$f.nsqd.log" curl -fsS -o /dev/null "http://${NHTTP[$s]}/ping" || die "nsqd for $s did not start"
    base=${s%@gc=*} gc=
    [[ $s != *@gc=* ]] || gc=${s#*@gc=}
    case $base in
    limit | group | seed)
        env ${gc:+GOGC=$gc} "$TMP/bench-nsqfloor" -mode "$base" -addr "$addr" -nsqd "$tcp" >"$f.log" 2>&1 & ;;
    *)
        flags=()
        [[ $base != coalesce ]] || flags+=(-nsq.coalesce)
        [[ -z $gc ]] || flags+=(-gc_percent "$gc")
        "$TMP/mqtarget" -http.addr "$addr" -nsq.hosts "$tcp" -log.level warn "${flags[@]}" >"$f.log" 2>&1 & ;;
    esac
    PIDS+=($!)
    PID[$s]=$! URL[$s]=http://$addr/send1
    await 10 "${PID[$s]}" "$f.log" curl -fsS -o /dev/null "http://$addr/healthz" || die "$s did not start"
done

hwm_mb() { awk '/^VmHWM:/ {printf "%d", $2 / 1024}' "/proc/$1/status"; }
# gen P D URL: load URL for D, at P connections (wrk -t1) or P requests per second (mqtarget load).
gen() {
    if [[ -n $RATES ]]; then
        "$TMP/mqtarget" load -rate "$1" -duration "$2" -o csv "$3" || true # judged on its CSV below
    else
        wrk -t1 -c"$1" -d"$2" --latency "$3"
    fi
}
# csv FILE COLUMN: COLUMN of mqtarget load's CSV row.
csv() { awk -F, -v k="$2" '$1 == "endpoint" {for (i = 1; i <= NF; i++) col[$i] = i; next} (k in col) {print $col[k]; exit}' "$1"; }
# ok FILE: the 2xx answers; bad FILE: the rest (non-2xx, and for the open model errors and not sent).
ok() {
    if [[ -n $RATES ]]; then csv "$1" ok; else wrk_2xx "$1"; fi
}
bad() {
    if [[ -n $RATES ]]; then
        echo $(($(csv "$1" non_2xx) + $(csv "$1" errors) + $(csv "$1" not_sent)))
    else
        awk '/Non-2xx/ {bad = $NF} END {print bad + 0}' "$1"
    fi
}
# pct FILE P: the P (50, 99, 999) latency percentile in ms; "-" where the generator gives none.
pct() {
    if [[ -n $RATES ]]; then
        csv "$1" "p$2_ms"
    else # wrk --latency: "     99%    5.00ms"
        awk -v p="$2%" '$1 == p {v = $2; u = v; sub(/^[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
            print v * (u == "us" ? 0.001 : u == "s" ? 1000 : u == "m" ? 60000 : 1); f = 1; exit}
            END {if (!f) print "-"}' "$1"
    fi
}
# load P D A B: A's and B's /send1 loaded at once (gen), A's started first; output in a.out, b.out.
load() {
    local w
    gen "$1" "$2" "${URL[$3]}" >"$TMP/a.out" 2>&1 & w=$!
    gen "$1" "$2" "${URL[$4]}" >"$TMP/b.out" 2>&1
    wait "$w"
}

# both A B CONNS: a run of A and B at once; appends a row to rows.
both() {
    local a=$1 b=$2 c=$3 x s0a s0b n0a n0b ra rb
    for x in "$a" "$b"; do
        curl -fsS -o /dev/null -X POST "http://${NHTTP[$x]}/topic/delete?topic=mqtarget" 2>/dev/null || true
    done
    load "$c" 1s "$a" "$b"
    echo 5 >"/proc/${PID[$a]}/clear_refs"
    echo 5 >"/proc/${PID[$b]}/clear_refs"
    s0a=$(cpu_ticks "${PID[$a]}") s0b=$(cpu_ticks "${PID[$b]}") n0a=$(cpu_ticks "${NPID[$a]}") n0b=$(cpu_ticks "${NPID[$b]}")
    load "$c" "$DURATION" "$a" "$b"
    ra=$(ok "$TMP/a.out") rb=$(ok "$TMP/b.out")
    ((${ra:-0} > 0 && ${rb:-0} > 0)) || die "a run answered no 2xx: $(cat "$TMP/a.out" "$TMP/b.out")"
    # point A B reqA reqB srvA srvB nsqdA nsqdB (CPU ticks) rssA rssB not-2xx p50A p50B p99A p99B p999A p999B
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$a" "$b" "$ra" "$rb" \
        "$(($(cpu_ticks "${PID[$a]}") - s0a))" "$(($(cpu_ticks "${PID[$b]}") - s0b))" \
        "$(($(cpu_ticks "${NPID[$a]}") - n0a))" "$(($(cpu_ticks "${NPID[$b]}") - n0b))" \
        "$(hwm_mb "${PID[$a]}")" "$(hwm_mb "${PID[$b]}")" "$(($(bad "$TMP/a.out") + $(bad "$TMP/b.out")))" \
        "$(pct "$TMP/a.out" 50)" "$(pct "$TMP/b.out" 50)" "$(pct "$TMP/a.out" 99)" "$(pct "$TMP/b.out" 99)" \
        "$(pct "$TMP/a.out" 999)" "$(pct "$TMP/b.out" 999)" >>"$TMP/rows"
}

: >"$TMP/rows"
for c in "${CS[@]}"; do
    for s in "${SV[@]:1}"; do
        for ((r = 1; r <= ROUNDS; r++)); do
            log "$POINT $c: ${SV[0]} beside $s, round $r of $ROUNDS (both orders)"
            both "${SV[0]}" "$s" "$c"
            both "$s" "${SV[0]}" "$c"
        done
    done
done

F=${SV[0]}
if [[ -n $RATES ]]; then gen_text="mqtarget load -rate R -duration $DURATION"; else gen_text="wrk -t1 -cN -d$DURATION --latency"; fi
printf '\n%s /send1 on two servers at once, each with an nsqd of its own; %d cores (%s), load average %s; mqtarget %s, %s\n\n' \
    "$gen_text" "$(nproc)" "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(date -u +%FT%TZ)"
# Every ratio below is the first server's over the other's, whichever wrk started first.
awk -F'\t' -v first="$F" -v s="${DURATION%s}" -v t="$(getconf CLK_TCK)" -v point="$POINT" -v open="${RATES:+1}" '
    function med(k, metric, x, y, tt, v, m) {
        m = cnt[metric, k]; if (!m) return "-"
        for (x = 1; x <= m; x++) v[x] = val[metric, k, x]
        for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (v[y] < v[x]) { tt = v[x]; v[x] = v[y]; v[y] = tt }
        return sprintf("%.3f", m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2) }
    function put(metric, k, x) { val[metric, k, ++cnt[metric, k]] = x }
    function both(a, b) { return a == b && a == "-" ? "-" : a " / " b }
    {   f = ($2 == first); o = f ? $3 : $2
        rf = f ? $4 : $5; ro = f ? $5 : $4; sf = f ? $6 : $7; so = f ? $7 : $6
        nf = f ? $8 : $9; no = f ? $9 : $8; hf = f ? $10 : $11; ho = f ? $11 : $10
        p50f = f ? $13 : $14; p50o = f ? $14 : $13; p99f = f ? $15 : $16; p99o = f ? $16 : $15
        p999f = f ? $17 : $18; p999o = f ? $18 : $17
        k = $1 SUBSEP o; if (!(k in n)) order[++keys] = k; n[k]++
        put("req", k, rf / ro); put("srv", k, (sf / rf) / (so / ro)); put("all", k, ((sf + nf) / rf) / ((so + no) / ro))
        r99 = "-"; if (p99f != "-" && p99o > 0) { r99 = sprintf("%.3f", p99f / p99o); put("p99", k, p99f / p99o) }
        if (p999f != "-" && p999o > 0) put("p999", k, p999f / p999o)
        if (hf > maxf[k]) maxf[k] = hf; if (ho > maxo[k]) maxo[k] = ho; bad[k] += $12
        row[NR] = sprintf("| %s | %s | %s | %s | %.0f / %.0f | %.3f | %.1f / %.1f | %.3f | %.1f / %.1f | %.3f | %s | %s | %s | %s | %s / %s | %s |",
            $1, first, o, $2, rf / s, ro / s, rf / ro, 1e6 * sf / t / rf, 1e6 * so / t / ro, (sf / rf) / (so / ro),
            1e6 * (sf + nf) / t / rf, 1e6 * (so + no) / t / ro, ((sf + nf) / rf) / ((so + no) / ro),
            both(p50f, p50o), both(p99f, p99o), r99, both(p999f, p999o), hf, ho, $12) }
    END {
        print "| " point " | first | other | started first | 2xx/s | ratio | server CPU µs/req | ratio | server + nsqd CPU µs/req | ratio | p50 ms | p99 ms | p99 ratio | p99.9 ms | peak RSS MB | not 2xx |"
        print "| --: | --- | --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |"
        for (i = 1; i <= NR; i++) print row[i]
        print ""
        print "| " point " | pair | runs | 2xx/s ratio, median | server CPU ratio, median | server + nsqd CPU ratio, median | p99 ratio, median | p99.9 ratio, median | peak RSS MB | not 2xx |"
        print "| --: | --- | --: | --: | --: | --: | --: | --: | --: | --: |"
        for (i = 1; i <= keys; i++) { k = order[i]; split(k, p, SUBSEP)
            printf "| %s | %s ÷ %s | %d | %s | %s | %s | %s | %s | %s / %s | %d |\n", p[1], first, p[2], n[k],
                med(k, "req"), med(k, "srv"), med(k, "all"), med(k, "p99"), med(k, "p999"), maxf[k], maxo[k], bad[k] }
        if (open) exit # the #17 targets are closed-model req/s
        # The targets of issue #17, on the medians, for the pairs this run has (the first server first).
        for (i = 1; i <= keys; i++) { k = order[i]; split(k, p, SUBSEP); pr = first " ÷ " p[2]
            if (first == "send1" && p[2] == "limit") {
                judge(p[1], pr " req/s", med(k, "req"), ">=", 0.90); judge(p[1], pr " server CPU per request", med(k, "srv"), "<=", 1.15) }
            if (first == "send1" && p[2] == "seed") judge(p[1], pr " req/s", med(k, "req"), ">=", 1.3)
            if (first == "coalesce" && p[2] == "group") judge(p[1], pr " req/s", med(k, "req"), ">=", 0.90) }
        if (verdicts) print "\n#17 targets (medians):" verdicts }
    function judge(c, what, v, op, want, ok) {
        ok = op == ">=" ? v + 0 >= want : v + 0 <= want
        verdicts = verdicts sprintf("\n- c%s: %s %s %s %.2f: %s", c, what, v, op == ">=" ? "≥" : "≤", want, ok ? "met" : "NOT met") }' "$TMP/rows"
