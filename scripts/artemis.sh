#!/usr/bin/env bash
# Run a local Apache ActiveMQ Artemis broker (STOMP only, 127.0.0.1) for mqtarget.
#
# Usage: scripts/artemis.sh start|stop|status
#
# start   fetch Artemis (Maven Central, via mvn) into the cache, create the
#         broker instance when missing or when its settings changed, start it
#         in the background and wait until a real STOMP probe passes
# stop    SIGTERM the broker, SIGKILL after ARTEMIS_STOP_TIMEOUT seconds
# status  print state, PID, RSS, STOMP address and credentials;
#         exit 0 when running, 3 when not
#
# Environment (defaults):
#   MQTARGET_CACHE          $HOME/.cache/mqtarget   download cache
#   ARTEMIS_DATA            $MQTARGET_CACHE/artemis-instance   broker instance
#   ARTEMIS_STOMP_PORT      61613
#   ARTEMIS_LOGIN           artemis    (STOMP login; anonymous is refused)
#   ARTEMIS_PASSCODE        artemis
#   ARTEMIS_HEAP            512M       (-Xmx; -Xms is ARTEMIS_HEAP_MIN, 256M)
#   ARTEMIS_START_TIMEOUT   90         seconds until the STOMP probe must pass
#   ARTEMIS_STOP_TIMEOUT    30         seconds between SIGTERM and SIGKILL
#
# STOMP destinations: /queue/NAME is an anycast queue NAME, /topic/NAME a
# multicast address NAME (anycastPrefix/multicastPrefix on the acceptor).
set -euo pipefail

ARTEMIS_VERSION=2.40.0
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROBE=$SCRIPT_DIR/stomp-probe.py

MQTARGET_CACHE=${MQTARGET_CACHE:-$HOME/.cache/mqtarget}
DIST_CACHE=$MQTARGET_CACHE/artemis-$ARTEMIS_VERSION
DIST_HOME=$DIST_CACHE/apache-artemis-$ARTEMIS_VERSION
ARTEMIS_DATA=$(realpath -m -- "${ARTEMIS_DATA:-$MQTARGET_CACHE/artemis-instance}")
STOMP_HOST=127.0.0.1
STOMP_PORT=${ARTEMIS_STOMP_PORT:-61613}
LOGIN=${ARTEMIS_LOGIN:-artemis}
PASSCODE=${ARTEMIS_PASSCODE:-artemis}
HEAP_MAX=${ARTEMIS_HEAP:-512M}
HEAP_MIN=${ARTEMIS_HEAP_MIN:-256M}
START_TIMEOUT=${ARTEMIS_START_TIMEOUT:-90}
STOP_TIMEOUT=${ARTEMIS_STOP_TIMEOUT:-30}

PIDFILE=$ARTEMIS_DATA/mqtarget-broker.pid
RUNLOG=$ARTEMIS_DATA/log/mqtarget-run.log
MARKER=$ARTEMIS_DATA/.mqtarget-config
CONFIG_ID="artemis=$ARTEMIS_VERSION port=$STOMP_PORT login=$LOGIN passcode=$PASSCODE heap=$HEAP_MIN/$HEAP_MAX layout=1"

BROKER_NAME=artemis
PID_MARK="-Dartemis.instance=$ARTEMIS_DATA " # the JVM command line names our instance dir
# shellcheck source=scripts/lib/stomp-broker.sh
. "$SCRIPT_DIR/lib/stomp-broker.sh"

# --- distribution and instance ---------------------------------------------

ensure_dist() {
  [[ -x $DIST_HOME/bin/artemis ]] && return 0
  command -v java >/dev/null || die "java not found (apt-get install -y openjdk-17-jre-headless)"
  command -v mvn >/dev/null || die "mvn not found (apt-get install -y maven)"
  mkdir -p "$DIST_CACHE"
  local tgz=$DIST_CACHE/apache-artemis-$ARTEMIS_VERSION-bin.tar.gz
  if [[ ! -s $tgz ]]; then
    log "fetching org.apache.activemq:apache-artemis:$ARTEMIS_VERSION:tar.gz:bin with mvn"
    mvn -q -B dependency:copy \
      "-Dartifact=org.apache.activemq:apache-artemis:$ARTEMIS_VERSION:tar.gz:bin" \
      "-DoutputDirectory=$DIST_CACHE" >"$DIST_CACHE/mvn.log" 2>&1 \
      || { cat "$DIST_CACHE/mvn.log" >&2; die "mvn dependency:copy failed"; }
  fi
  [[ -s $tgz ]] || die "download did not produce $tgz"
  local tmp
  tmp=$(mktemp -d "$DIST_CACHE/unpack.XXXXXX")
  tar -xzf "$tgz" -C "$tmp" || { rm -rf "$tmp"; die "cannot unpack $tgz"; }
  [[ -x $tmp/apache-artemis-$ARTEMIS_VERSION/bin/artemis ]] || { rm -rf "$tmp"; die "unexpected tarball layout"; }
  rm -rf "$DIST_HOME"
  mv "$tmp/apache-artemis-$ARTEMIS_VERSION" "$DIST_HOME"
  rm -rf "$tmp" "$tgz"   # the artifact also stays in ~/.m2
  log "unpacked to $DIST_HOME"
}

