#!/usr/bin/env bash
# Installs what weir's main job and test suite need, idempotently: safe to run
# on every `make run` / `make test`. On a fresh Debian machine run it as root.
#
#   scripts/deps.sh run      # what `make run` needs: Go, its modules, iproute2
#   scripts/deps.sh test     # plus the independent tools tests compare with (tshark, dumpcap, tcpdump, nfdump, softflowd, nft,
#                            # conntrack, iperf3, sockperf, ethtool, chromium), node and npm, and the console's
#                            # node packages (npm ci in web/)
#   scripts/deps.sh bench    # the same as test
#   scripts/deps.sh lint     # golangci-lint (pinned below) built from source into build/bin (test includes it)
#   scripts/deps.sh generate # clang and libbpf headers for `make generate` (the eBPF program)
#   scripts/deps.sh fleet    # the local fleet (scripts/cluster.sh): ClickHouse server, Java and Maven with
#                            # Kafka's jars under build/kafka, chDB in build/venv (test includes it)
set -euo pipefail
profile=${1:-test}
cd "$(dirname "$0")/.."

log() { printf 'deps: %s\n' "$*" >&2; }

# apt_lock_holder prints "PID NAME" of a process holding an apt or dpkg lock
# (apt takes fcntl locks: they show in /proc/locks by inode), or nothing.
apt_lock_holder() {
  local f ino pid
  for f in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock; do
    [ -e "$f" ] || continue
    ino=$(stat -c %i "$f")
    pid=$(awk -v ino="$ino" '$2 != "->" { n = split($6, a, ":"); if (a[n] == ino) { print $5; exit } }' /proc/locks)
    if [ -n "$pid" ]; then
      echo "$pid $(cat "/proc/$pid/comm" 2>/dev/null || echo unknown)"
      return
    fi
  done
}

# apt_get is apt-get that waits up to 10 minutes for the apt/dpkg lock (held
# for minutes by unattended-upgrades on a fresh cloud VM) instead of failing,
# and says so while it waits. DPkg::Lock::Timeout makes install wait for
# dpkg's lock; 'apt-get update' ignores it for the package lists' lock
# (apt 2.6), so the lock is also awaited here before each call.
apt_get() {
  local holder waited=0
  while holder=$(apt_lock_holder) && [ -n "$holder" ]; do
    if ((waited >= 600)); then
      log "the apt/dpkg lock is still held by ${holder#* } (pid ${holder%% *}) after 10 minutes; giving up"
      return 1
    fi
    if ((waited % 30 == 0)); then
      log "waiting for the apt/dpkg lock, held by ${holder#* } (pid ${holder%% *}; unattended-upgrades on a fresh machine can take minutes): ${waited}s of 600s"
    fi
    sleep 2
    waited=$((waited + 2))
  done
  apt-get -o DPkg::Lock::Timeout=600 "$@"
}

if ! command -v go >/dev/null 2>&1; then
  log "Go is not installed. weir needs Go $(sed -n 's/^go //p' go.mod) or newer on PATH."
  exit 1
fi

