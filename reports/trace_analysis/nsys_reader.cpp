// Nsight Systems' SQLite export (`nsys export --type sqlite`), read with SQLite. The tables and
// columns are those NVIDIA documents for the export ("SQLite Export Schema Reference"):
//   CUPTI_ACTIVITY_KIND_KERNEL   start, end (ns), globalPid, streamId, correlationId, and the
//                                kernel's name as a StringIds id: shortName (demangledName in
//                                exports without it)
//   CUPTI_ACTIVITY_KIND_MEMCPY   start, end, globalPid, streamId, correlationId, copyKind (CUPTI's
//                                CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...)
//   CUPTI_ACTIVITY_KIND_MEMSET   start, end, globalPid, streamId, correlationId
//   CUPTI_ACTIVITY_KIND_RUNTIME  start, end, globalTid, correlationId, nameId
//   NVTX_EVENTS                  start, end (NULL for marks), globalTid, text or textId
//   OSRT_API                     start, end, globalTid, nameId
//   StringIds                    id, value
// A serialized thread id is globalTid = pid * 2^24 + tid, and globalPid = pid * 2^24 (the
// export's "Serialized process and thread identifiers"). Tables are created lazily, so any of
// them may be missing; a table that is there without a column named here is an error.
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "core/check.h"
#include "reports/trace_analysis/readers.h"

namespace scalescope::traces {
namespace {

constexpr int64_t kPidShift = 24;

struct Database {
  sqlite3* db = nullptr;
  std::string file;
  ~Database() { sqlite3_close(db); }
};

using Statement = std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)>;

Statement prepare(const Database& d, const std::string& sql, const std::string& table) {
  sqlite3_stmt* s = nullptr;
  const int rc = sqlite3_prepare_v2(d.db, sql.c_str(), -1, &s, nullptr);
  Statement out(s, &sqlite3_finalize);
  SS_CHECK(rc == SQLITE_OK, "{}: table {}: {} (is it an Nsight Systems SQLite export?)", d.file,
           table, sqlite3_errmsg(d.db));
  return out;
}

// Runs `s` to its end, calling `row` for each row; throws naming the table on a read error.
template <class F>
void each_row(const Database& d, Statement& s, const std::string& table, F&& row) {
  for (;;) {
    const int rc = sqlite3_step(s.get());
    if (rc == SQLITE_DONE) return;
    SS_CHECK(rc == SQLITE_ROW, "{}: reading table {}: {}", d.file, table, sqlite3_errmsg(d.db));
    row(s.get());
  }
}

std::set<std::string> names_of(const Database& d, const std::string& sql, const std::string& what) {
  std::set<std::string> out;
  Statement s = prepare(d, sql, what);
  each_row(d, s, what, [&](sqlite3_stmt* r) {
    const unsigned char* text = sqlite3_column_text(r, 0);
    if (text != nullptr) out.insert(reinterpret_cast<const char*>(text));
  });
  return out;
}

std::set<std::string> tables(const Database& d) {
  return names_of(d, "SELECT name FROM sqlite_master WHERE type = 'table'", "sqlite_master");
}

std::set<std::string> columns(const Database& d, const std::string& table) {
  return names_of(d, fmt::format("SELECT name FROM pragma_table_info('{}')", table), table);
}

std::string copy_name(int64_t kind) {
  switch (kind) {
    case 1:
      return "Memcpy HtoD";
    case 2:
      return "Memcpy DtoH";
    case 8:
      return "Memcpy DtoD";
    case 9:
      return "Memcpy HtoH";
    case 10:
      return "Memcpy PtoP";
    default:
      return fmt::format("Memcpy (copy kind {})", kind);
  }
}

struct Source {
  std::string table;
  ActivityKind kind;
  std::string sql;  // columns: start, end, serialized id, lane, correlation, name, copy kind
};

// The query of each table the export has; names joined from StringIds (NVTX's own text first).
std::vector<Source> sources(const Database& d) {
  const std::set<std::string> have = tables(d);
  std::vector<Source> out;
  const auto add = [&](const std::string& table, ActivityKind kind, const std::string& sql) {
    if (have.contains(table)) out.push_back({table, kind, sql});
  };
  std::string kernel_name = "shortName";
  if (have.contains("CUPTI_ACTIVITY_KIND_KERNEL") &&
      !columns(d, "CUPTI_ACTIVITY_KIND_KERNEL").contains("shortName")) {
    kernel_name = "demangledName";
  }
  add("CUPTI_ACTIVITY_KIND_KERNEL", ActivityKind::kKernel,
      fmt::format("SELECT k.start, k.end, k.globalPid, k.streamId, k.correlationId, s.value, 0 "
                  "FROM CUPTI_ACTIVITY_KIND_KERNEL AS k LEFT JOIN StringIds AS s ON s.id = k.{}",
                  kernel_name));
  add("CUPTI_ACTIVITY_KIND_MEMCPY", ActivityKind::kMemcpy,
      "SELECT start, end, globalPid, streamId, correlationId, NULL, copyKind "
      "FROM CUPTI_ACTIVITY_KIND_MEMCPY");
  add("CUPTI_ACTIVITY_KIND_MEMSET", ActivityKind::kMemset,
      "SELECT start, end, globalPid, streamId, correlationId, 'Memset', 0 "
      "FROM CUPTI_ACTIVITY_KIND_MEMSET");
  add("CUPTI_ACTIVITY_KIND_RUNTIME", ActivityKind::kRuntime,
      "SELECT r.start, r.end, r.globalTid, r.globalTid, r.correlationId, s.value, 0 "
      "FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r LEFT JOIN StringIds AS s ON s.id = r.nameId");
  add("NVTX_EVENTS", ActivityKind::kAnnotation,
      "SELECT n.start, n.end, n.globalTid, n.globalTid, -1, COALESCE(n.text, s.value), 0 "
      "FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS s ON s.id = n.textId "
      "WHERE n.end IS NOT NULL");
  add("OSRT_API", ActivityKind::kOsRuntime,
      "SELECT o.start, o.end, o.globalTid, o.globalTid, -1, s.value, 0 "
      "FROM OSRT_API AS o LEFT JOIN StringIds AS s ON s.id = o.nameId");
  return out;
}

// Reads one table's rows into the processes' traces.
void read_source(const Database& d, const Source& src, NameTable& names,
                 std::map<int64_t, RankTrace>& processes) {
  Statement s = prepare(d, src.sql, src.table);
  int64_t row_index = 0;
  each_row(d, s, src.table, [&](sqlite3_stmt* r) {
    for (int c : {0, 1, 2}) {
      SS_CHECK(sqlite3_column_type(r, c) == SQLITE_INTEGER,
               "{}: table {}, row {}: start, end and the process or thread id must be integers",
               d.file, src.table, row_index);
    }
    const int64_t start = sqlite3_column_int64(r, 0);
    const int64_t end = sqlite3_column_int64(r, 1);
    SS_CHECK(end >= start, "{}: table {}, row {}: ends ({} ns) before it starts ({} ns)", d.file,
             src.table, row_index, end, start);
    SS_CHECK(static_cast<double>(end) - static_cast<double>(start) <= kMaxDurationUs * 1e3,
             "{}: table {}, row {}: lasts {} ns, longer than any trace", d.file, src.table,
             row_index, static_cast<double>(end) - static_cast<double>(start));
    Activity a;
    a.kind = src.kind;
    a.start_us = static_cast<double>(start) / 1e3;
    a.end_us = static_cast<double>(end) / 1e3;
    a.lane = sqlite3_column_int64(r, 3);
    a.correlation = sqlite3_column_type(r, 4) == SQLITE_INTEGER ? sqlite3_column_int64(r, 4) : -1;
    const unsigned char* name = sqlite3_column_text(r, 5);
    a.name = names.intern(src.kind == ActivityKind::kMemcpy ? copy_name(sqlite3_column_int64(r, 6))
                          : name != nullptr                 ? reinterpret_cast<const char*>(name)
                                                            : "");
    processes[sqlite3_column_int64(r, 2) >> kPidShift].activities.push_back(std::move(a));
    ++row_index;
  });
}

}  // namespace

