// Traces written in code for the trace-analysis tests: activities of a RankTrace, and an Nsight
// Systems SQLite export written from the documented schema of `nsys export --type sqlite`.
#pragma once

#include <cstdint>
#include <string>

#include "reports/trace_analysis/trace_model.h"

struct sqlite3;

namespace scalescope::traces::fixtures {

// An activity from start to end (µs) on `lane`.
Activity act(std::string name, ActivityKind kind, double start_us, double end_us, int64_t lane = 1,
             int64_t correlation = -1);

// A rank's trace of `activities` (sorted here).
RankTrace rank_trace(std::vector<Activity> activities, int rank = 0);

// An Nsight Systems SQLite export with the tables and columns of NVIDIA's "SQLite Export Schema
// Reference" that the reader uses (and more of their columns, as an export has them): StringIds,
// CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME, NVTX_EVENTS, OSRT_API. Times in ns;
// processes and threads as the export serializes them (globalPid = pid << 24, globalTid =
// globalPid + tid).
class NsysExport {
 public:
  // Creates `path` (replacing it) with every table, or only those not in `skip` (a table name).
  explicit NsysExport(const std::string& path, const std::string& skip = "");
  ~NsysExport();
  NsysExport(const NsysExport&) = delete;
  NsysExport& operator=(const NsysExport&) = delete;

  void kernel(int pid, int stream, int64_t start, int64_t end, const std::string& name,
              int64_t correlation);
  void memcpy(int pid, int stream, int64_t start, int64_t end, int copy_kind, int64_t correlation);
  void memset(int pid, int stream, int64_t start, int64_t end, int64_t correlation);
  void runtime(int pid, int tid, int64_t start, int64_t end, const std::string& name,
               int64_t correlation);
  // A push/pop range (eventType 59) with its text in StringIds (textId) or inline (text).
  void nvtx(int pid, int tid, int64_t start, int64_t end, const std::string& text,
            bool registered = true);
  void mark(int pid, int tid, int64_t at, const std::string& text);  // eventType 34, no end
  void osrt(int pid, int tid, int64_t start, int64_t end, const std::string& name);
  void exec(const std::string& sql);

 private:
  int64_t string_id(const std::string& value);
  sqlite3* db_ = nullptr;
  int64_t next_string_ = 1;
};

}  // namespace scalescope::traces::fixtures
