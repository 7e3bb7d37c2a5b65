#include "reports/trace_analysis/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <unordered_map>

#include "core/check.h"
#include "reports/trace_analysis/classify.h"

namespace scalescope::traces {
namespace {

constexpr double kMinStepUs = 1e-3;

// The classes of the sweep, in precedence order: the first one running takes the instant.
enum Slot {
  kForward,
  kBackward,
  kOptimizer,
  kComm,
  kCommWait,
  kH2D,
  kH2DWait,
  kCopy,
  kInput,
  kSlots
};

// Where a stretch of one class of work starts (delta +1) or ends (-1). The stretches are kept
// only as their edges, 16 bytes each: a trace's millions of activities make as many stretches,
// and the sweep needs no more of them than this.
struct Edge {
  double t;
  int32_t delta;
  uint8_t slot;  // a Slot
  // On the lane the steps are on, in a trace without device activity: the training thread,
  // whose own work is what the step spends; other threads' work counts only while it waits.
  bool main;
};
static_assert(sizeof(Edge) == 16);

struct Edges {
  std::vector<Edge> edges;
  void add(double start_us, double end_us, Slot slot, bool main) {
    edges.push_back({start_us, +1, static_cast<uint8_t>(slot), main});
    edges.push_back({end_us, -1, static_cast<uint8_t>(slot), main});
  }
};

Slot compute_slot(Context context) {
  if (context == Context::kBackward) return kBackward;
  if (context == Context::kOptimizer) return kOptimizer;
  return kForward;
}

std::optional<Slot> slot_of(Work work, Context context) {
  switch (work) {
    case Work::kCompute:
      return compute_slot(context);
    case Work::kCommunication:
      return kComm;
    case Work::kCommunicationWait:
      return kCommWait;
    case Work::kCopyH2D:
      return kH2D;
    case Work::kCopyH2DWait:
      return kH2DWait;
    case Work::kCopyOther:
      return kCopy;
    case Work::kInput:
      return kInput;
    case Work::kNone:
      break;
  }
  return std::nullopt;
}

// What a host thread is doing inside an activity: the innermost work and phase around it, and
// whether it is loading data (everything under the DataLoader's __next__ is input).
struct Frame {
  double end_us = 0.0;
  Work work = Work::kNone;
  Context context = Context::kNone;
  bool input = false;

  Work effective() const { return input ? Work::kInput : work; }
};

// Flattens one host lane's nested activities into segments of the innermost work: an
// all-reduce called inside a backward op is communication, not compute. Only `host_work` lanes
// give work (traces without device activity); in others only the input wait counts. Records
// the phase each runtime call was made in, by correlation id, for the kernels it launched.
class LaneFlattener {
 public:
  LaneFlattener(bool host_work, bool main, Edges& out,
                std::unordered_map<int64_t, Context>& launches)
      : host_work_(host_work), main_(main), out_(out), launches_(launches) {}

  void add(const Activity& a) {
    while (!stack_.empty() && ends_before(stack_.back(), a)) {
      stack_.back().end_us = std::min(stack_.back().end_us, a.start_us);
      pop();
    }
    if (!stack_.empty()) emit(a.start_us, stack_.back());
    t_ = a.start_us;
    const Frame parent = stack_.empty() ? Frame{a.end_us} : stack_.back();
    const Class c = classify(a);
    Frame f;
    f.end_us = std::min(a.end_us, parent.end_us);
    f.work = c.work != Work::kNone ? c.work : parent.work;
    f.context =
        c.context != Context::kNone && c.context != Context::kStep ? c.context : parent.context;
    f.input = parent.input || c.context == Context::kInput;
    if (a.kind == ActivityKind::kRuntime && a.correlation >= 0) {
      launches_[a.correlation] = f.context;
    }
    stack_.push_back(f);
  }
  void finish() {
    while (!stack_.empty()) pop();
    flush();
  }

