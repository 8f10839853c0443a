#!/usr/bin/env bash
# Run a local Apache ActiveMQ Artemis broker (STOMP and a core acceptor, 127.0.0.1 only) for mqtarget.
#
# Usage: scripts/artemis.sh start|stop|status|probe|fetch
#
# start   fetch Artemis when missing, create the broker instance when missing or when its login
#         changed, (re)write its acceptors and heap, start it in the background and wait until a real
#         STOMP probe passes
# stop    SIGTERM the broker, SIGKILL after ARTEMIS_STOP_TIMEOUT seconds
# status  print state, PID, RSS, addresses and credentials; exit 0 when running, 3 when not
# probe   exit 0 when a STOMP probe with the login passes
# fetch   fetch Artemis (Maven Central, via mvn) into the cache and print where it is
#
# Environment (defaults):
#   MQTARGET_CACHE          $HOME/.cache/mqtarget     the downloaded distribution
#   MQTARGET_DATA           ~/.local/state/mqtarget   (see scripts/lib/broker.sh)
#   ARTEMIS_DATA            $MQTARGET_DATA/artemis    broker instance (etc/, data/ journal, log/)
#   ARTEMIS_STOMP_PORT      61613
#   ARTEMIS_CORE_PORT       STOMP port + 3 (61616)    core protocol, for Artemis's own CLI
#   ARTEMIS_TLS_PORT        (unset: none)             a second STOMP acceptor, over TLS, with a test
#                           certificate made in $ARTEMIS_DATA/tls (clients trust tls/ca.pem)
#   ARTEMIS_LOGIN           mqtarget   (STOMP and core login; anonymous is refused)
#   ARTEMIS_PASSCODE        mqtarget
#   ARTEMIS_LIMITED_LOGIN   mqt-limited  a second user (role "limited"), who may use only the addresses
#                           mqt-allowed.# (the login above may use every address), for tests of
#                           publishes the broker refuses; rewritten on every start
#   ARTEMIS_LIMITED_PASSCODE  mqt-limited
#   (addresses mqt-full.# refuse a send once they hold a message: address-full-policy FAIL, for tests)
#   ARTEMIS_HEAP            512M       (-Xmx; -Xms is ARTEMIS_HEAP_MIN, 256M)
#   ARTEMIS_START_TIMEOUT   90         seconds until the STOMP probe must pass
#   ARTEMIS_STOP_TIMEOUT    30         seconds between SIGTERM and SIGKILL
#
# STOMP destinations: /queue/NAME is an anycast queue NAME, /topic/NAME a multicast address NAME
# (anycastPrefix/multicastPrefix on the acceptor). Queue counts with Artemis's own CLI:
#   $ARTEMIS_DATA/bin/artemis queue stat --url tcp://127.0.0.1:61616 --user mqtarget --password mqtarget
set -euo pipefail

NAME=artemis
PACKAGES=""
# shellcheck source=scripts/lib/broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/broker.sh"

VERSION=2.40.0
DIST_CACHE=$MQTARGET_CACHE/artemis-$VERSION
DIST_HOME=$DIST_CACHE/apache-artemis-$VERSION
DATA=$(realpath -m -- "${ARTEMIS_DATA:-$MQTARGET_DATA/artemis}")
STOMP_PORT=${ARTEMIS_STOMP_PORT:-61613}
CORE_PORT=${ARTEMIS_CORE_PORT:-$((STOMP_PORT + 3))}
LOGIN=${ARTEMIS_LOGIN:-mqtarget}
PASSCODE=${ARTEMIS_PASSCODE:-mqtarget}
LIMITED_LOGIN=${ARTEMIS_LIMITED_LOGIN:-mqt-limited}
LIMITED_PASSCODE=${ARTEMIS_LIMITED_PASSCODE:-mqt-limited}
HEAP_MAX=${ARTEMIS_HEAP:-512M}
HEAP_MIN=${ARTEMIS_HEAP_MIN:-256M}
START_TIMEOUT=${ARTEMIS_START_TIMEOUT:-90}
STOP_TIMEOUT=${ARTEMIS_STOP_TIMEOUT:-30}
MARKER=$DATA/.mqtarget-config
# What `artemis create` bakes in (the login is hashed into etc/); ports and heap are rewritten on every
# start, so changing them keeps the journal.
CONFIG_ID="artemis=$VERSION login=$LOGIN passcode=$PASSCODE layout=2"
PID_MARK="-Dartemis.instance=$DATA " # the JVM command line names our instance dir
# shellcheck source=scripts/lib/stomp-broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/stomp-broker.sh"
# shellcheck source=scripts/lib/tls.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/tls.sh"
TLS_PORT=${ARTEMIS_TLS_PORT:-}

# --- distribution and instance ---------------------------------------------

