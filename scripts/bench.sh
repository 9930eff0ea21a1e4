#!/usr/bin/env bash
# make bench: weir's headline numbers, each from a benchmark in the repo.
#   scripts/bench.sh [count]     # count = runs per Go benchmark (median reported)
# Raw outputs stay in build/bench/ for benchstat comparisons.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
out=build/bench
mkdir -p "$out"
export PATH=$PATH:/usr/sbin
TIMEFORMAT='%R %U %S'

echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   caches: $(lscpu | sed -n 's/^\(L[123][di]* cache\): *\(.*\)/\1 \2/p' | paste -sd';' | sed 's/;/; /g')"
echo "   kernel: $(uname -r) ($(uname -m)); $(date -u '+%Y-%m-%d %H:%M UTC')"

echo "== Go benchmarks (median of $count runs; raw output in $out/*.txt)"
go test -run '^$' -bench 'BenchmarkDecode' -benchmem -count "$count" ./internal/packet >"$out/packet.txt"
go test -run '^$' -bench 'BenchmarkUpdate|BenchmarkExpire|BenchmarkMemoryLatency' -benchmem -count "$count" ./internal/flow >"$out/flow.txt"
go test -run '^$' -bench . -benchmem -count "$count" -benchtime 2000000x ./internal/meter >"$out/pipeline.txt"
go test -run '^$' -bench . -benchmem -count "$count" ./internal/source/pcap ./internal/format >"$out/io.txt"
go test -run '^$' -bench 'BenchmarkAdd' -benchmem -count "$count" ./internal/ipfix >"$out/ipfix.txt"
go test -run '^$' -bench 'BenchmarkAntreaCycle|BenchmarkUDPFloor' -benchmem -count "$count" -benchtime 100x ./internal/sink/ipfix >>"$out/ipfix.txt"
go test -run '^$' -bench 'BenchmarkAntreaRun' -benchmem -count "$count" -benchtime 10x ./internal/sink/ipfix >>"$out/ipfix.txt"
go test -run '^$' -bench 'BenchmarkQuery' -benchmem -count "$count" -benchtime 3x ./internal/query >"$out/query.txt"
go test -run '^$' -bench 'BenchmarkEncodeBlock|BenchmarkReadBlock|BenchmarkAggregate' -benchmem -count "$count" ./internal/store >"$out/store.txt"
go run ./internal/tools/benchsum "$out"/packet.txt "$out"/flow.txt "$out"/pipeline.txt "$out"/io.txt "$out"/query.txt "$out"/store.txt "$out"/ipfix.txt

echo
echo "== memory: weir's resident set replaying a capture whose flows fill --max-flows (all live at once)"
for n in 100000 1000000; do
  f=$out/flows-$n.pcap
  [ -f "$f" ] || go run ./internal/tools/mksample -o "$f" -flows $n -packets $((n * 3)) 2>/dev/null
  line=$(bin/weir capture --read "$f" --max-flows=$n -o none --data-dir off --stats 2>&1 | grep '^memory')
  echo "max-flows $n: ${line#memory      }"
done

echo
echo "== side by side: replay of one pcap file (10k flows, 1M packets, 96-byte snap length)"
pcapfile=$out/replay-10k.pcap
[ -f "$pcapfile" ] || go run ./internal/tools/mksample -o "$pcapfile" -flows 10000 -packets 1000000
cpu() { # prints the median user+sys seconds of 3 runs of "$@"
  for i in 1 2 3; do { time timeout 120 "$@" >/dev/null 2>&1; } 2>&1 | awk '{printf "%.3f\n", $2 + $3}'; done | sort -n | sed -n 2p
}
# softflowd_cpu FILE: user+sys seconds softflowd spends on FILE. softflowd
# 1.1.0 -r never exits when its control socket (-c) is a path with a
# directory in it, so it runs in its own directory with relative -p and -c;
# the timeout stays as a guard. time(1) reports the CPU it used, its final
# flush included.
softflowd_cpu() {
  local dir file
  dir=$(mktemp -d)
  file=$(realpath "$1")
  (cd "$dir" && /usr/bin/time -f '%U %S' -o time timeout 15 softflowd -r "$file" -n 127.0.0.1:9 -v 10 -b -6 -m 20000 -d \
    -p pid -c ctl >/dev/null 2>&1) || true
  awk 'END {printf "%.3f\n", $1 + $2}' "$dir/time"
  rm -rf "$dir"
}

