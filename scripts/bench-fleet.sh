#!/usr/bin/env bash
# make bench's fleet section (issue 24): the Kafka sink's producer path, and
# on a real broker and ClickHouse server (scripts/cluster.sh, started here
# and stopped at the end) throughput, ingest, the broker-restart test, the
# collector tier beside GoFlow2 and weir query --clickhouse beside the
# embedded store. Skips what it cannot run, saying why.
#
#   scripts/bench-fleet.sh [count]
# Environment:
#   WEIR_BENCH_GOFLOW2=/path/to/goflow2   a GoFlow2 binary built elsewhere (this
#                                         repo never builds it); without it the
#                                         collector comparison is skipped
#   WEIR_BENCH_FLEET_DAYS=N               days of the gendb week loaded into
#                                         ClickHouse for the query comparison
#                                         (default 7: all 10.08M rows)
#   WEIR_INGEST_RATE, WEIR_INGEST_SECONDS BenchmarkIngest's paces ("200000 5000": one run each) and length (15)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
out=build/bench
mkdir -p "$out"
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "== Kafka sink: the producer path per record (BenchmarkProduce: encode, key, hand to franz-go's batch; no network);"
echo "   goal <= 1 us CPU (cpu-ns/op) and 0 allocs per record; load $(load)"
go test -run '^$' -bench 'BenchmarkProduce' -benchmem -count "$count" ./internal/sink/kafka >"$out/kafka-produce.txt"
go run ./internal/tools/benchsum "$out/kafka-produce.txt"

dir=$out/fleet
why=""
command -v java >/dev/null || why+="java is not installed; "
command -v mvn >/dev/null || compgen -G "build/kafka/*/libs/.complete" >/dev/null || why+="mvn is not installed and no Kafka jars are cached; "
PATH=$PATH:/usr/sbin command -v clickhouse-server >/dev/null || why+="the clickhouse-server package is not installed; "
if [ -n "$why" ]; then
  echo
  echo "== fleet: skipped: $why (scripts/deps.sh fleet installs Java, mvn and clickhouse-server)"
  exit 0
fi
rm -rf "$dir"
if ! addrs=$(scripts/cluster.sh up "$dir" --ingest kafka 2>"$out/cluster.err"); then
  echo
  echo "== fleet: skipped: scripts/cluster.sh up failed: $(tail -1 "$out/cluster.err")"
  scripts/cluster.sh down "$dir" >/dev/null 2>&1 || true
  exit 0
fi
trap 'scripts/cluster.sh down "$dir" >/dev/null 2>&1 || true' EXIT
kafka=$(sed -n 's/^KAFKA=//p' <<<"$addrs")
ch=$(sed -n 's/^CLICKHOUSE=//p' <<<"$addrs")
export WEIR_FLEET=$PWD/$dir

echo
echo "== Kafka: throughput from one sink to the local broker (BenchmarkBroker: 2M records, acks=all, zstd, 4 partitions,"
echo "   counted when the broker acknowledges them); goal >= 300k records/s; load $(load)"
go test -run '^$' -bench 'BenchmarkBroker' -benchtime 2000000x -count 3 ./internal/sink/kafka >"$out/kafka-broker.txt"
go run ./internal/tools/benchsum "$out/kafka-broker.txt"

echo
echo "== ClickHouse ingest: Kafka engine + materialized views of 'weir clickhouse setup' (BenchmarkIngest, 15 s paced at"
echo "   the goal's 200k records/s, then at 5k records/s, below this machine's capacity: the pipeline's own latency);"
echo "   goal >= 200k records/s, p99 emission -> queryable <= 10 s"
: >"$out/ingest.txt"
for rate in ${WEIR_INGEST_RATE:-200000 5000}; do
  echo "rate $rate: load $(load)"
  WEIR_INGEST_RATE=$rate go test -run '^$' -bench 'BenchmarkIngest' -benchtime 1x -count 1 -timeout 30m ./internal/clickhouse |
    sed "s/^BenchmarkIngest/BenchmarkIngest\/rate=$rate/" >>"$out/ingest.txt"
