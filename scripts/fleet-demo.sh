#!/usr/bin/env bash
# make fleet-demo: three test hosts, one weir agent each, one Kafka broker and
# one ClickHouse server, and one query that answers for all three.
#
#   scripts/fleet-demo.sh [DIR]     (root; DIR default build/fleet-demo)
#
# The test hosts are network namespaces on a bridge (10.77.0.1-3). Each host's
# agent watches the host's link from the root namespace (the veth's peer, as
# an agent on a node watches its uplink) with --node-name host-a|b|c and
# exports to Kafka on loopback; ClickHouse's Kafka engine ingests the topic
# (scripts/cluster.sh). Traffic goes only between the test hosts; everything
# is bounded in time and removed at exit, the cluster stopped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/fleet-demo}
weir=${WEIR:-$root/bin/weir}
hosts=(a b c)
br=wdemo-br

log() { printf 'fleet-demo: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (it creates network namespaces); run it as root"
[ -x "$weir" ] || die "no weir binary at $weir: run 'make build' (or make fleet-demo)"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "${ingest_pid:-}" ]; then kill "$ingest_pid" 2>/dev/null && wait "$ingest_pid" 2>/dev/null || true; fi
  for h in "${hosts[@]}"; do ip netns del "wdemo-$h" 2>/dev/null || true; done
  ip link del "$br" 2>/dev/null || true
  "$root/scripts/cluster.sh" down "$dir/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup

log "starting Kafka and ClickHouse (scripts/cluster.sh up $dir/cluster)"
env=$(WEIR=$weir "$root/scripts/cluster.sh" up "$dir/cluster" --topic weir-flows)
KAFKA=$(sed -n 's/^KAFKA=//p' <<<"$env")
CLICKHOUSE=$(sed -n 's/^CLICKHOUSE=//p' <<<"$env")
[ -n "$KAFKA" ] && [ -n "$CLICKHOUSE" ] || die "cluster.sh printed no KAFKA=/CLICKHOUSE= lines"

log "weir ingest: the topic into ClickHouse (consumer group weir-ingest)"
"$weir" ingest --kafka "$KAFKA" --topic weir-flows --clickhouse "$CLICKHOUSE" --stats 2>"$dir/ingest.log" &
ingest_pid=$!

log "three test hosts on bridge $br"
ip link add "$br" type bridge
ip link set "$br" up
i=0
for h in "${hosts[@]}"; do
  i=$((i + 1))
  ip netns add "wdemo-$h"
  ip link add "wd-$h" type veth peer name eth0 netns "wdemo-$h"
  ip link set "wd-$h" master "$br" up
  ip -n "wdemo-$h" addr add "10.77.0.$i/24" dev eth0
  ip -n "wdemo-$h" link set eth0 up
  ip -n "wdemo-$h" link set lo up
done

log "one agent per host, exporting to kafka://$KAFKA/weir-flows"
for h in "${hosts[@]}"; do
  "$weir" capture -i "wd-$h" --node-name "host-$h" --data-dir off -o none \
    --idle-timeout 2s --active-timeout 5s --metrics-addr off --duration 40s --stats \
    --export "kafka://$KAFKA/weir-flows" 2>"$dir/agent-$h.log" &
  pids+=($!)
done
# Traffic sent before an agent's ring is open would not be seen: wait for
# each to say it listens (bounded: a loaded machine starts them slowly).
deadline=$((SECONDS + 60))
for h in "${hosts[@]}"; do
  until grep -q 'listening on' "$dir/agent-$h.log" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || die "agent host-$h did not start in 60 s: $(cat "$dir/agent-$h.log")"
    sleep 0.2
  done
done

log "traffic: every host pings the others, a to c carries a bounded TCP transfer"
for h in "${hosts[@]}"; do
  for j in 1 2 3; do
    ip netns exec "wdemo-$h" ping -q -c 5 -i 0.2 -W 1 "10.77.0.$j" >/dev/null 2>&1 || true
  done
done
if command -v iperf3 >/dev/null; then
  ip netns exec wdemo-c timeout 15 iperf3 -s -1 -B 10.77.0.3 >/dev/null 2>&1 &
  sleep 1
  ip netns exec wdemo-a timeout 15 iperf3 -c 10.77.0.3 -n 20M >/dev/null 2>&1 || log "iperf3 failed (the pings are still there)"
fi

log "waiting for the agents to flush and exit (--duration 40s)"
for p in "${pids[@]}"; do wait "$p" || die "an agent failed: $(tail -n 3 "$dir"/agent-*.log)"; done
pids=()
for h in "${hosts[@]}"; do log "agent host-$h: $(grep -i -m1 'kafka' "$dir/agent-$h.log" || echo 'no kafka line in --stats')"; done

log "asking ClickHouse until all three nodes answer (at most 180 s)"
deadline=$((SECONDS + 180))
while :; do
  out=$("$weir" query --clickhouse "$CLICKHOUSE" -f 1h -n 20 node,sip,dip 2>&1) || true
  n=0
  for h in "${hosts[@]}"; do grep -q "host-$h" <<<"$out" && n=$((n + 1)); done
  if [ "$n" = 3 ]; then break; fi
  [ $SECONDS -lt $deadline ] || die "only $n of 3 nodes in ClickHouse after 180 s:
$out"
  sleep 2
done
echo "\$ weir query --clickhouse $CLICKHOUSE -f 1h -n 20 node,sip,dip"
echo "$out"
kill "$ingest_pid" && wait "$ingest_pid" || true
ingest_pid=
log "weir ingest: $(grep -m1 '^ingest:' "$dir/ingest.log" || echo 'no --stats line')"
log "ok: three agents, one query"
