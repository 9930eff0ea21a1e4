#!/usr/bin/env bash
# The collector tier side by side (issue 24): one paced IPFIX stream over
# loopback UDP, every datagram sent to both `weir collect --export kafka://`
# and GoFlow2 (-transport kafka, protobuf, zstd, hashing) at once, each
# producing to its own topic on the same broker. Per rate: CPU per record
# of each process (utime+stime from /proc/PID/stat, from just before the
# load until their topics stop growing), records in Kafka against records
# sent, and the kernel's drops on each UDP socket (/proc/net/udp).
#
#   scripts/bench-collectors.sh BROKER GOFLOW2 [RATES] [SECONDS]
#     BROKER   host:port of a running broker (scripts/cluster.sh up)
#     GOFLOW2  a GoFlow2 binary built elsewhere (this repo never builds it)
#     RATES    records/s, comma-separated (default 50000,200000,500000)
#     SECONDS  per rate (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
broker=$1 goflow2=$2 rates=${3:-50000,200000,500000} secs=${4:-10}
out=build/bench/collectors
mkdir -p "$out"
go build -o "$out/ipfixload" ./internal/tools/ipfixload
weir=bin/weir
hz=$(getconf CLK_TCK)

cpu_s() { # CPU seconds (user+system) of pid $1 so far
  awk -v hz="$hz" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' "/proc/$1/stat"
}
udp_drops() { # the kernel's drops on the UDP socket bound to 127.0.0.1:$1
  awk -v p="$(printf '0100007F:%04X' "$1")" '$2 == p { s += $NF; f = 1 } END { print f ? s : "?" }' /proc/net/udp # summed: weir opens a socket per worker (SO_REUSEPORT)
}
count() { "$out/ipfixload" count -brokers "$broker" "$@"; }

printf '%-9s %-7s %10s %10s %10s %9s %8s %12s %6s\n' rate tool sent in-kafka lost lost-% drops cpu-ns/rec load
run=0
for rate in ${rates//,/ }; do
  run=$((run + 1))
  tw=weir-bench-$$-$run tg=goflow2-bench-$$-$run
  "$out/ipfixload" topics -brokers "$broker" "$tw" "$tg" >/dev/null
  pw=$((24000 + RANDOM % 4000)) pg=$((28000 + RANDOM % 4000)) pm=$((32000 + RANDOM % 1000))
  "$weir" collect --listen "udp://127.0.0.1:$pw" --export "kafka://$broker/$tw" --data-dir off -o none \
    --metrics-addr off --stats >"$out/weir-$rate.out" 2>"$out/weir-$rate.err" &
  wpid=$!
  "$goflow2" -listen "netflow://127.0.0.1:$pg" -format bin -transport kafka -transport.kafka.brokers "$broker" \
    -transport.kafka.topic "$tg" -transport.kafka.compression zstd -transport.kafka.hashing \
    -addr "127.0.0.1:$pm" >"$out/goflow2-$rate.out" 2>"$out/goflow2-$rate.err" &
  gpid=$!
  sleep 3 # both listening and connected to the broker
  w0=$(cpu_s $wpid) g0=$(cpu_s $gpid) load=$(cut -d' ' -f1 /proc/loadavg)
  sent=$("$out/ipfixload" send -to "127.0.0.1:$pw,127.0.0.1:$pg" -rate "$rate" -duration "${secs}s" | tee "$out/send-$rate.txt" | awk '/^sent/ { print $2 }')
  # Wait until both topics stop growing for 8 s (GoFlow2 flushes every 5 s), at most 120 s.
  prev="" same=0
  for _ in $(seq 1 60); do
    sleep 2
    cur=$(count "$tw" "$tg" | tr '\n' ' ')
    if [ "$cur" = "$prev" ]; then same=$((same + 1)); else same=0; fi
    [ $same -ge 4 ] && break
    prev=$cur
  done
  w1=$(cpu_s $wpid) g1=$(cpu_s $gpid) dw=$(udp_drops $pw) dg=$(udp_drops $pg)
  kill -TERM $wpid $gpid
  wait $wpid $gpid 2>/dev/null || true
  read -r _ nw < <(count "$tw")
  read -r _ ng < <(count "$tg")
  for t in weir goflow2; do
    if [ $t = weir ]; then n=$nw c0=$w0 c1=$w1 d=$dw; else n=$ng c0=$g0 c1=$g1 d=$dg; fi
    awk -v r="$rate" -v t=$t -v s="$sent" -v n="$n" -v c0="$c0" -v c1="$c1" -v d="$d" -v l="$load" 'BEGIN {
      printf "%-9s %-7s %10d %10d %10d %8.2f%% %8s %12.0f %6s\n", r, t, s, n, s - n, 100 * (s - n) / s, d, (c1 - c0) * 1e9 / s, l }'
  done
  awk -v w0="$w0" -v w1="$w1" -v g0="$g0" -v g1="$g1" -v r="$rate" 'BEGIN { if (w1 > w0) printf "%-9s ratio goflow2/weir CPU: %.1fx\n", r, (g1 - g0) / (w1 - w0) }'
done
