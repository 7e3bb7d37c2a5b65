#include "reports/trace_analysis/readers.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "reports/trace_analysis/job.h"
#include "tests/reports/trace_analysis/trace_builders.h"
#include "tests/test_util.h"

namespace scalescope::traces {
namespace {

namespace fs = std::filesystem;
using testing_util::error_of;

// Kineto's shapes: a host op, an annotation, a runtime call and the kernel it launched (pid:
// the device, tid: the stream, and args.stream), a flow event and the profiler's span.
constexpr const char* kKineto = R"json({
  "schemaVersion": 1,
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 10, "tid": 11,
     "ts": 1000.5, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11, "ts": 1010, "dur": 5},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11,
     "ts": 1011, "dur": 2, "args": {"correlation": 77}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1020, "dur": 30,
     "args": {"stream": 7, "correlation": 77, "device": 0}},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 0, "tid": 7, "ts": 1020},
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
     "tid": "PyTorch Profiler", "ts": 900, "dur": 500}
  ]
})json";

class TraceFiles : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    const fs::path dir =
        fs::temp_directory_path() / ("scalescope-readers-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    dirs_.push_back(dir);
    return (dir / name).string();
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string gzip(const std::string& name, const std::string& text) {
    const std::string p = path(name);
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return p;
  }
  ~TraceFiles() override {
    for (const fs::path& d : dirs_) fs::remove_all(d);
  }
  std::vector<fs::path> dirs_;
};

// Found by tests/fuzz (trace_analysis): a tid of 2.7e99 was converted to int64_t, which is
// undefined (UBSan stopped there); such a number is a lane of its own, as a string would be.
TEST(ChromeReader, LaneNumbersPastInt64AreLanesOfTheirOwn) {
  const std::string events = R"json({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2.7e99, "ts": 0, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": -2.7e99, "ts": 2, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 5.0, "ts": 4, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "d", "pid": 1, "tid": 5, "ts": 6, "dur": 1}]})json";
  const std::vector<RankTrace> t = parse_chrome_trace(events, "rank-0.json");
  ASSERT_EQ(t.size(), 1u);
  ASSERT_EQ(t[0].activities.size(), 4u);
  EXPECT_NE(t[0].activities[0].lane, t[0].activities[1].lane);
  EXPECT_EQ(t[0].activities[2].lane, 5);
  EXPECT_EQ(t[0].activities[3].lane, 5);
}

TEST(ChromeReader, KinetoEventsBecomeActivities) {
  const std::vector<RankTrace> t = parse_chrome_trace(kKineto, "rank-9.json");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].rank, 3);  // distributedInfo first, then the file name
  EXPECT_EQ(t[0].world_size, 4);
  EXPECT_EQ(t[0].format, TraceFormat::kKineto);
  ASSERT_EQ(t[0].activities.size(), 4u);  // not the flow, not the profiler's span
  const Activity& step = t[0].activities[0];
  EXPECT_EQ(step.name, "ProfilerStep#5");
  EXPECT_EQ(step.kind, ActivityKind::kAnnotation);
  EXPECT_DOUBLE_EQ(step.start_us, 1000.5);
  EXPECT_DOUBLE_EQ(step.end_us, 1100.5);
  const Activity& kernel = t[0].activities[3];
  EXPECT_EQ(kernel.kind, ActivityKind::kKernel);
  EXPECT_EQ(kernel.lane, 7);
  EXPECT_EQ(kernel.correlation, 77);
  EXPECT_EQ(t[0].activities[2].kind, ActivityKind::kRuntime);
  EXPECT_EQ(t[0].activities[2].correlation, 77);
}

// PyTorch's legacy profiler (a PyTorch without Kineto, as Debian's 1.13) writes the same
// operators and record_function ranges as a bare array without categories (profiler_util.py's
// export_chrome_trace: pid "CPU functions", the thread as tid, args empty).
constexpr const char* kLegacy = R"json([
  {"name": "ProfilerStep#2", "ph": "X", "ts": 100, "dur": 50, "tid": 1, "pid": "CPU functions", "args": {}},
  {"name": "aten::mm", "ph": "X", "ts": 105, "dur": 5, "tid": 1, "pid": "CPU functions", "args": {}},
  {"name": "c10d::allreduce_", "ph": "X", "ts": 120, "dur": 2, "tid": 1, "pid": "CPU functions", "args": {}},
  {"name": "gloo:all_reduce", "ph": "X", "ts": 121, "dur": 9, "tid": 3, "pid": "CPU functions", "args": {}},
  {"name": "Optimizer.step#SGD.step", "ph": "X", "ts": 135, "dur": 10, "tid": 1, "pid": "CPU functions", "args": {}}
])json";

