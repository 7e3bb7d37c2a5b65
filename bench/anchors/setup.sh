#!/bin/bash
# Creates bench/anchors/.venv: the systems scalescope is measured against (TensorFlow with
# tf-keras for MirroredStrategy, PyTorch 2.x for DDP), at pinned versions, from PyPI.
# Large (about 6 GiB: PyPI's Linux torch wheel brings CUDA libraries even for CPU runs), so it
# is kept out of README's two commands and CI's default path; tests that need it skip
# without it. Usage: bench/anchors/setup.sh [VENV_DIR]   (default bench/anchors/.venv)
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
"$venv/bin/python" "$here/versions.py"
