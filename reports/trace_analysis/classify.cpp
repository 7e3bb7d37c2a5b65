#include "reports/trace_analysis/classify.h"

#include <cctype>

namespace scalescope::traces {

std::string_view to_string(Work work) {
  switch (work) {
    case Work::kCompute:
      return "compute";
    case Work::kCommunication:
      return "communication";
    case Work::kCommunicationWait:
      return "communication wait";
    case Work::kCopyH2D:
      return "host-to-device copy";
    case Work::kCopyH2DWait:
      return "host-to-device copy wait";
    case Work::kCopyOther:
      return "other copy";
    case Work::kInput:
      return "input";
    case Work::kNone:
      return "none";
  }
  return "?";
}

std::string_view to_string(Context context) {
  switch (context) {
    case Context::kNone:
      return "none";
    case Context::kStep:
      return "step";
    case Context::kInput:
      return "input";
    case Context::kForward:
      return "forward";
    case Context::kBackward:
      return "backward";
    case Context::kOptimizer:
      return "optimizer";
  }
  return "?";
}

namespace {

const PhaseDef* phase_named(std::string_view name) {
  for (const PhaseDef& d : kPhases) {
    if (name == d.label) return &d;
  }
  return nullptr;
}

bool matches(const Rule& rule, std::string_view name) {
  switch (rule.match) {
    case Match::kExact:
      return name == rule.pattern;
    case Match::kPrefix:
      return name.starts_with(rule.pattern);
    case Match::kContains:
      return name.find(rule.pattern) != std::string_view::npos;
    case Match::kAny:
      return true;
    case Match::kPhaseLabel:
      return phase_named(name) != nullptr;
  }
  return false;
}

}  // namespace

Class classify(const Activity& activity) {
  const unsigned bit = kind_bit(activity.kind);
  for (const Rule& rule : kRules) {
    if ((rule.kinds & bit) == 0 || !matches(rule, activity.name)) continue;
    if (rule.match == Match::kPhaseLabel) {
      Class c = phase_class(*phase_named(activity.name));
      c.rule = &rule;
      return c;
    }
    return {rule.work, rule.context, &rule};
  }
  return {};
}

ActivityKind kind_by_name(std::string_view name) {
  for (const Rule& rule : kRules) {
    if (rule.match != Match::kAny && (rule.kinds & kRanges) != 0 && matches(rule, name)) {
      return ActivityKind::kAnnotation;
    }
  }
  return ActivityKind::kHostOp;
}

Class phase_class(const PhaseDef& phase) {
  switch (phase.kind) {
    case PhaseKind::kCompute:
      return {Work::kCompute, phase.phase == Phase::kBackward    ? Context::kBackward
                              : phase.phase == Phase::kOptimizer ? Context::kOptimizer
                                                                 : Context::kForward};
    case PhaseKind::kCommunication:
      return {phase.track == Track::kCompute ? Work::kCommunicationWait : Work::kCommunication,
              Context::kNone};
    case PhaseKind::kInput:
      if (phase.track == Track::kInput) return {Work::kInput, Context::kInput};
      return {phase.track == Track::kCompute ? Work::kCopyH2DWait : Work::kCopyH2D, Context::kNone};
  }
  return {};
}

bool names_step_range(std::string_view name, std::string_view range) {
  if (!name.starts_with(range)) return false;
  if (name.size() == range.size()) return true;
  const auto next = static_cast<unsigned char>(name[range.size()]);
  return !std::isalnum(next) && next != '_';
}

}  // namespace scalescope::traces
