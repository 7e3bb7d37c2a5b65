# Sourced by scripts/gpu-check.sh: the steps that compare, for a session that changed GPU code
# and has one call to show what the change did. side-by-side runs the same training with the
# binary of the commit before (GPU_CHECK_BEFORE) and this one, alternating, in one call, as
# every speed claim needs; kernels times each CUDA kernel with Nsight Compute, for what a layer
# table cannot split; head-copies times the padded lm_head's copies
# (bench/padded_head_copies.py).
# shellcheck shell=bash disable=SC2154  # the variables are set by gpu-check.sh

# MODEL:BATCH:PRECISION -> "MODEL BATCH PRECISION" (a model's spec has colons of its own).
split_case() {
  local precision=${1##*:} rest=${1%:*}
  echo "${rest%:*} ${rest##*:} $precision"
}

# Two rounds over the cases (GPU_CHECK_CASES, space-separated), before then after within each
# case. A line per run: "side-by-side: CASE before|after round R: X ms, Y GiB".
step_side_by_side() {
  local round case_ which binary model batch precision log json
  for round in 1 2; do
    for case_ in $side_by_side_cases; do
      read -r model batch precision <<<"$(split_case "$case_")"
      for which in before after; do
        binary=$bin
        [[ $which == before ]] && binary=$before_bin
        log="$out/side-by-side-last.log"
        json="$out/side-by-side-${case_//[:=]/-}-${round}-${which}.json"
        "$binary" train --devices cuda:1 --model "$model" --batch "$batch" \
          --precision "$precision" --steps 15 --no-eval --data synthetic:device \
          -o "$json" >"$log" 2>&1 || {
          tail -n 5 "$log"
          echo "side-by-side: $case_ $which round $round FAILED"
          return 1
        }
        echo "side-by-side: $case_ $which round $round: $(run_figures "$log" "$json")"
      done
    done
  done
}
# "X ms, Y GiB" from a run's median step line and, where it wrote one, its report's peak.
run_figures() {  # LOG JSON
  local ms peak=""
  ms=$(grep -m1 -oE 'median step [0-9.]+ ms' "$1" | grep -oE '[0-9.]+')
  [[ -s "$2" ]] && peak=$(python3 -c 'import json, sys
print("%.3f GiB" % (json.load(open(sys.argv[1]))["summary"]["peak_memory_bytes"][0] / 2**30))' "$2" 2>/dev/null)
  echo "${ms:-?} ms${peak:+, $peak}"
}
# Per case: "CASE ms before/after: b1,b2/a1,a2".
note_side_by_side() {
  awk '/^side-by-side: .* round [0-9]+: / {
         key = $2; ms = $6; which = $3
         if (!(key in seen)) { seen[key] = 1; order[++n] = key }
         if (which == "before") b[key] = b[key] (b[key] == "" ? "" : ",") ms
         else a[key] = a[key] (a[key] == "" ? "" : ",") ms
       }
       END { for (i = 1; i <= n; ++i) printf "%s ms before/after: %s/%s; ", order[i], b[order[i]], a[order[i]] }' "$1"
}

# Nsight Compute over 3 training steps of ResNet-50 at 64 and GPT-2 small at 8 in bf16 (their
# first 3000 launches at most, so that ncu's serialised replay fits the step's time): each
# kernel's duration and DRAM bytes, summed by kernel name (kernels/*.csv, its raw pages).
step_kernels() {
  local spec model batch
  mkdir -p "$out/kernels"
  for spec in resnet:depth=50:64 gpt:preset=small:8; do
    model=${spec%:*}
    batch=${spec##*:}
    echo "== $model at $batch, bf16"
    "$ncu" --clock-control none --cache-control none --launch-count 3000 --csv --page raw \
      --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      --log-file "$out/kernels/${model//[:=]/-}.csv" "$bin" train --devices cuda:1 \
      --model "$model" --batch "$batch" --precision bf16 --steps 3 --no-eval \
      --data synthetic:device >"$out/kernels/${model//[:=]/-}.log" 2>&1 || {
      tail -n 5 "$out/kernels/${model//[:=]/-}.log" "$out/kernels/${model//[:=]/-}.csv"
      return 1
    }
    python3 "$script_dir/gpu-check/kernel_summary.py" "$out/kernels/${model//[:=]/-}.csv" || return 1
  done
}
note_kernels() { grep -m2 -E '^top: ' "$1" | sed 's/^top: //' | paste -sd';' | cut -c1-220; }

step_head_copies() { python3 "$bench_dir/padded_head_copies.py"; }
note_head_copies() { grep -E 'memcpy2D pitch 50304|torch copy_' "$1" | paste -sd';' | cut -c1-220; }

export -f split_case step_side_by_side run_figures step_kernels step_head_copies