std::vector<RankTrace> read_nsys_export(const std::string& path) {
  Database d;
  d.file = path;
  const int rc = sqlite3_open_v2(path.c_str(), &d.db, SQLITE_OPEN_READONLY, nullptr);
  SS_CHECK(rc == SQLITE_OK, "{}: cannot open as SQLite: {}", path,
           d.db != nullptr ? sqlite3_errmsg(d.db) : sqlite3_errstr(rc));
  const std::vector<Source> srcs = sources(d);
  SS_CHECK(!srcs.empty(),
           "{}: an SQLite file without any table of an Nsight Systems export that the analysis "
           "reads (CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME, NVTX_EVENTS, OSRT_API); "
           "export a report with `nsys export --type sqlite`",
           path);
  std::map<int64_t, RankTrace> processes;
  NameTable names;
  for (const Source& src : srcs) read_source(d, src, names, processes);
  // Processes that only made OS or runtime calls (a launcher, a daemon) are no rank.
  std::erase_if(processes, [](const auto& entry) {
    const std::vector<Activity>& a = entry.second.activities;
    return std::none_of(a.begin(), a.end(), [](const Activity& x) {
      return on_device(x.kind) || x.kind == ActivityKind::kAnnotation;
    });
  });
  std::vector<RankTrace> out;
  const std::optional<int> named = rank_from_file_name(path);
  for (auto& [pid, t] : processes) {
    t.file = path;
    t.format = TraceFormat::kNsys;
    t.rank = processes.size() == 1 && named ? *named : static_cast<int>(out.size());
    t.world_size = static_cast<int>(processes.size());
    t.sort();
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace scalescope::traces
