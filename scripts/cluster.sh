#!/usr/bin/env bash
# A local fleet backend for development, demos and integration tests: a real
# single-node Kafka broker (KRaft mode, jars from Maven Central cached under
# build/kafka) and a ClickHouse server (Debian's clickhouse-server package),
# both run as ordinary processes with all their state in DIR, both listening
# on loopback only.
#
#   scripts/cluster.sh up DIR [flags]     start what is not running, wait until
#                                         each answers, print KAFKA=host:port and
#                                         CLICKHOUSE=http://host:port
#   scripts/cluster.sh down DIR [kafka|clickhouse]
#                                         stop them (or one) by PID; idempotent
#   scripts/cluster.sh status DIR         say what runs
#   scripts/cluster.sh fetch              only fetch the Kafka jars (scripts/deps.sh fleet)
#
# Flags of up (each also an environment variable; ports are free loopback
# ports picked on the first up and kept in DIR/ports.env for later ups):
#   --kafka-port N        KAFKA_PORT: the broker's client listener
#   --controller-port N   KAFKA_CONTROLLER_PORT: the KRaft controller listener
#   --clickhouse-port N   CLICKHOUSE_PORT: ClickHouse's HTTP interface
#   --clickhouse-tcp-port N  CLICKHOUSE_TCP_PORT: its native protocol (clickhouse-client)
#   --only kafka|clickhouse  start only one of them
#   --no-setup            SETUP=0: do not run 'weir clickhouse setup' afterwards
#   --topic T             TOPIC: the topic setup ingests (default weir-flows)
#   --ingest weir|kafka   INGEST: setup's --ingest (default weir: run 'weir ingest'
#                         to read the topic; kafka: ClickHouse's Kafka engine reads it,
#                         and exporters must send ?format=row)
# Other environment: KAFKA_VERSION (default 4.4.0), KAFKA_HEAP (default
# -Xms128m -Xmx384m), WAIT_SECONDS (default 120: how long to wait for each),
# WEIR (the weir binary setup runs; default bin/weir, else go run ./cmd/weir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
KAFKA_HEAP=${KAFKA_HEAP:--Xms128m -Xmx384m}
WAIT_SECONDS=${WAIT_SECONDS:-120}
SETUP=${SETUP:-1}
TOPIC=${TOPIC:-weir-flows}
INGEST=${INGEST:-weir}
libs=$root/build/kafka/$KAFKA_VERSION/libs

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# fetch_kafka puts the broker's jars under build/kafka/VERSION/libs, once:
# offline first (the local Maven repository), then from Maven Central.
fetch_kafka() {
  [ -f "$libs/.complete" ] && return 0
  command -v mvn >/dev/null 2>&1 || die "mvn is not installed: apt-get install maven (or scripts/deps.sh fleet)"
  local tmp=$libs.tmp.$$
  rm -rf "$tmp"
  mkdir -p "$tmp"
  local args=(-q -B -f "$root/scripts/kafka/pom.xml" -Dkafka.version="$KAFKA_VERSION"
    dependency:copy-dependencies -DoutputDirectory="$tmp" -DincludeScope=runtime)
  log "fetching Kafka $KAFKA_VERSION jars with mvn"
  if ! mvn -o "${args[@]}" >/dev/null 2>&1 && ! mvn "${args[@]}" >&2; then
    rm -rf "$tmp"
    die "mvn could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION"
  fi
  touch "$tmp/.complete"
  rm -rf "$libs"
  mv "$tmp" "$libs"
}

check_java() {
  command -v java >/dev/null 2>&1 || die "java is not installed: Kafka $KAFKA_VERSION needs Java 17 or newer (apt-get install openjdk-17-jre-headless)"
  local v
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ "${v:-0}" -ge 17 ] || die "java is version ${v:-unknown}: Kafka $KAFKA_VERSION needs 17 or newer"
}

# port_free reports whether nothing listens on TCP port $1.
port_free() {
  ! ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# free_port picks a port below the ephemeral range that nothing listens on
# and that this run has not picked yet (bounded tries).
picked=" "
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 12000))
    if [[ $picked != *" $p "* ]] && port_free "$p"; then
      picked+="$p "
      echo "$p"
      return 0
    fi
  done
  die "found no free port"
}

# alive reports whether pid file $1 names a running process started for DIR.
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir/" # not a recycled PID
}

# launch starts "$4..." in directory $3 with output to $2, in a session of
# its own (it outlives this script and its terminal; 'down' stops it by PID)
# and writes its PID to $1: the shell that execs it writes its own PID, so
# the file names the server whether or not setsid had to fork.
launch() {
  local pidfile=$1 out=$2 cwd=$3
  shift 3
  rm -f "$pidfile"
  setsid nohup sh -c 'cd "$1" || exit 1; echo $$ >"$2"; shift 2; exec "$@"' sh "$cwd" "$pidfile" "$@" \
    >"$out" 2>&1 </dev/null &
  for _ in $(seq 1 100); do
    [ -s "$pidfile" ] && return 0
    sleep 0.1
  done
  die "$4 did not start"
}

