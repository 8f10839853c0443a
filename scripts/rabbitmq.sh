#!/usr/bin/env bash
# Run a local RabbitMQ node (Debian's `rabbitmq-server` package) with the STOMP plugin on 127.0.0.1, as
# a plain Erlang process under its own directories (no Debian service, no system epmd).
#
# Usage: scripts/rabbitmq.sh start|stop|status|probe|packages|ctl ARGS...
#
# start     apt-get install rabbitmq-server when missing (its service is not started), write a private
#           rabbitmq.conf and enabled_plugins ([rabbitmq_stomp]) into the data dir, start a private epmd
#           and the node in the background and wait until a real STOMP probe (vhost /) passes
# stop      SIGTERM the node (the Erlang VM itself: a clean shutdown), SIGKILL after
#           RABBITMQ_STOP_TIMEOUT seconds; then stop the epmd this script started
# status    print state, PID, RSS, STOMP address and credentials; exit 0 when running, 3 when not
# probe     exit 0 when a STOMP probe with the login passes
# packages  print the Debian packages start needs
# ctl ARGS  rabbitmqctl ARGS against this node (its name, cookie and epmd port), e.g.
#           `ctl list_queues -q name messages`; exit 3 when the node is not running (rabbitmqctl would
#           start a stray epmd listening on every interface)
#
# Environment (defaults):
#   MQTARGET_DATA           ~/.local/state/mqtarget (see scripts/lib/broker.sh)
#   RABBITMQ_DATA           $MQTARGET_DATA/rabbitmq   conf/, mnesia/, log/ (also the node's HOME, so its
#                                                     .erlang.cookie is private)
#   RABBITMQ_STOMP_PORT     61615      (not 61613/61614, so it runs beside Artemis and ActiveMQ)
#   RABBITMQ_LOGIN          mqtarget   (the node's default user, administrator of vhost /)
#   RABBITMQ_PASSCODE       mqtarget
#   RABBITMQ_NODE_PORT      5673       AMQP 0-9-1 listener on 127.0.0.1 (not the default 5672)
#   RABBITMQ_AMQPS_PORT     (unset: none)  AMQP 0-9-1 over TLS on 127.0.0.1, with a test certificate for
#                                      127.0.0.1 made in $RABBITMQ_DATA/tls (clients trust tls/ca.pem)
#   RABBITMQ_DIST_PORT      25673      Erlang distribution port on 127.0.0.1
#   RABBITMQ_EPMD_PORT      4370       private epmd on 127.0.0.1 (not the shared default 4369)
#   RABBITMQ_NODENAME       mqtarget@localhost
#   RABBITMQ_MEMORY_LIMIT   512MiB     vm_memory_high_watermark.absolute (publishers block above it)
#   RABBITMQ_START_TIMEOUT  90         seconds until the STOMP probe must pass
#   RABBITMQ_STOP_TIMEOUT   30         seconds between SIGTERM and SIGKILL
#
# The default user is created only when the node's database is new: when RABBITMQ_LOGIN/PASSCODE differ
# from the ones the database was made with, start deletes mnesia/ (queued test messages included).
# STOMP destinations: /queue/NAME is a durable queue NAME, /topic/NAME goes through amq.topic.
set -euo pipefail

NAME=rabbitmq
PACKAGES=rabbitmq-server
# shellcheck source=scripts/lib/broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/broker.sh"
# shellcheck source=scripts/lib/tls.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/tls.sh"

RMQ_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server # the real start script (/usr/sbin's wrapper su's to rabbitmq)
RMQ_CTL=/usr/lib/rabbitmq/bin/rabbitmqctl # likewise: the real one, run as us with HOME=$DATA
EPMD=/usr/lib/erlang/bin/epmd

DATA=$(realpath -m -- "${RABBITMQ_DATA:-$MQTARGET_DATA/rabbitmq}")
STOMP_PORT=${RABBITMQ_STOMP_PORT:-61615}
VHOST=/
LOGIN=${RABBITMQ_LOGIN:-mqtarget}
PASSCODE=${RABBITMQ_PASSCODE:-mqtarget}
NODE_PORT=${RABBITMQ_NODE_PORT:-5673}
AMQPS_PORT=${RABBITMQ_AMQPS_PORT:-}
DIST_PORT=${RABBITMQ_DIST_PORT:-25673}
EPMD_PORT=${RABBITMQ_EPMD_PORT:-4370}
NODENAME=${RABBITMQ_NODENAME:-mqtarget@localhost}
MEMORY_LIMIT=${RABBITMQ_MEMORY_LIMIT:-512MiB}
START_TIMEOUT=${RABBITMQ_START_TIMEOUT:-90}
STOP_TIMEOUT=${RABBITMQ_STOP_TIMEOUT:-30}

