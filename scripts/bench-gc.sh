#!/usr/bin/env bash
# gc_percent side by side (docs/benchmarks.md, "Memory and gc_percent"): one nsqd, one mqtarget per
# gc_percent value, all built from this tree, on 127.0.0.1. Each round loads the first value's mqtarget
# and one other's at the same time, each with its own `wrk -t1 -cN /send1`, so both see the same state
# of the machine (on a VM whose speed changes from one run to the next, runs one after another mostly
# measure the VM); every pair runs in both orders of start. Printed per run: each process's CPU µs per
# request (utime+stime from /proc/PID/stat), the first's ÷ the other's, req/s and peak RSS (VmHWM,
# reset per run), non-2xx; then the median ratio and RSS per pair and concurrency.
#
# Usage: scripts/bench-gc.sh [options]
#   -g, --gc "N…"       gc_percent values; the first is compared with each other one [400 200 100]
#   -c, --conns "N…"    wrk connections per process [50 200]
#   -r, --rounds N      rounds per pair and concurrency, each in both orders, at most 10 [3]
#   -d, --duration D    measured per run, whole seconds, at most 60s [5s] (after a 1 s warm-up)
#       --port-base N   nsqd TCP on N, its HTTP on N+1, the mqtargets on N+2 up [18170]
# Environment: MQTARGET_CACHE (where scripts/nsqd.sh builds nsqd). Needs go, curl, wrk.
set -euo pipefail
cd "$(dirname "$0")/.."

GCS="400 200 100"
CONNS="50 200"
ROUNDS=3
DURATION=5s
PORT_BASE=18170

NAME=bench-gc
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh # log, die, usage, port_in_use, await

while (($#)); do
    case $1 in
    -g | --gc) GCS=$2; shift 2 ;;
    -c | --conns) CONNS=$2; shift 2 ;;
    -r | --rounds) ROUNDS=$2; shift 2 ;;
    -d | --duration) DURATION=$2; shift 2 ;;
    --port-base) PORT_BASE=$2; shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
