// File helpers shared by checkpoints and reports.
#pragma once

#include <string>
#include <string_view>

namespace scalescope {

// Writes `data` to `path` atomically: a temporary file in the same directory, flushed, then
// renamed over `path`. A reader sees the old file or the new one, never a torn one.
// Throws Error naming the path and the system's reason.
void write_file_atomic(const std::string& path, std::string_view data);
// Reads a whole file; throws Error naming the path and the reason.
std::string read_file(const std::string& path);

}  // namespace scalescope
