#!/usr/bin/env bash
# Regenerates tests/data/traces/ddp_gloo: PyTorch profiler traces of a small DDP job on CPU with
# Gloo (bench/traces/ddp_trace.py), one rank and two ranks, 5 profiled steps each, trimmed and
# gzipped by bench/traces/trim_trace.py. Needs bench/traces/setup.sh's environment. Then
# ddp_gloo_legacy beside it: the same job under Debian's python3-torch (1.13, built without
# Kineto, so its profiler writes the legacy format; gzipped whole). The traces are
# measurements: regenerating them changes their numbers, and the tests that quote figures read
# them from the traces themselves.
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
legacy=$(dirname "$out")/ddp_gloo_legacy
mkdir -p "$legacy/one_rank" "$legacy/two_ranks"
/usr/bin/python3 "$here/ddp_trace.py" "$raw/legacy-one" --ranks 1 --steps 5 --threads 1
/usr/bin/python3 "$here/ddp_trace.py" "$raw/legacy-two" --ranks 2 --steps 5 --threads 1
gzip -9 -c "$raw/legacy-one/rank-0.pt.trace.json" > "$legacy/one_rank/rank-0.json.gz"
for r in 0 1; do
  gzip -9 -c "$raw/legacy-two/rank-$r.pt.trace.json" > "$legacy/two_ranks/rank-$r.json.gz"
done
