// The SCALESCOPE_* variables that kernels read when they are built (a kernel's alternative to its
// default: the choice before it, or one not yet the default, for comparing), read all at once: a
// command reads them when it starts (harness/cli/settings_check.cpp), so that a bad value is named
// whatever the run builds, never only on the devices or models whose kernels read it, and so that
// their names count among the settings scalescope knows (core/env.h).
#pragma once

namespace scalescope {

// Throws Error naming the first variable whose value its kernel would refuse.
void read_kernel_environment();

}  // namespace scalescope
