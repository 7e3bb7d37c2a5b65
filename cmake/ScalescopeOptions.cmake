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
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

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
