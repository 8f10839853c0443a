#!/usr/bin/env bash
# Run a local mosquitto MQTT broker (Debian's `mosquitto` package) on 127.0.0.1 as a plain process
# under its own directory (never the Debian service), with mosquitto-clients for probing and counting.
#
# Usage: scripts/mosquitto.sh start|stop|status|probe|packages
#
# start     apt-get install mosquitto mosquitto-clients when missing, write a private
#           mosquitto.conf into the data dir, start the broker in the background and wait
#           until an MQTT probe passes (mosquitto_sub reads $SYS/broker/version)
# stop      SIGTERM the broker, SIGKILL after MOSQUITTO_STOP_TIMEOUT seconds
# status    print state, PID, RSS, address and version; exit 0 when running, 3 when not
# probe     exit 0 when the MQTT probe passes (prints the broker's version)
# packages  print the Debian packages start needs
#
# Environment (defaults):
#   MQTARGET_DATA            ~/.local/state/mqtarget (see scripts/lib/broker.sh)
#   MOSQUITTO_DATA           $MQTARGET_DATA/mosquitto   mosquitto.conf, data/ (persistence), log/
#   MOSQUITTO_PORT           1883
#   MOSQUITTO_START_TIMEOUT  30    seconds until the probe must pass
#   MOSQUITTO_STOP_TIMEOUT   10    seconds between SIGTERM and SIGKILL
#   MOSQUITTO_LOGIN          (empty)  USER:PASSWORD: the only login the broker takes (a password file
#                                     in the data dir; anonymous clients are refused); the probe uses it
#   MOSQUITTO_TLS_PORT       (unset: none)  a second listener, MQTT over TLS, with a test certificate for
#                                     127.0.0.1 made in $MOSQUITTO_DATA/tls (clients trust tls/ca.pem)
#   MOSQUITTO_DENIED         mqt-denied/#  a topic filter no client may use (an ACL that allows every
#                                     other topic): what the refusal tests publish to
#
# Without MOSQUITTO_LOGIN anonymous clients are allowed (the listener is 127.0.0.1 only). max_queued_messages is 0
# (unlimited): with mosquitto's default of 1000 a QoS 1 subscriber that falls behind loses messages,
# and a count with mosquitto_sub would then be short. Count what the broker delivers with a
# subscriber started before publishing, e.g.
#   mosquitto_sub -h 127.0.0.1 -p 1883 -t T -q 1 -C 100 -W 30 | wc -l
set -euo pipefail

NAME=mosquitto
PACKAGES=(mosquitto mosquitto-clients)
# shellcheck source=scripts/lib/broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/broker.sh"
# shellcheck source=scripts/lib/tls.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/tls.sh"

