// The readers: one per trace format, each producing RankTraces (trace_model.h). Every reader
// throws Error naming the file and what was wrong with it (not valid JSON, a gzip stream cut
// short, an event without a time, a table without a column it needs), never anything else.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/byte_source.h"
#include "reports/trace_analysis/trace_model.h"

namespace scalescope::traces {

// One file of any format, recognised by its content: SQLite's header (an Nsight Systems export:
// `nsys export --type sqlite`), gzip's magic (a compressed Chrome trace), else a Chrome trace's
// JSON (Kineto's; the legacy profiler's of a PyTorch without Kineto, a bare array of events
// without categories; or scalescope's own when its otherData.generator is "scalescope").
std::vector<RankTrace> read_trace_file(const std::string& path);

// The traces a path names: a file itself; of a directory (torch.profiler's TensorBoard handler
// writes one trace a rank into its folder, and HTA reads such a folder), the files in it named
// *.json, *.json.gz or *.sqlite, in name order (not its subdirectories). Throws Error for a
// directory without such files or that cannot be listed.
std::vector<std::string> trace_paths(const std::string& path);

// A Chrome trace's JSON text. `file` names it in errors and in the traces. A Kineto or legacy
// profiler's trace is one rank: the rank of its distributedInfo, else of its file name
// (rank_from_file_name), else unknown (rank -1: the caller numbers it). scalescope's trace is one
// rank per replica.
std::vector<RankTrace> parse_chrome_trace(std::string_view text, const std::string& file);
// The same from a source (a file, decompressed if it is gzip), read as the parser goes.
std::vector<RankTrace> parse_chrome_trace(ByteSource& source, const std::string& file);

// An Nsight Systems SQLite export, one rank per profiled process that ran device work or NVTX
// ranges (in process id order; a single process takes the rank of its file name, if any).
std::vector<RankTrace> read_nsys_export(const std::string& path);

}  // namespace scalescope::traces