TEST(ChromeReader, LegacyProfilerEventsAreRangesOrOperatorsByName) {
  const std::vector<RankTrace> t = parse_chrome_trace(kLegacy, "rank-1.json");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].format, TraceFormat::kTorchLegacy);
  EXPECT_EQ(t[0].rank, 1);  // from the file name: the format says none
  ASSERT_EQ(t[0].activities.size(), 5u);
  std::map<std::string, ActivityKind> kinds;
  for (const Activity& a : t[0].activities) kinds[std::string(a.name.view())] = a.kind;
  EXPECT_EQ(kinds.at("ProfilerStep#2"), ActivityKind::kAnnotation);
  EXPECT_EQ(kinds.at("gloo:all_reduce"), ActivityKind::kAnnotation);
  EXPECT_EQ(kinds.at("Optimizer.step#SGD.step"), ActivityKind::kAnnotation);
  EXPECT_EQ(kinds.at("aten::mm"), ActivityKind::kHostOp);
  EXPECT_EQ(kinds.at("c10d::allreduce_"), ActivityKind::kHostOp);
  EXPECT_FALSE(t[0].has_device());
}

// The legacy profiler draws a flow from an operator to the CUDA kernels it launched but records
// none of them: such a trace cannot say what the GPU did, and is refused saying what would.
TEST(ChromeReader, ALegacyTraceOfACudaJobIsRefusedNamingTheProfilerThatRecordsKernels) {
  std::string events = kLegacy;
  events.insert(events.rfind(']'), R"(, {"name": "aten::mm", "ph": "s", "ts": 105, "tid": 1,
      "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}})");
  const std::string e = error_of([&] { parse_chrome_trace(events, "t.json"); });
  EXPECT_NE(e.find("t.json: a trace of PyTorch's legacy profiler"), std::string::npos) << e;
  EXPECT_NE(e.find("none of the GPU's work"), std::string::npos) << e;
  EXPECT_NE(e.find("ProfilerActivity.CUDA"), std::string::npos) << e;
}

TEST(ChromeReader, ALegacyEventWithoutItsTimeIsNamed) {
  const std::string events =
      R"([{"name": "aten::mm", "ph": "X", "ts": 5, "tid": 1, "pid": "CPU functions"}])";
  const std::string e = error_of([&] { parse_chrome_trace(events, "t.json"); });
  EXPECT_NE(e.find("t.json: traceEvents[0] ('X' event) has no 'dur'"), std::string::npos) << e;
}

// Events without a category beside Kineto's are not Kineto's: a Kineto trace stays one.
TEST(ChromeReader, UncategorizedEventsInAKinetoTraceAreLeftOut) {
  const std::string events = R"json([
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 1},
    {"ph": "X", "name": "other", "pid": 1, "tid": 1, "ts": 2, "dur": 1}])json";
  const std::vector<RankTrace> t = parse_chrome_trace(events, "t.json");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].format, TraceFormat::kKineto);
  ASSERT_EQ(t[0].activities.size(), 1u);
  EXPECT_EQ(t[0].activities[0].name, "aten::mm");
}

TEST(ChromeReader, RankFromTheFileNameWhenTheTraceHasNone) {
  const std::string events = R"({"traceEvents": []})";
  EXPECT_EQ(parse_chrome_trace(events, "/runs/job.rank_12.pt.trace.json")[0].rank, 12);
  EXPECT_EQ(parse_chrome_trace(events, "/runs/worker0.json")[0].rank, -1);
  EXPECT_EQ(rank_from_file_name("a/rank-3/trace.json"), std::nullopt);  // the file's own name
  EXPECT_EQ(rank_from_file_name("rank7.json"), 7);
}

