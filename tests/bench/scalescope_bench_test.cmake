# scalescope-bench end to end: a short filtered run exits 0, and its Google Benchmark JSON
# names each kind of benchmark (layer forward and backward, both optimizers, an all-reduce
# bucket) with none of them reporting an error.
#
# Usage: cmake -DBENCH=path/to/scalescope-bench -P scalescope_bench_test.cmake
if(NOT BENCH)
  message(FATAL_ERROR "usage: cmake -DBENCH=path/to/scalescope-bench -P ${CMAKE_CURRENT_LIST_FILE}")
endif()

execute_process(
  COMMAND ${BENCH} --benchmark_filter=dense-100 --benchmark_min_time=0.01
          --benchmark_format=json
  RESULT_VARIABLE status
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 300)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "scalescope-bench exited with ${status}\nstderr:\n${err}\nstdout:\n${out}")
endif()

string(JSON commit ERROR_VARIABLE json_error GET "${out}" context scalescope_git_commit)
if(json_error)
  message(FATAL_ERROR "no scalescope context in the JSON (${json_error}):\n${out}")
endif()
string(JSON count ERROR_VARIABLE json_error LENGTH "${out}" benchmarks)
if(json_error OR count EQUAL 0)
  message(FATAL_ERROR "no benchmarks in the JSON (${json_error}):\n${out}")
endif()

set(names "")
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${out}" benchmarks ${i} name)
  string(JSON failed ERROR_VARIABLE absent GET "${out}" benchmarks ${i} error_occurred)
  if(NOT absent AND failed)
    string(JSON why GET "${out}" benchmarks ${i} error_message)
    message(FATAL_ERROR "benchmark ${name} failed: ${why}")
  endif()
  list(APPEND names "${name}")
endforeach()

foreach(expected
    "layer/dense-100/0:linear/forward/batch:32/"
    "layer/dense-100/0:linear/backward/batch:32/"
    "layer/dense-100/1:relu/forward/batch:32/"
    "layer/dense-100/2:linear/backward/batch:32/"
    "optimizer/dense-100/sgd/params:7114/"
    "optimizer/dense-100/adam/params:7114/"
    "allreduce/gloo/ranks:2/dense-100/bucket:0/bytes:28672/")
  set(found FALSE)
  foreach(name IN LISTS names)
    string(FIND "${name}" "${expected}" at)
    if(at EQUAL 0)
      set(found TRUE)
    endif()
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "no benchmark named ${expected}... among: ${names}")
  endif()
endforeach()
message(STATUS "scalescope-bench: ${count} benchmarks ran (commit ${commit})")
