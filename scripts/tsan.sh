#!/usr/bin/env bash
# ThreadSanitizer over every test of the concurrent paths: the simulated accelerator's
# streams, events and allocator, the stager, the reducers, the trainer on sim and CPU
# devices (equivalence under chaos jitter, a failing replica), Gloo collectives, the input
# pipeline and the NVML sampler. A CPU-only build in build-tsan (or $BUILD_DIR). Any report
# fails the script. No suppressions: what the libraries do that TSan cannot see is turned off
# instead, for this run only:
# - OMP_NUM_THREADS=1: libgomp is not instrumented, so TSan cannot see an OpenMP team's
#   barriers and would report every parallel loop; with one thread per team there are none.
# - oneDNN's primitive cache off: replicas that plan the same primitive would share one
#   object published inside the (uninstrumented) library.
# The tests, the command line and the trace analysis compile at -O0, as in scripts/asan.sh:
# less compile time, and the tests spend theirs in the training code.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-tsan}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCALESCOPE_WITH_CUDA=OFF \
  -DSCALESCOPE_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=thread" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DSCALESCOPE_TEST_CXX_FLAGS=-O0 -DSCALESCOPE_COLD_CXX_FLAGS=-O0 \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  >/dev/null
began=$SECONDS
cmake --build "$build" --target test_core test_pipelines test_harness
echo "tsan: build took $((SECONDS - began)) s"
export OMP_NUM_THREADS=1 DNNL_PRIMITIVE_CACHE_CAPACITY=0 ONEDNN_PRIMITIVE_CACHE_CAPACITY=0
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1"
status=0
run() {
  local binary=$1 filter=$2
  local began=$SECONDS
  echo "tsan: $binary --gtest_filter=$filter"
  if ! "$build/tests/$binary" --gtest_brief=1 --gtest_filter="$filter"; then
    echo "tsan: $binary FAILED (a test failed or ThreadSanitizer reported a race above)"
    status=1
  fi
  echo "tsan: $binary took $((SECONDS - began)) s"
}
run test_core 'SimDevice.*:CpuDevice.*:Interrupt.*'
run test_pipelines 'Stager.*:*Pipeline*:*WorkersAndDepths*'
run test_harness 'Reducer.*:StepTimer.*:Devices/GpuTrainer.*/sim:Cases/SimEquivalence.*:SimTrainer.*:Mirrored.*:Cases/Equivalence.*:*Gloo*:*AllReduceBench*:ReplicaComms.*:*HalfAllReduce*:GradCompression.BothReducers*:GradCompression.SimulatedDevices*:NoiseScaleTraining.StreamReducer*:Target.StopsAtTheFirst*:SharedMemoryCollectives.*:NvmlSampler*:Evaluation.*:SweepFaults.AnInterrupt*:ResNetTrainer.*:Devices/SyncBatchNorm.*:Devices/GptMirrored.*:Precision.Bf16Replicas*:Precision.APlantedFp16*'
exit $status
