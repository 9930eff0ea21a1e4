#!/usr/bin/env bash
# Runs the hostile probes of issue 21 against the built weir (bin/weir):
# kill -9 during store writes, a full disk (a 256 KiB tmpfs: root only,
# skipped otherwise), damaged blocks, exporter floods (domains, templates
# from one and from 64 addresses, garbage names and times), slow TLS/TCP
# clients, an ipfix+tls:// export refused, a UDP socket overflow. Traffic
# stays on loopback; every loop is bounded (a few minutes in all, at most
# 10). Prints one table (docs/reliability.md explains it) and exits 1 if
# any case failed.
#
#   scripts/chaos.sh [-only kill9-store,damaged-blocks] [-v] [-keep]
set -euo pipefail
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -o bin/weir ./cmd/weir
go build -o bin/weir-chaos ./internal/tools/chaos
exec timeout --signal=INT --kill-after=30s 600 bin/weir-chaos -weir bin/weir "$@"