TEST(ChromeReader, BadEventsAreNamed) {
  EXPECT_CONTAINS(error_of([] { parse_chrome_trace(R"({"traceEvents": [)", "t.json"); }),
                  "t.json is not valid JSON");
  EXPECT_CONTAINS(error_of([] { parse_chrome_trace(R"({"events": []})", "t.json"); }),
                  "t.json: not a Chrome trace: no 'traceEvents' array");
  EXPECT_CONTAINS(error_of([] {
                    parse_chrome_trace(
                        R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1}]})",
                        "t.json");
                  }),
                  "t.json: traceEvents[0] ('X' event) has no 'dur'");
  EXPECT_CONTAINS(error_of([] {
                    parse_chrome_trace(R"({"traceEvents": [{"ph": "X", "cat": "kernel",
                        "name": "k", "ts": 5, "dur": -1}]})",
                                       "t.json");
                  }),
                  "traceEvents[0] ('k'): ts 5 µs, dur -1 µs is no time of a trace");
}

// A trace repeats a few names over millions of events: each name's text is held once, the
// events of a name pointing at it, while the events of a dropped category leave the trace.
TEST(ChromeReader, EventsOfOneNameShareItsText) {
  const std::string kineto = R"json({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm_with_a_name_longer_than_sso", "pid": 1,
     "tid": 2, "ts": 1, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 2, "ts": 2, "dur": 1},
    {"ph": "X", "cat": "ac2g", "name": "aten::relu", "pid": 1, "tid": 2, "ts": 2.5, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm_with_a_name_longer_than_sso", "pid": 1,
     "tid": 2, "ts": 3, "dur": 1}]})json";
  const std::vector<Activity> a = parse_chrome_trace(kineto, "rank-0.json")[0].activities;
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].name, "aten::addmm_with_a_name_longer_than_sso");
  EXPECT_EQ(a[1].name, "aten::relu");
  EXPECT_EQ(a[2].name, a[0].name.view());
  EXPECT_EQ(a[2].name.view().data(), a[0].name.view().data());
  EXPECT_NE(a[1].name.view().data(), a[0].name.view().data());
}

// The reader takes each event as the parser meets it, before it knows the trace's format
// (otherData may come after the events): each format's errors are still its own.
TEST(ChromeReader, EachFormatChecksTheEventsItReads) {
  // Kineto's reader leaves out categories it does not read, a broken event among them.
  const std::string kineto = R"json({"traceEvents": [
    {"ph": "X", "cat": "gpu_user_annotation", "name": "x", "ts": 1},
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 4, "dur": 1}]})json";
  const std::vector<RankTrace> t = parse_chrome_trace(kineto, "rank-0.json");
  ASSERT_EQ(t.size(), 1u);
  ASSERT_EQ(t[0].activities.size(), 1u);
  EXPECT_EQ(t[0].activities[0].name, "a");
  // scalescope's reads every complete event, so the same event is an error there, and so is
  // a replica out of range; its otherData after the events still says whose trace it is.
  const std::string ours = R"json({"traceEvents": [
    {"ph": "X", "cat": "phase", "name": "forward", "pid": 0, "tid": 1, "ts": 0, "dur": 2},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "x", "ts": 1}],
    "otherData": {"generator": "scalescope"}})json";
  EXPECT_CONTAINS(error_of([&] { parse_chrome_trace(ours, "t.json"); }),
                  "t.json: traceEvents[1] ('X' event) has no 'dur'");
  const std::string far = R"json({"traceEvents": [
    {"ph": "X", "cat": "phase", "name": "forward", "pid": 2000000, "tid": 1, "ts": 0, "dur": 2}],
    "otherData": {"generator": "scalescope"}})json";
  EXPECT_CONTAINS(error_of([&] { parse_chrome_trace(far, "t.json"); }),
                  "t.json: traceEvents[0]: replica (pid) 2000000 out of range");
  const std::string good = R"json({"traceEvents": [
    {"ph": "X", "cat": "phase", "name": "forward", "pid": 1, "tid": 1, "ts": 0, "dur": 2},
    {"ph": "X", "cat": "phase", "name": "forward", "pid": 0, "tid": 1, "ts": 0, "dur": 3}],
    "otherData": {"generator": "scalescope"}})json";
  const std::vector<RankTrace> replicas = parse_chrome_trace(good, "t.json");
  ASSERT_EQ(replicas.size(), 2u);
  EXPECT_EQ(replicas[0].format, TraceFormat::kScalescope);
  EXPECT_DOUBLE_EQ(replicas[0].activities.at(0).us(), 3.0);
  EXPECT_EQ(replicas[1].world_size, 2);
}

