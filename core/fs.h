// File helpers shared by checkpoints and reports.
#pragma once

#include <string>
#include <string_view>

namespace scalescope {

// Writes `data` to `path` atomically: a temporary file in the same directory, flushed, then
// renamed over `path`. A reader sees the old file or the new one, never a torn one. A
// symbolic link is written through (the link stays); a path that is a directory, a device or
// a pipe is refused. Throws Error naming the path and the system's reason.
void write_file_atomic(const std::string& path, std::string_view data);
// Checks, by creating and removing a file there, that a file can be written at `path`: its
// directory exists and this process may create files in it (permissions, a read-only mount,
// a path that is not a directory) and that `path` is not one write_file_atomic refuses. Throws
// Error naming the directory and the system's reason. Run before work whose results would otherwise
// be lost when the write fails at its end.
void check_can_write(const std::string& path);
// Where keep_previous moves a file: "run.json" -> "run.old.json", "run" -> "run.old".
std::string previous_path(const std::string& path);
// Before a new result replaces the file at `path` (through a link, the file it names): moves
// a non-empty regular file there to previous_path, replacing an older one (one generation, as
// perf keeps perf.data.old), so that a run writing to the same name as the last loses nothing
// of the last one's. Returns where it moved the file, "" when there was none. Throws Error
// naming both paths when the rename fails.
std::string keep_previous(const std::string& path);
// Reads a whole file; throws a UsageError naming the path and the reason (a directory too).
std::string read_file(const std::string& path);
// Throws read_file's UsageError for a path that names a directory or a device (which reads
// forever); a file, a pipe or a path that does not exist (whose open fails then) passes.
void check_readable(const std::string& path);

}  // namespace scalescope
