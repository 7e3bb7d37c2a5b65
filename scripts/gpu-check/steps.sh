# Sourced by scripts/gpu-check.sh: its steps, each run in a child shell under timeout(1) with
# its output in its log, and the note functions that read a step's answer from its log.
# shellcheck shell=bash disable=SC2154  # the variables are set by gpu-check.sh

step_env() {
  echo "== date"; date -u
  echo "== host"; uname -a; grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null
  echo "cores: $(nproc)"; free -g 2>/dev/null | head -2
  echo "== tools"
  [[ -x "$nvcc" ]] && "$nvcc" --version | tail -2
  command -v cmake >/dev/null && cmake --version | head -1
  command -v ninja >/dev/null && echo "ninja $(ninja --version)"
  ldd --version | head -1
  echo "compute-sanitizer: ${sanitizer:-none found}"
  echo "python3: $(command -v python3) $(python3 --version 2>&1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "NCCL_IB_DISABLE=$NCCL_IB_DISABLE"
  if [[ "$mode" == bundle ]]; then
    echo "== bundle ($bundle_root)"
    cat "$bundle_root/manifest.txt"
    return 0
  fi
  echo "== paths"
  echo "repo:        $repo"
  echo "build dir:   $build_dir"
  echo "debs:        $deps_root"
  echo "cuDNN root:  ${cudnn_root:-NOT FOUND}  (lib: ${cudnn_lib:-NOT FOUND})"
  echo "NCCL root:   ${nccl_root:-NOT FOUND}  (lib: ${nccl_lib:-NOT FOUND})"
  echo "CUDA home:   $cuda_home; $cublas_note"
  echo "zlib:        ${zlib_so:-NOT FOUND}"
  for h in "$cudnn_root/include/cudnn_version.h" "$nccl_root/include/nccl.h"; do
    [[ -f "$h" ]] && echo "$(basename "$h"): $(grep -E '^#define (CUDNN|NCCL)_(MAJOR|MINOR|PATCH(LEVEL)?) ' "$h" | awk '{print $3}' | paste -sd. -)"
  done
  echo "== CMake arguments: $cmake_args_q"
  echo "== debs"
  if [[ -f "$deps_root/gpu-debs.manifest" ]]; then
    cat "$deps_root/gpu-debs.manifest"
  else
    echo "MISSING: $deps_root/gpu-debs.manifest -- run scripts/gpu-deps.sh on the Debian machine and carry third_party/gpu-debs"
    return 1
  fi
  [[ -n "$cudnn_root" && -n "$cudnn_lib" && -n "$nccl_root" && -n "$nccl_lib" ]]
}
note_env() { grep -m1 -E 'MISSING|NOT FOUND|no cuBLAS' "$1" || grep -m1 '^commit:' "$1" || true; }

step_nvidia_smi() { nvidia-smi && nvidia-smi -L; }
note_nvidia_smi() { grep -m1 -E '^GPU 0' "$1" || tail -n 1 "$1"; }

# The bundle's binaries find every library: theirs inside it, NVIDIA's on this machine.
step_bundle() {
  echo "== NVIDIA libraries the bundle expects from this machine"
  echo "$vendor_found_text"
  [[ -z "$vendor_missing_text" ]] || echo "MISSING: $vendor_missing_text (install the nvidia-* wheels, or put their lib folders on LD_LIBRARY_PATH)"
  local f libs missing=0 needed have
  needed=$(sed -n 's/^glibc needed: \([0-9.]*\).*/\1/p' "$bundle_root/manifest.txt")
  have=$(ldd --version | head -1 | grep -oE '[0-9]+\.[0-9]+$')
  echo "glibc: this machine has $have, the bundle needs ${needed:-?}"
  if [[ -n "$needed" && "$(printf '%s\n' "$needed" "$have" | sort -V | head -1)" != "$needed" ]]; then
    echo "MISSING: glibc $needed (this machine has $have: build the bundle on a host with glibc $have or older)"
    missing=1
  fi
  for f in "$bin" "$tests_dir"/* "$probe"; do
    [[ -x "$f" ]] || continue
    echo "== ldd ${f#"$bundle_root"/}"
    libs=$(ldd "$f" 2>&1)
    echo "$libs"
    grep -q 'not found' <<<"$libs" && missing=1
  done
  "$bin" --version 2>&1 | head -3
  [[ -z "$vendor_missing_text" ]] && ((missing == 0))
}
note_bundle() {
  local m="$bundle_root/manifest.txt"
  echo "$(sed -n 's/^commit: \([0-9a-f]\{10\}\).*/\1/p' "$m"), dirty: $(sed -n 's/^dirty: \([a-z]*\).*/\1/p' "$m"), archs $(sed -n 's/^cuda architectures: //p' "$m")$(grep -m1 -o 'MISSING: [^(]*' "$1" | sed 's/^/; /')$(grep -m1 -o '[^ ]* => not found' "$1" | sed 's/^/; /')"
}

