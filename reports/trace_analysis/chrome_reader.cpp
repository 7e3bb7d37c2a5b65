// Chrome trace JSON: Kineto's (torch.profiler's export_chrome_trace and TensorBoard handler),
// PyTorch's legacy profiler's (a PyTorch built without Kineto) and scalescope's own
// (reports/writers/trace.h).
#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "core/check.h"
#include "reports/json_reader.h"
#include "reports/trace_analysis/classify.h"
#include "reports/trace_analysis/readers.h"

namespace scalescope::traces {

using nlohmann::json;

namespace {

// Kineto's event categories that the analyses read; events of other categories (flows, the
// profiler's own span, device copies of host annotations, instant events) are left out.
std::optional<ActivityKind> kineto_kind(const std::string& cat) {
  static const std::map<std::string, ActivityKind, std::less<>> kKinds = {
      {"cpu_op", ActivityKind::kHostOp},
      {"user_annotation", ActivityKind::kAnnotation},
      {"python_function", ActivityKind::kAnnotation},
      {"cuda_runtime", ActivityKind::kRuntime},
      {"cuda_driver", ActivityKind::kRuntime},
      {"kernel", ActivityKind::kKernel},
      {"gpu_memcpy", ActivityKind::kMemcpy},
      {"gpu_memset", ActivityKind::kMemset},
  };
  const auto it = kKinds.find(cat);
  if (it == kKinds.end()) return std::nullopt;
  return it->second;
}

// A pid or tid: Chrome traces allow numbers and strings ("Spans"). A number no int64_t holds
// (1e99: converting it would be undefined) is a key like a string, by its text.
int64_t lane_id(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::abs(d) < 0x1p63) return static_cast<int64_t>(d);
  }
  const auto key = [](const std::string& text) {
    return static_cast<int64_t>(std::hash<std::string>{}(text));
  };
  if (v.is_string()) return key(v.get<std::string>());
  if (v.is_number()) return key(v.dump());
  return 0;
}

std::optional<int64_t> integer_arg(const json& e, const char* key) {
  const auto args = e.find("args");
  if (args == e.end() || !args->is_object()) return std::nullopt;
  const auto v = args->find(key);
  if (v == args->end() || !v->is_number()) return std::nullopt;
  const double d = v->get<double>();
  if (!std::isfinite(d) || std::abs(d) > 9e15) return std::nullopt;
  return static_cast<int64_t>(d);
}

// A complete event's name, start and end; throws naming the event when a field is missing or
// of the wrong type.
Activity timed(const json& e, size_t index, const std::string& file, NameTable& names) {
  const auto field = [&](const char* key) -> const json& {
    const auto it = e.find(key);
    SS_CHECK(it != e.end(), "{}: traceEvents[{}] ('X' event) has no '{}'", file, index, key);
    return *it;
  };
  const json& name = field("name");
  const json& ts = field("ts");
  const json& dur = field("dur");
  SS_CHECK(name.is_string(), "{}: traceEvents[{}].name is not a string", file, index);
  SS_CHECK(ts.is_number() && dur.is_number(), "{}: traceEvents[{}]: 'ts' and 'dur' must be numbers",
           file, index);
  const double start = ts.get<double>();
  const double length = dur.get<double>();
  SS_CHECK(length >= 0.0 && length <= kMaxDurationUs && std::abs(start) <= kMaxTimestampUs,
           "{}: traceEvents[{}] ('{}'): ts {} µs, dur {} µs is no time of a trace (a negative "
           "duration, or beyond {:g} µs)",
           file, index, name.get<std::string>(), start, length,
           length < 0.0 || length > kMaxDurationUs ? kMaxDurationUs : kMaxTimestampUs);
  Activity a;
  a.name = names.intern(name.get_ref<const std::string&>());
  a.start_us = start;
  a.end_us = start + length;
  return a;
}

const json& trace_events(const json& doc, const std::string& file) {
  if (doc.is_array()) return doc;
  SS_CHECK(doc.is_object(), "{}: not a Chrome trace (neither an object nor an array of events)",
           file);
  const auto it = doc.find("traceEvents");
  SS_CHECK(it != doc.end() && it->is_array(),
           "{}: not a Chrome trace: no 'traceEvents' array (a Kineto trace from "
           "torch.profiler's export_chrome_trace has one)",
           file);
  return *it;
}

bool is_complete_event(const json& e) {
  if (!e.is_object()) return false;
  const auto ph = e.find("ph");
  return ph != e.end() && ph->is_string() && ph->get<std::string>() == "X";
}

