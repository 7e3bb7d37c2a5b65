# FindCUDNN: cuDNN headers and library.
# Honours CUDNN_ROOT (CMake variable or environment), e.g. the include/ and lib/ of the
# nvidia-cudnn-cu13 Python wheel, whose library has no unversioned libcudnn.so link.
# Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY and CUDNN::cudnn.
set(_cudnn_hints ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT} /usr/local/cuda)
find_path(CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${_cudnn_hints} PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cudnn_hints}
             PATH_SUFFIXES lib lib64 lib/x64)
if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_defs
       REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX REPLACE ".*#define CUDNN_${_part} +([0-9]+).*" "\\1" _cudnn_${_part}
           "${_cudnn_defs}")
  endforeach()
  set(CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
                                  VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