w=$(cpu bin/weir capture --read "$pcapfile" --max-flows=20000 -o none --data-dir off)
echo "weir capture --read:         ${w}s CPU ($(awk -v s="$w" 'BEGIN{printf "%.0f", s*1e9/1e6}') ns/packet)"
# softflowd exports IPFIX to the discard port on loopback: nothing listens,
# nothing leaves the host.
if command -v softflowd >/dev/null; then
  s=$(for i in 1 2 3; do softflowd_cpu "$pcapfile"; done | sort -n | sed -n 2p)
  if awk -v s="$s" 'BEGIN { exit !(s < 0.05) }'; then
    # It did not read the file (or timed out): no number, no ratio.
    echo "softflowd -r (Debian peer):  did not process the file this run (median ${s}s CPU); no ratio"
  else
    echo "softflowd -r (Debian peer):  ${s}s CPU ($(awk -v s="$s" 'BEGIN{printf "%.0f", s*1e9/1e6}') ns/packet)"
    awk -v a="$s" -v b="$w" 'BEGIN{ if (b > 0) printf "ratio softflowd/weir:        %.1fx\n", a/b }'
  fi
else
  echo "softflowd not installed (scripts/deps.sh bench installs it)"
fi

echo
echo "== live capture: CPU per packet under a fixed load between test hosts (1M UDP datagrams of 64 bytes at 150k/s,"
echo "   256 and 50k flows); weir (bin/weir, --filter udp), nfpcapd and softflowd (Debian, same filter) capture the same"
echo "   veth at the same time; goal weir/nfpcapd <= 0.8, 0 kernel drops, 0 missed"
if [ "$(id -u)" = 0 ]; then
  go test -run '^$' -bench 'BenchmarkLiveCapture' -benchtime 1x -count 3 -timeout 30m ./internal/source/afpacket >"$out/live.txt"
  go run ./internal/tools/benchsum "$out"/live.txt
else
  echo "skipped: needs root for the test hosts"
fi

echo
echo "== eBPF source: kernel cost per packet (BPF run-time stats; noop = an empty program: the accounting's own floor),"
echo "   drain of 10k/100k entries (swap = RCU grace period, drain = lookup-and-delete + flow table), memory,"
echo "   CPU per million packets (weir-cpu-ms/Mpkt: process CPU with the source minus without)"
if [ "$(id -u)" = 0 ]; then
  go test -run '^$' -bench 'BenchmarkKernel' -benchtime 200000x -count "$count" ./internal/source/ebpf >"$out/kflow.txt"
  go test -run '^$' -bench 'BenchmarkEvict|BenchmarkRSS' -benchmem -benchtime 5x -count "$count" ./internal/source/ebpf >>"$out/kflow.txt"
  go test -run '^$' -bench 'BenchmarkMapDesign' -benchtime 200000x -count "$count" ./internal/source/ebpf >>"$out/kflow.txt"
  go test -run '^$' -bench 'BenchmarkMapDrain' -benchmem -benchtime 5x -count "$count" ./internal/source/ebpf >>"$out/kflow.txt"
  go test -run '^$' -bench 'BenchmarkCPU' -benchtime 1000000x -count "$count" ./internal/source/ebpf >>"$out/kflow.txt"
  go run ./internal/tools/benchsum "$out"/kflow.txt
  line=$(bin/weir capture --source ebpf -i lo --ebpf-max-flows 100000 --duration 3s -o none --data-dir off --metrics-addr off --stats 2>&1 | grep '^memory')
  echo "weir capture --source ebpf --ebpf-max-flows 100000, idle: ${line#memory      }"