cmd_fetch() {
  if [[ ! -x $DIST_HOME/bin/artemis ]]; then
    command -v mvn >/dev/null || die "mvn not found (apt-get install -y maven)"
    mkdir -p "$DIST_CACHE"
    local tgz=$DIST_CACHE/apache-artemis-$VERSION-bin.tar.gz tmp
    if [[ ! -s $tgz ]]; then
      log "fetching org.apache.activemq:apache-artemis:$VERSION:tar.gz:bin with mvn"
      mvn -q -B dependency:copy \
        "-Dartifact=org.apache.activemq:apache-artemis:$VERSION:tar.gz:bin" \
        "-DoutputDirectory=$DIST_CACHE" >"$DIST_CACHE/mvn.log" 2>&1 ||
        { cat "$DIST_CACHE/mvn.log" >&2; die "mvn dependency:copy failed"; }
    fi
    [[ -s $tgz ]] || die "download did not produce $tgz"
    tmp=$(mktemp -d "$DIST_CACHE/unpack.XXXXXX")
    tar -xzf "$tgz" -C "$tmp" || { rm -rf "$tmp"; die "cannot unpack $tgz"; }
    [[ -x $tmp/apache-artemis-$VERSION/bin/artemis ]] || { rm -rf "$tmp"; die "unexpected tarball layout"; }
    rm -rf "$DIST_HOME"
    mv "$tmp/apache-artemis-$VERSION" "$DIST_HOME"
    rm -rf "$tmp" "$tgz" # the artifact also stays in the Maven repository
    log "unpacked to $DIST_HOME"
  fi
  echo "$DIST_HOME"
}

# edit FILE SED-EXPR CHECK-REGEX: apply a sed edit and insist the result matches.
edit() {
  sed -i -E "$2" "$1"
  grep -qE -- "$3" "$1" || die "editing $1 failed (expected /$3/): Artemis layout changed?"
}

create_instance() {
  if [[ -f $MARKER && $(<"$MARKER") == "$CONFIG_ID" && -x $DATA/bin/artemis ]]; then
    return 0
  fi
  if [[ -e $DATA ]]; then
    # Only ever delete a directory this script created.
    if [[ -f $MARKER || (-f $DATA/etc/broker.xml && -x $DATA/bin/artemis) ]]; then
      log "login or layout changed; recreating $DATA (its journal is lost)"
      rm -rf "$DATA"
    elif [[ -n $(ls -A "$DATA") ]]; then
      die "$DATA exists, is not empty and is not an Artemis instance; refusing to touch it"
    fi
  fi
  log "creating broker instance in $DATA"
  mkdir -p "$DATA/log"
  "$DIST_HOME/bin/artemis" create --silent --force \
    --user "$LOGIN" --password "$PASSCODE" --require-login \
    --host "$STOMP_HOST" --no-web \
    --no-amqp-acceptor --no-mqtt-acceptor --no-hornetq-acceptor \
    --nio --no-autotune \
    "$DATA" >"$DATA.create.log" 2>&1 ||
    { cat "$DATA.create.log" >&2; rm -f "$DATA.create.log"; die "artemis create failed"; }
  mv "$DATA.create.log" "$DATA/log/mqtarget-create.log"
  local xml=$DATA/etc/broker.xml
  # No disk-usage blocking; log (not halt) on critical-analyzer timeouts under load.
  edit "$xml" 's#<max-disk-usage>[^<]*</max-disk-usage>#<max-disk-usage>-1</max-disk-usage>#' '<max-disk-usage>-1</max-disk-usage>'
  edit "$xml" 's#<critical-analyzer-policy>[^<]*</critical-analyzer-policy>#<critical-analyzer-policy>LOG</critical-analyzer-policy>#' \
    '<critical-analyzer-policy>LOG</critical-analyzer-policy>'
  printf '%s' "$CONFIG_ID" >"$MARKER"
}

# configure: the acceptors (both on 127.0.0.1) and the heap, rewritten on every start.
configure() {
  local xml=$DATA/etc/broker.xml profile=$DATA/etc/artemis.profile
  # Core only on the "artemis" acceptor: the instance's own CLI (bin/artemis queue stat ...) uses it.
  edit "$xml" "s#<acceptor name=\"artemis\">[^<]*</acceptor>#<acceptor name=\"artemis\">tcp://$STOMP_HOST:$CORE_PORT?protocols=CORE;useEpoll=true</acceptor>#" \
    "<acceptor name=\"artemis\">tcp://$STOMP_HOST:$CORE_PORT\\?protocols=CORE;"
  # STOMP acceptor on 127.0.0.1:PORT with /queue/ and /topic/ prefixes.
  edit "$xml" "s#<acceptor name=\"stomp\">[^<]*</acceptor>#<acceptor name=\"stomp\">tcp://$STOMP_HOST:$STOMP_PORT?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=STOMP;useEpoll=true;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>#" \
    "<acceptor name=\"stomp\">tcp://$STOMP_HOST:$STOMP_PORT\\?.*anycastPrefix=/queue/;multicastPrefix=/topic/<"
  # The TLS STOMP acceptor, only with ARTEMIS_TLS_PORT: removed, then added again with the current port.
  sed -i -E '/<acceptor name="stomp-tls">/d' "$xml"
  local want=2
  if [[ -n $TLS_PORT ]]; then
    test_certs "$DATA/tls"
    edit "$xml" "s#^( *)(<acceptor name=\"stomp\">.*)\$#\\1\\2\\n\\1<acceptor name=\"stomp-tls\">tcp://$STOMP_HOST:$TLS_PORT?protocols=STOMP;useEpoll=true;anycastPrefix=/queue/;multicastPrefix=/topic/;sslEnabled=true;keyStoreType=PKCS12;keyStorePath=$DATA/tls/server.p12;keyStorePassword=$TLS_STORE_PASSWORD</acceptor>#" \
      "<acceptor name=\"stomp-tls\">tcp://$STOMP_HOST:$TLS_PORT\\?.*sslEnabled=true;"
    want=3
  fi
  [[ $(grep -c '<acceptor ' "$xml") == "$want" ]] || die "unexpected acceptors in $xml"
  test_settings
  edit "$profile" "s#-Xms[0-9]+[kKmMgG]?#-Xms$HEAP_MIN#" "-Xms$HEAP_MIN "
  edit "$profile" "s#-Xmx[0-9]+[kKmMgG]?#-Xmx$HEAP_MAX#" "-Xmx$HEAP_MAX "
}

