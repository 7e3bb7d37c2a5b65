// Address space with no memory behind it, for devices that only plan (BackendOptions::
// plan_only): a plan allocates every tensor of the batch it plans, and planning a batch must
// need neither that memory nor the time to commit it. Any read or write of it faults.
#pragma once

#include <cstddef>

namespace scalescope {

// `bytes` of address space (at least one page), page-aligned; null when the process's
// address space cannot take it.
void* reserve_address_space(size_t bytes) noexcept;
// Gives back what reserve_address_space(bytes) returned; nothing for null.
void release_address_space(void* ptr, size_t bytes) noexcept;

}  // namespace scalescope
