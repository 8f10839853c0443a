#!/usr/bin/env bash
# Builds a real nsqd (and nsqlookupd) of the pinned version from the Go module proxy into the cache,
# and runs one on 127.0.0.1. nsq's apps need nsq's own `replace` of judwhite/go-svc, so they are built
# in a small module of their own, outside mqtarget's go.mod.
#
# Usage: scripts/nsqd.sh build|start|stop|status
#
# build     build when missing, print the nsqd path (the default)
# start     build, then run nsqd in the background on 127.0.0.1 and wait until it answers /ping; a
#           running one is reused
# stop      SIGTERM it (nsqd flushes its in-memory queue to disk), SIGKILL after NSQD_STOP_TIMEOUT
# status    print state, PID, RSS and addresses; exit 0 when running, 3 when not
#
# Environment (defaults):
#   MQTARGET_CACHE          ~/.cache/mqtarget          where nsqd is built
#   MQTARGET_DATA           ~/.local/state/mqtarget    (see scripts/lib/broker.sh)
#   NSQD_DATA               $MQTARGET_DATA/nsqd        its data path, log and PID file
#   NSQD_TCP_PORT           4150                       what mqtarget connects to (nsq.hosts)
#   NSQD_HTTP_PORT          4151                       /stats (what it holds), /ping
#   NSQD_MEM_QUEUE_SIZE     10000                      messages per topic kept in memory (then disk)
#   NSQD_START_TIMEOUT      30                         seconds until /ping must answer
#   NSQD_STOP_TIMEOUT       30                         seconds between SIGTERM and SIGKILL
#
# Count what it holds: curl -s 'http://127.0.0.1:4151/stats?format=json&topic=T' (message_count).
set -euo pipefail

readonly NSQ_VERSION="v1.3.0"
readonly GO_SVC_REPLACE="github.com/mreiferson/go-svc v1.2.2-0.20210815184239-7a96e00010f6"
NAME=nsqd
# shellcheck source=scripts/lib/broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/broker.sh"
DIR="$MQTARGET_CACHE/nsq-$NSQ_VERSION"
DATA=$(realpath -m -- "${NSQD_DATA:-$MQTARGET_DATA/nsqd}")
TCP_PORT=${NSQD_TCP_PORT:-4150}
HTTP_PORT=${NSQD_HTTP_PORT:-4151}
MEM_QUEUE_SIZE=${NSQD_MEM_QUEUE_SIZE:-10000}
START_TIMEOUT=${NSQD_START_TIMEOUT:-30}
STOP_TIMEOUT=${NSQD_STOP_TIMEOUT:-30}
PIDFILE=$DATA/nsqd.pid
PID_MARK="--data-path=$DATA "

build() {
    if [[ -x "$DIR/bin/nsqd" && -x "$DIR/bin/nsqlookupd" ]] && "$DIR/bin/nsqd" --version | grep -q "nsqd ${NSQ_VERSION}"; then
        echo "$DIR/bin/nsqd"
        return
    fi
    command -v go >/dev/null || die "go is required"
    local mod="$DIR/module"
    mkdir -p "$mod" "$DIR/bin"
    cat >"$mod/go.mod" <<GOMOD
module mqtarget.local/nsq-apps

go 1.22

require github.com/nsqio/nsq ${NSQ_VERSION}

replace github.com/judwhite/go-svc => ${GO_SVC_REPLACE}
GOMOD
    cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "github.com/nsqio/nsq/apps/nsqd"
	_ "github.com/nsqio/nsq/apps/nsqlookupd"
)
GO
    log "building nsqd ${NSQ_VERSION} into $DIR/bin"
    (
        cd "$mod"
        export GOFLAGS="${GOFLAGS:-} -mod=mod"
        go mod tidy >&2
        go build -o "$DIR/bin/" github.com/nsqio/nsq/apps/nsqd github.com/nsqio/nsq/apps/nsqlookupd >&2
    )
    echo "$DIR/bin/nsqd"
}

cmd_build() { build; }

ping() { curl -fsS --max-time 2 "http://127.0.0.1:$HTTP_PORT/ping"; }

cmd_start() {
  lock_instance "$DATA/.lock"
  local pid bin
  if pid=$(pid_of "$PIDFILE" "$PID_MARK"); then
    log "already running (pid $pid) on 127.0.0.1:$TCP_PORT"
    return 0
  fi
  for v in TCP_PORT HTTP_PORT MEM_QUEUE_SIZE START_TIMEOUT STOP_TIMEOUT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "NSQD_$v: a number, got ${!v}"
  done
  command -v curl >/dev/null || die "curl is needed"
  for p in "$TCP_PORT" "$HTTP_PORT"; do port_in_use "$p" && die "port $p on 127.0.0.1 is in use (NSQD_TCP_PORT, NSQD_HTTP_PORT)"; done
  bin=$(build)
  mkdir -p "$DATA"
  spawn "$DATA/nsqd.log" "$DATA" "$bin" --tcp-address="127.0.0.1:$TCP_PORT" --http-address="127.0.0.1:$HTTP_PORT" \
    --data-path="$DATA" --mem-queue-size="$MEM_QUEUE_SIZE" --broadcast-address=127.0.0.1
  echo "$SPAWNED" >"$PIDFILE"
  await "$START_TIMEOUT" "$SPAWNED" "$DATA/nsqd.log" ping || die "nsqd did not start"
  log "running (pid $SPAWNED) on 127.0.0.1:$TCP_PORT (HTTP $HTTP_PORT), data $DATA, ready in ${AWAIT_SECONDS}s"
}

cmd_stop() {
  lock_instance "$DATA/.lock"
  local pid
  if ! pid=$(pid_of "$PIDFILE" "$PID_MARK"); then
    log "not running"
    rm -f "$PIDFILE"
    return 0
  fi
  stop_pids "$STOP_TIMEOUT" nsqd "$pid"
  rm -f "$PIDFILE"
}

cmd_status() {
  local pid
  if pid=$(pid_of "$PIDFILE" "$PID_MARK"); then
    echo "nsqd: running, pid $pid, RSS $(rss_mib "$pid") MiB, tcp 127.0.0.1:$TCP_PORT, http 127.0.0.1:$HTTP_PORT, data $DATA"
    return 0
  fi
  echo "nsqd: not running (data $DATA)"
  return 3
}

dispatch "${1:-build}" "${@:2}"