# edit FILE SED-EXPR CHECK-REGEX: apply a sed edit and insist the result matches.
edit() {
  sed -i -E "$2" "$1"
  grep -qE -- "$3" "$1" || die "editing $1 failed (expected /$3/): Artemis layout changed?"
}

ensure_instance() {
  if [[ -f $MARKER && $(<"$MARKER") == "$CONFIG_ID" && -x $ARTEMIS_DATA/bin/artemis ]]; then
    return 0
  fi
  if [[ -e $ARTEMIS_DATA ]]; then
    # Only ever delete a directory this script created.
    if [[ -f $MARKER || ( -f $ARTEMIS_DATA/etc/broker.xml && -x $ARTEMIS_DATA/bin/artemis ) ]]; then
      log "instance settings changed; recreating $ARTEMIS_DATA"
      rm -rf "$ARTEMIS_DATA"
    elif [[ -n $(ls -A "$ARTEMIS_DATA") ]]; then
      die "$ARTEMIS_DATA exists, is not empty and is not an Artemis instance; refusing to touch it"
    fi
  fi
  log "creating broker instance in $ARTEMIS_DATA"
  mkdir -p "$(dirname "$ARTEMIS_DATA")"
  "$DIST_HOME/bin/artemis" create --silent --force \
    --user "$LOGIN" --password "$PASSCODE" --require-login \
    --host "$STOMP_HOST" --no-web \
    --no-amqp-acceptor --no-mqtt-acceptor --no-hornetq-acceptor \
    --nio --no-autotune --java-memory "$HEAP_MAX" \
    "$ARTEMIS_DATA" >"$MQTARGET_CACHE/artemis-create.log" 2>&1 \
    || { cat "$MQTARGET_CACHE/artemis-create.log" >&2; die "artemis create failed"; }

  local xml=$ARTEMIS_DATA/etc/broker.xml profile=$ARTEMIS_DATA/etc/artemis.profile
  # Drop the all-protocols acceptor (61616): only STOMP is served.
  sed -i -E '/<acceptor name="artemis">/d' "$xml"
  if grep -q '<acceptor name="artemis">' "$xml"; then die "could not remove the 61616 acceptor"; fi
  # STOMP acceptor on 127.0.0.1:PORT with /queue/ and /topic/ prefixes.
  edit "$xml" "s#<acceptor name=\"stomp\">[^<]*</acceptor>#<acceptor name=\"stomp\">tcp://$STOMP_HOST:$STOMP_PORT?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=STOMP;useEpoll=true;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>#" \
    "<acceptor name=\"stomp\">tcp://$STOMP_HOST:$STOMP_PORT\\?.*anycastPrefix=/queue/;multicastPrefix=/topic/<"
  # No disk-usage blocking; log (not halt) on critical-analyzer timeouts under load.
  edit "$xml" 's#<max-disk-usage>[^<]*</max-disk-usage>#<max-disk-usage>-1</max-disk-usage>#' '<max-disk-usage>-1</max-disk-usage>'
  edit "$xml" 's#<critical-analyzer-policy>[^<]*</critical-analyzer-policy>#<critical-analyzer-policy>LOG</critical-analyzer-policy>#' \
    '<critical-analyzer-policy>LOG</critical-analyzer-policy>'
  [[ $(grep -c '<acceptor ' "$xml") == 1 ]] || die "unexpected extra acceptors in $xml"
  edit "$profile" "s#-Xms[0-9]+[kKmMgG]?#-Xms$HEAP_MIN#" "-Xms$HEAP_MIN "
  edit "$profile" "s#-Xmx[0-9]+[kKmMgG]?#-Xmx$HEAP_MAX#" "-Xmx$HEAP_MAX "
  printf '%s' "$CONFIG_ID" >"$MARKER"
}

# --- commands ---------------------------------------------------------------

cmd_start() {
  local pid
  if pid=$(broker_pid); then
    log "already running (pid $pid) on $STOMP_HOST:$STOMP_PORT"
    return 0
  fi
  check_can_start
  ensure_dist
  ensure_instance
  # bin/artemis execs java, so the launched PID is the JVM's.
  launch "$ARTEMIS_DATA" env -u JAVA_ARGS -u JAVA_ARGS_APPEND "$ARTEMIS_DATA/bin/artemis" run
}

cmd_status() {
  local pid
  if pid=$(broker_pid); then
    echo "artemis $ARTEMIS_VERSION: running"
    echo "  pid:      $pid"
    echo "  rss:      $(rss_of "$pid")"
    echo "  stomp:    $STOMP_HOST:$STOMP_PORT (login=$LOGIN passcode=$PASSCODE; /queue/NAME anycast, /topic/NAME multicast)"
    echo "  instance: $ARTEMIS_DATA (log: $RUNLOG)"
    print_probe
    return 0
  fi
  echo "artemis $ARTEMIS_VERSION: not running"
  echo "  stomp:    $STOMP_HOST:$STOMP_PORT (login=$LOGIN passcode=$PASSCODE)"
  echo "  instance: $ARTEMIS_DATA"
  return 3
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 64 ;;
esac
