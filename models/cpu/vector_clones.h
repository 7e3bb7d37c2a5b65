// SCALESCOPE_VECTOR_CLONES before a CPU kernel's hot loop function: it is also compiled for
// AVX2 and AVX-512, and the loader picks the best the CPU has (GCC's function
// multi-versioning); the portable build targets x86-64's baseline (SSE2), 4 floats at a time.
// GCC only, and not under ThreadSanitizer, whose runtime is not up yet when the loader runs
// the clones' resolvers (a program with a clone crashes at start). A clone must compute the
// baseline's bits: a file whose clones multiply and add keeps -ffp-contract=off.
#pragma once

#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define SCALESCOPE_VECTOR_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#else
#define SCALESCOPE_VECTOR_CLONES
#endif
