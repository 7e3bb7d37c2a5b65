#!/bin/bash
# Per kernel of one CUDA source, how many global loads (LDG), branches (BRA) and stores (STG) its
# sm_90 machine code has: the static check that a kernel keeps several loads in flight (a loop
# unrolled with its loads first) or waits for each (one LDG per iteration, a branch on its
# value). Needs no GPU: nvcc compiles the file alone, cuobjdump disassembles it.
#
# usage: scripts/sass-loads.sh models/cuda/norm_ops.cu [FILTER]
#   FILTER: an extended regular expression the kernel's mangled name must match.
#   CUOBJDUMP: the cuobjdump to use (default: the toolkit's, else the one in the bench
#   environment's triton wheel; the Debian toolkit here ships none).
#   SASS_ARCH: the architecture (default 90); SASS_KEEP=DIR keeps the listing there.
#
# Prints "LDG BRA STG kernel" per kernel (demangled), sorted by name. The counts are a first
# look; the listing (SASS_KEEP) shows where each load stands against the instructions using it. See docs/performance.md for what the
# counts showed for the batch norm's 16-bit passes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 1 && -f "$1" ]] || { echo "usage: $0 FILE.cu [FILTER]" >&2; exit 2; }
source_file=$1
# Includes from the checkout the file is in, so that another commit's worktree compiles as it was.
include_root=$(git -C "$(dirname "$source_file")" rev-parse --show-toplevel 2>/dev/null || echo "$root")
filter=${2:-.}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x "$nvcc" ]] || { echo "sass-loads: no nvcc (set NVCC)" >&2; exit 2; }
cuobjdump=${CUOBJDUMP:-}
if [[ -z "$cuobjdump" ]]; then
  for candidate in "$(dirname "$nvcc")/cuobjdump" \
      "$root"/bench/anchors/.venv/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump; do
    if [[ -x "$candidate" ]]; then cuobjdump=$candidate; break; fi
  done
fi
[[ -n "$cuobjdump" && -x "$cuobjdump" ]] ||
  { echo "sass-loads: no cuobjdump (set CUOBJDUMP; pip's triton wheel has one)" >&2; exit 2; }
arch=${SASS_ARCH:-90}
work=${SASS_KEEP:-$(mktemp -d)}
mkdir -p "$work"
[[ -n "${SASS_KEEP:-}" ]] || trap 'rm -rf "$work"' EXIT
# The build's flags that change code generation (CMakeLists.txt): -O3, no FMA contraction.
"$nvcc" -DSCALESCOPE_WITH_CUDA=1 -DNDEBUG -I"$include_root" -O3 --fmad=false -std=c++20 \
  --generate-code="arch=compute_$arch,code=sm_$arch" -cubin -o "$work/kernels.cubin" "$source_file"
"$cuobjdump" -sass "$work/kernels.cubin" >"$work/kernels.sass"
awk -v filter="$filter" '
  /Function :/ { name = $3; if (name ~ filter) { seen[name] = 1 } next }
  !(name in seen) { next }
  /[[:space:]]LDG/ { ldg[name]++ }
  /[[:space:]]BRA/ { bra[name]++ }
  /[[:space:]]STG/ { stg[name]++ }
  END { for (n in seen) printf "%4d %4d %4d %s\n", ldg[n], bra[n], stg[n], n }
' "$work/kernels.sass" | c++filt |
  sed -e 's/scalescope::cuda_ops::(anonymous namespace):://g' -e 's/scalescope::kernel_math:://g' -e 's/scalescope::cuda_ops:://g' |
  sort -k4 | { echo " LDG  BRA  STG kernel"; cat; }
