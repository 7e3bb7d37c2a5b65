#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/byte_source.h"
#include "core/check.h"
#include "reports/trace_analysis/readers.h"

namespace scalescope::traces {

namespace fs = std::filesystem;

std::vector<std::string> trace_paths(const std::string& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) return {path};
  std::vector<std::string> out;
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const bool trace =
        name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".sqlite");
    if (trace && it->is_regular_file(error)) out.push_back(it->path().string());
  }
  SS_CHECK_INPUT(!error, "cannot list the directory '{}': {}", path, error.message());
  SS_CHECK_INPUT(!out.empty(),
                 "'{}' is a directory without traces (files named *.json, *.json.gz or *.sqlite)",
                 path);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<RankTrace> read_trace_file(const std::string& path) {
  // SQLite's header, its NUL included: the first 16 bytes of an Nsight Systems export.
  constexpr std::string_view kSqliteMagic("SQLite format 3", 16);
  ByteSource source(path, path);
  if (source.head().starts_with(kSqliteMagic)) return read_nsys_export(path);
  return parse_chrome_trace(source, path);
}

}  // namespace scalescope::traces
