#!/usr/bin/env bash
# Local Apache RocketMQ for mqtarget tests and benchmarks: one name server and
# two master brokers (broker-a, broker-b) in one cluster, all on 127.0.0.1.
#
# Usage: scripts/rocketmq.sh start|stop|status|restart|probe
#        scripts/rocketmq.sh start-broker|stop-broker|pid broker-a|broker-b|namesrv
#        scripts/rocketmq.sh launch-broker broker-a|broker-b   (no readiness probe: returns at once)
#        scripts/rocketmq.sh fetch | mqadmin ARGS... | classpath [bench]
#
# status exits 0 when all three run, 3 otherwise; probe waits (up to ROCKETMQ_START_TIMEOUT) until both
# running brokers are registered and take a probe message.
#
# Environment (defaults in brackets):
#   MQTARGET_CACHE          [$HOME/.cache/mqtarget]  jars: rocketmq-<version>/lib
#   MQTARGET_DATA           [~/.local/state/mqtarget] (see scripts/lib/broker.sh)
#   ROCKETMQ_DATA           [$MQTARGET_DATA/rocketmq]  stores, logs, pid files, and the lock that start,
#                                    stop and restart take turns on (MQTARGET_BROKER_LOCK_TIMEOUT [600] s)
#   ROCKETMQ_NAMESRV_PORT   [9876]
#   ROCKETMQ_BROKER_A_PORT  [10911]  (a broker also uses port-2 and port+1)
#   ROCKETMQ_BROKER_B_PORT  [10921]
#   ROCKETMQ_CLUSTER        [DefaultCluster]
#   ROCKETMQ_QUEUES         [8]      defaultTopicQueueNums of each broker
#   ROCKETMQ_NAMESRV_HEAP   [128m]   ROCKETMQ_BROKER_HEAP [256m]
#   ROCKETMQ_BROKER_DIRECT  [256m]   MaxDirectMemorySize of each broker
#   ROCKETMQ_COMMITLOG_MB   [64]     size of one commit log file
#   ROCKETMQ_START_TIMEOUT  [120]    seconds until both brokers take a probe message
#   ROCKETMQ_STOP_TIMEOUT   [60]     seconds between SIGTERM and SIGKILL
#   ROCKETMQ_MAX_DISK_PCT   [85]     refuse to start above this use of the data filesystem
#   ROCKETMQ_TLS            [permissive]  tls.server.mode of the name server and brokers: permissive
#                                    (plain and TLS clients on the same ports), enforcing (TLS only) or
#                                    disabled. Not disabled: a test certificate for 127.0.0.1 is made in
#                                    $ROCKETMQ_DATA/tls, clients trust tls/ca.pem
#   ROCKETMQ_AUTH           []       USER:PASSWORD turns on the brokers' ACL 2.0 (authentication and
#                                    authorization) with USER as their super user; mqadmin (and the
#                                    probe) signs as USER. Create further users with `mqadmin createUser`
#   ROCKETMQ_BROKERS        [broker-a broker-b]  the brokers start, stop, status and probe mean
set -euo pipefail

readonly ROCKETMQ_VERSION="5.3.3"
# rocketmq-example (benchmark Producer/Consumer) is not published for any 5.3.x;
# it lives in its own lib dir with its own dependency tree (client speaks the same
# remoting protocol as the 5.3.3 brokers).
readonly ROCKETMQ_EXAMPLE_VERSION="5.5.0"

NAME=rocketmq
# shellcheck source=scripts/lib/broker.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/broker.sh"
# shellcheck source=scripts/lib/tls.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/tls.sh"

RMQ_HOME="$MQTARGET_CACHE/rocketmq-$ROCKETMQ_VERSION"
LIB_DIR="$RMQ_HOME/lib"
BENCH_LIB_DIR="$RMQ_HOME/bench-lib"
FETCH_MARKER="$RMQ_HOME/.fetch-complete"
DATA_DIR="$(realpath -m -- "${ROCKETMQ_DATA:-$MQTARGET_DATA/rocketmq}")"
RUN_DIR="$DATA_DIR/run"

