#!/usr/bin/env bash
# The seeds' round-trip table (docs/benchmarks.md, "Round trips"): `mqtarget roundtrip -o json` over a
# matrix of batch sizes, message sizes and echo handoffs on one or more brokers, written as a markdown
# table with the exact command of every row.
#
# Usage: scripts/roundtrip-table.sh BROKER...   BROKER: artemis, activemq, nsq (a real nsqd), rocketmq
#
# A broker that does not run yet (scripts/<broker>.sh status, with the variables below) is started
# with its script and stopped at exit; one that runs is used and left running. nsq starts one nsqd from
# scripts/nsqd.sh build on ephemeral ports unless NSQ_HOSTS names running ones.
#
# Environment (defaults):
#   COUNTS      "5000 10000 30000 50000"  messages per batch
#   SIZES       "37 1024 2048 3072"       bytes; the seeds' 11 B is below mqtarget's 37-byte header, so
#                                         the smallest row is the header alone
#   HANDOFFS    "queue direct"            the echo's handoff ("async receive", "async consume")
#   PRODUCERS   4                         publishing goroutines
#   WORKERS     10                        the echo's workers (the seeds ran 8 cores + 2 threads)
#   WAIT        60s                       -wait: acks later than this after the last publish are lost
#   MQTARGET    (built from this checkout into a temporary directory)
#   OUT         (stdout)                  where the markdown goes; progress is logged on stderr
#   NSQ_HOSTS   (an nsqd started here)    running nsqd TCP addresses, comma-separated
#   the brokers' own variables: ARTEMIS_STOMP_PORT, ARTEMIS_DATA, ARTEMIS_LOGIN, ARTEMIS_PASSCODE,
#   ACTIVEMQ_STOMP_PORT, ACTIVEMQ_DATA, ACTIVEMQ_LOGIN, ACTIVEMQ_PASSCODE, ROCKETMQ_NAMESRV_PORT,
#   ROCKETMQ_DATA, ... (see each script); MQTARGET_DATA, MQTARGET_CACHE (scripts/lib/broker.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=roundtrip-table
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh

(($# > 0)) || usage
read -ra counts <<<"${COUNTS:-5000 10000 30000 50000}"
read -ra sizes <<<"${SIZES:-37 1024 2048 3072}"
read -ra handoffs <<<"${HANDOFFS:-queue direct}"
PRODUCERS=${PRODUCERS:-4} WORKERS=${WORKERS:-10} WAIT=${WAIT:-60s}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/roundtrip-table.XXXXXX")
started=() nsqd_pid=""
cleanup() {
  local rc=$? b
  if [[ -n $nsqd_pid ]]; then stop_pids 10 nsqd "$nsqd_pid"; fi
  for b in "${started[@]}"; do scripts/"$b".sh stop || log "stopping $b failed"; done
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT

MQ=${MQTARGET:-}
if [[ -z $MQ ]]; then
  log "building mqtarget"
  go build -o "$TMP/mqtarget" ./cmd/mqtarget
  MQ=$TMP/mqtarget
fi

# ensure BROKER: start scripts/BROKER.sh unless it runs.
ensure() {
  if scripts/"$1".sh status >/dev/null 2>&1; then
    log "$1 runs already: using it"
    return
  fi
  started+=("$1")
  scripts/"$1".sh start >&2
}

# nsqd_addr: the TCP address nsqd logged (fails until it did).
nsqd_addr() { grep -m1 -oE 'TCP: listening on 127\.0\.0\.1:[0-9]+' "$TMP/nsqd.log" | sed 's/.* //'; }

# start_nsqd: one nsqd on ephemeral ports; NSQ_HOSTS is set from its log.
start_nsqd() {
  local bin
  bin=$(scripts/nsqd.sh build)
  mkdir -p "$TMP/nsqd"
  spawn "$TMP/nsqd.log" "$TMP/nsqd" "$bin" --data-path "$TMP/nsqd" --tcp-address 127.0.0.1:0 --http-address 127.0.0.1:0
  nsqd_pid=$SPAWNED
  await 30 "$nsqd_pid" "$TMP/nsqd.log" nsqd_addr || die "nsqd did not start"
  NSQ_HOSTS=$AWAIT_OUT
  log "nsqd $nsqd_pid on $NSQ_HOSTS"
}

# flags BROKER: print mqtarget's broker settings, one per line, starting what is needed.
flags() {
  case $1 in
    artemis)
      ensure artemis
      printf '%s\n' -broker stomp -stomp.hosts "127.0.0.1:${ARTEMIS_STOMP_PORT:-61613}" \
        -stomp.login "${ARTEMIS_LOGIN:-mqtarget}" -stomp.passcode "${ARTEMIS_PASSCODE:-mqtarget}"
      ;;
    activemq)
      ensure activemq
      printf '%s\n' -broker stomp -stomp.hosts "127.0.0.1:${ACTIVEMQ_STOMP_PORT:-61614}" \
        -stomp.login "${ACTIVEMQ_LOGIN:-mqtarget}" -stomp.passcode "${ACTIVEMQ_PASSCODE:-mqtarget}"
      ;;
    nsq)
      if [[ -z ${NSQ_HOSTS:-} ]]; then start_nsqd >&2; fi
      printf '%s\n' -broker nsq -nsq.hosts "$NSQ_HOSTS"
      ;;
    rocketmq)
      ensure rocketmq
      printf '%s\n' -broker rocketmq -rocketmq.name_servers "127.0.0.1:${ROCKETMQ_NAMESRV_PORT:-9876}" -rocketmq.create_topics=true
      ;;
    *) die "unknown broker $1 (artemis, activemq, nsq, rocketmq)" ;;
  esac
}