CONF=$DATA/conf
MNESIA=$DATA/mnesia
EPMD_PIDFILE=$DATA/mqtarget-epmd.pid
CRED_FILE=$MNESIA/mqtarget-credentials
PID_MARK="-home $DATA " # erlexec passes HOME to the VM as "-home DIR"
VERSION=$(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || true)
VERSION=${VERSION:-(not installed)}
# RabbitMQ takes CONNECT's host header as the virtual host: probe vhost / (by default the probe sends
# the address's host, 127.0.0.1, which RabbitMQ refuses as an unknown vhost).
PROBE_ARGS=(--host "$VHOST")
# shellcheck source=scripts/lib/stomp-broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/stomp-broker.sh"

# --- installation and configuration ----------------------------------------

conf_value() { # rabbitmq.conf (cuttlefish) values end at the line: refuse newlines
  [[ $2 != *$'\n'* && -n $2 ]] || die "$1 must be a non-empty single line"
  printf '%s' "$2"
}

write_config() {
  mkdir -p "$CONF" "$MNESIA" "$DATA/log"
  local login pass
  login=$(conf_value RABBITMQ_LOGIN "$LOGIN")
  pass=$(conf_value RABBITMQ_PASSCODE "$PASSCODE")
  # RabbitMQ only logs an unparsable watermark and falls back to 40% of RAM: refuse it here.
  [[ $MEMORY_LIMIT =~ ^[0-9]+([kKMG]i?B)?$ ]] || die "RABBITMQ_MEMORY_LIMIT must be like 512MiB, got '$MEMORY_LIMIT'"
  # default_user/default_pass are applied only when the database is created: start afresh when they change.
  local cred
  cred=$(printf '%s\n%s\n' "$login" "$pass" | sha256sum | cut -d' ' -f1)
  if [[ -d $MNESIA/$NODENAME ]] && [[ ! -f $CRED_FILE || $(<"$CRED_FILE") != "$cred" ]]; then
    log "login changed since the node's database was created: deleting $MNESIA"
    rm -rf "$MNESIA"
    mkdir -p "$MNESIA"
  fi
  echo "$cred" >"$CRED_FILE"
  local tls=""
  if [[ -n $AMQPS_PORT ]]; then
    test_certs "$DATA/tls"
    tls="listeners.ssl.1 = 127.0.0.1:$AMQPS_PORT
ssl_options.cacertfile = $DATA/tls/ca.pem
ssl_options.certfile = $DATA/tls/server.pem
ssl_options.keyfile = $DATA/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false"
  fi
  cat >"$CONF/rabbitmq.conf.new" <<EOF
# Generated by mqtarget scripts/rabbitmq.sh; rewritten on every start.
listeners.tcp.1 = 127.0.0.1:$NODE_PORT
$tls
stomp.listeners.tcp.1 = $STOMP_HOST:$STOMP_PORT
stomp.default_vhost = /
default_vhost = /
default_user = $login
default_pass = $pass
default_user_tags.administrator = true
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
loopback_users = none
vm_memory_high_watermark.absolute = $MEMORY_LIMIT
disk_free_limit.absolute = 50MB
log.console = true
log.console.level = info
log.file = false
EOF
  mv "$CONF/rabbitmq.conf.new" "$CONF/rabbitmq.conf"
  echo '[rabbitmq_stomp].' >"$CONF/enabled_plugins" # no management plugin
}

# ensure_epmd: a private epmd on 127.0.0.1:EPMD_PORT, run in the foreground under our PID file (the
# node would otherwise start a daemonised epmd of its own, listening on every interface).
ensure_epmd() {
  export ERL_EPMD_PORT=$EPMD_PORT ERL_EPMD_ADDRESS=127.0.0.1
  if "$EPMD" -port "$EPMD_PORT" -names >/dev/null 2>&1; then return 0; fi # ours, or one to share
  spawn "$RUNLOG" "$DATA" "$EPMD" -address 127.0.0.1 -port "$EPMD_PORT"
  echo "$SPAWNED" >"$EPMD_PIDFILE"
  await 10 "$SPAWNED" "$RUNLOG" "$EPMD" -port "$EPMD_PORT" -names >/dev/null ||
    die "epmd did not come up on 127.0.0.1:$EPMD_PORT (log: $RUNLOG)"
}

