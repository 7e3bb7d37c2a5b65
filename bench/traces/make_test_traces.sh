#!/usr/bin/env bash
# Regenerates tests/data/traces/ddp_gloo: PyTorch profiler traces of a small DDP job on CPU with
# Gloo (bench/traces/ddp_trace.py), one rank and two ranks, 5 profiled steps each, trimmed and
# gzipped by bench/traces/trim_trace.py. Needs bench/traces/setup.sh's environment. The traces
# are measurements: regenerating them changes their numbers, and the tests that quote figures
# read them from the traces themselves.
#   bench/traces/make_test_traces.sh [OUT_DIR]   (default tests/data/traces/ddp_gloo)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/tests/data/traces/ddp_gloo}
python=$here/.venv/bin/python
[[ -x $python ]] || { echo "run bench/traces/setup.sh first" >&2; exit 1; }
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
mkdir -p "$out/one_rank" "$out/two_ranks"
"$python" "$here/ddp_trace.py" "$raw/one" --ranks 1 --steps 5 --threads 1
"$python" "$here/ddp_trace.py" "$raw/two" --ranks 2 --steps 5 --threads 1
python3 "$here/trim_trace.py" "$raw/one/rank-0.pt.trace.json" "$out/one_rank/rank-0.pt.trace.json.gz"
for r in 0 1; do
  python3 "$here/trim_trace.py" "$raw/two/rank-$r.pt.trace.json" \
    "$out/two_ranks/rank-$r.pt.trace.json.gz"
done
