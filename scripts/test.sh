#!/usr/bin/env bash
# mqtarget's test command (README.md names it; .ci/run runs it): installs what is missing, starts the real brokers on
# 127.0.0.1, runs the static checks, then every test with the race detector.
#
#  1. packages  every missing Debian package (Java, Maven, python3, shellcheck, chromium, activemq,
#               rabbitmq-server, mosquitto) in one apt-get call, before anything runs in the background
#  2. downloads one after the other, so Maven never races on its local repository: nsqd and
#               nats-server built from the Go module proxy (scripts/nsqd.sh, scripts/nats.sh), RocketMQ
#               jars, the Artemis distribution and Kafka (Maven)
#  3. brokers   Artemis, ActiveMQ Classic, RabbitMQ (STOMP and AMQP), RocketMQ (name server, two
#               brokers), two Kafka clusters, two NATS servers and two Mosquitto start in the
#               background, their data in a per-run directory removed on exit; an Artemis, ActiveMQ,
#               RabbitMQ or RocketMQ that already runs (started by hand with the same settings) is
#               reused and left running
#  4. checks    gofmt over every Go file, go vet (running since step 1: on a new machine it compiles
#               every dependency), `go mod tidy -diff`, shellcheck over scripts/, while the brokers start
#     fuzz      every fuzz target for FUZZTIME (2000x: executions, not seconds) each (scripts/fuzz.sh),
#               run beside the checks; its output is printed after them
#  5. go test -race over every package, with TMPDIR inside the per-run directory
# The integration tests stop, freeze and restart the brokers through the same scripts, with the
# environment exported here. NSQ tests start their own nsqd processes from MQTARGET_NSQD_BIN.
#
# Environment: MQTARGET_CACHE [$HOME/.cache/mqtarget] downloads and builds (never test data);
#              MQTARGET_DATA  [~/.local/state/mqtarget] where brokers started by hand keep their data
#                             (looked at only to reuse a running broker);
#              MQTARGET_KEEP_RUN=1 keeps the per-run directory (broker logs) for a look after a failure;
#              GO_TEST_FLAGS extra flags for go test (e.g. "-run TestNSQ -v");
#              the brokers' own variables (ARTEMIS_STOMP_PORT, ROCKETMQ_NAMESRV_PORT, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=test.sh
# shellcheck source=scripts/lib/broker.sh
. scripts/lib/broker.sh
export MQTARGET_CACHE
mkdir -p "$MQTARGET_CACHE"
HAND_DATA=$MQTARGET_DATA # where a broker started by hand would keep its data

# step NAME: start a step; the time of each is printed at exit.
timings=()
step_name="" step_t0=$SECONDS
end_step() { if [[ -n $step_name ]]; then timings+=("$(printf '%-10s %4ds' "$step_name" $((SECONDS - step_t0)))"); fi; }
step() {
  end_step
  step_name=$1 step_t0=$SECONDS
  printf '\n== %s (+%ds)\n' "$*" "$SECONDS"
}

step "packages"
command -v go >/dev/null || die "Go 1.26 is required (https://go.dev/dl/)"
go version
# go vet -race compiles every dependency with the flags go test uses (go test then finds them built).
# On a new machine that is minutes of both cores, so it starts here, beside apt-get and the downloads,
# which mostly wait on the network; the checks step waits for it.
VET_LOG=$(mktemp "${TMPDIR:-/tmp}/mqtarget-vet.XXXXXX")
go vet -race ./... >"$VET_LOG" 2>&1 &
vet_pid=$!
stop_vet() {
  if [[ -n ${vet_pid:-} ]]; then kill "$vet_pid" 2>/dev/null || true; wait "$vet_pid" 2>/dev/null || true; fi
  vet_pid=
  rm -f "$VET_LOG"
}
trap stop_vet EXIT # until cleanup (below) takes over
pkgs=(python3 shellcheck chromium) # chromium: the live page test (internal/itest/page_test.go)
command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || pkgs+=(maven)
for b in activemq rabbitmq mosquitto; do read -ra more < <(scripts/$b.sh packages) && pkgs+=("${more[@]}"); done
ensure_packages "${pkgs[@]}"
java -version 2>&1 | sed -n 1p # sed, not head: it reads everything, so no SIGPIPE under pipefail
mvn -v 2>/dev/null | sed -n 1p
shellcheck --version | sed -n 2p

