#!/bin/bash
# Creates bench/traces/.venv: PyTorch 2.x (to write profiler traces of a DDP job,
# ddp_trace.py) and Meta's Holistic Trace Analysis (hta_side_by_side.py compares its temporal
# breakdown and overlap with `scalescope analyze`), at pinned versions, from PyPI. Large (PyPI's
# Linux torch wheel brings CUDA libraries even for CPU runs); neither README's commands nor
# ctest need it. Usage: bench/traces/setup.sh [VENV_DIR]   (default bench/traces/.venv)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-$here/.venv}
python=${PYTHON:-python3}
"$python" -c 'import sys; assert sys.version_info[:2] >= (3, 10), "Python 3.10+ needed"'
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet -r "$here/requirements.txt"