done
go run ./internal/tools/benchsum "$out/ingest.txt"

echo
echo "== Kafka broker restart mid-stream (TestBrokerRestart: SIGTERM and SIGKILL); goal 0 loss; load $(load)"
go test -run 'TestBrokerRestart' -v -count 1 -timeout 20m ./internal/sink/kafka 2>&1 | grep -E 'broker_test|^(---|ok|FAIL)' | sed 's/^ *//'

echo
echo "== collector tier: weir collect and GoFlow2, IPFIX over loopback UDP into Kafka, same datagrams at once; load $(load)"
if [ -n "${WEIR_BENCH_GOFLOW2:-}" ] && [ -x "$WEIR_BENCH_GOFLOW2" ]; then
  scripts/bench-collectors.sh "$kafka" "$WEIR_BENCH_GOFLOW2" | tee "$out/collectors.txt"
else
  echo "skipped: set WEIR_BENCH_GOFLOW2 to a GoFlow2 binary built elsewhere (go install github.com/netsampler/goflow2/v2/cmd/goflow2@latest into /tmp)"
fi

echo
days=${WEIR_BENCH_FLEET_DAYS:-7}
echo "== weir query --clickhouse beside the embedded store: the gendb week's first $days day(s), loaded with weir export into"
echo "   Kafka and ClickHouse's Kafka engine; median wall of 3 runs each, answers compared as CSV; load $(load)"
week=$out/gendb-week-fleet
rm -rf "$week"
bin/weir bench gendb --data-dir "$week" >/dev/null
from=2026-01-01 to=$(date -u -d "2026-01-01 + $days days" +%F)
t0=$(date +%s.%N)
bin/weir export -d "$week" -f "$from" -t "$to" --export "kafka://$kafka/weir-flows?format=row" >/dev/null 2>"$out/export.err"
want=$(bin/weir query -d "$week" -f "$from" -t "$to" -n 0 -o csv time --resolution 24h | awk -F, 'NR > 1 { n += $2 } END { print n }')
for _ in $(seq 1 1800); do
  n=$(curl -s "$ch" --data-binary 'SELECT count() FROM weir.flows')
  [ "$n" -ge "$want" ] && break
  sleep 1
done
t1=$(date +%s.%N)
echo "loaded $n of $want rows in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f s (%.0f rows/s, export and ingest)", b - a, '"$want"' / (b - a) }')"
qtime() { # median wall seconds and the largest max RSS of 3 runs of weir query "$@"
  for i in 1 2 3; do /usr/bin/time -f '%e %M' bin/weir query "$@" 2>&1 >/dev/null | tail -1; done |
    sort -n | awk '{w[NR] = $1; if ($2 > m) m = $2} END {printf "%6.2f s %5.0f MiB", w[2], m / 1024}'
}
printf '%-26s %-20s %-20s %s\n' shape embedded clickhouse answers
for q in "sip" "sip,dip" "sip,dip,dport,proto" "sip,dip dport = 443"; do
  # shellcheck disable=SC2086 # the words are the query's arguments
  {
    e=$(qtime -d "$week" -f "$from" -t "$to" $q)
    c=$(qtime --clickhouse "$ch" -f "$from" -t "$to" $q)
    bin/weir query -d "$week" -f "$from" -t "$to" -o csv $q >"$out/q-embedded.csv"
    bin/weir query --clickhouse "$ch" -f "$from" -t "$to" -o csv $q >"$out/q-clickhouse.csv"
  }
  if cmp -s "$out/q-embedded.csv" "$out/q-clickhouse.csv"; then same=equal; else same="DIFFER (diff $out/q-*.csv)"; fi
  printf '%-26s %-20s %-20s %s\n' "$q" "$e" "$c" "$same"
done
rm -rf "$week"
