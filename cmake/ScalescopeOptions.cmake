# Options of the scalescope build and the flags every target of ours uses.
include(CheckLanguage)

option(SCALESCOPE_BUILD_TESTS "Build the GoogleTest suite" ON)
option(SCALESCOPE_WERROR "Treat warnings in our own targets as errors" ON)
option(SCALESCOPE_NVTX "NVTX ranges (when the NVTX3 headers are found)" ON)

# SCALESCOPE_WITH_CUDA: ON by default where a CUDA compiler is found; asked for explicitly
# but missing is a configure error rather than a silent CPU-only build.
check_language(CUDA)
if(DEFINED SCALESCOPE_WITH_CUDA)
  if(SCALESCOPE_WITH_CUDA AND NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "SCALESCOPE_WITH_CUDA=ON but no CUDA compiler was found "
                        "(set CMAKE_CUDA_COMPILER or CUDACXX, or put nvcc on PATH)")
  endif()
elseif(CMAKE_CUDA_COMPILER)
  set(SCALESCOPE_WITH_CUDA ON)
else()
  set(SCALESCOPE_WITH_CUDA OFF)
endif()
set(SCALESCOPE_WITH_CUDA ${SCALESCOPE_WITH_CUDA} CACHE BOOL "Build the CUDA backend" FORCE)
if(SCALESCOPE_WITH_CUDA)
  # One CUDA runtime for every link line: the shared one, which CUDA::cudart names too.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # CMake 3.25 knows no flag for CUDA_STANDARD 20 with nvcc (it stops at 17) and refuses to
  # generate for a target with .cu sources; nvcc 12+ takes -std=c++20.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

# SCALESCOPE_WITH_MPI: multi-process runs launched by mpirun or srun (MPI bootstraps the
# collectives; it never carries gradients). ON by default where MPI is found; asked for
# explicitly but missing is a configure error. A single-node run never needs it.
if(DEFINED SCALESCOPE_WITH_MPI)
  if(SCALESCOPE_WITH_MPI)
    # The C API only, through the C++ component (the project enables no C compiler).
    find_package(MPI COMPONENTS CXX)
    if(NOT MPI_CXX_FOUND)
      message(FATAL_ERROR "SCALESCOPE_WITH_MPI=ON but no MPI was found "
                          "(Debian: apt-get install libopenmpi-dev)")
    endif()
  endif()
else()
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(SCALESCOPE_WITH_MPI ON)
  else()
    set(SCALESCOPE_WITH_MPI OFF)
  endif()
endif()
set(SCALESCOPE_WITH_MPI ${SCALESCOPE_WITH_MPI} CACHE BOOL "Multi-process runs through MPI" FORCE)

# scalescope_target_defaults(TARGET): warnings and code generation of our targets.
# -fno-math-errno: nothing of ours reads errno after maths, and with it GCC can vectorise
# loops that call sqrt/exp (Adam's update ran 3x slower without).
function(scalescope_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -fno-math-errno>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(SCALESCOPE_WERROR)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
  endif()
endfunction()

# SCALESCOPE_PCH: the third-party headers that most of a target's sources include, parsed once
# per target instead of once per source. nlohmann/json, CLI11 and GoogleTest cost 2.6 s, 7.4 s
# and 1.9 s of parsing per source that includes them (g++ 12 -O2); they are included by 87,
# 13 and 71 of the ~190 sources. C++ sources only (not CUDA). A source with compile options
# of its own is left out (SKIP_PRECOMPILE_HEADERS), since a header precompiled with other
# flags is rejected.
option(SCALESCOPE_PCH "Precompile the heavy third-party headers of each target" ON)
function(scalescope_precompile target)
  if(NOT SCALESCOPE_PCH)
    return()
  endif()
  foreach(header IN LISTS ARGN)
    target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:<${header}>>")
  endforeach()
endfunction()

# SCALESCOPE_COLD_CXX_FLAGS: extra flags for the libraries that no training step and no
# report's statistics run: the command line (scalescope_cli and the executable) and the trace
# analysis. Empty by default. The sanitizer builds (scripts/asan.sh, scripts/tsan.sh) pass -O0
# there, as they do for the test sources: under ASan and UBSan such a source compiles in half
# the time at -O0 (clang-16: cli/sweep_command.cpp 33.9 s at -O1, 16.5 s at -O0), and the
# command line alone was a seventh of that build's compile time. The reports keep the build's
# flags: at -O0 their bootstrap intervals made report tests up to 14x slower under ASan,
# more than their compile time saved.
set(SCALESCOPE_COLD_CXX_FLAGS "" CACHE STRING
    "Extra compile flags for the command line and trace analysis libraries")
function(scalescope_cold target)
  separate_arguments(flags UNIX_COMMAND "${SCALESCOPE_COLD_CXX_FLAGS}")
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${flags}>")
endfunction()

# SCALESCOPE_FUZZ: the libFuzzer targets of tests/fuzz (scripts/fuzz.sh). Every target of the
# build is instrumented for coverage and checked by ASan and UBSan; each fuzzer links
# libFuzzer's main. Clang only, CPU only, no benchmarks (checked where that option is declared).
option(SCALESCOPE_FUZZ "Build the libFuzzer targets (clang; CPU-only)" OFF)
if(SCALESCOPE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SCALESCOPE_FUZZ=ON needs clang (libFuzzer), not "
                        "${CMAKE_CXX_COMPILER_ID}: -DCMAKE_CXX_COMPILER=clang++-16")
  endif()
  if(SCALESCOPE_WITH_CUDA)
    message(FATAL_ERROR "SCALESCOPE_FUZZ=ON needs -DSCALESCOPE_WITH_CUDA=OFF")
  endif()
  # Every finding is fatal: a sanitizer report that let the input continue would be lost.
  # Instrumented loops are not vectorized: clang's note on `omp simd` loops says so, and is no
  # defect of the code.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -gline-tables-only -Wno-pass-failed)
  add_link_options(-fsanitize=address,undefined)
endif()
