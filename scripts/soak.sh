#!/usr/bin/env bash
# Soak test (issue #9; not in CI): mqtarget under a fixed request rate for a long time, watching that its
# RSS, goroutines and open file descriptors stay flat and that every answer is 2xx.
#
# It builds nsqd (scripts/nsqd.sh build) and mqtarget from this tree, starts N nsqd processes on
# 127.0.0.1 ephemeral ports (data in a temporary directory removed on exit) and mqtarget with -nsq.hosts
# pointing at them, its /metrics on a separate admin listener. Then cmd/bench-fixedrate sends
# RATE requests per second, round-robin over the endpoints, for DURATION (open loop, at most 512
# outstanding), samples every 10 s mqtarget's VmRSS, go_goroutines (from /metrics) and the entries of
# /proc/PID/fd, prints the table and judges each series after the warm-up:
#
#   flat  <=>  median of the last third of the samples  <=  median of the first third * (1 + pct/100) + abs
#
# with pct/abs 20 %/16 MiB for RSS, 10 %/20 for goroutines, 10 %/10 for fds (fixedrate's flags). It exits
# non-zero when a series grew, when any answer was not 2xx, or when a request was skipped because 512
# were outstanding (the target did not keep up with the rate).
#
# Usage: scripts/soak.sh [options]
#   -r, --rate N        requests per second [1000]
#   -d, --duration D    how long to send (Go duration) [10m]
#   -w, --warmup D      samples before this are not judged [1m]
#   -n, --nsqd N        nsqd processes (/send3Host needs 3) [3]
#   -e, --endpoints L   comma-separated paths [/send1,/send2,/sendAsync,/sendAsyncWait,/send3Host]
#   -o, --out FILE      also write the output to FILE
# Environment: MQTARGET_CACHE (where scripts/nsqd.sh builds nsqd). Needs go and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=1000
DURATION=10m
WARMUP=1m
NSQDS=3
ENDPOINTS=/send1,/send2,/sendAsync,/sendAsyncWait,/send3Host
OUT=

NAME=soak
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh # log, die, ensure_packages, await, stop_pids
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

while (($#)); do
    case $1 in
        -r | --rate) RATE=${2:?}; shift 2 ;;
        -d | --duration) DURATION=${2:?}; shift 2 ;;
        -w | --warmup) WARMUP=${2:?}; shift 2 ;;
        -n | --nsqd) NSQDS=${2:?}; shift 2 ;;
        -e | --endpoints) ENDPOINTS=${2:?}; shift 2 ;;
        -o | --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
[[ $RATE =~ ^[1-9][0-9]*$ ]] || die "--rate must be a positive integer, not $RATE"
[[ $NSQDS =~ ^[1-9]$ ]] || die "--nsqd must be 1..9, not $NSQDS"

command -v go >/dev/null || die "go is required (it builds nsqd, mqtarget and the load)"
command -v curl >/dev/null || ensure_packages curl

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-soak.XXXXXX")"
STOP=() # label pid pairs for stop_pids
cleanup() {
    local rc=$?
    if ((rc != 0)) && [[ -s "$TMP/mqtarget.log" ]]; then
        echo "--- mqtarget log (tail) ---" >&2
        tail -n 30 "$TMP/mqtarget.log" >&2
    fi
    if ((${#STOP[@]})); then stop_pids 10 "${STOP[@]}"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# listening FILE WHAT: prints the host:port of the first "WHAT: listening on host:port" line in FILE.
listening() { grep -m1 -oE "$2: listening on [0-9.:]+" "$1" | sed 's/.* //'; }
# logged_addr FILE: the address of mqtarget's "mqtarget listening" log line; admin_addr: of the admin routes.
logged_addr() { grep -m1 -oE 'msg="mqtarget listening" addr=[0-9.:]+' "$1" | sed 's/.*addr=//'; }
admin_addr() { grep -m1 -oE 'msg="admin routes listening" addr=[0-9.:]+' "$1" | sed 's/.*addr=//'; }
ready() { curl -fsS -o /dev/null "http://$1/readyz"; }

log "building nsqd (scripts/nsqd.sh build), mqtarget and cmd/bench-fixedrate"
NSQD_BIN="$(scripts/nsqd.sh build)"
go build -o "$TMP/mqtarget" ./cmd/mqtarget
go build -o "$TMP/fixedrate" ./cmd/bench-fixedrate

HOSTS=()
for ((i = 0; i < NSQDS; i++)); do
    mkdir -p "$TMP/nsqd$i"
    "$NSQD_BIN" --node-id="$i" --tcp-address=127.0.0.1:0 --http-address=127.0.0.1:0 \
        --data-path="$TMP/nsqd$i" >"$TMP/nsqd$i.log" 2>&1 &
    STOP+=("nsqd$i" "$!")
    await 30 "$!" "$TMP/nsqd$i.log" listening "$TMP/nsqd$i.log" TCP || die "nsqd $i did not start"
    HOSTS+=("$AWAIT_OUT")
done
log "nsqd TCP ${HOSTS[*]}"

"$TMP/mqtarget" -http.addr 127.0.0.1:0 -http.admin_addr 127.0.0.1:0 -nsq.hosts "$(IFS=,; echo "${HOSTS[*]}")" \
    -log.level info >"$TMP/mqtarget.log" 2>&1 &
MQT_PID=$!
STOP+=(mqtarget "$MQT_PID")
await 30 "$MQT_PID" "$TMP/mqtarget.log" logged_addr "$TMP/mqtarget.log" || die "mqtarget did not start"
MQT_ADDR=$AWAIT_OUT
await 30 "$MQT_PID" "$TMP/mqtarget.log" admin_addr "$TMP/mqtarget.log" || die "mqtarget's admin listener did not start"
ADMIN_ADDR=$AWAIT_OUT
await 30 "$MQT_PID" "$TMP/mqtarget.log" ready "$ADMIN_ADDR" || die "mqtarget not ready"
log "mqtarget pid $MQT_PID, sends on $MQT_ADDR, admin on $ADMIN_ADDR; $RATE req/s for $DURATION"

rc=0
"$TMP/fixedrate" -addr "$MQT_ADDR" -admin "$ADMIN_ADDR" -pid "$MQT_PID" -rate "$RATE" -duration "$DURATION" \
    -warmup "$WARMUP" -endpoints "$ENDPOINTS" >"$TMP/out" || rc=$?
if [[ -n $OUT ]]; then cp "$TMP/out" "$OUT"; fi
cat "$TMP/out"
kill -0 "$MQT_PID" 2>/dev/null || die "mqtarget exited during the soak"
((rc == 0)) || die "the soak failed (fixedrate exit $rc): see the verdict above"
log "passed"
