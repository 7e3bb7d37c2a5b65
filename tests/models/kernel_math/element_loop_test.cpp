// kernel_math/element_loop.h: the element-wise kernels' loop. Run for every thread of a grid on
// the host, it must take each element exactly once, in steps of kElementsAhead grid-stride
// elements whose reads all come before their writes, whatever the count against the grid.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "models/kernel_math/element_loop.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

// The accesses of one thread: 'L' for a read of an element, 'S' for a write, in order.
struct Thread {
  std::string accesses;
};

void expect_each_element_once(int64_t threads, int64_t count) {
  SCOPED_TRACE(::testing::Message() << threads << " threads, " << count << " elements");
  std::vector<int> loads(static_cast<size_t>(count)), stores(static_cast<size_t>(count));
  for (int64_t t = 0; t < threads; ++t) {
    Thread thread;
    km::for_each_element(
        t, threads, count,
        [&](int64_t i) {
          ++loads.at(static_cast<size_t>(i));
          thread.accesses += 'L';
          return i;
        },
        [&](int64_t i, int64_t loaded) {
          EXPECT_EQ(loaded, i);  // each write gets its own element's reads
          EXPECT_EQ(i % threads, t);
          ++stores.at(static_cast<size_t>(i));
          thread.accesses += 'S';
        });
    // Steps of kElementsAhead reads then as many writes (the last step may be shorter).
    size_t at = 0;
    while (at < thread.accesses.size()) {
      const size_t reads = thread.accesses.find('S', at) - at;
      ASSERT_GE(reads, 1u);
      ASSERT_LE(reads, static_cast<size_t>(km::kElementsAhead));
      ASSERT_EQ(thread.accesses.substr(at + reads, reads), std::string(reads, 'S'));
      const bool last = at + 2 * reads == thread.accesses.size();
      if (!last) {
        ASSERT_EQ(reads, static_cast<size_t>(km::kElementsAhead));
      }
      at += 2 * reads;
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(loads[static_cast<size_t>(i)], 1) << "element " << i;
    ASSERT_EQ(stores[static_cast<size_t>(i)], 1) << "element " << i;
  }
}

TEST(KernelMathElementLoop, EveryElementIsReadAndWrittenOnceReadsFirst) {
  for (const int64_t threads : {1, 3, 32, 256}) {
    for (const int64_t count : {0, 1, 2, 31, 255, 256, 257, 1023, 1024, 1025, 4099}) {
      expect_each_element_once(threads, count);
    }
  }
  // The launchers' grid: element_threads(count) threads (or fewer where the grid is capped).
  for (const int64_t count : {1, 4, 5, 1000, 1001}) {
    expect_each_element_once(km::element_threads(count), count);
    expect_each_element_once(std::max<int64_t>(1, km::element_threads(count) / 3), count);
  }
  EXPECT_EQ(km::element_threads(0), 0);
  EXPECT_EQ(km::element_threads(4), 1);
  EXPECT_EQ(km::element_threads(5), 2);
}

}  // namespace
}  // namespace scalescope::kernel_math_test