 private:
  // Whether `a` comes after `f` rather than inside it. Ranges that overlap without nesting (a
  // range starting a rounding error before its predecessor ended, or a child outlasting its
  // parent by one) are taken as whichever their overlap suggests: the shorter of the overlap and
  // the overrun is the rounding.
  static bool ends_before(const Frame& f, const Activity& a) {
    if (f.end_us <= a.start_us) return true;
    return a.end_us > f.end_us && f.end_us - a.start_us < a.end_us - f.end_us;
  }

  void pop() {
    emit(stack_.back().end_us, stack_.back());
    t_ = std::max(t_, stack_.back().end_us);
    stack_.pop_back();
  }
  void emit(double until, const Frame& f) {
    if (until <= t_) return;
    const Work w = f.effective();
    if (!host_work_ && w != Work::kInput) return;
    const std::optional<Slot> s = slot_of(w, f.context);
    if (!s) return;
    // A stretch that goes on where the last one of its class ended is the same stretch to the
    // sweep: one pair of edges for a nest of ops of one class, not a pair per op.
    if (pending_ && pending_->slot == *s && pending_->end_us == t_) {
      pending_->end_us = until;
      return;
    }
    flush();
    pending_ = Stretch{t_, until, *s};
  }
  void flush() {
    if (pending_) out_.add(pending_->start_us, pending_->end_us, pending_->slot, main_);
    pending_.reset();
  }

  struct Stretch {
    double start_us;
    double end_us;
    Slot slot;
  };

