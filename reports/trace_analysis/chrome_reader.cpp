// Chrome trace JSON: Kineto's (torch.profiler's export_chrome_trace and TensorBoard handler) and
// scalescope's own (reports/writers/trace.h).
#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "core/check.h"
#include "reports/json_reader.h"
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
Activity timed(const json& e, size_t index, const std::string& file) {
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
  a.name = name.get<std::string>();
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

// What the readers keep of one complete ('X') event: taken as the parser meets the event, so
// that a trace's events never exist together as JSON values (about 1.3 KB each: a 200 MB
// Kineto trace of 1.6 million events took 2 GB as one document).
struct CompleteEvent {
  Activity activity;                 // name and times; kind, lane and correlation per format
  std::optional<ActivityKind> kind;  // Kineto's, by the event's category
  int64_t thread = 0;                // its tid as a lane
  int64_t process = 0;               // its pid as a lane
  std::optional<int64_t> stream;
};

// A Chrome trace's complete events and the first error each format's reader raises on them,
// thrown once the document says which format it is (Kineto's reader checks only the
// categories it reads; scalescope's checks every complete event and its process).
struct CompleteEvents {
  std::vector<CompleteEvent> events;
  std::exception_ptr kineto_error;
  std::exception_ptr scalescope_error;

  void take(const json& e, size_t index, const std::string& file) {
    if (!is_complete_event(e)) return;
    const auto cat = e.find("cat");
    CompleteEvent c;
    if (cat != e.end() && cat->is_string())
      c.kind = kineto_kind(cat->get_ref<const std::string&>());
    try {
      c.activity = timed(e, index, file);
    } catch (const Error&) {
      if (c.kind && !kineto_error) kineto_error = std::current_exception();
      if (!scalescope_error) scalescope_error = std::current_exception();
      return;
    }
    c.thread = lane_id(e.value("tid", json()));
    c.process = lane_id(e.value("pid", json()));
    if (!scalescope_error && (c.process < 0 || c.process >= 1'000'000)) {
      scalescope_error = std::make_exception_ptr(UsageError(fmt::format(
          "{}: traceEvents[{}]: replica (pid) {} out of range", file, index, c.process)));
    }
    c.stream = integer_arg(e, "stream");
    c.activity.correlation = integer_arg(e, "correlation").value_or(-1);
    events.push_back(std::move(c));
  }
};

// The document of `text` less its events (the top-level array, or the traceEvents array of
// the top-level object, left empty), whose elements go one at a time to `events`.
json read_document(std::string_view text, const std::string& file, CompleteEvents& events) {
  using Event = json::parse_event_t;
  int events_depth = -1;  // the events array's, while the parser is inside it
  bool events_seen = false;
  size_t index = 0;
  std::string key;  // the top-level object's latest
  return parse_json(text, file, [&](int depth, Event event, json& parsed) {
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

RankTrace kineto_trace(const json& doc, std::vector<CompleteEvent>& events,
                       const std::string& file) {
  RankTrace t;
  t.file = file;
  t.format = TraceFormat::kKineto;
  const std::optional<int> rank = distributed_int(doc, "rank");
  const std::optional<int> from_name = rank_from_file_name(file);
  t.rank = rank ? *rank : from_name ? *from_name : -1;
  t.world_size = distributed_int(doc, "world_size");
  for (CompleteEvent& e : events) {
    if (!e.kind) continue;
    Activity& a = e.activity;
    a.kind = *e.kind;
    a.lane = on_device(a.kind) && e.stream ? *e.stream : e.thread;
    t.activities.push_back(std::move(a));
  }
  t.sort();
  return t;
}

bool is_scalescope(const json& doc) {
  if (!doc.is_object() || !doc.contains("otherData")) return false;
  const json& other = doc["otherData"];
  return other.is_object() && other.contains("generator") && other["generator"] == "scalescope";
}

// One rank per replica (the process id of its events); every phase is a range measured where its
// work ran.
std::vector<RankTrace> scalescope_traces(std::vector<CompleteEvent>& events,
                                         const std::string& file) {
  std::map<int64_t, RankTrace> ranks;
  for (CompleteEvent& e : events) {
    Activity& a = e.activity;
    a.kind = ActivityKind::kAnnotation;
    a.lane = e.thread;
    a.correlation = -1;
    ranks[e.process].activities.push_back(std::move(a));
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

}  // namespace

std::vector<RankTrace> parse_chrome_trace(std::string_view text, const std::string& file) {
  CompleteEvents events;
  const json doc = read_document(text, file, events);
  trace_events(doc, file);  // the document has its events array
  const bool ours = is_scalescope(doc);
  const std::exception_ptr& error = ours ? events.scalescope_error : events.kineto_error;
  if (error) std::rethrow_exception(error);
  return ours ? scalescope_traces(events.events, file)
              : std::vector{kineto_trace(doc, events.events, file)};
}

}  // namespace scalescope::traces
