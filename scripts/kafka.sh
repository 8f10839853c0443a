#!/usr/bin/env bash
# Local Apache Kafka (4.x, KRaft: no ZooKeeper) for mqtarget tests and benchmarks: one controller and
# KAFKA_BROKERS brokers, all on 127.0.0.1, from the Maven Central jars (fetched by mvn into the cache).
#
# Usage: scripts/kafka.sh start|stop|status|fetch
#        scripts/kafka.sh tool CLASS ARGS...   run a class of the installation with its classpath
#        scripts/kafka.sh pid broker-K|controller
#
# start   fetch the jars when missing, write each node's properties, format its storage when new, start
#         what is not running and wait until every broker is registered and unfenced (all of them in
#         one metadata answer); reuses the nodes that run already
# stop    SIGTERM the brokers, then the controller; SIGKILL after KAFKA_STOP_TIMEOUT seconds
# status  print each node's state, PID, address and RSS; exit 0 when all run, 3 when not
# tool    e.g. count what the broker holds, one T:PARTITION:OFFSET line per partition on stdout (the
#         tool's log goes to stderr, WARN and above):
#           scripts/kafka.sh tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server 127.0.0.1:9092 --topic T
# pid     the PID of a running node, for SIGSTOP/SIGCONT and kill -9 in tests; exit 1 when not running
#
# Broker K (0-based) has node id K and listens on KAFKA_PORT+K; the controller has node id 1000.
#
# Environment (defaults in brackets):
#   MQTARGET_CACHE         [$HOME/.cache/mqtarget]  jars: kafka-<version>/lib
#   MQTARGET_DATA          [~/.local/state/mqtarget] (see scripts/lib/broker.sh)
#   KAFKA_DATA             [$MQTARGET_DATA/kafka]  each node's log.dirs, logs, pid files and the lock
#                          that start and stop take turns on
#   KAFKA_BROKERS          [2]     brokers, 1..16
#   KAFKA_PORT             [9092]  broker 0's port; broker K listens on KAFKA_PORT+K
#   KAFKA_CONTROLLER_PORT  [9094]  the controller's port (not 9093, where a second broker would listen)
#   KAFKA_TLS_PORT         [unset: none]  broker K also listens over TLS on KAFKA_TLS_PORT+K, with a test
#                          certificate for 127.0.0.1 made in $KAFKA_DATA/tls (clients trust tls/ca.pem)
#   KAFKA_SASL_PORT        [unset: none]  broker K also listens with SASL (SASL_PLAINTEXT) on KAFKA_SASL_PORT+K:
#                          mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, one user for all three; its
#                          password is written to $KAFKA_DATA/sasl/password (mqtarget's kafka.sasl_password_file)
#                          With it every node runs Kafka's StandardAuthorizer: a resource without ACLs is
#                          open to everyone, ANONYMOUS (the plain listeners) is a super user, so ACLs added
#                          over the plain listener can refuse SASL users a topic
#   KAFKA_SASL_USER        [mqtarget]         that user (letters, digits, . _ -)
#   KAFKA_SASL_PASSWORD    [mqtarget-secret]  its password (letters, digits, . _ -); test use only
#   KAFKA_HEAP             [256m]  -Xmx and -Xms of each node
#   KAFKA_START_TIMEOUT    [90]    seconds until every broker is registered
#   KAFKA_STOP_TIMEOUT     [30]    seconds between SIGTERM and SIGKILL
set -euo pipefail

readonly KAFKA_VERSION=4.4.0
# The Kafka jars carry no SLF4J binding and no log4j2 configuration: without these a broker logs
# nothing. Their slf4j-api is 1.7, which log4j's SLF4J 2 binding does not serve: slf4j-api 2 is named
# here, and a direct dependency wins over the one Kafka brings.
readonly LOG4J_VERSION=2.25.3
readonly SLF4J_VERSION=2.0.17
readonly CONTROLLER_ID=1000

NAME=kafka
# shellcheck source=scripts/lib/broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/broker.sh"
# shellcheck source=scripts/lib/tls.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/tls.sh"