NAMESRV_PORT="${ROCKETMQ_NAMESRV_PORT:-9876}"
BROKER_A_PORT="${ROCKETMQ_BROKER_A_PORT:-10911}"
BROKER_B_PORT="${ROCKETMQ_BROKER_B_PORT:-10921}"
CLUSTER="${ROCKETMQ_CLUSTER:-DefaultCluster}"
QUEUES="${ROCKETMQ_QUEUES:-8}"
NAMESRV_HEAP="${ROCKETMQ_NAMESRV_HEAP:-128m}"
BROKER_HEAP="${ROCKETMQ_BROKER_HEAP:-256m}"
BROKER_DIRECT="${ROCKETMQ_BROKER_DIRECT:-256m}"
COMMITLOG_MB="${ROCKETMQ_COMMITLOG_MB:-64}"
START_TIMEOUT="${ROCKETMQ_START_TIMEOUT:-120}"
STOP_TIMEOUT="${ROCKETMQ_STOP_TIMEOUT:-60}"
MAX_DISK_PCT="${ROCKETMQ_MAX_DISK_PCT:-85}"
TLS_MODE="${ROCKETMQ_TLS:-permissive}"
NAMESRV_ADDR="127.0.0.1:$NAMESRV_PORT"
PROBE_TOPIC="mqtarget-probe"
# RocketMQ shades logback; without this it dumps its config status into the .out files
LOGBACK_QUIET="-Dlogback.statusListenerClass=org.apache.rocketmq.logging.ch.qos.logback.core.status.NopStatusListener"
STARTED=() # components launched by this invocation (stopped again if they never get ready)
read -ra BROKERS <<<"${ROCKETMQ_BROKERS:-broker-a broker-b}"
AUTH="${ROCKETMQ_AUTH:-}"

JAVA="java"
if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    JAVA="$JAVA_HOME/bin/java"
fi

broker_port() {
    case "$1" in
        broker-a) echo "$BROKER_A_PORT" ;;
        broker-b) echo "$BROKER_B_PORT" ;;
        *) die "unknown broker '$1' (expected broker-a or broker-b)" ;;
    esac
}

check_ports() {
    local p
    for p in "$NAMESRV_PORT" "$BROKER_A_PORT" "$BROKER_B_PORT"; do
        [[ "$p" =~ ^[0-9]+$ ]] || die "port '$p' is not a number"
    done
    local a=$BROKER_A_PORT b=$BROKER_B_PORT
    # each broker occupies [port-2, port+1]; the ranges must not touch each other or the name server
    if (( a - b < 4 && b - a < 4 )); then
        die "broker ports $a and $b are too close: a broker also listens on port-2 and port+1"
    fi
    for p in "$a" "$b"; do
        if (( NAMESRV_PORT >= p - 2 && NAMESRV_PORT <= p + 1 )); then
            die "name server port $NAMESRV_PORT collides with broker port range $((p - 2))..$((p + 1))"
        fi
    done
}

# ---------------------------------------------------------------- fetch

write_pom() { # file artifactId... (version given per item as artifact:version)
    local file="$1"; shift
    local item
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo '<project xmlns="http://maven.apache.org/POM/4.0.0">'
        echo '  <modelVersion>4.0.0</modelVersion>'
        echo '  <groupId>local.mqtarget</groupId>'
        echo '  <artifactId>rocketmq-fetch</artifactId>'
        echo '  <version>1</version>'
        echo '  <packaging>pom</packaging>'
        echo '  <dependencies>'
        for item in "$@"; do
            echo "    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>${item%%:*}</artifactId><version>${item#*:}</version></dependency>"
        done
        echo '  </dependencies>'
        echo '</project>'
    } > "$file"
}

