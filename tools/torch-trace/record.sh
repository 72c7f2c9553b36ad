#!/usr/bin/env bash
# Record the tensor allocations of one workload of workloads.py as a compact, gzipped RMM
# replay log. Needs PyTorch for python3 (Debian: python3-torch, python3-torchvision).
#   tools/torch-trace/record.sh NAME [OUT.csv.gz]     (default bench/traces/heldout/NAME.csv.gz)
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: record.sh NAME [OUT.csv.gz]}
out=${2:-bench/traces/heldout/$name.csv.gz}
py=${PYTHON:-python3}
"$py" -c 'import torch' 2>/dev/null || { echo "record.sh: $py cannot import torch" >&2; exit 1; }
make -s recorder
raw=$(mktemp /tmp/gpool-record-XXXXXX.csv)
trap 'rm -f "$raw" "$raw.small"' EXIT
GPOOL_RECORD_OUT=$raw LD_PRELOAD=$PWD/build/tools/gpool-record.so "$py" tools/torch-trace/workloads.py "$name"
python3 tools/torch-trace/compact.py "$raw" "$raw.small"
mkdir -p "$(dirname "$out")"
gzip -9 -n -c "$raw.small" >"$out"
echo "$out: $(($(wc -l <"$raw.small") - 1)) rows"