# wait_for runs "$2..." until it succeeds, for at most WAIT_SECONDS; $1
# names what is waited for. It fails early when pid file $PIDFILE dies.
wait_for() {
  local what=$1
  shift
  local deadline=$((SECONDS + WAIT_SECONDS))
  while ((SECONDS < deadline)); do
    if "$@"; then return 0; fi
    alive "$PIDFILE" || return 1
    sleep 0.5
  done
  log "$what did not answer within ${WAIT_SECONDS}s"
  return 1
}

load_ports() {
  if [ -f "$dir/ports.env" ]; then
    local k v
    while IFS='=' read -r k v; do
      case "$k" in
        KAFKA_PORT | KAFKA_CONTROLLER_PORT | CLICKHOUSE_PORT | CLICKHOUSE_TCP_PORT)
          local cur=${!k:-}
          [ -z "$cur" ] || [ "$cur" = "$v" ] || die "$dir was set up with $k=$v, not $cur: use another DIR or drop the flag"
          printf -v "$k" '%s' "$v"
          ;;
      esac
    done <"$dir/ports.env"
  fi
  for k in KAFKA_PORT KAFKA_CONTROLLER_PORT CLICKHOUSE_PORT CLICKHOUSE_TCP_PORT; do
    local v=${!k:-}
    if [ -z "$v" ]; then
      v=$(free_port)
      printf -v "$k" '%s' "$v"
    fi
    [[ $v =~ ^[0-9]+$ ]] && ((v > 0 && v < 65536)) || die "$k=$v is not a port"
    picked+="$v "
  done
  umask 077
  printf 'KAFKA_PORT=%s\nKAFKA_CONTROLLER_PORT=%s\nCLICKHOUSE_PORT=%s\nCLICKHOUSE_TCP_PORT=%s\n' \
    "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$CLICKHOUSE_PORT" "$CLICKHOUSE_TCP_PORT" >"$dir/ports.env"
}

kafka_up() {
  local k=$dir/kafka
  PIDFILE=$k/pid
  if alive "$PIDFILE"; then
    log "kafka already runs (pid $(cat "$PIDFILE"))"
    return 0
  fi
  check_java
  fetch_kafka
  mkdir -p "$k/data"
  chmod 700 "$k" "$k/data"
  cat >"$k/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$k/data
num.partitions=4
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
background.threads=2
log.retention.hours=24
log.segment.bytes=67108864
EOF
  cat >"$k/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $k/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = FILE
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
EOF
  local cp="$libs/*"
  local jopts=(-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:ActiveProcessorCount=2 -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$k/log4j2.properties")
  if [ ! -f "$k/data/meta.properties" ]; then
    local id
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    # --cluster-id=ID, not -t ID: a base64url id may start with "-", which argparse4j would read as an option
    java -Xmx128m "${jopts[@]}" -cp "$cp" kafka.tools.StorageTool format --cluster-id="$id" -c "$k/server.properties" \
      >"$k/format.log" 2>&1 || { cat "$k/format.log" >&2; die "formatting Kafka's log directory failed"; }
  fi
  : >"$k/server.log"
  # shellcheck disable=SC2086
  launch "$PIDFILE" "$k/stdout.log" "$k" java $KAFKA_HEAP "${jopts[@]}" -cp "$cp" kafka.Kafka "$k/server.properties"
  kafka_ready() {
    grep -q "Kafka Server started" "$k/server.log" 2>/dev/null && ! port_free "$KAFKA_PORT"
  }
  if ! wait_for kafka kafka_ready; then
    tail -n 20 "$k/server.log" "$k/stdout.log" >&2 || true
    die "kafka did not start (logs in $k)"
  fi
  log "kafka $KAFKA_VERSION runs (pid $(cat "$PIDFILE")) on 127.0.0.1:$KAFKA_PORT"
}

ch_binary() {
  local b
  for b in /usr/sbin/clickhouse-server /usr/bin/clickhouse-server; do
    [ -x "$b" ] && { echo "$b"; return 0; }
  done
  die "clickhouse-server is not installed: apt-get install clickhouse-server (or scripts/deps.sh fleet)"
}

# ch_ping asks ClickHouse's HTTP interface for /ping with bash alone.
ch_ping() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$CLICKHOUSE_PORT" || exit 1
    printf 'GET /ping HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    timeout 5 cat <&3
  ) 2>/dev/null | grep -q "Ok."
}