read -r -a GC <<<"$GCS"
((${#GC[@]} >= 2 && ${#GC[@]} <= 5)) || die "--gc: 2 to 5 values, got '$GCS'"
for g in "${GC[@]}"; do
    if ! [[ $g =~ ^[1-9][0-9]{0,4}$ ]] || ((g > 100000)); then die "--gc: each 1..100000, got $g"; fi
done
read -r -a CS <<<"$CONNS"
((${#CS[@]} >= 1)) || die "--conns: at least one value"
for c in "${CS[@]}"; do
    if ! [[ $c =~ ^[1-9][0-9]{0,3}$ ]] || ((c > 1000)); then die "--conns: each 1..1000, got $c"; fi
done
if ! [[ $ROUNDS =~ ^[1-9][0-9]?$ ]] || ((ROUNDS > 10)); then die "--rounds: 1..10, got $ROUNDS"; fi
if ! [[ $DURATION =~ ^([1-9][0-9]?)s$ ]] || ((BASH_REMATCH[1] > 60)); then die "--duration: whole seconds 1s..60s, got $DURATION"; fi
if ! [[ $PORT_BASE =~ ^[1-9][0-9]{3,4}$ ]] || ((PORT_BASE > 32760)); then die "--port-base: 1024..32760, got $PORT_BASE"; fi
for c in go curl wrk; do command -v "$c" >/dev/null || die "$c is needed"; done
for ((p = PORT_BASE; p < PORT_BASE + 2 + ${#GC[@]}; p++)); do
    port_in_use "$p" && die "port $p on 127.0.0.1 is in use (--port-base)"
done

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-bench-gc.XXXXXX")"
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

log "building nsqd (scripts/nsqd.sh build) and mqtarget"
NSQD_BIN="$(scripts/nsqd.sh build)"
go build -o "$TMP/mqtarget" ./cmd/mqtarget
NSQD_TCP=127.0.0.1:$PORT_BASE
NSQD_HTTP=127.0.0.1:$((PORT_BASE + 1))
mkdir "$TMP/nsqd"
"$NSQD_BIN" --tcp-address="$NSQD_TCP" --http-address="$NSQD_HTTP" --data-path="$TMP/nsqd" \
    --mem-queue-size=1000000 >"$TMP/nsqd.log" 2>&1 &
PIDS+=($!)
await 10 "${PIDS[0]}" "$TMP/nsqd.log" curl -fsS -o /dev/null "http://$NSQD_HTTP/ping" || die "nsqd did not start"
declare -A PID URL
for i in "${!GC[@]}"; do
    g=${GC[i]} addr=127.0.0.1:$((PORT_BASE + 2 + i))
    "$TMP/mqtarget" -http.addr "$addr" -nsq.hosts "$NSQD_TCP" -gc_percent "$g" -log.level warn \
        -echo.enabled=false >"$TMP/mqtarget-$g.log" 2>&1 &
    PIDS+=($!)
    PID[$g]=$! URL[$g]=http://$addr/send1
    await 10 "${PID[$g]}" "$TMP/mqtarget-$g.log" curl -fsS -o /dev/null "http://$addr/readyz" || die "mqtarget -gc_percent $g did not start"
done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm_mb() { awk '/^VmHWM:/ {printf "%d", $2 / 1024}' "/proc/$1/status"; }
# wrk_ok FILE: the 2xx answers in wrk's output; wrk_bad FILE: its non-2xx count.
wrk_ok() { awk '/requests in/ {n = $1} /Non-2xx/ {bad = $NF} END {print n - bad}' "$1"; }
wrk_bad() { awk '/Non-2xx/ {bad = $NF} END {print bad + 0}' "$1"; }

# both A B CONNS: a run of A's and B's mqtarget at once, A's wrk started first; appends a row to rows.
both() {
    local a=$1 b=$2 c=$3 w ta tb ra rb
    curl -fsS -o /dev/null -X POST "http://$NSQD_HTTP/topic/delete?topic=mqtarget" 2>/dev/null || true
    wrk -t1 -c"$c" -d1s "${URL[$a]}" >/dev/null & w=$!
    wrk -t1 -c"$c" -d1s "${URL[$b]}" >/dev/null
    wait "$w"
    echo 5 >"/proc/${PID[$a]}/clear_refs"
    echo 5 >"/proc/${PID[$b]}/clear_refs"
    ta=$(ticks "${PID[$a]}") tb=$(ticks "${PID[$b]}")
    wrk -t1 -c"$c" -d"$DURATION" "${URL[$a]}" >"$TMP/a.out" 2>&1 & w=$!
    wrk -t1 -c"$c" -d"$DURATION" "${URL[$b]}" >"$TMP/b.out" 2>&1
    wait "$w"
    ta=$(($(ticks "${PID[$a]}") - ta)) tb=$(($(ticks "${PID[$b]}") - tb))
    ra=$(wrk_ok "$TMP/a.out") rb=$(wrk_ok "$TMP/b.out")
    ((ra > 0 && rb > 0)) || die "a run answered no 2xx: $(cat "$TMP/a.out" "$TMP/b.out")"
    # c gcA gcB cpuA cpuB ratio(first value ÷ other) rpsA rpsB rssA rssB non2xx
    awk -v c="$c" -v a="$a" -v b="$b" -v ta="$ta" -v tb="$tb" -v ra="$ra" -v rb="$rb" -v t="$(getconf CLK_TCK)" \
        -v s="${DURATION%s}" -v ha="$(hwm_mb "${PID[$a]}")" -v hb="$(hwm_mb "${PID[$b]}")" \
        -v bad="$(($(wrk_bad "$TMP/a.out") + $(wrk_bad "$TMP/b.out")))" -v first="${GC[0]}" 'BEGIN {
            ca = 1e6 * ta / t / ra; cb = 1e6 * tb / t / rb
            printf "%s\t%s\t%s\t%.1f\t%.1f\t%.3f\t%.0f\t%.0f\t%s\t%s\t%s\n", c, a, b, ca, cb,
                (a == first ? ca / cb : cb / ca), ra / s, rb / s, ha, hb, bad }' >>"$TMP/rows"
}

: >"$TMP/rows"
for c in "${CS[@]}"; do
    for g in "${GC[@]:1}"; do
        for ((r = 1; r <= ROUNDS; r++)); do
            log "c$c: gc_percent ${GC[0]} beside $g, round $r of $ROUNDS (both orders)"
            both "${GC[0]}" "$g" "$c"
            both "$g" "${GC[0]}" "$c"
        done
    done
done

printf '\nwrk -t1 -cN -d%s /send1 on each of two mqtarget processes at once, one nsqd; %d cores (%s), load average %s; mqtarget %s, %s\n\n' \
    "$DURATION" "$(nproc)" "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(date -u +%FT%TZ)"
printf '| -c | started first | CPU µs/req | started second | CPU µs/req | %s ÷ other, CPU | req/s | peak RSS MB | non-2xx |\n' "${GC[0]}"
printf '| --: | --: | --: | --: | --: | --: | --: | --: | --: |\n'
awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s |\n", $1, $2, $4, $3, $5, $6, $7, $8, $9, $10, $11}' "$TMP/rows"
printf '\n| -c | pair | %s ÷ other, CPU per request, per run (median) | peak RSS MB, %s / other |\n| --: | --- | --- | --- |\n' "${GC[0]}" "${GC[0]}"
awk -F'\t' -v first="${GC[0]}" '
    { other = ($2 == first ? $3 : $2); k = $1 SUBSEP other
      if (!(k in n)) order[++keys] = k
      r[k, ++n[k]] = $6; list[k] = list[k] (n[k] > 1 ? " / " : "") $6
      hf = ($2 == first ? $9 : $10); ho = ($2 == first ? $10 : $9)
      if (hf > maxf[k]) maxf[k] = hf; if (ho > maxo[k]) maxo[k] = ho }
    END { for (i = 1; i <= keys; i++) { k = order[i]; m = n[k]
            for (x = 1; x <= m; x++) v[x] = r[k, x]
            for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (v[y] < v[x]) { t = v[x]; v[x] = v[y]; v[y] = t }
            med = (m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2)
            split(k, p, SUBSEP)
            printf "| %s | %s ÷ %s | %s (%.3f) | %s / %s |\n", p[1], first, p[2], list[k], med, maxf[k], maxo[k] } }' "$TMP/rows"