# stop_epmd: stop the epmd this script started, unless another node is still registered with it.
stop_epmd() {
  local pid names
  [[ -f $EPMD_PIDFILE ]] || return 0
  pid=$(<"$EPMD_PIDFILE")
  if [[ $pid =~ ^[0-9]+$ ]] && pid_alive "$pid" &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-port $EPMD_PORT"; then
    names=$("$EPMD" -port "$EPMD_PORT" -names 2>/dev/null | grep '^name ' || true)
    if [[ -n $names ]]; then
      log "epmd (pid $pid) still has nodes registered, leaving it running: $names"
      return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    log "stopped epmd (pid $pid)"
  fi
  rm -f "$EPMD_PIDFILE"
}

# node_env: the rabbitmq-server environment. With `detached` set the start script execs erl (which execs
# beam.smp) instead of running it as a child behind a signal-forwarding shell, so launch's PID is the
# Erlang VM: SIGTERM stops the node cleanly, SIGSTOP freezes it.
node_env() {
  export HOME=$DATA \
    RABBITMQ_CONF_ENV_FILE=$CONF/rabbitmq-env.conf \
    RABBITMQ_CONFIG_FILE=$CONF/rabbitmq.conf \
    RABBITMQ_ADVANCED_CONFIG_FILE=$CONF/advanced.config \
    RABBITMQ_ENABLED_PLUGINS_FILE=$CONF/enabled_plugins \
    RABBITMQ_MNESIA_BASE=$MNESIA \
    RABBITMQ_LOG_BASE=$DATA/log \
    RABBITMQ_LOGS=- \
    RABBITMQ_NODENAME=$NODENAME \
    RABBITMQ_USE_LONGNAME=false \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT=$NODE_PORT \
    RABBITMQ_DIST_PORT=$DIST_PORT \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    RABBITMQ_SCHEDULER_BUSY_WAIT_THRESHOLD=none \
    ERL_CRASH_DUMP=$DATA/log/erl_crash.dump \
    detached=true
  : >"$CONF/rabbitmq-env.conf" # empty: ignore /etc/rabbitmq/rabbitmq-env.conf
  rm -f "$CONF/advanced.config"
}

# --- commands ---------------------------------------------------------------

cmd_start() {
  already_running && return 0
  check_can_start "$STOMP_PORT" "$NODE_PORT" "$DIST_PORT" ${AMQPS_PORT:+"$AMQPS_PORT"}
  ensure_packages "$PACKAGES"
  [[ -x $RMQ_SERVER && -x $EPMD ]] || die "$RMQ_SERVER or $EPMD missing: is the rabbitmq-server package broken?"
  write_config
  ensure_epmd
  trap 'broker_pid >/dev/null || stop_epmd' EXIT # launch dies when the node does not come up
  node_env
  launch "$DATA" "$RMQ_SERVER"
  trap - EXIT
}

cmd_stop() {
  stop_broker
  stop_epmd
}

cmd_ctl() {
  if ! broker_pid >/dev/null; then
    log "node $NODENAME is not running (start it with: $0 start); not running rabbitmqctl"
    exit 3
  fi
  # HOME holds the node's .erlang.cookie; ERL_EPMD_PORT finds the node through our private epmd. A
  # rabbitmqctl that crashes (the node killed under it) writes its dump beside the node's logs, not
  # into the caller's directory (a test's package directory once).
  HOME=$DATA ERL_EPMD_PORT=$EPMD_PORT ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_CONF_ENV_FILE=$CONF/rabbitmq-env.conf \
    ERL_CRASH_DUMP=$DATA/log/erl_crash_ctl.dump exec "$RMQ_CTL" --node "$NODENAME" "$@"
}

status_extra() {
  echo "  vhost:    $VHOST (node $NODENAME)"
  echo "  amqp:     127.0.0.1:$NODE_PORT; epmd 127.0.0.1:$EPMD_PORT, distribution 127.0.0.1:$DIST_PORT"
  if [[ -n $AMQPS_PORT ]]; then echo "  amqps:    127.0.0.1:$AMQPS_PORT (CA: $DATA/tls/ca.pem)"; fi
}

dispatch "$@"