else
  echo "skipped: needs root for the test hosts and eBPF"
fi

echo
echo "== conntrack source: decode one ctnetlink message (1,000 real entries replayed), dump 10k entries (root),"
echo "   Antrea-shaped poll (10k connections, 1k new, 1k gone) and export (20k, 2k dying) of the connection store;"
echo "   NFLOG: one deny message decoded and aggregated, a 20k deny-flow export cycle (2k idle)"
go test -run '^$' -bench 'BenchmarkDecode|BenchmarkDump|BenchmarkPoll$|BenchmarkPollStore|BenchmarkExport$' -benchmem -count "$count" ./internal/source/conntrack >"$out/conntrack.txt"
go test -run '^$' -bench . -benchmem -count "$count" ./internal/source/nflog >>"$out/conntrack.txt"
go run ./internal/tools/benchsum "$out"/conntrack.txt

echo
echo "== services (issue 8): OVN lb-group-stress on the service model, M = 3,000 load balancers; goal at 120 nodes:"
echo "   last add <= 1 ms, RSS <= 200 MB; with groups rows and recompute stay flat in N, without they grow as N x M"
bin/weir bench lbstress --nodes 20,120,250,500 --lbs 3000 | tee "$out/lbstress.txt"
go test -run '^$' -bench 'BenchmarkAddLB|BenchmarkRecompute' -benchmem -count "$count" ./internal/enrich/services >"$out/services.txt"
go run ./internal/tools/benchsum "$out"/services.txt

echo
echo "== store and query: 10.08M rows (weir bench gendb: 7 days x 288 blocks x 5,000 flows), warm cache, top 10 by bytes;"
echo "   DuckDB (PyPI, build/venv) on the same rows (gendb --csv loaded into a DuckDB file), 4 runs each, the order turning each round;"
echo "   CPU = user+sys seconds of the whole process (median of 4), RSS = largest max RSS; goal weir/DuckDB CPU <= 1, RSS <= 0.5"
dir=$out/gendb-week
rm -rf "$dir" "$dir.csv" "$dir.duckdb"
bin/weir bench gendb --data-dir "$dir" --csv "$dir.csv"
bin/weir query -d "$dir" sip >/dev/null # warm the page cache
duck=build/venv/bin/python
if ! $duck -c 'import duckdb' 2>/dev/null; then
  duck= && echo "DuckDB not installed (scripts/deps.sh bench installs it into build/venv): weir alone"
else
  $duck scripts/duckdb-query.py load "$dir.csv" "$dir.duckdb"
  echo "DuckDB $($duck -c 'import duckdb; print(duckdb.__version__)'): its CPU is from opening the database to the last row (not"
  echo "   the interpreter's start and import); its RSS includes the interpreter and the library, $(
    /usr/bin/time -f '%M' $duck -c 'import duckdb' 2>&1 | awk '{printf "%.0f", $1 / 1024}') MiB after the import alone"
