# shellcheck shell=bash
# The process library every scripts/*.sh that runs a broker sources: log lines, Debian packages, a
# detached start with a readiness deadline, stop by PID, and the command dispatch. Set NAME (the
# prefix of log lines) before sourcing; then define cmd_<command> functions and call `dispatch "$@"`.
#
# Where things live (both can be overridden):
#   MQTARGET_CACHE  [$HOME/.cache/mqtarget]              downloads and builds only
#   MQTARGET_DATA   [$XDG_STATE_HOME or ~/.local/state/mqtarget]  broker data of brokers run by hand,
#                   one directory per broker; scripts/test.sh points it at a per-run directory

MQTARGET_CACHE=${MQTARGET_CACHE:-$HOME/.cache/mqtarget}
MQTARGET_DATA=${MQTARGET_DATA:-${XDG_STATE_HOME:-$HOME/.local/state}/mqtarget}

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# --- Debian packages ---------------------------------------------------------

pkg_installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }

# apt_get ARGS...: apt-get that waits for the dpkg lock (another install running) instead of failing.
apt_get() {
  DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout="${MQTARGET_APT_LOCK_TIMEOUT:-600}" "$@"
}

# ensure_packages PKG...: install the missing Debian packages with one `apt-get update` and one
# `apt-get install`, without letting them start their services (policy-rc.d): the scripts run the
# brokers as plain processes under their own directories. Our own installs take turns (flock), so one
# never removes the policy file while another is still installing; apt itself waits for the dpkg lock.
ensure_packages() {
  local p missing=()
  for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  [[ $(id -u) == 0 ]] || die "missing Debian packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}"
  exec 9>/run/lock/mqtarget-apt.lock
  flock -w "${MQTARGET_APT_LOCK_TIMEOUT:-600}" 9 || die "another mqtarget install held /run/lock/mqtarget-apt.lock too long"
  missing=()
  for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done # the one before us may have installed them
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    local policy=/usr/sbin/policy-rc.d created=0 rc=0
    if [[ ! -e $policy ]]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy"
      chmod +x "$policy"
      created=1
    fi
    { apt_get update >&2 && apt_get install -y "${missing[@]}" >&2; } || rc=$?
    ((created)) && rm -f "$policy"
    ((rc == 0)) || die "apt-get install ${missing[*]} failed"
  fi
  exec 9>&-
}

# --- processes ---------------------------------------------------------------

# pid_alive PID: true when PID exists and is neither a zombie nor dead.
pid_alive() {
  local state
  [[ -r /proc/$1/stat ]] || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# pid_of PIDFILE MARK: print the PID in PIDFILE when that process runs and its command line (arguments
# joined by spaces, each followed by one) contains MARK, which guards against a reused PID.
pid_of() {
  local pid
  [[ -f $1 ]] || return 1
  pid=$(<"$1")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  pid_alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2" || return 1
  echo "$pid"
}

rss_mib() { awk '/^VmRSS:/ {printf "%d", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

# port_in_use PORT [HOST]: something accepts connections on HOST (127.0.0.1):PORT.
port_in_use() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# spawn OUT DIR CMD...: run CMD in DIR detached from our session, output appended to OUT; its PID is
# left in SPAWNED. setsid does not fork when we are not a process group leader (a background job of a
# non-interactive shell never is), so SPAWNED is the broker's own PID, the one to signal.
spawn() {
  local out=$1 dir=$2
  shift 2
  mkdir -p "$(dirname "$out")"
  printf '\n==== %s %s start ====\n' "$(date -u +%FT%TZ)" "$NAME" >>"$out"
  # 8>&-: the broker must not hold lock_instance's lock for as long as it runs.
  (cd "$dir" && exec setsid "$@") >>"$out" 2>&1 </dev/null 8>&- &
  # shellcheck disable=SC2034 # read by the caller
  SPAWNED=$!
}

# lock_instance FILE: take turns with every other start or stop of the same broker instance (FILE lives in
# its data directory). Without it, a start that ran while another caller's stop was still ending the
# processes took the dying name server for a running one. The lock is held on fd 8 until the script
# exits; spawn keeps it from the broker processes.
lock_instance() {
  mkdir -p "$(dirname "$1")"
  exec 8>"$1"
  flock -w "${MQTARGET_BROKER_LOCK_TIMEOUT:-600}" 8 ||
    die "another start or stop of this broker held $1 for ${MQTARGET_BROKER_LOCK_TIMEOUT:-600} s"
}

# await TIMEOUT PID LOG CHECK [ARGS...]: run CHECK ARGS until it succeeds (its stdout is kept in
# AWAIT_OUT), failing when PID exits or TIMEOUT seconds pass; LOG's tail is shown on failure.
await() {
  local timeout=$1 pid=$2 out=$3 t0=$SECONDS
  shift 3
  local deadline=$((SECONDS + timeout))
  while :; do
    if ! pid_alive "$pid"; then
      tail -n 40 "$out" >&2 || true
      log "pid $pid exited during startup (log: $out)"
      return 1
    fi
    if AWAIT_OUT=$("$@" 2>&1); then
      # shellcheck disable=SC2034 # read by the caller
      AWAIT_SECONDS=$((SECONDS - t0))
      return 0
    fi
    if ((SECONDS >= deadline)); then
      log "last check: $AWAIT_OUT"
      tail -n 40 "$out" >&2 || true
      log "not ready within ${timeout}s (log: $out)"
      return 1
    fi
    sleep 1
  done
}

# stop_pids TIMEOUT LABEL PID [LABEL PID]...: SIGTERM each (and SIGCONT, so a frozen one sees it),
# SIGKILL what is still alive after TIMEOUT seconds.
stop_pids() {
  local timeout=$1 i
  shift
  local -a labels=() pids=() alive=()
  while (($# >= 2)); do
    log "stopping $1 (pid $2)"
    kill -TERM "$2" 2>/dev/null || true
    kill -CONT "$2" 2>/dev/null || true
    labels+=("$1")
    pids+=("$2")
    shift 2
  done
  local deadline=$((SECONDS + timeout)) killed=0
  while :; do
    alive=()
    for i in "${!pids[@]}"; do
      if pid_alive "${pids[$i]}"; then alive+=("$i"); fi
    done
    ((${#alive[@]})) || break
    if ((SECONDS >= deadline)); then
      ((killed == 0)) || die "pid ${pids[${alive[0]}]} (${labels[${alive[0]}]}) survived SIGKILL"
      for i in "${alive[@]}"; do
        log "${labels[$i]} still alive after ${timeout}s: SIGKILL"
        kill -KILL "${pids[$i]}" 2>/dev/null || true
      done
      killed=1
      deadline=$((SECONDS + 10))
    fi
    sleep 0.5
  done
  for i in "${!labels[@]}"; do log "${labels[$i]} stopped"; done
}

# --- commands ----------------------------------------------------------------

# usage: the script's header comment, up to `set -euo pipefail`.
usage() {
  sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
  exit 64
}

# dispatch COMMAND [ARGS...]: run cmd_COMMAND (dashes become underscores) when the script defines it.
# By convention `status` exits 0 when the broker runs and 3 when it does not.
dispatch() {
  local fn="cmd_${1:-}"
  fn=${fn//-/_}
  [[ -n ${1:-} && $(type -t "$fn") == function ]] || usage
  shift
  "$fn" "$@"
}
