// The NVTX ranges of a training run reach a tool: the scalescope CLI runs under
// tests/harness/trainer/nvtx_recorder.cpp, an NVTX tool that NVTX loads from NVTX_INJECTION64_PATH
// and that logs every domain, registered string, category, thread name, push and pop. The
// log is read back into each thread's ranges and checked against the step structure of
// harness/trainer (replica, reducers).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/nvtx.h"
#include "core/phases.h"

namespace {

// One line of the recorder's log (see nvtx_recorder.cpp for the format).
struct Event {
  size_t index = 0;  // line number: an order of events across threads
  std::string kind;
  uint32_t tid = 0;
  uint64_t domain = 0;
  uint64_t id = 0;  // domain or string handle, category id, or the named thread
  uint32_t category = 0;
  std::string payload_type;
  int64_t payload = 0;
  std::string message_type;
  std::string text;  // name, registered text, or message
};

// A pushed-and-popped range of one thread.
struct Range {
  std::string name;  // the message, registered strings resolved
  std::string category;
  int64_t payload = 0;
  size_t push = 0;  // event indices
  size_t pop = 0;
  size_t depth = 0;  // 0: outermost
};

struct Trace {
  std::vector<std::string> errors;  // malformed or unbalanced events
  std::map<uint64_t, std::string> domains;
  std::map<uint64_t, std::string> strings;
  std::map<std::pair<uint64_t, uint32_t>, std::string> categories;
  std::map<uint32_t, std::string> thread_names;
  std::map<uint32_t, std::vector<Range>> ranges;  // per thread, in push order
  int inits = 0;
};

std::string rest_of(std::istringstream& in) {
  std::string rest;
  std::getline(in, rest);
  if (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
  return rest;
}

Event parse(const std::string& line, size_t index) {
  std::istringstream in(line);
  Event e;
  e.index = index;
  in >> e.kind >> e.tid;
  if (e.kind == "domain") {
    in >> e.id;
  } else if (e.kind == "string") {
    in >> e.domain >> e.id;
  } else if (e.kind == "category") {
    in >> e.domain >> e.category;
  } else if (e.kind == "thread") {
    in >> e.id;
  } else if (e.kind == "push") {
    std::string color;
    in >> e.domain >> e.category >> color >> e.payload_type >> e.payload >> e.message_type;
  } else if (e.kind == "pop") {
    in >> e.domain;
  }
  if (!in) e.kind = "malformed";
  e.text = rest_of(in);
  return e;
}

Trace read_trace(const std::string& path) {
  Trace t;
  std::ifstream in(path);
  std::map<uint32_t, std::vector<Event>> open;  // pushed, not yet popped, per thread
  std::string line;
  for (size_t index = 0; std::getline(in, line); ++index) {
    const Event e = parse(line, index);
    if (e.kind == "init") {
      ++t.inits;
    } else if (e.kind == "domain") {
      t.domains[e.id] = e.text;
    } else if (e.kind == "string") {
      t.strings[e.id] = e.text;
    } else if (e.kind == "category") {
      t.categories[{e.domain, e.category}] = e.text;
    } else if (e.kind == "thread") {
      // nvtxNameOsThreadA names any thread; ours name themselves.
      if (e.id != e.tid) t.errors.push_back("thread " + e.text + " named by another: " + line);
      t.thread_names[e.tid] = e.text;
    } else if (e.kind == "push") {
      open[e.tid].push_back(e);
    } else if (e.kind == "pop") {
      std::vector<Event>& stack = open[e.tid];
      if (stack.empty() || stack.back().domain != e.domain) {
        t.errors.push_back("pop without a matching push: " + line);
        continue;
      }
      const Event p = stack.back();
      stack.pop_back();
      Range r;
      if (p.message_type == "registered") {
        const auto s = t.strings.find(std::stoull(p.text));
        r.name = s != t.strings.end() ? s->second : "<unregistered " + p.text + ">";
      } else {
        r.name = p.message_type + ":" + p.text;
      }
      const auto c = t.categories.find({p.domain, p.category});
      r.category =
          c != t.categories.end() ? c->second : "<unnamed " + std::to_string(p.category) + ">";
      if (t.domains[p.domain] != "scalescope") {
        t.errors.push_back("range " + r.name + " outside the scalescope domain");
      }
      if (p.payload_type != "int64") {
        t.errors.push_back("range " + r.name + " has payload type " + p.payload_type);
      }
      r.payload = p.payload;
      r.push = p.index;
      r.pop = e.index;
      r.depth = stack.size();
      t.ranges[e.tid].push_back(r);
    } else {
      t.errors.push_back("unexpected line: " + line);
    }
  }
  for (const auto& [tid, stack] : open) {
    for (const Event& p : stack) {
      t.errors.push_back("thread " + std::to_string(tid) +
                         " never popped the range pushed at line " + std::to_string(p.index));
    }
  }
  // Ranges were appended as they closed; the checks want the order they opened in.
  for (auto& [tid, list] : t.ranges) {
    std::sort(list.begin(), list.end(),
              [](const Range& a, const Range& b) { return a.push < b.push; });
  }
  return t;
}

// The thread that named itself `name`, or 0.
uint32_t thread_named(const Trace& t, const std::string& name) {
  for (const auto& [tid, n] : t.thread_names) {
    if (n == name) return tid;
  }
  return 0;
}

const Range* find_range(const std::vector<Range>& ranges, const std::string& name, int64_t step) {
  for (const Range& r : ranges) {
    if (r.name == name && r.payload == step) return &r;
  }
  return nullptr;
}

int run_shell(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) *output += buffer.data();
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The phases the step timer opens a range for in every step of this run (one micro-batch, no
// batch-norm sync), in the table's order, each by its NVTX category's name.
std::vector<std::string> timed_phases() {
  using scalescope::TimerEnds;
  std::vector<std::string> names;
  for (const scalescope::PhaseDef& d : scalescope::kPhases) {
    if (d.ends == TimerEnds::kOncePerStep || d.ends == TimerEnds::kPerMicroBatch) {
      names.emplace_back(scalescope::nvtx::category(d.phase).name);
    }
  }
  return names;
}

constexpr int kSteps = 3;
constexpr int kReplicas = 2;

// The replica thread: a range per step and inside it every phase, in order, each closed before
// the next opens, the step as payload. "allreduce" here is the wait for the buckets after
// backward (the exposed all-reduce); the reductions themselves run on the communication thread.
void expect_phases_in_order(const std::vector<Range>& phases) {
  std::string expected;
  std::string actual;
  for (int step = 1; step <= kSteps; ++step) {
    expected += "step:" + std::to_string(step) + "@0 ";
    for (const std::string& phase : timed_phases()) {
      expected += phase + ":" + std::to_string(step) + "@1 ";
    }
  }
  for (const Range& r : phases) {
    actual += r.name + ":" + std::to_string(r.payload) + "@" + std::to_string(r.depth) + " ";
  }
  EXPECT_EQ(actual, expected);
}

void expect_buckets_inside_their_steps(const Trace& t, uint32_t comm,
                                       const std::vector<Range>& phases) {
  // The communication thread: all-reduce ranges only. Each falls inside one step of its
  // replica: pushed after that step's backward began (buckets are submitted from backward
  // onwards) and popped before its optimizer began (which waits for every bucket). The log's
  // order follows the program's synchronisation, so these comparisons are sound.
  const auto comm_ranges = t.ranges.find(comm);
  ASSERT_NE(comm_ranges, t.ranges.end()) << "no ranges on the communication thread";
  std::vector<std::vector<std::string>> buckets(kSteps);  // per step, in order
  for (const Range& r : comm_ranges->second) {
    // Its own text names the bucket and its bytes; the payload is the step.
    EXPECT_TRUE(r.name.starts_with("ascii:allreduce bucket ")) << r.name;
    EXPECT_EQ(r.depth, 0u);
    ASSERT_TRUE(r.payload >= 1 && r.payload <= kSteps) << r.name << " payload " << r.payload;
    const Range* backward = find_range(phases, "backward", r.payload);
    const Range* optimizer = find_range(phases, "optimizer", r.payload);
    ASSERT_TRUE(backward != nullptr && optimizer != nullptr);
    EXPECT_TRUE(r.push > backward->push && r.pop < optimizer->push)
        << r.name << " of step " << r.payload << " outside its step's backward-to-optimizer window";
    buckets[static_cast<size_t>(r.payload - 1)].push_back(
        r.name.substr(std::string("ascii:").size()));
  }
  // Every step reduces the same buckets, 0, 1, ... in order, each naming its size.
  ASSERT_GE(buckets[0].size(), 2u) << "expected at least two buckets per step";
  for (size_t i = 0; i < buckets[0].size(); ++i) {
    EXPECT_TRUE(buckets[0][i].starts_with("allreduce bucket " + std::to_string(i) + ": "))
        << buckets[0][i];
    EXPECT_TRUE(buckets[0][i].ends_with(" B")) << buckets[0][i];
  }
  for (int step = 2; step <= kSteps; ++step) {
    EXPECT_EQ(buckets[static_cast<size_t>(step - 1)], buckets[0]) << "step " << step;
  }
}

TEST(Nvtx, TrainingRangesReachAnInjectedTool) {
#if !SCALESCOPE_WITH_NVTX
  GTEST_SKIP() << "built without NVTX (SCALESCOPE_WITH_NVTX=0: the CMake option SCALESCOPE_NVTX "
                  "is OFF or the NVTX3 headers were not found), so there are no ranges to record";
#endif
  const std::string log = testing::TempDir() + "/nvtx_ranges.log";
  std::remove(log.c_str());  // the recorder appends
  // --first-bucket-mb 0.001 caps the first gradient bucket below dense-100's last layer
  // (650 parameters), so a step reduces at least two buckets.
  const std::string command = "NVTX_INJECTION64_PATH='" + std::string(SCALESCOPE_NVTX_RECORDER) +
                              "' SCALESCOPE_NVTX_LOG='" + log + "' " + SCALESCOPE_BINARY +
                              " train --model dense-100 --devices cpu:2 --batch 8 --steps " +
                              std::to_string(kSteps) +
                              " --data synthetic --no-eval --first-bucket-mb 0.001 -q";
  std::string output;
  ASSERT_EQ(run_shell(command, &output), 0) << command << "\n" << output;

  const Trace t = read_trace(log);
  ASSERT_EQ(t.inits, 1) << "NVTX did not load the recorder from " << SCALESCOPE_NVTX_RECORDER;
  for (const std::string& e : t.errors) ADD_FAILURE() << e;

  // One domain, with a named category per phase.
  uint64_t domain = 0;
  for (const auto& [handle, name] : t.domains) {
    if (name == "scalescope") domain = handle;
  }
  ASSERT_NE(domain, 0u) << "no domain named scalescope";
  for (const std::string& phase : timed_phases()) {
    bool named = false;
    for (const auto& [key, name] : t.categories) named |= key.first == domain && name == phase;
    EXPECT_TRUE(named) << "no category named " << phase << " in the scalescope domain";
  }
  // A range's category is its phase: the registered message, or the first word of its own
  // text ("ascii:allreduce bucket 0: 2600 B").
  for (const auto& [tid, list] : t.ranges) {
    for (const Range& r : list) {
      const std::string text =
          r.name.substr(r.name.find(':') == std::string::npos || r.name.starts_with("allreduce")
                            ? 0
                            : r.name.find(':') + 1);
      EXPECT_EQ(r.category, text.substr(0, text.find(' '))) << r.name;
    }
  }

  for (int rank = 0; rank < kReplicas; ++rank) {
    SCOPED_TRACE("replica " + std::to_string(rank));
    const uint32_t replica = thread_named(t, "scalescope replica " + std::to_string(rank));
    const uint32_t comm = thread_named(t, "scalescope comm " + std::to_string(rank));
    ASSERT_NE(replica, 0u) << "the replica thread is not named";
    ASSERT_NE(comm, 0u) << "the communication thread is not named (two replicas have one)";

    const std::vector<Range>& phases = t.ranges.at(replica);
    expect_phases_in_order(phases);
    expect_buckets_inside_their_steps(t, comm, phases);
  }
}

}  // namespace