# README's main command, as README writes it (the first `build/scalescope sweep` in it), with
# this check's binary, to its end or its time limit (then stopped by SIGINT): does it choose
# the GPUs (its first line says) and do its points run (none may fail). Run in a folder of its
# own: it writes its report there.
step_main_command() {
  local line args
  line=$(grep -m1 -oE 'build/scalescope sweep[^#`]*' "$repo/README.md" | sed 's/[[:space:]]*$//')
  [[ -n "$line" ]] || { echo "README.md has no 'build/scalescope sweep' command"; return 1; }
  read -ra args <<<"${line#build/scalescope}"
  mkdir -p "$out/main-command" && cd "$out/main-command" || return 1
  local run_s=$((STEP_LIMIT > 45 ? STEP_LIMIT - 25 : 20))
  echo "README: $line"
  echo "runs:   $bin ${args[*]}   (in $PWD, stopped by SIGINT after $run_s s)"
  echo "----"
  timeout --preserve-status -s INT --kill-after=15 "$run_s" "$bin" "${args[@]}" 2>&1 |
    tee "$out/main-command/output.txt"
  local rc=${PIPESTATUS[0]}
  echo "---- exit status $rc (130: stopped by SIGINT as planned)"
  # Its first line says which devices it chose ("sweep on cuda:1 (...)"), before anything
  # else it prints; libraries may have written to stderr first.
  local chose
  chose=$(grep -m1 '^sweep on ' "$out/main-command/output.txt")
  echo "chose: ${chose:-(no 'sweep on' line)}"
  grep -q '^sweep on cuda:[0-9]' <<<"$chose" || { echo "NO GPU CHOSEN"; return 1; }
  # The GPUs chosen, every point may still fail (each did at 75d88d7, and the step passed).
  local failed
  failed=$(grep -m1 '^FAILED: ' "$out/main-command/output.txt")
  [[ -z "$failed" ]] || { echo "POINT ${failed}"; return 1; }
  ((rc == 0 || rc == 130))
}
note_main_command() {
  local chose
  chose=$(grep -m1 '^chose: ' "$1" | sed 's/^chose: //')
  if grep -q '^NO GPU CHOSEN' "$1"; then
    echo "NO GPU CHOSEN: $chose"
  elif grep -q '^POINT FAILED: ' "$1"; then
    grep -m1 '^POINT FAILED: ' "$1"
  else
    echo "$chose"
  fi
}

# One GPU, ResNet-50 at 128 images: refused before by a fixed workspace limit.
step_resnet50_b128() {
  "$bin" train --devices cuda:1 --model resnet:depth=50 --batch 128 --steps 12 --no-eval \
    -o "$out/resnet50-b128.json"
}
# Its speed, and what the run said about workspace or determinism.
note_run() {
  local json="${1%.log}.json" said
  said=$(grep -m1 -iE 'workspace|determinis' "$1" | cut -c1-120)
  if [[ -s "$json" ]]; then
    echo "$(python3 "$script_dir/gpu-check/run_summary.py" "$json" ran optimizer)${said:+; $said}"
  else
    echo "no report; $(grep -m1 -iE 'error' "$1")"
  fi
}

# ResNet-50 at 64 images, host synthetic data: how much of the copy the step waited for.
step_h2d_overlap() {
  "$bin" train --devices cuda:1 --model resnet:depth=50 --batch 64 --steps 30 --no-eval \
    --data synthetic -o "$out/h2d-overlap.json" || return 1
  # h2d_ms is what the step waited for, h2d_total_ms how long the copy ran.
  python3 "$script_dir/gpu-check/run_summary.py" "$out/h2d-overlap.json" h2d h2d input_ms
}
note_h2d() { grep -m1 '^h2d: ' "$1" || grep -m1 -iE 'error' "$1" | cut -c1-200; }