copy_deps() { # pomdir outdir
    local pomdir="$1" out="$2"
    rm -rf "$out.tmp"
    if ! mvn -B -q -f "$pomdir/pom.xml" dependency:copy-dependencies \
            -DoutputDirectory="$out.tmp" -DincludeScope=runtime >"$pomdir/mvn.log" 2>&1; then
        tail -n 30 "$pomdir/mvn.log" >&2
        die "maven could not fetch the RocketMQ jars (log: $pomdir/mvn.log)"
    fi
    rm -rf "$out"
    mv "$out.tmp" "$out"
}

fetch() {
    if [[ -f "$FETCH_MARKER" && -d "$LIB_DIR" && -d "$BENCH_LIB_DIR" ]]; then
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: install Maven to fetch RocketMQ $ROCKETMQ_VERSION"
    log "fetching RocketMQ $ROCKETMQ_VERSION jars into $RMQ_HOME (maven) ..."
    mkdir -p "$RMQ_HOME/pom-server" "$RMQ_HOME/pom-bench"
    write_pom "$RMQ_HOME/pom-server/pom.xml" \
        "rocketmq-namesrv:$ROCKETMQ_VERSION" "rocketmq-broker:$ROCKETMQ_VERSION" "rocketmq-tools:$ROCKETMQ_VERSION"
    write_pom "$RMQ_HOME/pom-bench/pom.xml" "rocketmq-example:$ROCKETMQ_EXAMPLE_VERSION"
    copy_deps "$RMQ_HOME/pom-server" "$LIB_DIR"
    copy_deps "$RMQ_HOME/pom-bench" "$BENCH_LIB_DIR"
    [[ -f "$LIB_DIR/rocketmq-broker-$ROCKETMQ_VERSION.jar" ]] || die "broker jar missing after fetch"
    [[ -f "$BENCH_LIB_DIR/rocketmq-example-$ROCKETMQ_EXAMPLE_VERSION.jar" ]] || die "example jar missing after fetch"
    printf 'rocketmq %s, rocketmq-example %s\n' "$ROCKETMQ_VERSION" "$ROCKETMQ_EXAMPLE_VERSION" > "$FETCH_MARKER"
    log "fetch complete ($(find "$LIB_DIR" -name '*.jar' | wc -l) server jars, $(find "$BENCH_LIB_DIR" -name '*.jar' | wc -l) bench jars)"
}

# ---------------------------------------------------------------- java

java_major() {
    local v
    v="$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
    v="${v#1.}"
    echo "${v%%.*}"
}

JVM_OPENS=()
init_java() {
    command -v "$JAVA" >/dev/null || die "java not found (set JAVA_HOME or put java on PATH)"
    local major
    major="$(java_major)"
    [[ "$major" =~ ^[0-9]+$ ]] || die "cannot tell the java version of $JAVA"
    if (( major >= 9 )); then
        # the store maps files and calls MappedByteBuffer.isLoaded0 / sun.nio.ch.DirectBuffer
        JVM_OPENS=(
            --add-opens=java.base/java.nio=ALL-UNNAMED
            --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
            --add-exports=java.base/sun.nio.ch=ALL-UNNAMED
            --add-opens=java.base/java.lang=ALL-UNNAMED
            --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
            --add-opens=java.base/java.util=ALL-UNNAMED
            --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
            --add-opens=java.base/java.net=ALL-UNNAMED
            --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED
            --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
            -Dio.netty.tryReflectionSetAccessible=true
        )
    fi
    init_tls
}