# test_settings: the second user and its role, and the addresses the role may use (security-setting
# mqt-allowed.#, beside the instance's "#" for role amq); and the addresses mqt-full.#, full at once
# (address-full-policy FAIL); rewritten on every start.
test_settings() {
  [[ $LIMITED_LOGIN =~ ^[A-Za-z0-9._-]+$ && $LIMITED_PASSCODE =~ ^[A-Za-z0-9._-]+$ ]] ||
    die "ARTEMIS_LIMITED_LOGIN and ARTEMIS_LIMITED_PASSCODE: want letters, digits, . _ - (they are written into etc/)"
  [[ $LIMITED_LOGIN != "$LOGIN" ]] || die "ARTEMIS_LIMITED_LOGIN is ARTEMIS_LOGIN ($LOGIN): the limited user must be another"
  local users=$DATA/etc/artemis-users.properties roles=$DATA/etc/artemis-roles.properties xml=$DATA/etc/broker.xml
  local f
  for f in "$users" "$roles"; do
    sed -i -E '/^# mqtarget limited user$/,+1d' "$f"
    [[ -z $(tail -c1 "$f") ]] || echo >>"$f" # the instance's files end without a newline
  done
  # a plain-text password is accepted beside the login's ENC(...)
  printf '# mqtarget limited user\n%s = %s\n' "$LIMITED_LOGIN" "$LIMITED_PASSCODE" >>"$users"
  printf '# mqtarget limited user\nlimited = %s\n' "$LIMITED_LOGIN" >>"$roles"
  sed -i -E '/<security-setting match="mqt-allowed\.#">/,/<\/security-setting>/d' "$xml"
  local perms="" p
  for p in createNonDurableQueue deleteNonDurableQueue createDurableQueue deleteDurableQueue createAddress deleteAddress consume browse send; do
    perms+="            <permission type=\"$p\" roles=\"amq,limited\"/>\n"
  done
  edit "$xml" "s#^( *)<security-settings>\$#\1<security-settings>\n         <security-setting match=\"mqt-allowed.\#\">\n$perms         </security-setting>#" \
    '<security-setting match="mqt-allowed\.#">'
  # addresses that refuse a send once they hold anything (FAIL at 1 byte): tests of a full address
  sed -i -E '/<address-setting match="mqt-full\.#">/,/<\/address-setting>/d' "$xml"
  edit "$xml" "s#^( *)<address-settings>\$#\1<address-settings>\n         <address-setting match=\"mqt-full.\#\">\n            <max-size-bytes>1</max-size-bytes>\n            <address-full-policy>FAIL</address-full-policy>\n         </address-setting>#" \
    '<address-setting match="mqt-full\.#">'
}

# --- commands ---------------------------------------------------------------

cmd_start() {
  already_running && return 0
  check_can_start "$STOMP_PORT" "$CORE_PORT" ${TLS_PORT:+"$TLS_PORT"}
  command -v java >/dev/null || die "java not found (apt-get install -y openjdk-17-jre-headless)"
  cmd_fetch >/dev/null
  create_instance
  configure
  # bin/artemis execs java, so the launched PID is the JVM's.
  launch "$DATA" env -u JAVA_ARGS -u JAVA_ARGS_APPEND "$DATA/bin/artemis" run
}

status_extra() {
  [[ -z $TLS_PORT ]] || echo "  tls:      $STOMP_HOST:$TLS_PORT (STOMP over TLS; CA $DATA/tls/ca.pem)"
  echo "  core:     $STOMP_HOST:$CORE_PORT ($DATA/bin/artemis queue stat --url tcp://$STOMP_HOST:$CORE_PORT --user $LOGIN --password $PASSCODE)"
}

dispatch "$@"