exec 3>&1
if [[ -n ${OUT:-} ]]; then exec 3>"$OUT"; fi
printf '| broker | count | size | handoff | send_ms | echo_receive_ms | echo_last_latency_ms | return_receive_ms | return_last_latency_ms | rtt_p50_ms | rtt_p99_ms | lost | duplicates |\n' >&3
printf '|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n' >&3
cmds=()
for broker in "$@"; do
  # flags may start brokers: not in a command substitution, so started and nsqd_pid stay ours
  flags "$broker" >"$TMP/flags"
  mapfile -t bflags <"$TMP/flags"
  for count in "${counts[@]}"; do
    for size in "${sizes[@]}"; do
      for handoff in "${handoffs[@]}"; do
        topic="rtt_${broker}_$(date +%s%N)" # a fresh topic per batch: nothing left over from the last one
        args=(roundtrip "${bflags[@]}" -count "$count" -size "$size" -handoff "$handoff" -producers "$PRODUCERS"
          -workers "$WORKERS" -wait "$WAIT" -echo.topics "$topic" -log.level error -o json)
        log "$broker: ${count} x ${size} B, $handoff"
        rc=0
        row=$("$MQ" "${args[@]}" 2>"$TMP/err") || rc=$?
        if [[ -z $row ]]; then
          cat "$TMP/err" >&2
          die "$broker: mqtarget roundtrip exited $rc without a row"
        fi
        jq -r --arg b "$broker" --arg h "$handoff" \
          '"| \($b) | \(.count) | \(.size) | \($h) | \(.send_ms) | \(.echo_receive_ms) | \(.echo_last_latency_ms) | \(.return_receive_ms) | \(.return_last_latency_ms) | \(.rtt_p50_ms) | \(.rtt_p99_ms) | \(.lost) | \(.duplicates) |"' <<<"$row" >&3
        cmds+=("mqtarget ${args[*]}")
      done
    done
  done
done
printf '\nCommands, in row order (producers %s, workers %s):\n\n```sh\n' "$PRODUCERS" "$WORKERS" >&3
printf '%s\n' "${cmds[@]}" >&3
printf '```\n' >&3