step "downloads"
MQTARGET_NSQD_BIN="$(scripts/nsqd.sh build)"
export MQTARGET_NSQD_BIN MQTARGET_INTEGRATION=1
"$MQTARGET_NSQD_BIN" --version
scripts/rocketmq.sh fetch
scripts/artemis.sh fetch
scripts/kafka.sh fetch >/dev/null
scripts/nats.sh build >/dev/null

step "brokers"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-test.XXXXXX")
chmod o+x "$RUN" # brokers that drop to a user of their own (mosquitto) reach their data dirs in it
mkdir -p "$RUN/logs" "$RUN/tmp"
export MQTARGET_DATA=$RUN
started=()
declare -A starting=() # broker -> PID of its start command running in the background
declare -A inst_env=() inst_script=() # an instance of a broker script started with its own variables
cleanup() {
  local rc=$? b left
  step "stop"
  stop_vet
  for b in "${!starting[@]}"; do
    wait "${starting[$b]}" 2>/dev/null || true # let a start finish (it is bounded) so stop finds its PID
  done
  # a check failed while the fuzz targets ran: let them finish (a fixed count) before $RUN goes
  [[ -z ${fuzz_pid:-} ]] || wait "$fuzz_pid" 2>/dev/null || true
  for b in "${started[@]}"; do
    # shellcheck disable=SC2086 # inst_env holds VAR=VALUE words without spaces
    env ${inst_env[$b]:-} scripts/"${inst_script[$b]:-$b}".sh stop >>"$RUN/logs/$b-stop.log" 2>&1 ||
      { cat "$RUN/logs/$b-stop.log" >&2; log "stopping $b failed"; }
  done
  # mqtarget-test-lanes, mqtarget-test-ports: internal/testlane's and internal/testport's lock
  # files, shared by every test binary by design. `|| true`: find dies of SIGPIPE when head has its
  # 20, and pipefail would turn that into the run's exit status.
  left=$(find "$RUN/tmp" -mindepth 1 -maxdepth 1 ! -name mqtarget-test-lanes ! -name mqtarget-test-ports 2>/dev/null | head -n 20) || true
  if [[ -n $left ]]; then log "left behind in TMPDIR by the tests:"$'\n'"$left"; fi
  if [[ ${MQTARGET_KEEP_RUN:-} == 1 ]]; then log "kept $RUN"; else rm -rf "$RUN"; fi
  end_step
  printf '\n== times\n' >&2
  printf '%s\n' "${timings[@]}" "$(printf '%-10s %4ds' total "$SECONDS")" >&2
  exit "$rc"
}
trap cleanup EXIT

# start_bg NAME: start scripts/NAME.sh in the background (output in $RUN/logs/NAME-start.log);
# wait_broker NAME waits for it and fails when it failed.
start_bg() {
  started+=("$1")
  scripts/"$1".sh start >"$RUN/logs/$1-start.log" 2>&1 &
  starting[$1]=$!
}
# start_instance LABEL SCRIPT VAR=VALUE...: start scripts/SCRIPT.sh with its own variables (one of
# several instances of a broker), as start_bg; it is stopped with the same variables.
start_instance() {
  local label=$1 script=$2
  shift 2
  started+=("$label")
  inst_env[$label]="$*" inst_script[$label]=$script
  env "$@" scripts/"$script".sh start >"$RUN/logs/$label-start.log" 2>&1 &
  starting[$label]=$!
}
wait_broker() {
  local rc=0
  [[ -n ${starting[$1]:-} ]] || return 0 # reused
  wait "${starting[$1]}" || rc=$?
  unset "starting[$1]"
  cat "$RUN/logs/$1-start.log"
  ((rc == 0)) || die "starting $1 failed"
}

