#include "tests/reports/trace_analysis/trace_builders.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <filesystem>
#include <stdexcept>

namespace scalescope::traces::fixtures {
namespace {

// The tables as NVIDIA documents them for the export (columns the reader does not use
// included, so that it is shown to pick its own out of a full row).
constexpr const char* kTables[][2] = {
    {"StringIds", "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL"},
    {"CUPTI_ACTIVITY_KIND_KERNEL",
     "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER "
     "NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
     "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, "
     "launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX "
     "INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, "
     "blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, "
     "dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, "
     "localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, "
     "graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER"},
    {"CUPTI_ACTIVITY_KIND_MEMCPY",
     "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER "
     "NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes "
     "INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, "
     "dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, "
     "dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER"},
    {"CUPTI_ACTIVITY_KIND_MEMSET",
     "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER "
     "NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value "
     "INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"},
    {"CUPTI_ACTIVITY_KIND_RUNTIME",
     "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid "
     "INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, "
     "callchainId INTEGER"},
    {"NVTX_EVENTS",
     "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category "
     "INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId "
     "INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
     "uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText "
     "TEXT"},
    {"OSRT_API",
     "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid "
     "INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, "
     "nestingLevel INTEGER, callchainId INTEGER"},
};

int64_t global_pid(int pid) {
  return static_cast<int64_t>(pid) << 24;
}
int64_t global_tid(int pid, int tid) {
  return global_pid(pid) + tid;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Activity act(std::string name, ActivityKind kind, double start_us, double end_us, int64_t lane,
             int64_t correlation) {
  Activity a;
  a.name = std::move(name);
  a.kind = kind;
  a.start_us = start_us;
  a.end_us = end_us;
  a.lane = lane;
  a.correlation = correlation;
  return a;
}

RankTrace rank_trace(std::vector<Activity> activities, int rank) {
  RankTrace t;
  t.file = fmt::format("rank-{}.json", rank);
  t.rank = rank;
  t.activities = std::move(activities);
  t.sort();
  return t;
}

NsysExport::NsysExport(const std::string& path, const std::string& skip) {
  std::filesystem::remove(path);
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("sqlite3_open");
  for (const auto& [name, columns] : kTables) {
    if (skip != name) exec(fmt::format("CREATE TABLE {} ({})", name, columns));
  }
}

NsysExport::~NsysExport() {
  sqlite3_close(db_);
}

void NsysExport::exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = fmt::format("{}: {}", sql, error != nullptr ? error : "?");
    sqlite3_free(error);
    throw std::runtime_error(message);
  }
}

int64_t NsysExport::string_id(const std::string& value) {
  const int64_t id = next_string_++;
  exec(fmt::format("INSERT INTO StringIds VALUES ({}, {})", id, quoted(value)));
  return id;
}

void NsysExport::kernel(int pid, int stream, int64_t start, int64_t end, const std::string& name,
                        int64_t correlation) {
  const int64_t id = string_id(name);
  exec(fmt::format(
      "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
      "correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, "
      "gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
      "localMemoryPerThread, localMemoryTotal, gridId) VALUES ({}, {}, 0, 1, {}, {}, {}, {}, {}, "
      "32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 1)",
      start, end, stream, correlation, global_pid(pid), id, id));
}

void NsysExport::memcpy(int pid, int stream, int64_t start, int64_t end, int copy_kind,
                        int64_t correlation) {
  exec(fmt::format(
      "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, "
      "correlationId, globalPid, bytes, copyKind) VALUES ({}, {}, 0, 1, {}, {}, {}, 4096, {})",
      start, end, stream, correlation, global_pid(pid), copy_kind));
}

void NsysExport::memset(int pid, int stream, int64_t start, int64_t end, int64_t correlation) {
  exec(fmt::format(
      "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, "
      "correlationId, globalPid, value, bytes) VALUES ({}, {}, 0, 1, {}, {}, {}, 0, 4096)",
      start, end, stream, correlation, global_pid(pid)));
}

void NsysExport::runtime(int pid, int tid, int64_t start, int64_t end, const std::string& name,
                         int64_t correlation) {
  exec(
      fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
                  "correlationId, nameId, returnValue) VALUES ({}, {}, 1, {}, {}, {}, 0)",
                  start, end, global_tid(pid, tid), correlation, string_id(name)));
}

void NsysExport::nvtx(int pid, int tid, int64_t start, int64_t end, const std::string& text,
                      bool registered) {
  exec(
      fmt::format("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text, textId) "
                  "VALUES ({}, {}, 59, {}, {}, {})",
                  start, end, global_tid(pid, tid), registered ? "NULL" : quoted(text),
                  registered ? std::to_string(string_id(text)) : "NULL"));
}

void NsysExport::mark(int pid, int tid, int64_t at, const std::string& text) {
  exec(
      fmt::format("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text) VALUES "
                  "({}, NULL, 34, {}, {})",
                  at, global_tid(pid, tid), quoted(text)));
}

void NsysExport::osrt(int pid, int tid, int64_t start, int64_t end, const std::string& name) {
  exec(fmt::format(
      "INSERT INTO OSRT_API (start, end, eventClass, globalTid, nameId, returnValue) VALUES "
      "({}, {}, 27, {}, {}, 0)",
      start, end, global_tid(pid, tid), string_id(name)));
}

}  // namespace scalescope::traces::fixtures