KAFKA_HOME=$MQTARGET_CACHE/kafka-$KAFKA_VERSION
LIB_DIR=$KAFKA_HOME/lib
FETCH_MARKER=$KAFKA_HOME/.fetch-complete
DATA_DIR=$(realpath -m -- "${KAFKA_DATA:-$MQTARGET_DATA/kafka}")
RUN_DIR=$DATA_DIR/run
BROKERS=${KAFKA_BROKERS:-2}
PORT=${KAFKA_PORT:-9092}
CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9094}
TLS_PORT=${KAFKA_TLS_PORT:-}
SASL_PORT=${KAFKA_SASL_PORT:-}
SASL_USER=${KAFKA_SASL_USER:-mqtarget}
SASL_PASSWORD=${KAFKA_SASL_PASSWORD:-mqtarget-secret}
SASL_DIR=$DATA_DIR/sasl
HEAP=${KAFKA_HEAP:-256m}
START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}

JAVA=java
if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
  JAVA=$JAVA_HOME/bin/java
fi

check_settings() {
  local v
  for v in PORT CONTROLLER_PORT BROKERS START_TIMEOUT STOP_TIMEOUT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "KAFKA_$v='${!v}' is not a number"
  done
  ((BROKERS >= 1 && BROKERS <= 16)) || die "KAFKA_BROKERS=$BROKERS: want 1..16"
  ((PORT >= 1 && PORT + BROKERS - 1 <= 65535)) || die "KAFKA_PORT=$PORT: brokers would listen on $PORT..$((PORT + BROKERS - 1))"
  ((CONTROLLER_PORT >= 1 && CONTROLLER_PORT <= 65535)) || die "KAFKA_CONTROLLER_PORT=$CONTROLLER_PORT: want 1..65535"
  if ((CONTROLLER_PORT >= PORT && CONTROLLER_PORT < PORT + BROKERS)); then
    die "KAFKA_CONTROLLER_PORT=$CONTROLLER_PORT is one of the brokers' ports $PORT..$((PORT + BROKERS - 1)) (set KAFKA_CONTROLLER_PORT)"
  fi
  [[ $HEAP =~ ^[0-9]+[kKmMgG]$ ]] || die "KAFKA_HEAP='$HEAP': want a JVM size such as 256m"
  check_listener_port TLS "$TLS_PORT" "$SASL_PORT"
  check_listener_port SASL "$SASL_PORT" "$TLS_PORT"
  if [[ -n $SASL_PORT ]]; then
    [[ $SASL_USER =~ ^[A-Za-z0-9._-]+$ ]] || die "KAFKA_SASL_USER='$SASL_USER': want letters, digits, . _ -"
    [[ $SASL_PASSWORD =~ ^[A-Za-z0-9._-]+$ ]] || die "KAFKA_SASL_PASSWORD: want letters, digits, . _ - (it is written into the brokers' properties)"
  fi
}

# check_listener_port NAME FIRST OTHER: KAFKA_<NAME>_PORT (empty: no such listener) leaves room for every
# broker and meets neither the brokers' plain ports, the controller's nor the other listener's (OTHER).
check_listener_port() {
  local name=$1 first=$2 other=$3
  [[ -n $first ]] || return 0
  if ! [[ $first =~ ^[0-9]+$ ]] || ((first < 1 || first + BROKERS - 1 > 65535)); then
    die "KAFKA_${name}_PORT='$first': brokers would listen on $first..$((first + BROKERS - 1))"
  fi
  if ((first < PORT + BROKERS && PORT < first + BROKERS)) ||
    ((CONTROLLER_PORT >= first && CONTROLLER_PORT < first + BROKERS)) ||
    { [[ -n $other ]] && ((first < other + BROKERS && other < first + BROKERS)); }; then
    die "KAFKA_${name}_PORT=$first: its ports $first..$((first + BROKERS - 1)) meet the brokers', the controller's or the other listener's"
  fi
}

# nodes: the controller first (brokers register with it), then the brokers.
nodes() {
  local k
  echo controller
  for ((k = 0; k < BROKERS; k++)); do echo "broker-$k"; done
}