# use_or_start NAME VAR PORT...: reuse NAME when scripts/NAME.sh reports it running in its hand-run data
# directory (VAR, e.g. ARTEMIS_DATA, or $MQTARGET_DATA/NAME) and its probe passes with our settings;
# otherwise start it in $RUN/NAME. Fails when one of its PORTs is held by something else.
use_or_start() {
  local name=$1 var=$2 dir p out
  shift 2
  dir=$(realpath -m -- "${!var:-$HAND_DATA/$name}")
  if env "$var=$dir" scripts/"$name".sh status >/dev/null 2>&1; then
    out=$(env "$var=$dir" scripts/"$name".sh probe 2>&1) ||
      die "$name runs already (data $dir) but does not pass our probe (login or ports differ?): $out"$'\n'"Stop it (scripts/$name.sh stop) or give it the same settings."
    export "$var=$dir"
    log "reusing the $name that already runs (data $dir); it is left running at exit"
    return 0
  fi
  for p in "$@"; do
    if port_in_use "$p"; then
      die "127.0.0.1:$p ($name) is in use, but not by a broker scripts/$name.sh started with $var=$dir; stop it, export the $var it was started with, or move $name to other ports"
    fi
  done
  export "$var=$RUN/$name"
  start_bg "$name"
}

# Every broker starts at once, beside the checks and fuzz below, on what may be a 2-core machine: nine
# JVMs, an Erlang node and go vet compete for it. The scripts' own deadlines suit a broker started
# alone; here each gets 240 s (a CI run gave up on RabbitMQ at 90 s with its log still booting, while
# Artemis made it in 92 s). A broker that is ready sooner is not waited for longer.
for v in ARTEMIS ACTIVEMQ RABBITMQ ROCKETMQ KAFKA NATS MOSQUITTO; do
  t=${v}_START_TIMEOUT
  export "$t=${!t:-240}"
done

# STOMP: Apache Artemis, ActiveMQ Classic and RabbitMQ (STOMP plugin). All get one login, so TestSTOMPMixed
# can point mqtarget at Artemis and ActiveMQ at once; it is the scripts' default login too.
export ARTEMIS_LOGIN="${ARTEMIS_LOGIN:-mqtarget}" ARTEMIS_PASSCODE="${ARTEMIS_PASSCODE:-mqtarget}"
export ACTIVEMQ_LOGIN="$ARTEMIS_LOGIN" ACTIVEMQ_PASSCODE="$ARTEMIS_PASSCODE"
export RABBITMQ_LOGIN="$ARTEMIS_LOGIN" RABBITMQ_PASSCODE="$ARTEMIS_PASSCODE"
artemis_port=${ARTEMIS_STOMP_PORT:-61613}
export ARTEMIS_TLS_PORT="${ARTEMIS_TLS_PORT:-$((artemis_port + 7))}" # STOMP over TLS (TestArtemisTLS)
use_or_start artemis ARTEMIS_DATA "$artemis_port" "${ARTEMIS_CORE_PORT:-$((artemis_port + 3))}" "$ARTEMIS_TLS_PORT"
use_or_start activemq ACTIVEMQ_DATA "${ACTIVEMQ_STOMP_PORT:-61614}"
export RABBITMQ_AMQPS_PORT="${RABBITMQ_AMQPS_PORT:-5674}" # AMQP over TLS (publishers/amqp's TestIntegrationTLS)
use_or_start rabbitmq RABBITMQ_DATA "${RABBITMQ_STOMP_PORT:-61615}" "${RABBITMQ_NODE_PORT:-5673}" "$RABBITMQ_AMQPS_PORT"
export MQTARGET_ARTEMIS_STOMP="127.0.0.1:$artemis_port" \
  MQTARGET_ARTEMIS_LOGIN="$ARTEMIS_LOGIN" MQTARGET_ARTEMIS_PASSCODE="$ARTEMIS_PASSCODE" \
  MQTARGET_ARTEMIS_PIDFILE="$ARTEMIS_DATA/mqtarget-broker.pid" \
  MQTARGET_ARTEMIS_LIMITED_LOGIN="${ARTEMIS_LIMITED_LOGIN:-mqt-limited}" MQTARGET_ARTEMIS_LIMITED_PASSCODE="${ARTEMIS_LIMITED_PASSCODE:-mqt-limited}" \
  MQTARGET_ARTEMIS_TLS_STOMP="127.0.0.1:$ARTEMIS_TLS_PORT" MQTARGET_ARTEMIS_TLS_CA="$ARTEMIS_DATA/tls/ca.pem"