fi
rm -f "$dir.csv"
# cpurss CMD...: runs CMD, prints "CPU-seconds max-RSS-KiB" (stdout to $out/answer); the
# CPU is the command's own "cpu S" line on stderr when it prints one, else time(1)'s
cpurss() {
  /usr/bin/time -f 'time %U %S %M' "$@" 2>&1 >"$out/answer" |
    awk '$1 == "cpu" {c = $2} $1 == "time" {if (c == "") c = $2 + $3; m = $4} END {printf "%.3f %d\n", c, m}'
}
printf "%-22s %10s %9s %10s %9s %7s %7s  %s\n" query "weir CPU" "weir RSS" "DuckDB CPU" "DuckDB RSS" "CPU x" "RSS x" "answers"
for q in "sip" "sip,dip" "sip,dip,dport,proto" "sip,dip|dport = 443|dst_port = 443"; do
  IFS='|' read -r group wcond dcond <<<"$q"
  : >"$out/w.txt" && : >"$out/d.txt"
  # The order turns every round: on a VM the run right after a large one pays
  # for faulting in the pages the host took back (up to a second of sys time).
  for order in "w d" "d w" "w d" "d w"; do
    for who in $order; do
      if [ "$who" = w ]; then
        # shellcheck disable=SC2086 # the words are the query's arguments
        cpurss bin/weir query -d "$dir" -o csv -n 10 "$group" $wcond >>"$out/w.txt"
        cp "$out/answer" "$out/w.csv"
      elif [ -n "$duck" ]; then
        cpurss $duck scripts/duckdb-query.py query "$dir.duckdb" "$group" "$dcond" >>"$out/d.txt"
        cp "$out/answer" "$out/d.csv"
      fi
    done
  done
  med() { sort -n "$1" | cut -d' ' -f1 | awk '{v[NR] = $1} END {print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2}'; }
  rss() { sort -k2 -n "$1" | tail -1 | awk '{printf "%.0f", $2 / 1024}'; }
  w=$(med "$out/w.txt") && wm=$(rss "$out/w.txt")
  if [ -n "$duck" ]; then
    d=$(med "$out/d.txt") && dm=$(rss "$out/d.txt")
    same=differ && cmp -s "$out/w.csv" "$out/d.csv" && same=same
    printf "%-22s %9.2fs %5d MiB %9.2fs %5d MiB %7.2f %7.2f  %s\n" "$group${wcond:+ $wcond}" "$w" "$wm" "$d" "$dm" \
      "$(awk -v a="$w" -v b="$d" 'BEGIN{print a/b}')" "$(awk -v a="$wm" -v b="$dm" 'BEGIN{print a/b}')" "$same"
  else
    printf "%-22s %9.2fs %5d MiB\n" "$group${wcond:+ $wcond}" "$w" "$wm"
  fi
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
# A tail client: the bloom filters rule out most blocks.
printf "%-22s %s\n" "sip,dip sip = 10.0.62.253" "$(bin/weir query -d "$dir" sip,dip sip = 10.0.62.253 | tail -1)"
rm -rf "$dir" "$dir.duckdb"

echo
echo "== console and API (issue 25): weir serve on one gendb day (1.44M rows, seed 1), from outside the process:"
echo "   top 10 over the day (goal: p50 <= 150 ms), 20 requests; the console's first visit in Chromium, 10 loads"
echo "   (first useful paint = top-N table and chart drawn; goal: <= 1 s). load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench 'ConsoleDay/api' -benchtime 20x -count 1 ./web >"$out/console.txt"
go test -run '^$' -bench 'ConsoleDay/page' -benchtime 10x -count 1 ./web >>"$out/console.txt"
grep -E '^Benchmark' "$out/console.txt" | sed -E 's/[[:space:]]+0 ns\/op//; s/^BenchmarkConsoleDay\///; s/-[0-9]+ / /'
echo "   load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== traffic driver (issue 9): weir bench run --calibrate, 3 runs; iperf3 TCP stream and sockperf UDP ping-pong"
echo "   on the same test hosts in the same run, weir's driver in their shapes beside them; goal: within 10%"
go test -run '^$' -bench 'BenchmarkLoopback' -benchmem -count "$count" ./internal/bench/engine >"$out/bench-engine.txt"
go run ./internal/tools/benchsum "$out"/bench-engine.txt
prof=$out/calibrate-stream.yaml
sed 's/duration: 10s/duration: 1s/' examples/bench/stream.yaml >"$prof"
for i in 1 2 3; do
  bin/weir bench run --calibrate --calibrate-time 3s --json "$out/calibrate-$i.json" "$prof" 2>/dev/null |
    sed -n '/^Calibration/,/p99 RTT/p' | tee "$out/calibrate-$i.txt" | grep -E 'iperf3|avg RTT'
done

echo
echo "== fleet (issue 24): Kafka sink, broker, ClickHouse ingest, broker restart, collectors beside GoFlow2,"
echo "   weir query --clickhouse beside the store (scripts/bench-fleet.sh; starts and stops scripts/cluster.sh)"
scripts/bench-fleet.sh "$count"