std::optional<int> distributed_int(const json& doc, const char* key) {
  if (!doc.is_object() || !doc.contains("distributedInfo")) return std::nullopt;
  const json& info = doc["distributedInfo"];
  if (!info.is_object() || !info.contains(key) || !info[key].is_number_integer()) {
    return std::nullopt;
  }
  const int64_t v = info[key].get<int64_t>();
  if (v < 0 || v > 1'000'000) return std::nullopt;
  return static_cast<int>(v);
}

// A Chrome trace's complete ('X') events as the readers keep them, taken as the parser meets
// each event, so that a trace's events never exist together as JSON values (about 1.3 KB each:
// a 200 MB Kineto trace of 1.6 million events took 2 GB as one document). `activities` holds
// each event's name, times and correlation, with the kind and lane Kineto's reader gives it;
// `lanes` the rest, element for element. Each format's reader raises the first error it would
// on them, thrown once the document says which format it is (Kineto's reader checks only the
// categories it reads; scalescope's checks every complete event and its process).
struct CompleteEvents {
  struct Lanes {
    int64_t thread = 0;          // its tid as a lane
    int64_t process = 0;         // its pid as a lane
    bool kineto = false;         // of a category Kineto's reader reads
    bool uncategorized = false;  // without a 'cat', as the legacy profiler writes them all
  };
  std::vector<Activity> activities;
  std::vector<Lanes> lanes;
  NameTable names;
  std::exception_ptr kineto_error;
  std::exception_ptr legacy_error;
  std::exception_ptr scalescope_error;
  // The legacy profiler's flow from an operator to the CUDA kernels it launched: the job ran on
  // a GPU, whose work that profiler does not record.
  bool launched_cuda_kernels = false;

  void take(const json& e, size_t index, const std::string& file) {
    const auto cat = e.find("cat");
    const bool categorized = cat != e.end() && cat->is_string();
    if (!is_complete_event(e)) {
      if (categorized && cat->get_ref<const std::string&>() == "cpu_to_cuda") {
        launched_cuda_kernels = true;
      }
      return;
    }
    const std::optional<ActivityKind> kind =
        categorized ? kineto_kind(cat->get_ref<const std::string&>()) : std::nullopt;
    const bool uncategorized = cat == e.end();
    Activity a;
    try {
      a = timed(e, index, file, names);
    } catch (const Error&) {
      if (kind && !kineto_error) kineto_error = std::current_exception();
      if (uncategorized && !legacy_error) legacy_error = std::current_exception();
      if (!scalescope_error) scalescope_error = std::current_exception();
      return;
    }
    Lanes l{lane_id(e.value("tid", json())), lane_id(e.value("pid", json())), kind.has_value(),
            uncategorized};
    if (!scalescope_error && (l.process < 0 || l.process >= 1'000'000)) {
      scalescope_error = std::make_exception_ptr(UsageError(fmt::format(
          "{}: traceEvents[{}]: replica (pid) {} out of range", file, index, l.process)));
    }
    a.kind = kind.value_or(ActivityKind::kHostOp);
    const std::optional<int64_t> stream = integer_arg(e, "stream");
    a.lane = on_device(a.kind) && stream ? *stream : l.thread;
    a.correlation = integer_arg(e, "correlation").value_or(-1);
    activities.push_back(std::move(a));
    lanes.push_back(l);
  }
};

// What read_document parses: the text, or its source, with the callback given.
using Parse = std::function<json(const json::parser_callback_t&)>;

// The document that `parse` reads less its events (the top-level array, or the traceEvents
// array of the top-level object, left empty), whose elements go one at a time to `events`.
json read_document(const Parse& parse, const std::string& file, CompleteEvents& events) {
  using Event = json::parse_event_t;
  int events_depth = -1;  // the events array's, while the parser is inside it
  bool events_seen = false;
  size_t index = 0;
  std::string key;  // the top-level object's latest
  return parse([&](int depth, Event event, json& parsed) {
    if (events_depth < 0) {
      if (event == Event::key && depth == 1) key = parsed.get<std::string>();
      if (event == Event::array_start && (depth == 0 || (depth == 1 && key == "traceEvents"))) {
        SS_CHECK_INPUT(!events_seen,
                       "{}: not a Chrome trace: it gives 'traceEvents' twice, so which events "
                       "are meant is not known",
                       file);
        events_depth = depth;
        events_seen = true;
      }
      return true;
    }
    if (depth == events_depth && event == Event::array_end) {
      events_depth = -1;
      return true;
    }
    const bool element_end =
        event == Event::object_end || event == Event::array_end || event == Event::value;
    if (depth != events_depth + 1 || !element_end) return true;
    if (event == Event::object_end) events.take(parsed, index, file);
    ++index;
    return false;  // the element leaves the document
  });
}