# mqadmin: runs org.apache.rocketmq.tools.command.MQAdminStartup against our name server.
# With ROCKETMQ_AUTH it signs as the super user: MQAdminStartup reads the credentials from
# <rocketmq.home.dir>/conf/tools.yml, so its home is a directory of its own.
mqadmin() {
    local home="$RMQ_HOME"
    mkdir -p "$DATA_DIR/tools"
    if [[ -n $AUTH ]]; then
        home="$DATA_DIR/tools/home"
        mkdir -p "$home/conf"
        printf 'accessKey: %s\nsecretKey: %s\n' "${AUTH%%:*}" "${AUTH#*:}" >"$home/conf/tools.yml"
    fi
    "$JAVA" -Xms64m -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "${JVM_OPENS[@]}" \
        -Duser.home="$DATA_DIR/tools" -Drocketmq.home.dir="$home" \
        -Drmq.logback.configurationFile=rmq.tools.logback.xml "$LOGBACK_QUIET" \
        -Drocketmq.namesrv.addr="$NAMESRV_ADDR" "${TLS_ARGS[@]}" \
        -cp "$LIB_DIR/*" org.apache.rocketmq.tools.command.MQAdminStartup "$@"
}

# ---------------------------------------------------------------- processes

pid_file() { echo "$RUN_DIR/$1.pid"; }

# pid of component $1 when it is running (the pid file's process is the JVM of that role in our data dir)
running_pid() { pid_of "$(pid_file "$1")" "-Duser.home=$DATA_DIR/$1 "; }

check_disk() {
    mkdir -p "$DATA_DIR"
    local pct
    pct="$(df -P "$DATA_DIR" | awk 'NR==2 {sub(/%/, "", $5); print $5}')"
    [[ "$pct" =~ ^[0-9]+$ ]] || die "cannot read disk usage of $DATA_DIR"
    if (( pct > MAX_DISK_PCT )); then
        die "filesystem of $DATA_DIR is ${pct}% used (limit ${MAX_DISK_PCT}%): RocketMQ brokers refuse writes near 90%; free space or set ROCKETMQ_DATA elsewhere"
    fi
}

# the servers' TLS (TlsSystemConfig system properties): our test certificate instead of Netty's
# self-signed test mode, and no /etc/rocketmq/tls.properties. Their own clients (broker to name server,
# mqadmin) stay plain when permissive and use TLS, unverified, when enforcing.
TLS_ARGS=()
init_tls() {
    local client=false
    case "$TLS_MODE" in
        permissive) ;;
        enforcing) client=true ;;
        disabled) TLS_ARGS=(-Dtls.server.mode=disabled); return 0 ;;
        *) die "ROCKETMQ_TLS='$TLS_MODE': want permissive, enforcing or disabled" ;;
    esac
    local dir="$DATA_DIR/tls"
    test_certs "$dir"
    TLS_ARGS=(
        "-Dtls.server.mode=$TLS_MODE" -Dtls.test.mode.enable=false -Dtls.server.need.client.auth=none
        "-Dtls.server.certPath=$dir/server.pem" "-Dtls.server.keyPath=$dir/server.key"
        "-Dtls.config.file=$dir/tls.properties" "-Dtls.enable=$client"
    )
}

launch() { # role mainclass logback-config out-file java-args...
    local role="$1" main="$2" logcfg="$3" out="$4"; shift 4
    local home="$DATA_DIR/$role"
    mkdir -p "$home" "$RUN_DIR"
    spawn "$out" "$home" "$JAVA" -server -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow -XX:+HeapDumpOnOutOfMemoryError \
        -XX:HeapDumpPath="$home" "${JVM_OPENS[@]}" "${TLS_ARGS[@]}" "$@" \
        -Duser.home="$home" -Drocketmq.home.dir="$RMQ_HOME" \
        -Drmq.logback.configurationFile="$logcfg" "$LOGBACK_QUIET" \
        -Dmqtarget.rocketmq.role="$role" \
        -cp "$LIB_DIR/*" "$main" -c "$home/$role.properties"
    echo "$SPAWNED" > "$(pid_file "$role")"
    STARTED+=("$role")
}

# before launching anything: every port of a component that is not running yet must be free
preflight_ports() {
    local name port p
    if ! running_pid namesrv >/dev/null && port_in_use "$NAMESRV_PORT"; then
        die "port $NAMESRV_PORT (name server) is in use by another process (set ROCKETMQ_NAMESRV_PORT)"
    fi
    for name in "$@"; do
        running_pid "$name" >/dev/null && continue
        port="$(broker_port "$name")"
        for p in $((port - 2)) "$port" $((port + 1)); do
            if port_in_use "$p"; then
                die "port $p (needed by $name: listen port $port, fast port $((port - 2)), HA port $((port + 1))) is in use by another process"
            fi
        done
    done
}

