# shellcheck shell=bash
# Shared by scripts/artemis.sh and scripts/activemq.sh: process handling, the STOMP readiness probe and
# stop-by-PID for a JVM broker started in the background. Source it after setting:
#   BROKER_NAME  name in log lines          PIDFILE, RUNLOG   pid file and run log
#   PID_MARK     text the JVM's command line must contain (guards against PID reuse)
#   STOMP_HOST, STOMP_PORT, LOGIN, PASSCODE, START_TIMEOUT, STOP_TIMEOUT, PROBE (stomp-probe.py)

log() { printf '%s: %s\n' "$BROKER_NAME" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# pid_alive PID: true when PID exists and is not a zombie.
pid_alive() {
  local state
  [[ -r /proc/$1/stat ]] || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# broker_pid: print the PID of our broker if it is running.
broker_pid() {
  local pid
  [[ -f $PIDFILE ]] || return 1
  pid=$(<"$PIDFILE")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  pid_alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$PID_MARK" || return 1
  echo "$pid"
}

rss_of() { awk '/^VmRSS:/ {printf "%.0f MiB", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

port_in_use() { (exec 3<>"/dev/tcp/$STOMP_HOST/$STOMP_PORT") 2>/dev/null; }

probe() { python3 "$PROBE" "$STOMP_HOST:$STOMP_PORT" --login "$LOGIN" --passcode "$PASSCODE" "$@"; }

# check_can_start: the probe's interpreter is there and nobody else holds the STOMP port.
check_can_start() {
  command -v python3 >/dev/null || die "python3 not found (needed for the STOMP probe)"
  if port_in_use; then
    die "$STOMP_HOST:$STOMP_PORT is already in use by another process (not this broker)"
  fi
}

# launch DIR CMD...: start CMD in DIR, detached (setsid does not fork when we are not a group leader,
# so $! is the JVM), record its PID, and wait until the STOMP probe passes or START_TIMEOUT runs out.
launch() {
  local dir=$1 pid
  shift
  rm -f "$PIDFILE"
  mkdir -p "$(dirname "$RUNLOG")"
  printf '\n==== %s mqtarget start ====\n' "$(date -u +%FT%TZ)" >>"$RUNLOG"
  local t0=$SECONDS
  (cd "$dir" && exec setsid "$@") >>"$RUNLOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  log "started pid $pid, waiting up to ${START_TIMEOUT}s for STOMP on $STOMP_HOST:$STOMP_PORT"

  local deadline=$((SECONDS + START_TIMEOUT)) out=""
  while :; do
    if ! pid_alive "$pid"; then
      tail -n 40 "$RUNLOG" >&2 || true
      rm -f "$PIDFILE"
      die "broker exited during startup (log: $RUNLOG)"
    fi
    if out=$(probe --timeout 5 2>&1); then
      log "ready in $((SECONDS - t0))s: $out"
      return 0
    fi
    if ((SECONDS >= deadline)); then
      log "last probe: $out"
      tail -n 40 "$RUNLOG" >&2 || true
      cmd_stop || true
      die "not ready within ${START_TIMEOUT}s (log: $RUNLOG)"
    fi
    sleep 1
  done
}

cmd_stop() {
  local pid
  if ! pid=$(broker_pid); then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  log "stopping pid $pid (SIGTERM, up to ${STOP_TIMEOUT}s)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while pid_alive "$pid" && ((SECONDS < deadline)); do sleep 0.5; done
  if pid_alive "$pid"; then
    log "still alive after ${STOP_TIMEOUT}s; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while pid_alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
    pid_alive "$pid" && die "pid $pid survived SIGKILL"
  fi
  rm -f "$PIDFILE"
  log "stopped"
}

# print_probe: the probe's answer, for status.
print_probe() {
  local out
  out=$(probe --timeout 5 2>&1) || true
  echo "  probe:    $out"
}
