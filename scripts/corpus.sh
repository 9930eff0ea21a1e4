#!/usr/bin/env bash
# Checks weir's IP packet and byte totals against tshark's on every capture
# under a corpus directory (see docs/corpus.md for how to build one: this
# script downloads nothing). Prints one table by link type, the mismatched
# files and the link types weir skips; exit 1 if a file weir reads mismatches.
#
#   scripts/corpus.sh /work/corpus-data [--detail] [--jobs N] [--tsv out.tsv]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: scripts/corpus.sh CORPUS_DIR [--detail] [--jobs N] [--tsv FILE]" >&2
  exit 2
fi
dir=$1
shift
for tool in tshark capinfos python3; do
  command -v "$tool" >/dev/null || { echo "corpus: $tool not found (scripts/deps.sh test installs tshark and capinfos)" >&2; exit 2; }
done
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
CGO_ENABLED=0 go build -o "$bin/weir" ./cmd/weir
python3 scripts/corpus.py --weir "$bin/weir" "$@" "$dir"