# Debian packages, by the command each provides.
declare -A pkg_for=(
  [tshark]=tshark          # independent cross-check of per-conversation counts
  [capinfos]=wireshark-common
  [dumpcap]=wireshark-common # independent live capture (libpcap) beside weir's
  [tcpdump]=tcpdump        # libpcap's filter compiler: differential test of internal/pcapfilter
  [ip]=iproute2            # test hosts: network namespaces joined by veth pairs
  [nfcapd]=nfdump          # IPFIX interop: nfdump's collector reads weir's export
  [nfpcapd]=nfdump         # make bench: the live capture peer beside weir
  [softflowd]=softflowd    # IPFIX interop: weir's collector reads a real exporter
  [nfacctd]=pmacct         # IPFIX interop: a collector that ignores RFC 5103 reverse elements (--export ?biflow=off)
  [nft]=nftables           # firewall rules that drop packets in test hosts (eBPF drop attribution)
  [conntrack]=conntrack     # independent listing of the conntrack table (internal/source/conntrack tests)
  [iperf3]=iperf3          # weir bench --calibrate: TCP stream reference beside weir's driver
  [sockperf]=sockperf      # weir bench --calibrate: ping-pong latency reference
  [ethtool]=ethtool        # weir bench --observe: segmentation offloads off, so a packet is a segment
  [chromium]=chromium      # weir bench compare --html and the console's browser test (web/browser_test.go), headless
  [node]=nodejs            # the console's build (make web) and its browser test (playwright-core)
  [npm]=npm
  [zstd]=zstd              # compressed captures: the zstd tool writes what weir capture --read decompresses
  [groff]=groff-base       # the man pages weir generates render without a warning (internal/clidoc)
  [zsh]=zsh                # weir completion zsh and fish load in the real shells
  [fish]=fish
  [systemd-analyze]=systemd # make install's units pass systemd-analyze verify (deploy)
  [man]=man-db
)
missing=()
fleet_pkgs() { # the local fleet's Debian packages (scripts/cluster.sh, internal/testfleet)
  pkg_for[/usr/sbin/clickhouse-server]=clickhouse-server
  pkg_for[java]=openjdk-17-jre-headless
  pkg_for[mvn]=maven
  pkg_for[python3]=python3
  pkg_for[/usr/share/doc/python3-venv]=python3-venv # ensurepip, which venv needs on Debian
}
# The linter `make lint` runs, pinned: a newer one may find new things and
# fail a build that passed. Built from source (the Go module proxy serves
# it) into build/bin, once per version; a second run only checks it.
golangci_version=v2.15.0
install_golangci() {
  local have
  have=$(build/bin/golangci-lint version --short 2>/dev/null || true)
  if [ "v${have#v}" != "$golangci_version" ]; then
    log "building golangci-lint $golangci_version into build/bin (a few minutes, once)"
    GOBIN="$PWD/build/bin" GOFLAGS= go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$golangci_version"
  fi
}

case "$profile" in
  lint) install_golangci; log "ok"; exit 0 ;;
  run) pkg_for=([ip]=iproute2) ;; # the default-route interface
  bench) pkg_for[/usr/bin/time]=time # CPU time of the peers make bench runs
    pkg_for[/usr/share/doc/python3-venv]=python3-venv ;; # DuckDB's virtualenv (below)
  generate) pkg_for=([clang]=clang [llvm-strip]=llvm [/usr/include/bpf/bpf_helpers.h]=libbpf-dev [/usr/include/linux/bpf.h]=linux-libc-dev) ;;
  fleet) pkg_for=() && fleet_pkgs ;;
  test) fleet_pkgs ;;
  *) log "unknown profile $profile (run, test, lint, bench, generate, fleet)"; exit 2 ;;
esac
for cmd in "${!pkg_for[@]}"; do
  if [[ $cmd == /* ]]; then # a file the package provides
    [ -e "$cmd" ] || missing+=("${pkg_for[$cmd]}")
  else
    PATH=$PATH:/usr/sbin command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkg_for[$cmd]}")
  fi
done

if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    log "missing: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture: answer no.
  echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
  log "installing ${missing[*]}"
  for try in 1 2 3; do
    if apt_get update -qq && apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
      break
    fi
    [ "$try" = 3 ] && { log "apt-get failed three times"; exit 1; }
    sleep $((try * 5))
  done
fi

go mod download
[ "$profile" = test ] && install_golangci
# deploy/kubernetes is its own module (the Kubernetes API types its manifest test decodes with)
if [ "$profile" = test ]; then (cd deploy/kubernetes && go mod download); fi

if [ "$profile" = test ] || [ "$profile" = fleet ]; then
  # Kafka's jars (once; offline after) and chDB, current ClickHouse
  # in-process, for the tests of internal/clickhouse.
  scripts/cluster.sh fetch
  if ! build/venv/bin/python -c 'import chdb' >/dev/null 2>&1; then
    log "installing chdb into build/venv"
    python3 -m venv build/venv
    build/venv/bin/pip install -q chdb
  fi
fi

# DuckDB from PyPI, the query engine make bench runs beside weir's on the
# same generated rows (weir bench gendb --csv).
if [ "$profile" = bench ] && ! build/venv/bin/python -c 'import duckdb' >/dev/null 2>&1; then
  log "installing duckdb into build/venv"
  python3 -m venv build/venv
  build/venv/bin/pip install -q duckdb
fi

# The console's node packages (esbuild, TypeScript, playwright-core; never a
# browser download: the test drives Debian's Chromium). npm ci only when
# package-lock.json changed since the last install.
if [ "$profile" = test ] || [ "$profile" = bench ]; then
  lock_sum=$(sha256sum web/package-lock.json | cut -d' ' -f1)
  if [ "$(cat web/node_modules/.weir-lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
    log "npm ci in web/"
    (cd web && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$lock_sum" > web/node_modules/.weir-lock-sha256
  fi
fi
log "ok"
