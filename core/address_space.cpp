#include "core/address_space.h"

#include <sys/mman.h>

#include <algorithm>

namespace scalescope {

void* reserve_address_space(size_t bytes) noexcept {
  // PROT_NONE with MAP_NORESERVE: no page is ever committed, and the kernel's overcommit
  // accounting does not count it, so a plan of more than the machine's memory still succeeds.
  void* ptr = mmap(nullptr, std::max<size_t>(bytes, 1), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

void release_address_space(void* ptr, size_t bytes) noexcept {
  if (ptr != nullptr) munmap(ptr, std::max<size_t>(bytes, 1));
}

}  // namespace scalescope
