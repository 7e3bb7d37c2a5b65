// The parsed form of a training job's trace, one per rank: what every reader produces (Kineto's
// Chrome trace, an Nsight Systems SQLite export, scalescope's own Chrome trace) and what every
// analysis of reports/trace_analysis takes. Parsing is kept apart from the analyses, as in
// Holistic Trace Analysis: a reader knows a format, an analysis knows only this model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace scalescope::traces {

enum class TraceFormat { kKineto, kTorchLegacy, kNsys, kScalescope };
std::string_view to_string(TraceFormat format);

// What a recorded interval is, as the tool that recorded it says.
enum class ActivityKind {
  kHostOp,      // an operator on a host thread (Kineto's cpu_op)
  kAnnotation,  // a range the program marked: record_function (Kineto's user_annotation), an
                // NVTX range, a phase of scalescope's own trace
  kRuntime,     // a CUDA runtime or driver call on a host thread
  kOsRuntime,   // an operating-system call (Nsight Systems' OS runtime trace)
  kKernel,      // on a device stream
  kMemcpy,      // on a device stream
  kMemset,      // on a device stream
};
std::string_view to_string(ActivityKind kind);
constexpr bool on_device(ActivityKind kind) {
  return kind == ActivityKind::kKernel || kind == ActivityKind::kMemcpy ||
         kind == ActivityKind::kMemset;
}

// An activity's name, one string shared by every activity of that name: a trace repeats a few
// thousand names over millions of activities, and a string of its own per activity (a kernel's
// name runs to a hundred characters and more) took more memory than the rest of the activity.
class Name {
 public:
  Name() = default;
  Name(std::string text)  // NOLINT: implicit, a name is its text
      : text_(std::make_shared<const std::string>(std::move(text))) {}
  Name(const char* text) : Name(std::string(text)) {}  // NOLINT: as above

  std::string_view view() const { return text_ ? std::string_view(*text_) : std::string_view(); }
  operator std::string_view() const { return view(); }  // NOLINT: as above
  bool operator==(std::string_view other) const { return view() == other; }
  friend std::ostream& operator<<(std::ostream& out, const Name& n) { return out << n.view(); }

 private:
  std::shared_ptr<const std::string> text_;
};

// What the readers make names with: the same text gives the same shared Name.
class NameTable {
 public:
  Name intern(const std::string& text);

 private:
  std::unordered_map<std::string, Name> names_;
};

struct Activity {
  Name name;
  ActivityKind kind = ActivityKind::kHostOp;
  double start_us = 0.0;
  double end_us = 0.0;  // >= start_us
  // The host thread it ran on, or for device activities the stream (one number space per
  // kind of lane: a stream and a thread with the same id are different lanes).
  int64_t lane = 0;
  // Links a device activity to the runtime call that launched it (CUPTI's correlation id);
  // -1 when the trace does not say.
  int64_t correlation = -1;

  double us() const { return end_us - start_us; }
};

// The largest times a reader accepts, µs: a timestamp 3,000 years from the clock's epoch, a
// duration of four months. Beyond them a file holds no trace; within them every sum an
// analysis forms stays finite.
inline constexpr double kMaxTimestampUs = 1e17;
inline constexpr double kMaxDurationUs = 1e13;

// One rank's trace.
struct RankTrace {
  std::string file;
  TraceFormat format = TraceFormat::kKineto;
  int rank = 0;
  std::optional<int> world_size;  // when the trace says
  // Sorted by start, the longer first among equal starts (so an enclosing range comes before
  // what it encloses).
  std::vector<Activity> activities;

  // Whether any activity ran on a device stream: then the device's timeline is the one the
  // step waits for; otherwise the host threads' work is.
  bool has_device() const;
  // Sorts `activities` as the field requires; readers call it last.
  void sort();
};

// "rank-3.json" -> 3: the number after "rank" (then '-', '_' or nothing) in the file's name,
// as PyTorch's TensorBoard handler and most launchers name per-rank traces.
std::optional<int> rank_from_file_name(std::string_view path);

}  // namespace scalescope::traces