# --profile-layers on the GPU (events around each layer): the step with and without it, twice
# each in alternation, and the table of the layers that took longest.
step_profile_layers() {
  local i flag
  for i in 1 2; do
    for flag in "" --profile-layers; do
      "$bin" train --devices cuda:1 --model resnet:depth=50 --batch 64 --steps 30 --no-eval \
        --data synthetic:device $flag -o "$out/profile-layers$flag.json" || return 1
    done
  done
}
note_profile_layers() {
  grep -E 'median step' "$1" | sed -E 's/.*median step ([0-9.]+) ms.*/\1/' | paste -sd' ' |
    awk '{printf "step ms without/with --profile-layers: %s/%s, %s/%s\n", $1, $2, $3, $4}'
}

# ResNet-50 with cuDNN's algorithms chosen by its heuristics and by timing each candidate
# (--conv-search benchmark, PyTorch's cudnn.benchmark), in alternation, at 64 and 128 in tf32 and
# at 64 in bf16: issue 39's first candidate for the convolutions' gap to PyTorch.
step_conv_search() {
  local point batch precision round search
  for point in 64:tf32 128:tf32 64:bf16; do
    batch=${point%%:*}
    precision=${point##*:}
    for round in 1 2; do
      for search in heuristic benchmark; do
        echo "conv-search: b$batch $precision $search, round $round"
        "$bin" train --devices cuda:1 --model resnet:depth=50 --batch "$batch" --steps 30 \
          --no-eval --data synthetic:device --precision "$precision" --conv-search "$search" \
          -o "$out/conv-search-b$batch-$precision-$search-$round.json" || return 1
      done
    done
  done
}
note_conv_search() {
  grep -E 'median step' "$1" | sed -E 's/.*median step ([0-9.]+) ms.*/\1/' | paste -sd' ' |
    awk '{printf "ResNet-50 step ms heuristic/benchmark twice: b64 tf32 %s/%s %s/%s, b128 tf32 %s/%s %s/%s, b64 bf16 %s/%s %s/%s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12}'
}

# The planned peak (`models SPEC --batch B`) against what three steps of training measured, on
# the GPU: GPT-2 small at 8 (the attention's workspace shared since 79a1d79) in tf32 and in bf16
# (its saved activations in 16 bits), and ResNet-50 at 64 in tf32 and in bf16 (its convolutions'
# 16-bit copies in the shared workspace).
step_memory_plan() {
  local spec batch precision name
  for spec in gpt:preset=small:8:tf32 gpt:preset=small:8:bf16 resnet:depth=50:64:tf32 \
    resnet:depth=50:64:bf16; do
    precision=${spec##*:}
    spec=${spec%:*}
    batch=${spec##*:}
    spec=${spec%:*}
    name=${spec//[:=]/-}-$precision
    "$bin" models "$spec" --batch "$batch" --devices cuda:1 --precision "$precision" --json \
      >"$out/plan-$name.json" &&
      "$bin" train --devices cuda:1 --model "$spec" --batch "$batch" --precision "$precision" \
        --steps 3 --no-eval -o "$out/run-$name.json" || return 1
    python3 - "$out/plan-$name.json" "$out/run-$name.json" "$spec" "$batch" "$precision" \
      <<'PY' || return 1
import json, sys
plan = json.load(open(sys.argv[1]))["models"][0]["memory"]["planned_peak_bytes"]
measured = json.load(open(sys.argv[2]))["summary"]["peak_memory_bytes"][0]
print(f"memory-plan: {sys.argv[3]} at {sys.argv[4]} in {sys.argv[5]}: planned "
      f"{plan / 2**30:.2f} GiB, measured {measured / 2**30:.2f} GiB ({measured / plan:.3f})")
PY
  done
}
note_memory_plan() { grep -E '^memory-plan: ' "$1" | sed -E 's/^memory-plan: //' | paste -sd';' | cut -c1-220; }

# GPT-2 small at 8 sequences of 1024, --profile-layers, in tf32 and in bf16 (the dense layers on
# bf16 copies), in tf32 with the vocabulary padded to 50304 (a multiple of 64, as nanoGPT pads
# it): what the lm_head's unaligned 50257 columns cost its GEMMs; and in bf16 with the
# attention fused (SCALESCOPE_ATTENTION=flash, not the default until this shows it right and
# faster): what it gains per attention layer against the chunks.
step_gpt_profile() {
  local run extra kind
  for run in tf32:: bf16:: tf32:,vocab=50304: bf16::flash; do
    kind=${run##*:}
    run=${run%:*}
    extra=${run#*:}
    SCALESCOPE_ATTENTION=$kind "$bin" train --devices cuda:1 \
      --model "gpt:preset=small$extra" --batch 8 --steps 12 --no-eval --data synthetic:device \
      --precision "${run%%:*}" --profile-layers \
      -o "$out/gpt-profile-${run%%:*}${extra:+-${extra#,}}${kind:+-$kind}.json" || return 1
  done
}
note_gpt_profile() {
  grep -E 'median step' "$1" | sed -E 's/.*median step ([0-9.]+) ms.*/\1/' | paste -sd' ' |
    awk '{printf "GPT-2 small b8 step ms, profiled, tf32/bf16/tf32 vocab 50304/bf16 flash attention: %s/%s/%s/%s\n", $1, $2, $3, $4}'
}

# GPT-2 small and ResNet-50 beside PyTorch in tf32, bf16 and fp16 (PyTorch: torch.autocast,
# GradScaler; ours: 16-bit dense layers and, since 2026-11-28, convolutions).
step_compare_16bit() {
  local p
  for p in tf32 bf16 fp16; do
    python3 "$bench_dir/compare_pytorch.py" --device cuda --binary "$bin" --rounds 1 --steps 10 \
      --precision "$p" --cases gpt:preset=small:8,resnet:depth=50:64 || return 1
  done
}
note_compare_16bit() {
  awk '/^PyTorch/ {p = $0; sub(/.*precision /, "", p); sub(/,.*/, "", p)}
       /^(gpt|resnet)/ {printf "%s %s ms pytorch/ours %s/%s; ", substr($1, 1, 3), p, $3, $4}' \
    "$1" | cut -c1-300
}

step_devices() { "$bin" devices && "$bin" devices --json >"$out/devices.json"; }
# The first GPU's host link figures (the table's row after its header), or why there are none.
note_devices() {
  local row
  row=$(awk '/to GPU pinned/ {getline; print; exit}' "$1" | sed 's/^ *//; s/  */ /g')
  if [[ -n "$row" ]]; then
    echo "host link GB/s (to GPU pinned, pageable; from GPU pinned, pageable): $row"
  else
    grep -m1 -iE 'no GPU|pinned|pageable' "$1" | sed 's/^ *//'
  fi
}

# compute-sanitizer on a few training steps of one GPU: three under memcheck, two under
# racecheck, which instruments every shared-memory access and is many times slower.
step_sanitizer() {  # memcheck | racecheck
  local raw="$out/sanitizer-$1.out" steps=3
  [[ "$1" == racecheck ]] && steps=2
  "$sanitizer" --tool "$1" --print-limit 100 "$bin" train --devices cuda:1 --model cifar-cnn \
    --steps "$steps" --no-eval >"$raw" 2>&1
  local rc=$?
  tail -n 40 "$raw"
  echo "---- scalescope under $1: exit status $rc; the whole output is in $(basename "$raw")"
  summarize_sanitizer "$raw" && ((rc == 0))
}
note_sanitizer() { grep -m1 -E '^(memcheck|racecheck): ' "$1" || echo "no summary line"; }

# The NCCL_HOSTID probe: the bundle's binary, or built with nvcc against the wheel's NCCL.
step_nccl_hostid() {
  if [[ "$mode" == build ]]; then
    echo "== build: $nvcc -std=c++17 -O2 scripts/nccl_hostid_probe.cpp"
    "$nvcc" -std=c++17 -O2 scripts/nccl_hostid_probe.cpp -I"$nccl_root/include" -L"$shim" -lnccl \
      -Xlinker -rpath -Xlinker "$nccl_lib" -o "$probe" || return 1
  fi
  echo "== run"
  timeout --kill-after=5 $((STEP_LIMIT - 10)) "$probe" --timeout 40
}
step_nccl_hostid_control() {
  [[ -x "$probe" ]] || { echo "no $probe (the nccl_hostid step builds it)"; return 1; }
  # The control is expected to fail (NCCL refuses two ranks on one GPU of one host); the step
  # passes when the probe reached a verdict either way.
  local output
  output=$(timeout --kill-after=5 $((STEP_LIMIT - 10)) "$probe" --timeout 20 --same-host 2>&1)
  echo "$output"
  grep -qE 'two-rank on one GPU: (WORKS|FAILS)' <<<"$output"
}
note_verdict() { grep -m1 -E 'two-rank on one GPU: (WORKS|FAILS)' "$1" || echo "no verdict line"; }

# two_ranks [MPIRUN OPTIONS] -- COMMAND...: COMMAND as ranks 0 and 1 under the bundle's mpirun,
# both on this machine's GPU 0, each with an NCCL_HOSTID of its own. With RANK_PID_DIR set each
# rank writes its scalescope's pid there and reports its exit status on stderr.
two_ranks() {
  local opts=()
  while [[ "$1" != -- ]]; do opts+=("$1"); shift; done
  shift
  [[ $(id -u) -eq 0 ]] && opts+=(--allow-run-as-root)
  # shellcheck disable=SC2016  # expanded by each rank's shell
  local rank_shell='export NCCL_HOSTID="scalescope-rank$OMPI_COMM_WORLD_RANK"
if [ -z "${RANK_PID_DIR:-}" ]; then exec "$@"; fi
"$@" & pid=$!
echo "$pid" >"$RANK_PID_DIR/rank$OMPI_COMM_WORLD_RANK.pid"
wait "$pid"; rc=$?
echo "rank $OMPI_COMM_WORLD_RANK exit $rc" >&2
exit "$rc"'
  eval "export $two_rank_env_q"
  echo "\$ mpirun -np 2 ${opts[*]} [NCCL_HOSTID=scalescope-rank<R>; $two_rank_env_q] $*"
  "$mpirun" -np 2 --oversubscribe --bind-to none "${opts[@]}" bash -c "$rank_shell" rank "$@"
}

# Two processes, one replica each on GPU 0: NCCL's multi-rank path, buckets during backward,
# weights compared across the ranks.
step_nccl_2proc_train() {
  two_ranks -- "$bin" train --devices cuda:2 --model cifar-cnn --batch 64 --steps 40 \
    --check-every 10 --no-eval --network-interface lo -o "$out/nccl-2proc-train.json" || return 1
  # allreduce_ms: every bucket's reduction; allreduce_exposed_ms: what backward did not hide.
  python3 "$script_dir/gpu-check/run_summary.py" "$out/nccl-2proc-train.json" "2 ranks" allreduce
}
note_2proc() { { grep -m1 '^2 ranks: ' "$1" || grep -m1 -E 'lost|[Ee]rror' "$1"; } | cut -c1-220; }

step_nccl_2proc_collectives() {
  two_ranks -- "$bin" collectives --devices cuda:2 -b 8 -e 64M -f 4 -w 2 -n 10 \
    --network-interface lo --json "$out/nccl-2proc-collectives.json" || return 1
  echo "2 ranks: $(grep -m1 'Wrong values' "$STEP_LOG" | sed 's/^# *//'), $(grep -m1 'Avg bus bandwidth' "$STEP_LOG" | sed 's/^# *//')"
  grep -qE 'Wrong values *: 0 OK' "$STEP_LOG"
}

# Rank 1 is killed while both train: rank 0 must notice, abort its NCCL communicator and exit
# 1 naming rank 1, well within the collective timeout (20 s here).
step_nccl_2proc_abort() {
  local dir="$out/abort" timeout_s=20
  rm -rf "$dir" && mkdir -p "$dir"
  RANK_PID_DIR="$dir" two_ranks --enable-recovery -- "$bin" train --devices cuda:2 \
    --model cifar-cnn --batch 64 --steps 1000000 --no-eval --network-interface lo \
    --collective-timeout-ms $((timeout_s * 1000)) >"$dir/ranks.log" 2>&1 &
  local launcher=$! waited=0
  until grep -q '^step ' "$dir/ranks.log" 2>/dev/null && [[ -s "$dir/rank1.pid" ]]; do
    sleep 1
    waited=$((waited + 1))
    kill -0 "$launcher" 2>/dev/null && ((waited < STEP_LIMIT - 3 * timeout_s)) && continue
    cat "$dir/ranks.log"
    echo "the two ranks never started training"
    kill "$launcher" 2>/dev/null
    return 1
  done
  sleep 3
  kill -9 "$(cat "$dir/rank1.pid")"
  local killed_at=$SECONDS
  echo "killed rank 1 (pid $(cat "$dir/rank1.pid")) after rank 0's first step"
  local rc=0
  timeout $((2 * timeout_s + 10)) tail --pid="$launcher" -f /dev/null || rc=1
  cat "$dir/ranks.log"
  if ((rc)); then
    echo "rank 0 still running $((SECONDS - killed_at)) s after rank 1 was killed"
    kill "$launcher" 2>/dev/null
    return 1
  fi
  local elapsed=$((SECONDS - killed_at))
  if grep -q 'rank 0 exit 1' "$dir/ranks.log" && grep -qE 'lost (contact with )?process rank 1' "$dir/ranks.log"; then
    echo "rank 0 exit 1 ${elapsed} s after rank 1 was killed: $(grep -m1 -oE 'lost (contact with )?process rank 1[^;]*' "$dir/ranks.log")"
  else
    echo "rank 0 did not exit 1 naming rank 1 (${elapsed} s after the kill)"
    return 1
  fi
}
note_abort() { grep -m1 -E '^rank 0 (exit 1 |did not|still)|never started' "$1" | cut -c1-220; }

two_rank_skip_reason() {  # empty when the two-process steps can run
  if [[ -z "$mpirun" ]]; then
    echo "no mpirun: the build path configures MPI off (the bundle carries Open MPI)"
  elif ! grep -q 'two-rank on one GPU: WORKS' "$out/nccl_hostid.log" 2>/dev/null; then
    echo "the NCCL_HOSTID probe's verdict is not WORKS (nccl_hostid.log)"
  fi
}

note_configure() { grep -m1 -E 'CMake Error|scalescope: CUDA=' "$1" || true; }

# -k 0: build everything that can be built, so one broken target does not hide the rest.
step_build() { cmake --build "$build_dir" -j "$(nproc)" -- -k 0; }
note_build() {
  echo "$(grep -c 'warning:' "$1") warning lines, $(grep -c 'error:' "$1") error lines, $(grep -c '^FAILED:' "$1") failed targets"
}
step_configure() { eval "cmake -S \"\$repo\" -B \"\$build_dir\" $cmake_args_q"; }

gtest() {  # binary filter name
  "$tests_dir/$1" --gtest_filter="$2" --gtest_output="json:$out/$3.json"
}
note_gtest() {  # from the JSON beside the log
  python3 - "${1%.log}.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
tests = [t for s in d.get("testsuites", []) for t in s.get("testsuite", [])]
skipped = sum(1 for t in tests if t.get("result") == "SKIPPED")
failed = sum(1 for t in tests if t.get("failures"))
print(f"{len(tests)} tests, {failed} failed, {skipped} skipped" + ("  <- NO TESTS RAN" if not tests else ""))
EOF
}

sweep() {  # devices json-name
  "$bin" sweep --devices "$1" --models cifar-cnn,mlp:scale=0.1 --batch 64 --repeats 2 --steps 20 \
    -o "$out/$2.json"
}
note_sweep() {
  local json="${1%.log}.json"
  if [[ -s "$json" ]]; then echo "report $(basename "$json")"; else echo "no report written"; fi
}

step_compare_pytorch() { python3 "$bench_dir/compare_pytorch.py" --device cuda --binary "$bin" --rounds 1; }

step_ctest() {  # STOP_EPOCH: ctest starts no test after it
  ctest --test-dir "$build_dir" --output-on-failure --no-tests=error --timeout 300 \
    --stop-time "$(date -d "@$1" +%H:%M:%S)" --output-junit "$out/ctest-junit.xml"
}
note_ctest() { grep -m1 -E 'tests passed|No tests were found' "$1" || echo "no ctest summary line"; }

export -f step_env step_nvidia_smi step_bundle step_main_command step_resnet50_b128 step_profile_layers \
  step_conv_search \
  step_memory_plan step_gpt_profile step_compare_16bit \
  step_h2d_overlap step_devices step_sanitizer summarize_sanitizer step_nccl_hostid \
  step_nccl_hostid_control two_ranks step_nccl_2proc_train step_nccl_2proc_collectives \
  step_nccl_2proc_abort step_configure step_build gtest sweep step_compare_pytorch step_ctest \
  note_verdict
