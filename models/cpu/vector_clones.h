// SCALESCOPE_VECTOR_CLONES before a CPU kernel's hot loop function: it is also compiled for
// AVX2 and AVX-512 (x86-64-v4: F with BW, DQ and VL, as every AVX-512 server CPU has; without
// BW, loops over 16-bit values such as bf16's ran 32 bytes at a time), and the loader picks
// the best the CPU has (GCC's function multi-versioning); the portable build targets x86-64's
// baseline (SSE2), 4 floats at a time.
// GCC only, and not under ThreadSanitizer, whose runtime is not up yet when the loader runs
// the clones' resolvers (a program with a clone crashes at start). A clone must compute the
// baseline's bits: a file whose clones multiply and add keeps -ffp-contract=off.
#pragma once

#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define SCALESCOPE_VECTOR_CLONES [[gnu::target_clones("arch=x86-64-v4", "avx2", "default")]]
#else
#define SCALESCOPE_VECTOR_CLONES
#endif
