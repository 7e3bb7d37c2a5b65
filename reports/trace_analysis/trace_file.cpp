#include <string_view>

#include "core/byte_source.h"
#include "reports/trace_analysis/readers.h"

namespace scalescope::traces {

std::vector<RankTrace> read_trace_file(const std::string& path) {
  // SQLite's header, its NUL included: the first 16 bytes of an Nsight Systems export.
  constexpr std::string_view kSqliteMagic("SQLite format 3", 16);
  ByteSource source(path, path);
  if (source.head().starts_with(kSqliteMagic)) return read_nsys_export(path);
  return parse_chrome_trace(source, path);
}

}  // namespace scalescope::traces
