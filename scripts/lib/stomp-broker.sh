# shellcheck shell=bash disable=SC2153 # the variables below are set by the script sourcing this
# What the STOMP brokers' scripts (artemis.sh, activemq.sh, rabbitmq.sh) share on top of lib/broker.sh
# (source that first): the STOMP readiness probe, start-with-probe, stop, status, probe and packages
# commands. Set before sourcing:
#   NAME VERSION     log prefix and what status calls the broker
#   DATA             the broker's data directory; PIDFILE and RUNLOG live in it
#   PID_MARK         text the broker's command line must contain (guards against PID reuse)
#   STOMP_PORT LOGIN PASSCODE START_TIMEOUT STOP_TIMEOUT
#   PACKAGES         Debian packages the broker needs (may be empty)
# and optionally PROBE_ARGS (extra stomp-probe.py arguments) and a status_extra function (more lines for
# status). The script defines cmd_start, which ends in `launch DIR CMD...`.

STOMP_HOST=127.0.0.1
PIDFILE=$DATA/mqtarget-broker.pid
RUNLOG=$DATA/log/mqtarget-run.log
PROBE=$(dirname "${BASH_SOURCE[0]}")/../stomp-probe.py
[[ -v PROBE_ARGS ]] || PROBE_ARGS=()

broker_pid() { pid_of "$PIDFILE" "$PID_MARK"; }

probe() {
  python3 "$PROBE" "$STOMP_HOST:$STOMP_PORT" "${PROBE_ARGS[@]}" --login "$LOGIN" --passcode "$PASSCODE" "$@"
}

# already_running: true (and says so) when our broker runs; the start commands return then.
already_running() {
  local pid
  pid=$(broker_pid) || return 1
  log "already running (pid $pid) on $STOMP_HOST:$STOMP_PORT"
}

# check_can_start PORT...: the probe's interpreter is there and nobody holds the ports we listen on.
check_can_start() {
  command -v python3 >/dev/null || die "python3 not found (needed for the STOMP probe)"
  local p
  for p in "$@"; do
    if port_in_use "$p"; then die "$STOMP_HOST:$p is already in use by another process (not this broker)"; fi
  done
}

# launch DIR CMD...: start CMD in DIR, record its PID and wait until the STOMP probe passes.
launch() {
  local dir=$1
  shift
  rm -f "$PIDFILE"
  spawn "$RUNLOG" "$dir" "$@"
  echo "$SPAWNED" >"$PIDFILE"
  log "started pid $SPAWNED, waiting up to ${START_TIMEOUT}s for STOMP on $STOMP_HOST:$STOMP_PORT"
  if ! await "$START_TIMEOUT" "$SPAWNED" "$RUNLOG" probe --timeout 5; then
    cmd_stop || true
    die "$NAME did not start (log: $RUNLOG)"
  fi
  log "ready in ${AWAIT_SECONDS}s: $AWAIT_OUT"
}

# stop_broker: stop our broker by its PID (cmd_stop; a script with more to stop redefines cmd_stop).
stop_broker() {
  local pid
  if pid=$(broker_pid); then
    stop_pids "$STOP_TIMEOUT" "$NAME" "$pid"
  else
    log "not running"
  fi
  rm -f "$PIDFILE"
}

cmd_stop() { stop_broker; }

cmd_status() {
  local pid out
  if ! pid=$(broker_pid); then
    echo "$NAME $VERSION: not running"
    echo "  stomp:    $STOMP_HOST:$STOMP_PORT (login=$LOGIN passcode=$PASSCODE)"
    echo "  data:     $DATA"
    return 3
  fi
  echo "$NAME $VERSION: running"
  echo "  pid:      $pid"
  echo "  rss:      $(rss_mib "$pid") MiB"
  echo "  stomp:    $STOMP_HOST:$STOMP_PORT (login=$LOGIN passcode=$PASSCODE; /queue/NAME, /topic/NAME)"
  if [[ $(type -t status_extra) == function ]]; then status_extra; fi
  echo "  data:     $DATA (log: $RUNLOG)"
  out=$(probe --timeout 5 2>&1) || true
  echo "  probe:    $out"
}

# probe: exit 0 when the broker on STOMP_PORT takes a message and gives it back with our login.
cmd_probe() { probe --timeout 10; }

# packages: the Debian packages start installs when missing (scripts/test.sh installs them up front).
cmd_packages() { if [[ -n $PACKAGES ]]; then echo "$PACKAGES"; fi; }
