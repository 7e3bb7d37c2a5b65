// Software prefetch for the CPU kernels' streaming loops (GELU, Adam, layer norm's rows). One
// core of this project's Xeon moved 5.5 GB/s through such a loop on its hardware
// prefetchers alone: GPT mini's GELU backward over a 2048×1024 activation written long before
// took 4.4 ms a layer inside a step, the same loop 1.9 ms on data in cache. Asking for the lines
// 4 KiB ahead of the loop brought it to 2.3 ms on cold data in isolation and 2.4-2.7 ms inside
// the step (why the hardware falls short was not established: madvise'd huge pages did not
// change it). Prefetches change no result, only when the lines arrive.
#pragma once

#include <algorithm>
#include <cstdint>

namespace scalescope::cpu_prefetch {

// Only inlined code prefetches: GCC deems a function whose one effect is a prefetch free of side
// effects, and drops calls to it that are not inlined (a lambda passed down to a larger loop was).
// Hence the always_inline below.

// Elements a loop computes between two rounds of prefetches, and how far ahead of them the
// prefetched elements lie (in elements of each stream: 4 KiB ahead for floats).
constexpr int64_t kBlock = 256;
constexpr int64_t kAhead = 1024;
constexpr int64_t kLineBytes = 64;

// Asks for the cache lines of `bytes` bytes starting `offset` bytes past `p`. The address is
// formed as an integer, so it may lie past the buffer's end (no out-of-range pointer is ever
// made): an x86 prefetch of any address never faults, and one past the end only fetches a
// neighbour's lines or nothing.
[[gnu::always_inline]] inline void prefetch_lines(const void* p, int64_t offset, int64_t bytes) {
  const auto base = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(offset);
  for (int64_t at = 0; at < bytes; at += kLineBytes) {
    __builtin_prefetch(reinterpret_cast<const void*>(base + static_cast<uintptr_t>(at)));
  }
}

// Before a loop computes the `count` elements at `p`: asks for the `count` elements kAhead past
// them, which the loop reaches a few blocks (or rows) later.
template <class T>
[[gnu::always_inline]] inline void prefetch_ahead(const T* p, int64_t count) {
  prefetch_lines(p, kAhead * int64_t{sizeof(T)}, count * int64_t{sizeof(T)});
}

// body(begin, end) over [0, n) in blocks of kBlock elements, each block preceded by prefetches of
// the elements kAhead past it in every stream read (`streams`, indexed as the body indexes them).
// Always inlined into its caller, so that a vector clone's body vectorises as the clone.
template <class Body, class... T>
[[gnu::always_inline]] inline void in_prefetched_blocks(int64_t n, const Body& body,
                                                        const T*... streams) {
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    (prefetch_ahead(streams + begin, kBlock), ...);
    body(begin, std::min(n, begin + kBlock));
  }
}

}  // namespace scalescope::cpu_prefetch