node_port() {
  case $1 in
    controller) echo "$CONTROLLER_PORT" ;;
    broker-*) echo $((PORT + ${1#broker-})) ;;
  esac
}

check_node() {
  [[ $1 == controller ]] && return 0
  [[ $1 =~ ^broker-([0-9]+)$ ]] && ((BASH_REMATCH[1] < BROKERS)) && return 0
  die "unknown node '$1' (controller or broker-0..broker-$((BROKERS - 1)))"
}

# ---------------------------------------------------------------- fetch

write_pom() {
  local a
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo '<project xmlns="http://maven.apache.org/POM/4.0.0">'
    echo '  <modelVersion>4.0.0</modelVersion>'
    echo '  <groupId>local.mqtarget</groupId><artifactId>kafka-fetch</artifactId><version>1</version>'
    echo '  <packaging>pom</packaging>'
    echo '  <dependencies>'
    for a in "org.apache.kafka:kafka_2.13:$KAFKA_VERSION" "org.apache.kafka:kafka-tools:$KAFKA_VERSION" \
      "org.apache.logging.log4j:log4j-api:$LOG4J_VERSION" "org.apache.logging.log4j:log4j-core:$LOG4J_VERSION" \
      "org.apache.logging.log4j:log4j-slf4j2-impl:$LOG4J_VERSION" "org.slf4j:slf4j-api:$SLF4J_VERSION"; do
      IFS=: read -r g n v <<<"$a"
      echo "    <dependency><groupId>$g</groupId><artifactId>$n</artifactId><version>$v</version></dependency>"
    done
    echo '  </dependencies>'
    echo '</project>'
  } >"$1"
}

# log4j2 configurations: the nodes' (WARN and above on stdout, which is the node's .out file; INFO
# in a rolling file of at most 3 x 10 MB) and the tools' (WARN and above on stderr, so stdout holds
# only what the tool prints).
write_log_configs() {
  cat >"$KAFKA_HOME/log4j2-node.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <ThresholdFilter level="WARN"/>
    </Console>
    <RollingFile name="file" fileName="${sys:kafka.logs.dir}/server.log" filePattern="${sys:kafka.logs.dir}/server.log.%i">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <SizeBasedTriggeringPolicy size="10 MB"/>
      <DefaultRolloverStrategy max="2"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="out"/><AppenderRef ref="file"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.controller" level="INFO"/>
  </Loggers>
</Configuration>
EOF
  cat >"$KAFKA_HOME/log4j2-tools.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Root level="WARN"><AppenderRef ref="err"/></Root>
  </Loggers>
</Configuration>
EOF
}

fetch() {
  [[ -f $FETCH_MARKER && -d $LIB_DIR && $(<"$FETCH_MARKER") == "kafka $KAFKA_VERSION, log4j $LOG4J_VERSION, slf4j $SLF4J_VERSION" ]] && return 0
  command -v mvn >/dev/null || die "mvn not found: install Maven (apt-get install -y maven) to fetch Kafka $KAFKA_VERSION"
  log "fetching Kafka $KAFKA_VERSION jars into $KAFKA_HOME (maven) ..."
  mkdir -p "$KAFKA_HOME/pom"
  write_pom "$KAFKA_HOME/pom/pom.xml"
  rm -rf "$LIB_DIR.tmp"
  if ! mvn -B -q -f "$KAFKA_HOME/pom/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$LIB_DIR.tmp" -DincludeScope=runtime >"$KAFKA_HOME/pom/mvn.log" 2>&1; then
    tail -n 30 "$KAFKA_HOME/pom/mvn.log" >&2
    die "maven could not fetch the Kafka jars (log: $KAFKA_HOME/pom/mvn.log)"
  fi
  [[ -f $LIB_DIR.tmp/kafka_2.13-$KAFKA_VERSION.jar ]] || die "kafka_2.13-$KAFKA_VERSION.jar missing after the fetch"
  rm -rf "$LIB_DIR"
  mv "$LIB_DIR.tmp" "$LIB_DIR"
  write_log_configs
  printf 'kafka %s, log4j %s, slf4j %s\n' "$KAFKA_VERSION" "$LOG4J_VERSION" "$SLF4J_VERSION" >"$FETCH_MARKER"
  log "fetch complete ($(find "$LIB_DIR" -name '*.jar' | wc -l) jars, $(du -sh "$LIB_DIR" | cut -f1))"
}

# ---------------------------------------------------------------- java

# tool CLASS ARGS...: a short-lived JVM of the installation; its log on stderr, WARN and above.
tool() {
  "$JAVA" -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$KAFKA_HOME/log4j2-tools.xml" -cp "$LIB_DIR/*" "$@"
}

pid_file() { echo "$RUN_DIR/$1.pid"; }

# the JVM of node $1 of this data directory (its command line names the node's directory)
running_pid() { pid_of "$(pid_file "$1")" "-Dmqtarget.kafka.node=$DATA_DIR/$1 "; }

cluster_id() {
  local f=$DATA_DIR/cluster.id
  if [[ ! -s $f ]]; then
    mkdir -p "$DATA_DIR"
    # a Kafka cluster id: 16 random bytes, URL-safe base64 without padding; never one that starts
    # with "-", which kafka-storage's argument parser takes for an option (1 start in 64 failed so)
    local id=-
    while [[ $id == -* ]]; do id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22); done
    echo "$id" >"$f"
  fi
  cat "$f"
}

write_properties() {
  mkdir -p "$DATA_DIR/$1/data" "$DATA_DIR/$1/logs"
  properties "$1" >"$DATA_DIR/$1/server.properties"
}

# properties NODE: the node's server.properties for the settings of this start.
properties() {
  local node=$1 home=$DATA_DIR/$1 port
  port=$(node_port "$node")
  {
    echo "controller.quorum.voters=$CONTROLLER_ID@127.0.0.1:$CONTROLLER_PORT"
    echo "controller.listener.names=CONTROLLER"
    echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
    echo "log.dirs=$home/data"
    if [[ -n $SASL_PORT ]]; then
      # ACLs, so a test can refuse the SASL user a topic: a resource without ACLs stays open to every
      # principal, and ANONYMOUS (every plain listener: clients, brokers, the controller) may do anything
      echo "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
      echo "allow.everyone.if.no.acl.found=true"
      echo "super.users=User:ANONYMOUS"
    fi
    if [[ $node == controller ]]; then
      echo "process.roles=controller"
      echo "node.id=$CONTROLLER_ID"
      echo "listeners=CONTROLLER://127.0.0.1:$port"
      # what auto-created topics get (the controller creates them); mqtarget creates its own
      echo "num.partitions=1"
      echo "default.replication.factor=1"
    else
      echo "process.roles=broker"
      echo "node.id=${node#broker-}"
      local listeners="PLAINTEXT://127.0.0.1:$port"
      if [[ -n $TLS_PORT ]]; then
        listeners+=",SSL://127.0.0.1:$((TLS_PORT + ${node#broker-}))"
        echo "ssl.keystore.type=PKCS12"
        echo "ssl.keystore.location=$DATA_DIR/tls/server.p12"
        echo "ssl.keystore.password=$TLS_STORE_PASSWORD"
        echo "ssl.key.password=$TLS_STORE_PASSWORD"
        echo "ssl.client.auth=none"
      fi
      if [[ -n $SASL_PORT ]]; then
        listeners+=",SASL_PLAINTEXT://127.0.0.1:$((SASL_PORT + ${node#broker-}))"
        echo "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
        # PLAIN's users are the JAAS entries; SCRAM's credentials live in the cluster's metadata
        # (added when the storage is formatted, or by scram_users for an older one)
        echo "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER=\"$SASL_PASSWORD\";"
        echo "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
        echo "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
      fi
      echo "listeners=$listeners"
      echo "advertised.listeners=$listeners"
      echo "inter.broker.listener.name=PLAINTEXT"
      # internal topics on one broker: a cluster of any size works, and losing a broker under test
      # loses no group coordinator unless it is that one
      echo "offsets.topic.replication.factor=1"
      echo "transaction.state.log.replication.factor=1"
      echo "transaction.state.log.min.isr=1"
      echo "share.coordinator.state.topic.replication.factor=1"
      echo "share.coordinator.state.topic.min.isr=1"
      echo "group.initial.rebalance.delay.ms=0"
      echo "auto.create.topics.enable=true"
      echo "log.segment.bytes=67108864"
      echo "num.network.threads=2"
      echo "num.io.threads=2"
    fi
  }
}

format_storage() {
  local node=$1 home=$DATA_DIR/$1
  [[ -f $home/data/meta.properties ]] && return 0
  local -a scram=()
  if [[ -n $SASL_PORT && $node == controller ]]; then
    scram=(--add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$SASL_PASSWORD]"
      --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]")
  fi
  tool kafka.tools.StorageTool format -t "$(cluster_id)" -c "$home/server.properties" --ignore-formatted \
    "${scram[@]}" >"$home/format.out" 2>&1 || {
    cat "$home/format.out" >&2
    die "formatting $node's storage failed"
  }
  if ((${#scram[@]})); then scram_mark >"$SASL_DIR/scram.done"; fi
}

# scram_mark: what the cluster's SCRAM credentials were made for (user and password), to tell whether
# they are still the ones asked for.
scram_mark() { printf '%s\n' "$SASL_USER:$SASL_PASSWORD" | sha256sum | cut -d' ' -f1; }

# scram_users: a storage formatted before SASL was asked for, or for another user or password, gets the
# SCRAM credentials from Kafka's own tool once the brokers are up.
scram_users() {
  [[ -n $SASL_PORT ]] || return 0
  [[ $(cat "$SASL_DIR/scram.done" 2>/dev/null) == "$(scram_mark)" ]] && return 0
  local m out
  for m in SCRAM-SHA-256 SCRAM-SHA-512; do
    out=$(tool org.apache.kafka.tools.ConfigCommand --bootstrap-server "127.0.0.1:$PORT" --alter --entity-type users \
      --entity-name "$SASL_USER" --add-config "$m=[password=$SASL_PASSWORD]" 2>&1) || {
      echo "$out" >&2
      die "adding the $m credentials of $SASL_USER failed"
    }
  done
  scram_mark >"$SASL_DIR/scram.done"
  log "SCRAM credentials of $SASL_USER added"
}

launch() {
  local node=$1 home=$DATA_DIR/$1 pid port
  port=$(node_port "$node")
  if pid=$(running_pid "$node"); then
    log "$node already running (pid $pid, 127.0.0.1:$port)"
    return 0
  fi
  port_in_use "$port" && die "port $port ($node) is in use by another process"
  if [[ -n $TLS_PORT && $node == broker-* ]]; then
    port_in_use $((TLS_PORT + ${node#broker-})) && die "port $((TLS_PORT + ${node#broker-})) ($node, TLS) is in use by another process"
    test_certs "$DATA_DIR/tls"
  fi
  if [[ -n $SASL_PORT && $node == broker-* ]]; then
    port_in_use $((SASL_PORT + ${node#broker-})) && die "port $((SASL_PORT + ${node#broker-})) ($node, SASL) is in use by another process"
  fi
  write_properties "$node"
  format_storage "$node"
  mkdir -p "$RUN_DIR"
  spawn "$home/$node.out" "$home" "$JAVA" -server "-Xms$HEAP" "-Xmx$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dkafka.logs.dir="$home/logs" -Dlog4j2.configurationFile="$KAFKA_HOME/log4j2-node.xml" \
    -Dmqtarget.kafka.node="$home" -cp "$LIB_DIR/*" kafka.Kafka "$home/server.properties"
  echo "$SPAWNED" >"$(pid_file "$node")"
  STARTED+=("$node")
  log "$node starting (pid $SPAWNED, 127.0.0.1:$port)"
}

stop_nodes() {
  local node pid
  local -a args=()
  for node in "$@"; do
    if pid=$(running_pid "$node"); then args+=("$node" "$pid"); fi
  done
  ((${#args[@]} == 0)) || stop_pids "$STOP_TIMEOUT" "${args[@]}"
  for node in "$@"; do rm -f "$(pid_file "$node")"; done
}

# registered: every broker is in one metadata answer (a broker is listed once it registered with the
# controller and is not fenced).
registered() {
  local k out
  for ((k = 0; k < BROKERS; k++)); do port_in_use $((PORT + k)) || {
    echo "broker-$k not listening on $((PORT + k)) yet"
    return 1
  }; done
  out=$(tool org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "127.0.0.1:$PORT" 2>&1) || {
    echo "$out" | tail -n 3
    return 1
  }
  for ((k = 0; k < BROKERS; k++)); do
    grep -q "^127\.0\.0\.1:$((PORT + k)) (id: $k " <<<"$out" || {
      echo "broker-$k not registered yet"
      return 1
    }
  done
}

# ---------------------------------------------------------------- commands

STARTED=()
cmd_start() {
  check_settings
  fetch
  command -v "$JAVA" >/dev/null || die "java not found (set JAVA_HOME or put java on PATH; Kafka $KAFKA_VERSION needs 17+)"
  local node all=1 t0=$SECONDS
  for node in $(nodes); do running_pid "$node" >/dev/null || all=0; done
  if ((all)); then
    # a start asking for other listeners (KAFKA_TLS_PORT, KAFKA_SASL_PORT, its user) must not pass for
    # one that has them
    for node in $(nodes); do
      cmp -s <(properties "$node") "$DATA_DIR/$node/server.properties" ||
        die "already running with other settings ($node's $DATA_DIR/$node/server.properties differs from what these KAFKA_* variables ask for): scripts/kafka.sh stop first"
    done
    log "already running: controller 127.0.0.1:$CONTROLLER_PORT, $BROKERS brokers from 127.0.0.1:$PORT"
    return 0
  fi
  if [[ -n $SASL_PORT ]]; then
    mkdir -p "$SASL_DIR"
    (umask 077 && printf '%s\n' "$SASL_PASSWORD" >"$SASL_DIR/password")
  fi
  for node in $(nodes); do launch "$node"; done
  local pid
  pid=$(running_pid controller) || die "the controller is not running"
  for node in $(nodes); do
    if ! running_pid "$node" >/dev/null; then
      tail -n 40 "$DATA_DIR/$node/$node.out" >&2 || true
      ((${#STARTED[@]} == 0)) || stop_nodes "${STARTED[@]}"
      die "$node exited during startup (log: $DATA_DIR/$node/logs/server.log)"
    fi
  done
  if ! await "$START_TIMEOUT" "$pid" "$DATA_DIR/controller/controller.out" registered; then
    ((${#STARTED[@]} == 0)) || stop_nodes "${STARTED[@]}"
    die "Kafka not ready within ${START_TIMEOUT}s (logs: $DATA_DIR/*/logs/server.log)"
  fi
  scram_users
  local extra=""
  [[ -z $TLS_PORT ]] || extra+=", TLS from 127.0.0.1:$TLS_PORT"
  [[ -z $SASL_PORT ]] || extra+=", SASL from 127.0.0.1:$SASL_PORT (user $SASL_USER, password in $SASL_DIR/password)"
  log "ready in $((SECONDS - t0))s: $BROKERS brokers from 127.0.0.1:$PORT (node ids 0..$((BROKERS - 1)))$extra, controller 127.0.0.1:$CONTROLLER_PORT"
}