clickhouse_up() {
  local c=$dir/clickhouse
  PIDFILE=$c/pid
  if alive "$PIDFILE"; then
    log "clickhouse already runs (pid $(cat "$PIDFILE"))"
    return 0
  fi
  local bin
  bin=$(ch_binary)
  mkdir -p "$c"/{data,tmp,user_files,format_schemas,log}
  chmod 700 "$c"
  cat >"$c/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$c/log/server.log</log><errorlog>$c/log/error.log</errorlog><size>50M</size><count>2</count></logger>
  <http_port>$CLICKHOUSE_PORT</http_port>
  <tcp_port>$CLICKHOUSE_TCP_PORT</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$c/data/</path>
  <tmp_path>$c/tmp/</tmp_path>
  <user_files_path>$c/user_files/</user_files_path>
  <format_schema_path>$c/format_schemas/</format_schema_path>
  <users_config>$c/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <max_concurrent_queries>32</max_concurrent_queries>
  <background_pool_size>4</background_pool_size>
  <!-- librdkafka settings of every Kafka engine table: a new consumer group
       starts at the oldest record kept, not at the newest -->
  <kafka><auto_offset_reset>smallest</auto_offset_reset></kafka>
</yandex>
EOF
  # stream_flush_interval_ms: how long the Kafka engine gathers a block
  # before it writes it (7.5 s by default): records are queryable sooner.
  cat >"$c/users.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage><max_threads>2</max_threads><stream_flush_interval_ms>2000</stream_flush_interval_ms></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
EOF
  launch "$PIDFILE" "$c/log/stdout.log" "$c" "$bin" --config-file="$c/config.xml"
  if ! wait_for clickhouse ch_ping; then
    tail -n 20 "$c/log/error.log" "$c/log/stdout.log" >&2 || true
    die "clickhouse did not start (logs in $c/log)"
  fi
  log "clickhouse runs (pid $(cat "$PIDFILE")) on 127.0.0.1:$CLICKHOUSE_PORT"
}

stop() { # $1: kafka or clickhouse
  local f=$dir/$1/pid pid
  if ! alive "$f"; then
    rm -f "$f"
    return 0
  fi
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$1 (pid $pid) did not stop in 30s: killing it"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
  fi
  rm -f "$f"
  log "$1 stopped"
}

run_setup() {
  local weir=${WEIR:-}
  if [ -z "$weir" ]; then
    if [ -x "$root/bin/weir" ]; then
      weir=$root/bin/weir
    else
      weir="go run $root/cmd/weir"
    fi
  fi
  # shellcheck disable=SC2086
  (cd "$root" && $weir clickhouse setup --url "http://127.0.0.1:$CLICKHOUSE_PORT" \
    --kafka "127.0.0.1:$KAFKA_PORT" --topic "$TOPIC" --ingest "$INGEST") >&2 || die "weir clickhouse setup failed"
}

cmd=${1:-}
case "$cmd" in
  fetch)
    check_java
    fetch_kafka
    exit 0
    ;;
  up | down | status) ;;
  *) usage ;;
esac
[ $# -ge 2 ] || usage
mkdir -p "$2"
dir=$(cd "$2" && pwd)
shift 2
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kafka-port) KAFKA_PORT=$2; shift ;;
    --controller-port) KAFKA_CONTROLLER_PORT=$2; shift ;;
    --clickhouse-port) CLICKHOUSE_PORT=$2; shift ;;
    --clickhouse-tcp-port) CLICKHOUSE_TCP_PORT=$2; shift ;;
    --only) only=$2; shift ;;
    --topic) TOPIC=$2; shift ;;
    --ingest) INGEST=$2; shift ;;
    --no-setup) SETUP=0 ;;
    kafka | clickhouse) only=$1 ;;
    *) usage ;;
  esac
  shift
done
case "$only" in "" | kafka | clickhouse) ;; *) die "--only takes kafka or clickhouse" ;; esac

case "$cmd" in
  up)
    chmod 700 "$dir"
    load_ports
    [ "$only" = clickhouse ] || kafka_up
    [ "$only" = kafka ] || clickhouse_up
    if [ "$SETUP" = 1 ] && [ -z "$only" ]; then run_setup; fi
    [ "$only" = clickhouse ] || echo "KAFKA=127.0.0.1:$KAFKA_PORT"
    [ "$only" = kafka ] || echo "CLICKHOUSE=http://127.0.0.1:$CLICKHOUSE_PORT"
    ;;
  down)
    [ "$only" = kafka ] || stop clickhouse
    [ "$only" = clickhouse ] || stop kafka
    ;;
  status)
    for s in kafka clickhouse; do
      if alive "$dir/$s/pid"; then echo "$s: running (pid $(cat "$dir/$s/pid"))"; else echo "$s: stopped"; fi
    done
    ;;
esac