HOST=127.0.0.1
DATA=$(realpath -m -- "${MOSQUITTO_DATA:-$MQTARGET_DATA/mosquitto}")
PORT=${MOSQUITTO_PORT:-1883}
START_TIMEOUT=${MOSQUITTO_START_TIMEOUT:-30}
STOP_TIMEOUT=${MOSQUITTO_STOP_TIMEOUT:-10}
LOGIN=${MOSQUITTO_LOGIN:-}
TLS_PORT=${MOSQUITTO_TLS_PORT:-}
DENIED=${MOSQUITTO_DENIED:-mqt-denied/#}
CONF=$DATA/mosquitto.conf
PIDFILE=$DATA/mqtarget-broker.pid
RUNLOG=$DATA/log/mqtarget-run.log
PID_MARK="-c $CONF " # the command line names our config
if ! [[ $PORT =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT > 65535)); then die "MOSQUITTO_PORT: must be a port 1..65535, got '$PORT'"; fi
if [[ -n $TLS_PORT ]] && { ! [[ $TLS_PORT =~ ^[0-9]+$ ]] || ((TLS_PORT < 1 || TLS_PORT > 65535 || TLS_PORT == PORT)); }; then
  die "MOSQUITTO_TLS_PORT: must be a port 1..65535 other than MOSQUITTO_PORT, got '$TLS_PORT'"
fi
[[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "MOSQUITTO_START_TIMEOUT: must be whole seconds, got '$START_TIMEOUT'"
[[ $STOP_TIMEOUT =~ ^[0-9]+$ ]] || die "MOSQUITTO_STOP_TIMEOUT: must be whole seconds, got '$STOP_TIMEOUT'"
[[ -n $DENIED && $DENIED != *[[:space:]]* && $DENIED != '#' ]] || die "MOSQUITTO_DENIED: must be one topic filter other than '#', got '$DENIED'"
[[ -z $LOGIN || $LOGIN == ?*:?* ]] || die "MOSQUITTO_LOGIN: must be USER:PASSWORD, got '${LOGIN%%:*}:…'"
LOGIN_ARGS=()
if [[ -n $LOGIN ]]; then LOGIN_ARGS=(-u "${LOGIN%%:*}" -P "${LOGIN#*:}"); fi

version() {
  local v
  v=$(dpkg-query -W -f='${Version}' mosquitto 2>/dev/null || true)
  echo "${v:-(not installed)}"
}

broker_pid() { pid_of "$PIDFILE" "$PID_MARK"; }

# probe: a real MQTT exchange: subscribe to the broker's retained version and print it.
# shellcheck disable=SC2016 # $SYS is MQTT's, not the shell's
probe() { mosquitto_sub -h "$HOST" -p "$PORT" "${LOGIN_ARGS[@]}" -t '$SYS/broker/version' -C 1 -W "${1:-5}"; }

# write_config: regenerated on every start; the persistence file in data/ is kept across restarts.
# Started as root, mosquitto drops to its own user (`user mosquitto`), which must be able to write
# data/ (the persistence file is written at shutdown and every autosave_interval).
write_config() {
  mkdir -p "$DATA/data" "$DATA/log"
  local user="" auth="allow_anonymous true"
  if [[ -n $LOGIN ]]; then
    # mosquitto_passwd hashes the password; the broker reads the file as its own user, and wants it
    # readable by nobody else
    rm -f "$DATA/passwd"
    (umask 077 && mosquitto_passwd -b -c "$DATA/passwd" "${LOGIN%%:*}" "${LOGIN#*:}") >/dev/null
    auth="allow_anonymous false
password_file $DATA/passwd"
  fi
  local tls=""
  if [[ -n $TLS_PORT ]]; then
    test_certs "$DATA/tls"
    # every listener takes the same logins (no per_listener_settings)
    tls="listener $TLS_PORT $HOST
certfile $DATA/tls/server.pem
keyfile $DATA/tls/server.key"
  fi
  # patterns apply to every client, anonymous or not; deny lines are checked first, and # does not
  # match $SYS topics (the probe reads one)
  cat >"$DATA/acl" <<EOF
pattern readwrite #
pattern read \$SYS/#
pattern deny $DENIED
EOF
  if [[ $(id -u) == 0 ]]; then
    id mosquitto >/dev/null 2>&1 || die "user mosquitto missing: is the mosquitto package broken?"
    chown mosquitto: "$DATA/data" "$DATA/acl"
    if [[ -n $LOGIN ]]; then chown mosquitto: "$DATA/passwd"; fi
    if [[ -n $TLS_PORT ]]; then
      chown -R mosquitto: "$DATA/tls"
      # mosquitto loads its certificate after dropping to that user: every directory above must let it by
      runuser -u mosquitto -- test -r "$DATA/tls/server.key" ||
        die "the mosquitto user cannot reach $DATA/tls (a directory above it lacks o+x): choose a MOSQUITTO_DATA it can reach, or chmod o+x the directories above"
    fi
    runuser -u mosquitto -- test -w "$DATA/data" ||
      log "warning: the mosquitto user cannot reach $DATA/data (a directory above it lacks o+x): its persistence file will not be written"
    user="user mosquitto"
  fi
  cat >"$CONF.new" <<EOF
# Generated by mqtarget scripts/mosquitto.sh; rewritten on every start.
$user
listener $PORT $HOST
$tls
$auth
acl_file $DATA/acl
persistence true
persistence_location $DATA/data/
autosave_interval 60
max_queued_messages 0
max_queued_bytes 0
sys_interval 10
log_dest stdout
log_type error
log_type warning
log_type notice
connection_messages false
EOF
  mv "$CONF.new" "$CONF"
}

cmd_packages() { echo "${PACKAGES[@]}"; }

cmd_probe() { probe "$@"; }

cmd_start() {
  lock_instance "$DATA/mqtarget-broker.lock"
  local pid
  if pid=$(broker_pid); then
    log "already running (pid $pid) on $HOST:$PORT"
    return 0
  fi
  local p
  for p in "$PORT" ${TLS_PORT:+"$TLS_PORT"}; do
    if port_in_use "$p"; then die "$HOST:$p is already in use by another process (not this broker)"; fi
  done
  ensure_packages "${PACKAGES[@]}"
  command -v mosquitto >/dev/null || [[ -x /usr/sbin/mosquitto ]] || die "mosquitto not found after installing ${PACKAGES[*]}"
  write_config
  rm -f "$PIDFILE"
  spawn "$RUNLOG" "$DATA" /usr/sbin/mosquitto -c "$CONF"
  echo "$SPAWNED" >"$PIDFILE"
  log "started pid $SPAWNED, waiting up to ${START_TIMEOUT}s for MQTT on $HOST:$PORT"
  if ! await "$START_TIMEOUT" "$SPAWNED" "$RUNLOG" probe 2; then
    cmd_stop || true
    die "mosquitto did not start (log: $RUNLOG)"
  fi
  log "ready in ${AWAIT_SECONDS}s: $AWAIT_OUT"
}

cmd_stop() {
  lock_instance "$DATA/mqtarget-broker.lock"
  local pid
  if pid=$(broker_pid); then
    stop_pids "$STOP_TIMEOUT" "$NAME" "$pid"
  else
    log "not running"
  fi
  rm -f "$PIDFILE"
}

cmd_status() {
  local pid
  if ! pid=$(broker_pid); then
    echo "$NAME $(version): not running"
    echo "  mqtt:     $HOST:$PORT"
    echo "  data:     $DATA"
    return 3
  fi
  echo "$NAME $(version): running"
  echo "  pid:      $pid"
  echo "  rss:      $(rss_mib "$pid") MiB"
  local who="anonymous"
  if [[ -n $LOGIN ]]; then who="login ${LOGIN%%:*} only"; fi
  echo "  mqtt:     $HOST:$PORT ($who; count with: mosquitto_sub -h $HOST -p $PORT -t TOPIC -q 1 -C N)"
  if [[ -n $TLS_PORT ]]; then echo "  mqtts:    $HOST:$TLS_PORT (CA: $DATA/tls/ca.pem)"; fi
  echo "  version:  $(probe 2 2>/dev/null || echo '(probe failed)')"
  echo "  data:     $DATA"
  echo "  log:      $RUNLOG"
}

dispatch "$@"