// Events are counted as the array holds them, whatever their type, and only the top level's
// events array is the trace's.
TEST(ChromeReader, EventsAreNamedByTheirPlaceInTheArray) {
  EXPECT_CONTAINS(error_of([] {
                    parse_chrome_trace(R"json([5, [1, 2], {"ph": "M"},
                        {"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1}])json",
                                       "t.json");
                  }),
                  "t.json: traceEvents[3] ('X' event) has no 'dur'");
  const std::string nested = R"json({"otherData": {"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "inner", "ts": 0, "dur": 1}]},
    "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 4, "dur": 1}]})json";
  const std::vector<RankTrace> t = parse_chrome_trace(nested, "rank-0.json");
  ASSERT_EQ(t[0].activities.size(), 1u);
  EXPECT_EQ(t[0].activities[0].name, "a");
  EXPECT_CONTAINS(
      error_of([] { parse_chrome_trace(R"({"traceEvents": [], "traceEvents": []})", "t.json"); }),
      "t.json: not a Chrome trace: it gives 'traceEvents' twice");
  EXPECT_CONTAINS(error_of([] { parse_chrome_trace(R"({"traceEvents": {}})", "t.json"); }),
                  "t.json: not a Chrome trace: no 'traceEvents' array");
}

TEST_F(TraceFiles, GzipIsReadAndATruncatedStreamIsNamed) {
  const std::string gz = gzip("rank-0.json.gz", kKineto);
  EXPECT_EQ(read_trace_file(gz)[0].activities.size(), 4u);
  std::string bytes;
  {
    std::ifstream in(gz, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = write("cut.json.gz", bytes.substr(0, bytes.size() / 2));
  EXPECT_CONTAINS(error_of([&] { read_trace_file(cut); }),
                  cut + ": the gzip stream is cut short (the file is truncated)");
  std::string corrupt = bytes;
  corrupt[12] = static_cast<char>(corrupt[12] ^ 0x55);
  const std::string bad = write("bad.json.gz", corrupt);
  EXPECT_CONTAINS(error_of([&] { read_trace_file(bad); }), bad + ": the gzip stream is corrupt");
  EXPECT_CONTAINS(error_of([&] { read_trace_file(path("missing.json")); }), "missing.json");
}

// `analyze <(zcat trace.json.gz)`: a pipe is read once, from its first byte (the check for an
// Nsight Systems export once opened it on its own and took the first 16 bytes), raw or gzip.
// A directory names the traces in it, as torch.profiler's TensorBoard handler writes them (one a
// rank) and HTA reads them; other files and subdirectories are not traces.
TEST_F(TraceFiles, ADirectoryNamesTheTracesInIt) {
  const std::string dir = path("job");
  fs::create_directories(fs::path(dir) / "old.json");
  const std::string one = write("job/rank-1.pt.trace.json", kKineto);
  const std::string zero = gzip("job/rank-0.pt.trace.json.gz", kKineto);
  write("job/events.out.tfevents.1", "not a trace");
  EXPECT_EQ(trace_paths(dir), (std::vector<std::string>{zero, one}));
  EXPECT_EQ(trace_paths(one), std::vector<std::string>{one});
  EXPECT_EQ(trace_paths("/nonexistent.json"), std::vector<std::string>{"/nonexistent.json"});
  const std::string empty = (fs::path(dir) / "old.json").string();
  EXPECT_CONTAINS(error_of([&] { trace_paths(empty); }),
                  "'" + empty + "' is a directory without traces (files named *.json");
}

TEST_F(TraceFiles, APipeIsReadAsAFileIs) {
  std::string gz_bytes;
  {
    std::ifstream in(gzip("piped.json.gz", kKineto), std::ios::binary);
    gz_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const std::string& bytes : {std::string(kKineto), gz_bytes}) {
    const std::string fifo = path("fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
    std::vector<RankTrace> t;
    auto reading =
        std::async(std::launch::async, [&] { EXPECT_NO_THROW(t = read_trace_file(fifo)); });
    // A reader that opens the pipe a second time waits for a writer that is gone: fail, and
    // end its wait with a writer that writes nothing.
    if (reading.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "the reader opened the pipe twice and waits";
      ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
    }
    reading.get();
    writer.join();
    fs::remove(fifo);
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].rank, 3);
    EXPECT_EQ(t[0].activities.size(), 4u);
  }
}

// An export with two processes: the kernels and copies of one GPU rank each, NVTX steps, a runtime
// call whose correlation gives its kernel the backward phase, and rows the analysis leaves out.
TEST_F(TraceFiles, NsysExportIsReadFromItsDocumentedTables) {
  const std::string db = path("job.sqlite");
  {
    fixtures::NsysExport e(db);
    for (int pid : {100, 200}) {
      e.nvtx(pid, 1, 0, 100'000, "train_step 1");
      e.nvtx(pid, 1, 30'000, 60'000, "backward", false);
      e.mark(pid, 1, 5'000, "a mark");
      e.runtime(pid, 1, 31'000, 32'000, "cudaLaunchKernel_v7000", 5);
      e.kernel(pid, 7, 40'000, 70'000, "sgemm_128x64_nn", 5);
      e.kernel(pid, 20, 65'000, 90'000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 6);
      e.memcpy(pid, 7, 10'000, 12'000, 1, 7);
      e.memset(pid, 7, 12'000, 13'000, 8);
      e.osrt(pid, 1, 0, 9'000, "pthread_cond_wait");
    }
    e.osrt(300, 1, 0, 1'000, "poll");  // a launcher: no rank
  }
  const std::vector<RankTrace> t = read_trace_file(db);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].rank, 1);
  EXPECT_EQ(t[0].format, TraceFormat::kNsys);
  EXPECT_EQ(t[0].activities.size(), 8u);  // the mark is no range
  const JobSteps job = job_of(t, "train_step");
  const StepBreakdown& s = job.ranks[0].steps[0];
  EXPECT_DOUBLE_EQ(s.step_ms, 0.100);
  EXPECT_DOUBLE_EQ(s.backward_ms, 0.030);
  EXPECT_DOUBLE_EQ(s.communication_ms, 0.025);
  EXPECT_DOUBLE_EQ(s.communication_exposed_ms, 0.020);
  EXPECT_DOUBLE_EQ(s.h2d_exposed_ms, 0.002);
  EXPECT_DOUBLE_EQ(s.copy_exposed_ms, 0.001);
}

TEST_F(TraceFiles, NsysKernelNamesFallBackToDemangledNames) {
  const std::string db = path("old.sqlite");
  {
    fixtures::NsysExport e(db, "CUPTI_ACTIVITY_KIND_KERNEL");
    e.exec(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, globalPid "
        "INTEGER, streamId INTEGER, correlationId INTEGER, demangledName INTEGER)");
    e.exec("INSERT INTO StringIds VALUES (99, 'ncclKernel_AllReduce_RING_LL_Sum_float')");
    e.exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 1000, 16777216, 7, 1, 99)");
  }
  const std::vector<RankTrace> t = read_trace_file(db);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].activities[0].name, "ncclKernel_AllReduce_RING_LL_Sum_float");
}