export MQTARGET_ACTIVEMQ_STOMP="127.0.0.1:${ACTIVEMQ_STOMP_PORT:-61614}" \
  MQTARGET_ACTIVEMQ_LOGIN="$ACTIVEMQ_LOGIN" MQTARGET_ACTIVEMQ_PASSCODE="$ACTIVEMQ_PASSCODE" \
  MQTARGET_ACTIVEMQ_PIDFILE="$ACTIVEMQ_DATA/mqtarget-broker.pid" \
  MQTARGET_ACTIVEMQ_LIMITED_LOGIN="${ACTIVEMQ_LIMITED_LOGIN:-mqt-limited}" MQTARGET_ACTIVEMQ_LIMITED_PASSCODE="${ACTIVEMQ_LIMITED_PASSCODE:-mqt-limited}"
export MQTARGET_RABBITMQ_STOMP="127.0.0.1:${RABBITMQ_STOMP_PORT:-61615}" \
  MQTARGET_RABBITMQ_LOGIN="$RABBITMQ_LOGIN" MQTARGET_RABBITMQ_PASSCODE="$RABBITMQ_PASSCODE" \
  MQTARGET_RABBITMQ_PIDFILE="$RABBITMQ_DATA/mqtarget-broker.pid"

# RocketMQ: name server 127.0.0.1:9876 with broker-a and broker-b.
use_or_start rocketmq ROCKETMQ_DATA "${ROCKETMQ_NAMESRV_PORT:-9876}" "${ROCKETMQ_BROKER_A_PORT:-10911}" \
  "${ROCKETMQ_BROKER_B_PORT:-10921}"
# (TLS permissive by default: TestRocketMQTLS trusts the CA scripts/rocketmq.sh made)
export MQTARGET_ROCKETMQ_NAMESRV="127.0.0.1:${ROCKETMQ_NAMESRV_PORT:-9876}" \
  MQTARGET_ROCKETMQ_TLS_CA="$ROCKETMQ_DATA/tls/ca.pem"
# A second RocketMQ with ACL 2.0 (a name server and one broker; ROCKETMQ_AUTH is its super user) for
# the tests of rocketmq.access_key and of a refused login (TestIntegrationACL, itest's TestRocketMQACL).
rmq_ns_port=${ROCKETMQ_NAMESRV_PORT:-9876}
rmq_acl=(ROCKETMQ_NAMESRV_PORT=$((rmq_ns_port + 1)) ROCKETMQ_BROKER_A_PORT=$((rmq_ns_port + 1065))
  ROCKETMQ_BROKER_B_PORT=$((rmq_ns_port + 1075)) ROCKETMQ_BROKERS=broker-a ROCKETMQ_TLS=disabled
  ROCKETMQ_AUTH=mqtarget:mqtarget-acl ROCKETMQ_DATA="$RUN/rocketmq-acl")
start_instance rocketmq-acl rocketmq "${rmq_acl[@]}"
export MQTARGET_ROCKETMQ_ACL_NAMESRV="127.0.0.1:$((rmq_ns_port + 1))" MQTARGET_ROCKETMQ_ACL_LOGIN=mqtarget:mqtarget-acl \
  MQTARGET_ROCKETMQ_ACL_ENV="${rmq_acl[*]}"

# Kafka (one controller, two brokers), NATS and MQTT (two independent servers each): the brokers of
# publishers/{kafka,nats,mqtt}'s integration tests; AMQP's runs on the RabbitMQ node above (two vhosts
# for two hosts). Their kill -9 tests restart a broker mid-suite; AMQP's restart the node the STOMP
# tests share, in the "rabbitmq" lane those take too (MQTARGET_AMQP_KILL=0 skips them).
export KAFKA_PORT="${KAFKA_PORT:-9092}" KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9094}"
export KAFKA_TLS_PORT="${KAFKA_TLS_PORT:-$((KAFKA_PORT + 100))}" KAFKA_DATA=$RUN/kafka KAFKA_BROKERS=2
export KAFKA_SASL_PORT="${KAFKA_SASL_PORT:-$((KAFKA_PORT + 300))}" KAFKA_SASL_USER="${KAFKA_SASL_USER:-mqtarget}"
start_bg kafka
export KAFKA_SCRIPT=$PWD/scripts/kafka.sh MQTARGET_KAFKA_TEST_BROKERS="127.0.0.1:$KAFKA_PORT" \
  KAFKA_TLS_BROKERS="127.0.0.1:$KAFKA_TLS_PORT" KAFKA_TLS_CA="$KAFKA_DATA/tls/ca.pem" \
  KAFKA_SASL_BROKERS="127.0.0.1:$KAFKA_SASL_PORT" KAFKA_SASL_PASSWORD_FILE="$KAFKA_DATA/sasl/password"
