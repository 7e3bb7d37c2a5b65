// SS_HOST_DEVICE marks a function compiled for both the host and the GPU: `__host__ __device__`
// under nvcc, nothing in a host-only compiler. The math of our CUDA kernels is written in such
// functions (models/kernel_math/) so that CPU tests run the same code in every build.
//
// Contract of those functions: every floating-point operation is rounded as written, as in the
// CPU kernels (built for baseline x86-64, which has no FMA instruction). So nvcc must compile
// them with --fmad=false, and host code that compares them bit for bit with the CPU kernels with
// -ffp-contract=off: no compiler may fuse a multiply and an add on its own. Where a fused
// multiply-add is meant, the code calls fmaf.
#pragma once

#if defined(__CUDACC__)
#define SS_HOST_DEVICE __host__ __device__
#else
#define SS_HOST_DEVICE
#endif