TEST_F(TraceFiles, BadExportsAreNamed) {
  const std::string db = path("bad.sqlite");
  {
    fixtures::NsysExport e(db, "OSRT_API");
    e.exec("CREATE TABLE OSRT_API (start INTEGER, globalTid INTEGER, nameId INTEGER)");
  }
  EXPECT_CONTAINS(error_of([&] { read_trace_file(db); }), db + ": table OSRT_API: no such column");
  const std::string other = path("other.sqlite");
  {
    sqlite3* d = nullptr;
    sqlite3_open(other.c_str(), &d);
    sqlite3_exec(d, "CREATE TABLE notes (text TEXT)", nullptr, nullptr, nullptr);
    sqlite3_close(d);
  }
  EXPECT_CONTAINS(error_of([&] { read_trace_file(other); }),
                  other + ": an SQLite file without any table of an Nsight Systems export");
  std::string bytes = "SQLite format 3";
  bytes.push_back('\0');
  const std::string fake = write("fake.sqlite", bytes + std::string(100, 'x'));
  EXPECT_CONTAINS(error_of([&] { read_trace_file(fake); }), fake + ": ");
  const std::string reversed = path("reversed.sqlite");
  {
    fixtures::NsysExport e(reversed);
    e.kernel(1, 7, 500, 100, "k", 1);
  }
  EXPECT_CONTAINS(error_of([&] { read_trace_file(reversed); }),
                  "table CUPTI_ACTIVITY_KIND_KERNEL, row 0: ends (100 ns) before it starts");
}

}  // namespace
}  // namespace scalescope::traces