  bool host_work_;
  bool main_;
  Edges& out_;
  std::unordered_map<int64_t, Context>& launches_;
  std::vector<Frame> stack_;
  double t_ = 0.0;
  std::optional<Stretch> pending_;  // the last stretch, while the next may go on with it
};

std::vector<Edge> edges_of(const RankTrace& trace, int64_t step_lane) {
  const bool device = trace.has_device();
  Edges out;
  std::unordered_map<int64_t, Context> launches;
  // Each lane's activities come to its flattener in time order, the lanes interleaved.
  std::unordered_map<int64_t, LaneFlattener> lanes;
  for (const Activity& a : trace.activities) {
    if (on_device(a.kind)) continue;
    auto it = lanes.find(a.lane);
    if (it == lanes.end()) {
      it = lanes.try_emplace(a.lane, !device, !device && a.lane == step_lane, out, launches).first;
    }
    it->second.add(a);
  }
  for (auto& [lane, flattener] : lanes) flattener.finish();
  for (const Activity& a : trace.activities) {
    if (!on_device(a.kind) || a.end_us <= a.start_us) continue;
    const Class c = classify(a);
    const auto launch = launches.find(a.correlation);
    const Context context = launch != launches.end() ? launch->second : Context::kNone;
    if (const std::optional<Slot> s = slot_of(c.work, context); s && *s != kInput) {
      out.add(a.start_us, a.end_us, *s, false);
    }
  }
  return std::move(out.edges);
}

// One stretch of time between two boundaries of the segments, and what ran in it.
struct Piece {
  double start_us;
  double end_us;
  int slot;  // the first Slot running, or kSlots for none
  bool comm;
  bool h2d;
};

// Calls `piece` with each stretch between two edges, in time order.
template <class OnPiece>
void sweep(std::vector<Edge> edges, const OnPiece& piece) {
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  // [0]: the training thread's segments, [1]: the others'; the first running of [0] wins.
  std::array<std::array<int, kSlots>, 2> running{};
  for (size_t i = 0; i < edges.size();) {
    const double t = edges[i].t;
    for (; i < edges.size() && edges[i].t == t; ++i) {
      running[edges[i].main ? 0 : 1][edges[i].slot] += edges[i].delta;
    }
    if (i == edges.size()) break;
    int top = kSlots;
    for (const std::array<int, kSlots>& r : running) {
      for (int s = 0; s < kSlots && top == kSlots; ++s) {
        if (r[s] > 0) top = s;
      }
    }
    const bool comm = running[0][kComm] > 0 || running[1][kComm] > 0;
    piece(Piece{t, edges[i].t, top, comm, running[0][kH2D] > 0 || running[1][kH2D] > 0});
  }
}

void add_piece(StepBreakdown& b, const Piece& p, double us) {
  const double ms = us / 1e3;
  std::array<double*, kSlots> exclusive = {&b.forward_ms,
                                           &b.backward_ms,
                                           &b.optimizer_ms,
                                           &b.communication_exposed_ms,
                                           &b.communication_exposed_ms,
                                           &b.h2d_exposed_ms,
                                           &b.h2d_exposed_ms,
                                           &b.copy_exposed_ms,
                                           &b.input_ms};
  if (p.slot < kSlots) *exclusive[static_cast<size_t>(p.slot)] += ms;
  if (p.comm) b.communication_ms += ms;
  if (p.h2d) b.h2d_ms += ms;
}

std::optional<int64_t> trailing_number(std::string_view name) {
  size_t i = name.size();
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') --i;
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(name.data() + i, name.data() + name.size(), v);
  if (i == name.size() || ec != std::errc() || ptr != name.data() + name.size()) {
    return std::nullopt;
  }
  return v;
}

bool is_step(const Activity& a, const std::string& step_range) {
  if (on_device(a.kind)) return false;
  if (!step_range.empty()) return names_step_range(a.name, step_range);
  return classify(a).context == Context::kStep;
}

}  // namespace

std::vector<StepWindow> find_steps(const RankTrace& trace, const std::string& step_range) {
  std::vector<StepWindow> out;
  std::optional<int64_t> lane;
  for (const Activity& a : trace.activities) {
    if (!is_step(a, step_range) || (lane && a.lane != *lane)) continue;
    lane = a.lane;
    const int64_t number = trailing_number(a.name).value_or(static_cast<int64_t>(out.size()) + 1);
    out.push_back({number, a.start_us, a.end_us, a.lane});
  }
  SS_CHECK(!out.empty(),
           "{}: no steps found: {} (rank {}). Name the range that marks a step with --step-range",
           trace.file,
           step_range.empty()
               ? std::string("no ProfilerStep#N range (torch.profiler with a schedule and "
                             "profiler.step() writes them) and no scalescope step")
               : fmt::format("no range named '{}'", step_range),
           trace.rank);
  // A step ends where the next one starts, should the ranges overlap; one shorter than a
  // nanosecond (no clock of a tracer resolves it) is no step.
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    out[i].end_us = std::min(out[i].end_us, out[i + 1].start_us);
  }
  std::erase_if(out, [](const StepWindow& w) { return w.end_us - w.start_us < kMinStepUs; });
  SS_CHECK(!out.empty(), "{}: every step range of rank {} is empty (shorter than a nanosecond)",
           trace.file, trace.rank);
  return out;
}

std::vector<StepBreakdown> break_down(const RankTrace& trace,
                                      const std::vector<StepWindow>& steps) {
  std::vector<StepBreakdown> out(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    out[i].step = steps[i].number;
    out[i].start_us = steps[i].start_us;
    out[i].step_ms = (steps[i].end_us - steps[i].start_us) / 1e3;
  }
  size_t first = 0;
  sweep(edges_of(trace, steps.empty() ? 0 : steps.front().lane), [&](const Piece& p) {
    while (first < steps.size() && steps[first].end_us <= p.start_us) ++first;
    for (size_t k = first; k < steps.size() && steps[k].start_us < p.end_us; ++k) {
      const double us =
          std::min(p.end_us, steps[k].end_us) - std::max(p.start_us, steps[k].start_us);
      if (us > 0.0) add_piece(out[k], p, us);
    }
  });
  for (StepBreakdown& b : out) {
    b.idle_ms = std::max(0.0, b.step_ms - b.busy_ms() - b.input_ms);
  }
  return out;
}

}  // namespace scalescope::traces