start_namesrv() {
    local pid
    if pid="$(running_pid namesrv)"; then
        log "name server already running (pid $pid, $NAMESRV_ADDR)"
        return 0
    fi
    local home="$DATA_DIR/namesrv"
    mkdir -p "$home"
    cat > "$home/namesrv.properties" <<EOF
listenPort=$NAMESRV_PORT
bindAddress=127.0.0.1
kvConfigPath=$home/kvConfig.json
EOF
    launch namesrv org.apache.rocketmq.namesrv.NamesrvStartup rmq.namesrv.logback.xml "$home/namesrv.out" \
        "-Xms$NAMESRV_HEAP" "-Xmx$NAMESRV_HEAP" -XX:MaxDirectMemorySize=64m
    log "name server starting (pid $(cat "$(pid_file namesrv)"), $NAMESRV_ADDR)"
}

start_broker_proc() {
    local name="$1" pid port
    port="$(broker_port "$name")"
    if pid="$(running_pid "$name")"; then
        log "$name already running (pid $pid, 127.0.0.1:$port)"
        return 0
    fi
    local home="$DATA_DIR/$name"
    local store="$home/store"
    mkdir -p "$store/commitlog"
    cat > "$home/$name.properties" <<EOF
brokerClusterName=$CLUSTER
brokerName=$name
brokerId=0
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
listenPort=$port
haListenPort=$((port + 1))
bindAddress=127.0.0.1
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
namesrvAddr=$NAMESRV_ADDR
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
defaultTopicQueueNums=$QUEUES
storePathRootDir=$store
storePathCommitLog=$store/commitlog
mappedFileSizeCommitLog=$((COMMITLOG_MB * 1024 * 1024))
mappedFileSizeConsumeQueue=1200000
mappedFileSizeTimerLog=16777216
maxHashSlotNum=100000
maxIndexNum=400000
diskMaxUsedSpaceRatio=90
fileReservedTime=24
EOF
    if [[ -n $AUTH ]]; then
        cat >> "$home/$name.properties" <<EOF
authenticationEnabled=true
authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider
authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider
initAuthenticationUser={"username":"${AUTH%%:*}","password":"${AUTH#*:}"}
innerClientAuthenticationCredentials={"accessKey":"${AUTH%%:*}","secretKey":"${AUTH#*:}"}
authorizationEnabled=true
authorizationProvider=org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider
authorizationMetadataProvider=org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider
EOF
    fi
    launch "$name" org.apache.rocketmq.broker.BrokerStartup rmq.broker.logback.xml "$home/$name.out" \
        "-Xms$BROKER_HEAP" "-Xmx$BROKER_HEAP" "-XX:MaxDirectMemorySize=$BROKER_DIRECT"
    log "$name starting (pid $(cat "$(pid_file "$name")"), 127.0.0.1:$port)"
}

