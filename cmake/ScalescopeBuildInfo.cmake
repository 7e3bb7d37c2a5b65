# Writes the build facts of scalescope (core/build_info.cpp.in) into OUTPUT.
#
# Included from a CMakeLists.txt it defines scalescope_add_build_info(TARGET), which adds a
# target that runs this file as a script (cmake -P) on every build, so the git commit in a
# report is the one the binary was built from, not the one at configure time. The script
# rewrites OUTPUT only when its content changes (configure_file compares), and the target
# declares OUTPUT as a byproduct, so Ninja/Make recompile that one file only after a commit.

if(CMAKE_SCRIPT_MODE_FILE)
  # Script mode. Inputs: SOURCE_DIR, TEMPLATE, OUTPUT and the SS_* facts known at configure
  # time. A tree without .git (a tarball) or without git gives "unknown".
  set(SS_GIT_COMMIT unknown)
  set(SS_GIT_DIRTY false)
  find_package(Git QUIET)
  if(GIT_FOUND)
    # A tarball unpacked inside some other checkout must not report that checkout's commit.
    execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --show-toplevel
                    WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE _rc
                    OUTPUT_VARIABLE _top ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    file(REAL_PATH "${SOURCE_DIR}" _source)
    if(_rc EQUAL 0)
      file(REAL_PATH "${_top}" _top)
    endif()
    if(_rc EQUAL 0 AND _top STREQUAL _source)
      execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --verify HEAD
                      WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE _rc
                      OUTPUT_VARIABLE _commit ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    else()
      set(_rc 1)
    endif()
    if(_rc EQUAL 0 AND _commit MATCHES "^[0-9a-f]+$")
      set(SS_GIT_COMMIT "${_commit}")
      # Untracked files (build folders, scratch) do not make a build differ from its commit.
      execute_process(COMMAND "${GIT_EXECUTABLE}" status --porcelain --untracked-files=no
                      WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE _rc
                      OUTPUT_VARIABLE _status ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(NOT _rc EQUAL 0 OR NOT _status STREQUAL "")
        set(SS_GIT_DIRTY true)
      endif()
    endif()
  endif()
  configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
  return()
endif()

set(_ss_build_info_script "${CMAKE_CURRENT_LIST_FILE}")

# scalescope_add_build_info(TARGET): compiles the generated build facts into TARGET.
function(scalescope_add_build_info target)
  set(_out "${CMAKE_CURRENT_BINARY_DIR}/build_info.cpp")
  set(_template "${PROJECT_SOURCE_DIR}/core/build_info.cpp.in")
  if(SCALESCOPE_WITH_CUDA AND CMAKE_CUDA_ARCHITECTURES)
    set(_archs "${CMAKE_CUDA_ARCHITECTURES}")
  else()
    set(_archs none)
  endif()
  # Debian's libgloo-dev headers carry a fixed 0.5.0; the package version names the
  # snapshot actually installed. Fixed at configure time: it changes only with the package.
  set(_gloo unknown)
  find_program(SCALESCOPE_DPKG_QUERY dpkg-query)
  mark_as_advanced(SCALESCOPE_DPKG_QUERY)
  if(SCALESCOPE_DPKG_QUERY)
    execute_process(COMMAND "${SCALESCOPE_DPKG_QUERY}" -W "-f=\${Version}" libgloo-dev
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _version ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0 AND NOT _version STREQUAL "")
      set(_gloo "${_version}")
    endif()
  endif()
  # A list would be split into several arguments; ";" becomes "," for the report.
  string(REPLACE ";" "," _archs "${_archs}")
  add_custom_target(${target}_build_info
    COMMAND "${CMAKE_COMMAND}"
            "-DSOURCE_DIR=${PROJECT_SOURCE_DIR}" "-DTEMPLATE=${_template}" "-DOUTPUT=${_out}"
            "-DSS_VERSION=${PROJECT_VERSION}"
            "-DSS_COMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
            "-DSS_BUILD_TYPE=$<CONFIG>" "-DSS_CUDA_ARCHITECTURES=${_archs}"
            "-DSS_GLOO_PACKAGE_VERSION=${_gloo}"
            -P "${_ss_build_info_script}"
    BYPRODUCTS "${_out}"
    DEPENDS "${_template}" "${_ss_build_info_script}"
    COMMENT "Recording build facts (git commit) for ${target}"
    VERBATIM)
  target_sources(${target} PRIVATE "${_out}")
  add_dependencies(${target} ${target}_build_info)
endfunction()
