# Sourced by scripts/gpu-check.sh without --bundle: where the GPU machine's toolkit, wheels and
# the unpacked Debian libraries are, and the CMake arguments of build-gpu.
# shellcheck shell=bash disable=SC2034,SC2154  # set here for gpu-check.sh and its steps, or by it
deps_root=$(realpath -m "${GPU_DEPS_ROOT:-third_party/gpu-debs/root}")
build_dir=$(realpath -m "${BUILD_DIR:-build-gpu}")
shim="$build_dir/gpu-check-shim"
mkdir -p "$shim"
bin="$build_dir/scalescope"
tests_dir="$build_dir/tests"
probe="$build_dir/nccl_hostid_probe"
bench_dir="$repo/bench"
mpirun=""  # this build is configured without MPI: the bundle carries Open MPI instead

cudnn_root=${CUDNN_ROOT:-$(find_wheel cudnn_version.h 'libcudnn.so*' || true)}
nccl_root=${NCCL_ROOT:-$(find_wheel nccl.h 'libnccl.so*' || true)}
cudnn_lib=""
nccl_lib=""
[[ -n "$cudnn_root" ]] && cudnn_lib=$(lib_dir "$cudnn_root" 'libcudnn.so*')
[[ -n "$nccl_root" ]] && nccl_lib=$(lib_dir "$nccl_root" 'libnccl.so*')

# The probe links with -lnccl: an unversioned link where the wheel has only libnccl.so.2.
if [[ -n "$nccl_lib" ]]; then
  nccl_so=$(compgen -G "$nccl_lib/libnccl.so*" | sort | head -1)
  ln -sfn "$nccl_so" "$shim/libnccl.so"
fi

# zlib: the headers come from the debs, the library is the image's own libz.so.1.
zlib_so=$(ldconfig -p 2>/dev/null | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
for f in /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1 /usr/lib64/libz.so.1; do
  [[ -n "$zlib_so" ]] && break
  [[ -e "$f" ]] && zlib_so=$f
done
[[ -n "$zlib_so" ]] && ln -sfn "$zlib_so" "$shim/libz.so"

# CMake package folders inside the debs (found, not assumed: the multiarch path may differ).
cfg_dir() {
  local f
  f=$(find "$deps_root" -name "$1" -print -quit 2>/dev/null)
  [[ -n "$f" ]] && dirname "$f"
}

deps_libs="$deps_root/usr/lib/x86_64-linux-gnu:$deps_root/usr/lib"
cmake_args=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DSCALESCOPE_WITH_CUDA=ON
  -DSCALESCOPE_WITH_MPI=OFF
  -DCMAKE_CUDA_ARCHITECTURES=90
  -DCMAKE_CUDA_COMPILER="$nvcc"
  -DSCALESCOPE_WERROR="${GPU_CHECK_WERROR:-OFF}"
  -DCMAKE_PREFIX_PATH="$deps_root/usr"
  -DCMAKE_INCLUDE_PATH="$deps_root/usr/include"
  -DCMAKE_LIBRARY_PATH="$deps_root/usr/lib/x86_64-linux-gnu;$deps_root/usr/lib"
  -Ddnnl_DIR="$(cfg_dir dnnl-config.cmake)"
  -DGloo_DIR="$(cfg_dir GlooConfig.cmake)"
  -Dfmt_DIR="$(cfg_dir fmt-config.cmake)"
  -DCLI11_DIR="$(cfg_dir CLI11Config.cmake)"
  -Dnlohmann_json_DIR="$(cfg_dir nlohmann_jsonConfig.cmake)"
  -DGTest_DIR="$(cfg_dir GTestConfig.cmake)"
  -Dbenchmark_DIR="$(cfg_dir benchmarkConfig.cmake)"
  -DOpenCL_INCLUDE_DIR="$deps_root/usr/include"
  -DOpenCL_LIBRARY="$deps_root/usr/lib/x86_64-linux-gnu/libOpenCL.so"
  -DZLIB_INCLUDE_DIR="$deps_root/usr/include"
  -DZLIB_LIBRARY="$shim/libz.so"
  -DCUDNN_ROOT="$cudnn_root"
  -DNCCL_ROOT="$nccl_root"
  # libgloo.so.0 and libdnnl.so.2 need libraries that only the debs have; the linker must
  # find them too, not just the loader.
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$deps_libs"
  -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$deps_libs"
  -DCMAKE_MODULE_LINKER_FLAGS="-Wl,-rpath-link,$deps_libs"
  # CMake 4 refuses configs that ask for policies older than 3.5; 3.x ignores this.
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5
)

ld_path="$deps_libs"
[[ -n "$cudnn_lib" ]] && ld_path="$ld_path:$cudnn_lib"
[[ -n "$nccl_lib" ]] && ld_path="$ld_path:$nccl_lib"

# cuBLAS normally comes with the toolkit. If this toolkit lacks it, take it from python3's
# CUDA wheels (nvidia/cu13 or similar) rather than fail.
cublas_note="cuBLAS from the toolkit ($cuda_home)"
if [[ ! -f "$cuda_home/include/cublas_v2.h" ]] || ! compgen -G "$cuda_home/lib*/libcublas.so*" >/dev/null; then
  cublas_root=$(find_wheel cublas_v2.h 'libcublas.so*' || true)
  if [[ -n "$cublas_root" ]]; then
    cublas_lib=$(lib_dir "$cublas_root" 'libcublas.so*')
    ln -sfn "$(compgen -G "$cublas_lib/libcublas.so.*" | sort | head -1)" "$shim/libcublas.so"
    ln -sfn "$(compgen -G "$cublas_lib/libcublasLt.so.*" | sort | head -1)" "$shim/libcublasLt.so"
    cmake_args+=(-DCUDA_cublas_LIBRARY="$shim/libcublas.so" -DCUDA_cublasLt_LIBRARY="$shim/libcublasLt.so"
                 -DCMAKE_CXX_FLAGS="-isystem $cublas_root/include" -DCMAKE_CUDA_FLAGS="-isystem $cublas_root/include")
    ld_path="$ld_path:$cublas_lib"
    cublas_note="cuBLAS from the wheel $cublas_root (the toolkit at $cuda_home has none)"
  else
    cublas_note="no cuBLAS in $cuda_home nor in python3's wheels: configure will fail"
  fi
fi
export LD_LIBRARY_PATH="$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Steps run in child shells (under timeout), which see exported functions and variables but
# no arrays: the CMake arguments travel as one quoted string.
printf -v cmake_args_q '%q ' "${cmake_args[@]}"
export build_dir nccl_root nccl_lib shim deps_root cmake_args_q cudnn_root cudnn_lib zlib_so \
  cublas_note
