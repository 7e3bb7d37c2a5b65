#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer over the whole test suite, in the build that
# also holds the libFuzzer targets (scripts/fuzz.sh uses it): clang-16, CPU-only, every target
# instrumented by SCALESCOPE_FUZZ (-fsanitize=fuzzer-no-link,address,undefined
# -fno-sanitize-recover=all: every finding fatal), in build-asan (or $BUILD_DIR).
#   scripts/asan.sh                  configure, build, run every test
#   scripts/asan.sh --build-only     configure and build
#   scripts/asan.sh --configure-only configure
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-asan}
# One build for the suite and the fuzzers: a second instrumented build of the same sources
# does not fit in CI's time. -O1 with line tables: stacks name file and line at a third of
# the compile time of -O2 -g. Test sources at -O0 (tests/CMakeLists.txt says which keep -O1),
# and so are the command line and the trace analysis (SCALESCOPE_COLD_CXX_FLAGS): the
# sanitizers double their compile time at -O1, and the tests spend theirs in the training code.
CXX=${CXX:-clang++-16} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DSCALESCOPE_FUZZ=ON \
  -DSCALESCOPE_TEST_CXX_FLAGS=-O0 -DSCALESCOPE_COLD_CXX_FLAGS=-O0 \
  -DSCALESCOPE_WITH_CUDA=OFF -DSCALESCOPE_BUILD_BENCH=OFF \
  >/dev/null
[[ "${1:-}" == "--configure-only" ]] && exit 0
began=$SECONDS
cmake --build "$build"
echo "asan: build took $((SECONDS - began)) s"
[[ "${1:-}" == "--build-only" ]] && exit 0
began=$SECONDS
asan="detect_leaks=1 abort_on_error=0 exitcode=66 strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1"
status=0
# Seventeen tests stay out; the README's suite runs them. Three convergence tests train 937, 200
# and 3 x 200 steps through the code the suite's other training tests run for a few steps
# each (155 s and 48 s of 395 s under the sanitizers; the compressed one trains three times
# the second's steps, two replicas each). Three more train hundreds of steps for their
# statistics (the noise scale at fixed weights, on 2 and 4 devices; a sweep to an accuracy on
# 1, 2 and 4): the norms and the stop at a target run in their short tests here. Four
# repeat, at a size that costs 19-24 s each under the sanitizers, paths that smaller tests
# here run too: the 41M-float Gloo all-reduce (the other Gloo tests), the killed and resumed
# sweep (the other SweepFaults tests), and two of the convolution gradient checks (the other
# LayerCheck cases). GptTrainer.LearnsTextBelowItsUnigramEntropy trains a GPT on text until
# its loss is low, the GPT trainer's short tests here. Two more train the zoo's models beside
# PyTorch for 30 steps each
# (models.torch_training, models.gpt_torch_training: 74 s under the sanitizers, 37 s without),
# through the training paths that the Precision, Train and GpuTrainer tests here run. And two
# that run none of our code sanitized: models.gpt_torch_reference is PyTorch alone (16 s), and
# scripts.bundle_layout packages the build (25 s), which matters for the README's build only.
# And the two sweeps of every convolution and dense case in bf16 and emulated fp16 against
# float64 (LayerBf16/LayerFp16.ConvolutionsAndDenseLayersComputeOn*Copies, 29 and 30 s here):
# their kernels' 16-bit paths run here in the short LayerBf16, LayerFp16, Fusion and Precision
# tests, and the float64 references are the test's own loops.
long='Train\.CifarCnnLearnsFashionMnistInOneEpoch|Train\.CifarCnnLossFallsClearlyWithin200Steps'
long+='|GradCompression\.CifarCnnTracksUncompressedTrainingOver200Steps'
long+='|GlooCommunicatorLargeTest\.AllReduceOf41MFloats|Sweep\.AKilledSweepKeepsItsFinishedPointsAndResumes'
long+='|Layers/LayerCheck\.GradientsMatchFiniteDifferences/conv_blocked_(s2_valid|2threads)'
long+='|NoiseScaleTraining\.ConvergesToTheExactFiguresAtFixedWeights|NoiseScaleTraining\.DoesNotDependOnTheDeviceCount'
long+='|models\.torch_training|models\.gpt_torch_training'
long+='|Target\.ASweepToAccuracySplitsItsSpeedupIntoHardwareAndStatistics|GptTrainer\.LearnsTextBelowItsUnigramEntropy'
long+='|models\.gpt_torch_reference|scripts\.bundle_layout'
long+='|LayerBf16\.ConvolutionsAndDenseLayersComputeOnBf16Copies|LayerFp16\.ConvolutionsAndDenseLayersComputeOnFp16Copies'
# Tests that hold measured times to each other (the phases to the step within 2%, a copy hidden
# behind compute, an input wait of nothing) run alone: a second sanitized process on the two
# cores stretches the host's time between two clock readings, and at 6f64ea3 one failed so
# under -j2. The rest run a test per core: their time is their own code at -O0 under the
# sanitizers (475 s one at a time, 281 s two at a time on the 2-core machine, 2026-12-06).
clocked='Mirrored\.(ExposedPhasesAddUpToTheStep|TheStreamReducerMatchesTheCommunicationThreadBitForBit'
clocked+='|AccumulationTimesEveryMicroBatch)|StepTimer\..*|GradCompression\.TheReportSaysWhatWasSentAndTimesTheCasts'
clocked+='|Devices/GpuTrainer\.(SteadyStepsAllocateNothingAndTheirPhasesAddUp|TheNextBatchIsCopiedWhileTheStepComputes)/.*'
clocked+='|Train\.DeviceResidentSyntheticDataHasNoInputCost|CpuDevice\.EventsMeasureTheWorkBetweenThem'
ASAN_OPTIONS=$asan ctest --test-dir "$build" --output-on-failure -j "$(nproc)" \
  -E "^(harness\.multiprocess|harness\.netns_.*|$long|$clocked)\$" || status=1
ASAN_OPTIONS=$asan ctest --test-dir "$build" --output-on-failure -R "^($clocked)\$" || status=1
# Under mpirun and srun, leak checking is off: OpenMPI's MPI_Init allocations are never freed,
# and many are made by plugins it unloads before the check, so no suppression can name them.
# Memory errors are still fatal there, and every other test checks our code for leaks. The
# shaped-link test (harness.netns_link) stays out: it runs the same code paths as
# harness.netns_nodes and compares times with a link rate, which the suite does unsanitized.
ASAN_OPTIONS="$asan detect_leaks=0" ctest --test-dir "$build" --output-on-failure \
  -R '^harness\.(multiprocess|netns_nodes|netns_slurm)$' || status=1
echo "asan: tests took $((SECONDS - began)) s"
exit $status
