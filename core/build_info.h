// Facts fixed when the binary was built, written on every build by
// cmake/ScalescopeBuildInfo.cmake into the build_info.cpp generated from build_info.cpp.in.
#pragma once

namespace scalescope::build_info {

extern const char* const kScalescopeVersion;
extern const char* const kCompiler;
extern const char* const kBuildType;          // "" for a configuration without one
extern const char* const kCudaArchitectures;  // e.g. "90", or "none"
extern const char* const kGitCommit;          // 40 hex digits, or "unknown"
extern const bool kGitDirty;
// libgloo-dev's package version, or "unknown" where dpkg does not know it.
extern const char* const kGlooPackageVersion;

}  // namespace scalescope::build_info