stop_roles() { # role...: stop the running ones together (SIGTERM, SIGKILL after STOP_TIMEOUT)
    local role pid
    local -a args=()
    for role in "$@"; do
        if pid="$(running_pid "$role")"; then args+=("$role" "$pid"); fi
    done
    if (( ${#args[@]} > 0 )); then stop_pids "$STOP_TIMEOUT" "${args[@]}"; fi
    for role in "$@"; do rm -f "$(pid_file "$role")"; done
}

# ---------------------------------------------------------------- readiness

print_logs() {
    local role f
    for role in "$@"; do
        for f in "$DATA_DIR/$role/$role.out" \
                 "$DATA_DIR/$role/logs/rocketmqlogs/namesrv.log" \
                 "$DATA_DIR/$role/logs/rocketmqlogs/broker.log" \
                 "$DATA_DIR/$role/logs/rocketmqlogs/store.log"; do
            if [[ -s "$f" ]]; then
                printf '\n----- tail %s -----\n' "$f" >&2
                tail -n 40 "$f" >&2
            fi
        done
    done
}

ready_fail() {
    log "$1"
    print_logs namesrv "${@:2}"
    if (( ${#STARTED[@]} > 0 )); then
        log "stopping what this start launched: ${STARTED[*]}"
        stop_roles "${STARTED[@]}"
    fi
    die "RocketMQ not ready: $1"
}

# alive ROLE: ROLE's process runs, asked three times 0.3 s apart before saying no: right after the
# launch its command line can read as another's for a moment (a CI run took a broker that was
# starting for one that had exited, then stopped it as "what this start launched").
alive() {
    local try
    for try in 1 2 3; do
        running_pid "$1" >/dev/null && return 0
        ((try < 3)) && sleep 0.3
    done
    return 1
}

# wait until the brokers named in $@ are registered and accept a probe message
wait_ready() {
    local deadline=$((SECONDS + START_TIMEOUT)) name out="(name server not listening yet)" port
    local -a pending=("$@")
    # 1. processes alive and registered in the name server with the expected address
    while :; do
        for name in namesrv "$@"; do
            alive "$name" || ready_fail "$name exited during startup" "$@"
        done
        # a mqadmin JVM takes ~4 s: only ask once every server accepts connections
        local listening=1
        port_in_use "$NAMESRV_PORT" || listening=0
        for name in "$@"; do
            port_in_use "$(broker_port "$name")" || listening=0
        done
        if (( listening == 1 )); then
            out="$(mqadmin clusterList -n "$NAMESRV_ADDR" 2>&1 || true)"
            local unregistered=0
            for name in "$@"; do
                port="$(broker_port "$name")"
                grep -Eq "^$CLUSTER +$name +0 +127\.0\.0\.1:$port( |$)" <<<"$out" || unregistered=1
            done
            (( unregistered == 0 )) && break
        fi
        (( SECONDS >= deadline )) && ready_fail "brokers not registered in the name server within ${START_TIMEOUT}s; last clusterList:
$out" "$@"
        if (( listening == 1 )); then sleep 1; else sleep 0.5; fi
    done
    log "registered in name server $NAMESRV_ADDR: $*"
    # 2. probe topic on the whole cluster (idempotent), then one message to queue 0 of each broker
    while :; do
        out="$(mqadmin updateTopic -c "$CLUSTER" -t "$PROBE_TOPIC" -r 1 -w 1 -n "$NAMESRV_ADDR" 2>&1 || true)"
        if ! grep -q 'create topic to .* success' <<<"$out"; then
            log "probe topic not created yet: $(grep -m1 -E '[A-Za-z]' <<<"$out" | cut -c1-160)"
        else
            local -a still=() probes=()
            for name in "${pending[@]}"; do # one JVM per broker, in parallel
                mqadmin sendMessage -t "$PROBE_TOPIC" -p "probe $(date +%s)" -b "$name" -i 0 -n "$NAMESRV_ADDR" \
                    > "$RUN_DIR/probe-$name.out" 2>&1 &
                probes+=("$!")
            done
            wait "${probes[@]}" || true # (a bare wait would also wait for the servers)
            for name in "${pending[@]}"; do
                out="$(cat "$RUN_DIR/probe-$name.out")"
                rm -f "$RUN_DIR/probe-$name.out"
                if grep -Eq "^$name +0 +SEND_OK" <<<"$out"; then
                    log "probe send to $name: SEND_OK"
                else
                    log "probe send to $name not ok yet: $(grep -v '^#' <<<"$out" | grep -m1 -E '[A-Za-z]' | cut -c1-160)"
                    still+=("$name")
                fi
            done
            pending=("${still[@]+"${still[@]}"}")
            (( ${#pending[@]} == 0 )) && return 0
        fi
        (( SECONDS >= deadline )) && ready_fail "probe send failed within ${START_TIMEOUT}s (pending: ${pending[*]}); last output:
$out" "$@"
        sleep 2
    done
}

# ---------------------------------------------------------------- commands

cmd_start() { # [broker]: both brokers by default
    if (( $# == 0 )); then set -- "${BROKERS[@]}"; fi
    local -a targets=("$@")
    check_ports
    fetch
    init_java
    check_disk
    local all=1 name
    for name in namesrv "${targets[@]}"; do
        running_pid "$name" >/dev/null || all=0
    done
    if (( all == 1 )); then
        log "already running: namesrv ${targets[*]} (name server $NAMESRV_ADDR)"
        return 0
    fi
    preflight_ports "${targets[@]}"
    local t0=$SECONDS
    start_namesrv
    for name in "${targets[@]}"; do
        start_broker_proc "$name"
    done
    wait_ready "${targets[@]}"
    log "ready in $((SECONDS - t0))s: name server $NAMESRV_ADDR, brokers ${targets[*]}"
}

cmd_stop() {
    stop_roles "${BROKERS[@]}"
    stop_roles namesrv
}

cmd_restart() {
    cmd_stop
    cmd_start
}

cmd_probe() {
    init_java
    wait_ready "${BROKERS[@]}"
}

cmd_status() {
    local name pid rss total=0 down=0 addr
    printf '%-9s %-8s %-7s %-17s %s\n' ROLE PID STATE ADDRESS RSS_MiB
    for name in namesrv "${BROKERS[@]}"; do
        if [[ "$name" == namesrv ]]; then addr="$NAMESRV_ADDR"; else addr="127.0.0.1:$(broker_port "$name")"; fi
        if pid="$(running_pid "$name")"; then
            rss="$(rss_mib "$pid")"
            total=$((total + rss))
            printf '%-9s %-8s %-7s %-17s %d\n' "$name" "$pid" running "$addr" "$rss"
        else
            down=1
            printf '%-9s %-8s %-7s %-17s %s\n' "$name" - stopped "$addr" -
        fi
    done
    printf 'total RSS: %d MiB (data: %s, %s)\n' "$total" "$DATA_DIR" \
        "$(du -sh "$DATA_DIR" 2>/dev/null | cut -f1 || echo '?')"
    (( down == 0 )) || return 3
}

one_role() { # role: check the argument of the per-component commands
    [[ -n "${1:-}" ]] || usage
    [[ "$1" == namesrv ]] || broker_port "$1" >/dev/null
}
cmd_start_broker() { one_role "${1:-}"; [[ "$1" != namesrv ]] || usage; cmd_start "$1"; }
cmd_stop_broker() { one_role "${1:-}"; stop_roles "$1"; }
# launch-broker: start a broker next to a running name server and return at once, skipping the probes
# (admin JVMs that take tens of seconds): for tests that watch the broker come back themselves.
cmd_launch_broker() {
    one_role "${1:-}"
    [[ "$1" != namesrv ]] || usage
    running_pid namesrv >/dev/null || die "the name server is not running (scripts/rocketmq.sh start)"
    check_ports
    fetch
    init_java
    check_disk
    preflight_ports "$1"
    start_broker_proc "$1"
}
# pid of a running component (for SIGSTOP/SIGCONT in tests); exit 1 when not running
cmd_pid() { one_role "${1:-}"; running_pid "$1" || die "$1 is not running"; }
cmd_fetch() { fetch; echo "$RMQ_HOME"; }
cmd_mqadmin() { fetch; init_java; mqadmin "$@"; }
cmd_classpath() {
    fetch
    if [[ "${1:-}" == bench ]]; then echo "$BENCH_LIB_DIR/*"; else echo "$LIB_DIR/*"; fi
}

case "${1:-}" in
    start | stop | restart | start-broker | stop-broker | launch-broker) lock_instance "$RUN_DIR/lock" ;;
esac
dispatch "$@"