# internal/itest's Kafka: a cluster of its own (go test runs that package beside publishers/kafka,
# whose tests kill and freeze the first one's brokers, and the other way round).
kafka_http=(KAFKA_PORT=$((KAFKA_PORT + 200)) KAFKA_CONTROLLER_PORT=$((KAFKA_PORT + 202)) KAFKA_TLS_PORT= KAFKA_SASL_PORT= KAFKA_DATA="$RUN/kafka-http" KAFKA_BROKERS=2)
start_instance kafka-http kafka "${kafka_http[@]}"
export MQTARGET_KAFKA_TEST_HTTP_BROKERS="127.0.0.1:$((KAFKA_PORT + 200))" MQTARGET_KAFKA_TEST_HTTP_ENV="${kafka_http[*]}"
nats_port=${NATS_PORT:-4222} nats_mon=${NATS_MONITOR_PORT:-8222}
start_instance nats-1 nats NATS_PORT=$((nats_port + 1)) NATS_MONITOR_PORT=$((nats_mon + 1)) NATS_DATA="$RUN/nats-1"
export NATS_PORT=$nats_port NATS_MONITOR_PORT=$nats_mon NATS_DATA=$RUN/nats # the first: the kill test restarts it
start_bg nats
export MQTARGET_NATS_TEST_SERVERS="127.0.0.1:$nats_port,127.0.0.1:$((nats_port + 1))" \
  MQTARGET_NATS_MONITORS="127.0.0.1:$nats_mon,127.0.0.1:$((nats_mon + 1))" \
  MQTARGET_NATS_PIDFILES="$NATS_DATA/mqtarget-broker.pid,$RUN/nats-1/mqtarget-broker.pid" \
  MQTARGET_NATS_KILL_PIDFILE="$NATS_DATA/mqtarget-broker.pid"
mqtt_port=${MOSQUITTO_PORT:-1883}
start_instance mosquitto-0 mosquitto MOSQUITTO_PORT="$mqtt_port" MOSQUITTO_TLS_PORT=$((mqtt_port + 100)) MOSQUITTO_DATA="$RUN/mosquitto-0"
start_instance mosquitto-1 mosquitto MOSQUITTO_PORT=$((mqtt_port + 1)) MOSQUITTO_DATA="$RUN/mosquitto-1"
export MQTARGET_MQTT_TEST_SERVERS="127.0.0.1:$mqtt_port,127.0.0.1:$((mqtt_port + 1))" \
  MQTARGET_MQTT_TEST_TLS_SERVER="127.0.0.1:$((mqtt_port + 100))" MQTARGET_MQTT_TEST_TLS_CA="$RUN/mosquitto-0/tls/ca.pem"
rabbit_amqp="amqp://$RABBITMQ_LOGIN:$RABBITMQ_PASSCODE@127.0.0.1:${RABBITMQ_NODE_PORT:-5673}"
export MQTARGET_AMQP_TEST_URLS="$rabbit_amqp/,$rabbit_amqp/mqt-h1" \
  MQTARGET_AMQP_TEST_TLS_URL="amqps://$RABBITMQ_LOGIN:$RABBITMQ_PASSCODE@127.0.0.1:$RABBITMQ_AMQPS_PORT/" \
  MQTARGET_AMQP_TEST_TLS_CA="$RABBITMQ_DATA/tls/ca.pem"
if [[ ${MQTARGET_AMQP_KILL:-1} == 0 ]]; then unset MQTARGET_AMQP_KILL; else export MQTARGET_AMQP_KILL=1; fi