// The events the format reads (Kineto's categories, or the legacy profiler's uncategorized
// events), moved (not copied: a large trace's activities are most of the reader's memory) out
// of `events`, as one rank's trace.
RankTrace torch_trace(const json& doc, CompleteEvents& events, const std::string& file,
                      TraceFormat format) {
  const bool legacy = format == TraceFormat::kTorchLegacy;
  RankTrace t;
  t.file = file;
  t.format = format;
  const std::optional<int> rank = distributed_int(doc, "rank");
  const std::optional<int> from_name = rank_from_file_name(file);
  t.rank = rank ? *rank : from_name ? *from_name : -1;
  t.world_size = distributed_int(doc, "world_size");
  std::vector<Activity>& activities = events.activities;
  size_t count = 0;
  for (size_t i = 0; i < activities.size(); ++i) {
    if (!(legacy ? events.lanes[i].uncategorized : events.lanes[i].kineto)) continue;
    // Not onto itself: a string moved onto itself may empty.
    if (count != i) activities[count] = std::move(activities[i]);
    ++count;
  }
  activities.resize(count);
  t.activities = std::move(activities);
  events.lanes = {};  // not needed any more: its memory back before the sort takes its own
  if (legacy) {
    for (Activity& a : t.activities) a.kind = kind_by_name(a.name);
  }
  t.sort();
  return t;
}

// PyTorch's profiler where PyTorch has no Kineto (Debian's build; use_kineto=False) writes a
// bare array of complete events, none with a category: every operator and record_function range
// of the host threads, and of a GPU's work only flows to it. Read where no event has a
// category Kineto's reader reads.
bool is_legacy_torch(const json& doc, const CompleteEvents& events) {
  if (!doc.is_array() || events.kineto_error) return false;
  bool uncategorized = false;
  for (const CompleteEvents::Lanes& l : events.lanes) {
    if (l.kineto) return false;
    uncategorized = uncategorized || l.uncategorized;
  }
  return uncategorized || events.legacy_error;
}

RankTrace legacy_torch_trace(const json& doc, CompleteEvents& events, const std::string& file) {
  if (events.legacy_error) std::rethrow_exception(events.legacy_error);
  SS_CHECK_INPUT(!events.launched_cuda_kernels,
                 "{}: a trace of PyTorch's legacy profiler (a PyTorch without Kineto) from a job "
                 "that ran CUDA kernels: it records the host's operators but none of the GPU's "
                 "work, so its steps cannot be split. Profile with torch.profiler and "
                 "ProfilerActivity.CUDA in a PyTorch built with Kineto (the PyPI and conda builds)",
                 file);
  return torch_trace(doc, events, file, TraceFormat::kTorchLegacy);
}

bool is_scalescope(const json& doc) {
  if (!doc.is_object() || !doc.contains("otherData")) return false;
  const json& other = doc["otherData"];
  return other.is_object() && other.contains("generator") && other["generator"] == "scalescope";
}

// One rank per replica (the process id of its events); every phase is a range measured where its
// work ran.
std::vector<RankTrace> scalescope_traces(CompleteEvents& events, const std::string& file) {
  std::map<int64_t, RankTrace> ranks;
  for (size_t i = 0; i < events.activities.size(); ++i) {
    Activity& a = events.activities[i];
    a.kind = ActivityKind::kAnnotation;
    a.lane = events.lanes[i].thread;
    a.correlation = -1;
    ranks[events.lanes[i].process].activities.push_back(std::move(a));
  }
  std::vector<RankTrace> out;
  for (auto& [pid, t] : ranks) {
    t.file = file;
    t.format = TraceFormat::kScalescope;
    t.rank = static_cast<int>(pid);
    t.world_size = static_cast<int>(ranks.size());
    t.sort();
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<RankTrace> chrome_traces(const Parse& parse, const std::string& file) {
  CompleteEvents events;
  const json doc = read_document(parse, file, events);
  trace_events(doc, file);  // the document has its events array
  if (is_scalescope(doc)) {
    if (events.scalescope_error) std::rethrow_exception(events.scalescope_error);
    return scalescope_traces(events, file);
  }
  if (is_legacy_torch(doc, events)) return {legacy_torch_trace(doc, events, file)};
  if (events.kineto_error) std::rethrow_exception(events.kineto_error);
  return {torch_trace(doc, events, file, TraceFormat::kKineto)};
}

}  // namespace

std::vector<RankTrace> parse_chrome_trace(std::string_view text, const std::string& file) {
  return chrome_traces(
      [&](const json::parser_callback_t& callback) { return parse_json(text, file, callback); },
      file);
}

std::vector<RankTrace> parse_chrome_trace(ByteSource& source, const std::string& file) {
  return chrome_traces(
      [&](const json::parser_callback_t& callback) { return parse_json(source, file, callback); },
      file);
}

}  // namespace scalescope::traces