cmd_stop() {
  check_settings
  local -a brokers
  mapfile -t brokers < <(nodes | grep '^broker-')
  # every broker directory of this data dir, also of a start with more brokers than KAFKA_BROKERS now
  local d
  for d in "$DATA_DIR"/broker-*; do
    [[ -d $d ]] || continue
    d=${d##*/}
    [[ " ${brokers[*]} " == *" $d "* ]] || brokers+=("$d")
  done
  stop_nodes "${brokers[@]}" # before the controller: a broker's controlled shutdown asks it
  stop_nodes controller
}

cmd_status() {
  check_settings
  local node pid rss total=0 down=0
  printf '%-11s %-8s %-7s %-16s %s\n' NODE PID STATE ADDRESS RSS_MiB
  for node in $(nodes); do
    if pid=$(running_pid "$node"); then
      rss=$(rss_mib "$pid")
      total=$((total + rss))
      printf '%-11s %-8s %-7s %-16s %s\n' "$node" "$pid" running "127.0.0.1:$(node_port "$node")" "$rss"
    else
      down=1
      printf '%-11s %-8s %-7s %-16s %s\n' "$node" - stopped "127.0.0.1:$(node_port "$node")" -
    fi
  done
  printf 'total RSS: %d MiB (data: %s, %s)\n' "$total" "$DATA_DIR" "$(du -sh "$DATA_DIR" 2>/dev/null | cut -f1 || echo '?')"
  ((down == 0)) || return 3
}

cmd_tool() {
  (($# >= 1)) || usage
  fetch
  tool "$@"
}

cmd_pid() {
  [[ -n ${1:-} ]] || usage
  check_settings
  check_node "$1"
  running_pid "$1" || die "$1 is not running"
}

cmd_fetch() {
  fetch
  echo "$KAFKA_HOME"
}

case ${1:-} in
  start | stop) lock_instance "$RUN_DIR/lock" ;;
esac
dispatch "$@"
