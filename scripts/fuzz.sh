#!/usr/bin/env bash
# Runs every fuzz target in the module for a while each. New crashers land in
# the package's testdata/fuzz/<Target>/ and become regression cases that plain
# `go test` replays: commit them with the fix.
#
#   scripts/fuzz.sh 60s
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-60s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | awk '{print $2}'); do
    echo "== $pkg $target for $t"
    go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$t"
  done
done