step "checks"
# The fuzz targets (a short fixed count of executions each: a count, not a time, see scripts/fuzz.sh;
# the seed corpora run in go test below too) build and run beside the checks, still while the brokers
# start: their instrumented build shares nothing with vet's, and vet alone leaves a core idle.
FUZZTIME="${FUZZTIME:-2000x}" TMPDIR=$RUN/tmp scripts/fuzz.sh >"$RUN/fuzz.log" 2>&1 &
fuzz_pid=$!
mapfile -t gofiles < <(git ls-files -co --exclude-standard '*.go')
unformatted="$(gofmt -l "${gofiles[@]}")"
[[ -z $unformatted ]] || die "gofmt would change:"$'\n'"$unformatted"
# go vet -race, started in the packages step: it builds the dependencies it reads with the flags go test
# below uses, so go test finds them built (a new machine: vet 139 s then the test build 56 s, against
# 218 s for the test build alone).
vet_rc=0
wait "$vet_pid" || vet_rc=$?
vet_pid=
cat "$VET_LOG"
((vet_rc == 0)) || die "go vet failed (above)"
go mod tidy -diff || die "go.mod/go.sum are not tidy: run go mod tidy"
# Every shell script under scripts/: *.sh, and files whose first line names sh or bash.
mapfile -t shfiles < <(find scripts -type f \( -name '*.sh' -o -exec sh -c 'head -n1 "$1" | grep -qE "^#!.*\b(ba)?sh\b"' _ {} \; \) -print | sort)
shellcheck -x "${shfiles[@]}"
echo "gofmt (${#gofiles[@]} files), go vet, go mod tidy -diff, shellcheck (${#shfiles[@]} files): clean"

step "fuzz"
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
fuzz_pid=
cat "$RUN/fuzz.log"
((fuzz_rc == 0)) || die "scripts/fuzz.sh failed (above)"

step "brokers up"
wait_broker artemis
wait_broker activemq
wait_broker rabbitmq
wait_broker rocketmq
wait_broker rocketmq-acl
for b in kafka kafka-http nats nats-1 mosquitto-0 mosquitto-1; do wait_broker "$b"; done

step "go test"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
# -p: four test binaries at once, not one per core: many of them wait on brokers, timers and each
# other's lanes, and with two at a time the package queue, not internal/itest, set the length of the
# step. It is CPU-bound now (vmstat, a warm run of 2026-12-04: both cores 85-100 % busy for the first
# 220 s of a 281 s step, 10-35 % in the rest, the last packages waiting on their lanes); starting the
# longest packages first and letting lane waits hold no -parallel slot gave 320 s against 333 s,
# one run each, within the noise: not kept (docs/testing.md, run 8).
# -parallel: the integration tests in lanes (internal/itest/lane.go) overlap, four at a time (a test
# waiting for its lane holds a slot; 8 made a new-machine run slower, 496 s against 415 s of go test,
# and timing bounds failed in four packages).
# In a process group of its own, waited for here: a TERM, INT or HUP to this script stops the test
# binaries first (they restart brokers), and then the EXIT trap stops the brokers. Killed with the
# script alone, they went on restarting brokers that outlived the run and took the next run's ports.
TMPDIR=$RUN/tmp setsid go test -race -count=1 -timeout 20m -p 4 -parallel 4 ${GO_TEST_FLAGS:-} ./... &
test_pid=$!
stop_tests() {
  trap - TERM INT HUP
  kill -TERM -- "-$test_pid" 2>/dev/null || true
  wait "$test_pid" 2>/dev/null || true
  exit 143
}
trap stop_tests TERM INT HUP
wait "$test_pid"
trap - TERM INT HUP

step "memory"
# What the brokers hold after the whole suite (docs/testing.md "Broker memory after the suite").
for b in ARTEMIS ACTIVEMQ RABBITMQ; do
  f=MQTARGET_${b}_PIDFILE
  printf '%-9s %s MiB\n' "${b,,}" "$(rss_mib "$(cat "${!f}" 2>/dev/null || echo none)")"
done
scripts/rocketmq.sh status || true
