#include "reports/html/view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace scalescope::html {

int64_t batch_key(const SweepPoint& p) {
  return p.mode == ScalingMode::kWeak ? p.batch : p.global_batch;
}

std::string batch_label(ScalingMode mode, int64_t batch) {
  return mode == ScalingMode::kWeak ? fmt::format("batch {}/device", batch)
                                    : fmt::format("global batch {}", batch);
}

const SweepPoint* ModelView::at(int d, int64_t b) const {
  for (const SweepPoint* p : points) {
    if (p->devices == d && batch_key(*p) == b) return p;
  }
  return nullptr;
}

std::vector<const SweepPoint*> ModelView::series(int64_t b, bool all) const {
  std::vector<const SweepPoint*> out;
  for (const SweepPoint* p : all ? all_points : points) {
    if (batch_key(*p) == b) out.push_back(p);
  }
  std::stable_sort(out.begin(), out.end(), [](const SweepPoint* x, const SweepPoint* y) {
    return x->devices < y->devices;
  });
  return out;
}

std::string ModelView::point_text(const SweepPoint& p) const {
  return fmt::format("{}:{}, {}", p.device_kind, p.devices, batch_text(batch_key(p)));
}

std::vector<ModelView> models_of(const SweepReport& report) {
  std::vector<ModelView> out;
  for (const SweepPoint& p : report.points) {
    const std::string name = p.model + precision_text(p.precision, p.precision_default);
    auto it =
        std::find_if(out.begin(), out.end(), [&](const ModelView& m) { return m.name == name; });
    if (it == out.end()) {
      ModelView m;
      m.name = name;
      m.model = p.model;
      m.index = static_cast<int>(out.size());
      m.mode = p.mode;
      m.device_kind = p.device_kind;
      m.precision = p.precision;
      out.push_back(std::move(m));
      it = out.end() - 1;
    }
    it->all_points.push_back(&p);
    // One point per device count and batch for the charts: an uncompressed one replaces a
    // compressed one, then the default bucket caps' replace another setting's.
    auto same = std::find_if(it->points.begin(), it->points.end(), [&](const SweepPoint* q) {
      return q->devices == p.devices && batch_key(*q) == batch_key(p);
    });
    const auto rank = [](const SweepPoint* q) {
      return std::pair(!q->compressed(), q->default_buckets());
    };
    if (same == it->points.end()) {
      it->points.push_back(&p);
    } else if (rank(&p) > rank(*same)) {
      *same = &p;
    }
  }
  for (ModelView& m : out) {
    m.other_precisions = std::count_if(out.begin(), out.end(),
                                       [&](const ModelView& v) { return v.model == m.model; }) > 1;
    std::set<int> devices;
    std::set<int64_t> batches;
    for (const SweepPoint* p : m.points) {
      devices.insert(p->devices);
      batches.insert(batch_key(*p));
    }
    m.devices.assign(devices.begin(), devices.end());
    m.batches.assign(batches.begin(), batches.end());
    for (const CommunicationAnalysis& c : report.communication) {
      if (c.model == m.model) m.communication = &c;
    }
    for (const BucketChoice& c : report.bucket_choices) {
      if (c.model == m.model && c.precision == m.precision) m.bucket_choices.push_back(&c);
    }
    for (const CompressionEffect& e : report.compression_effects) {
      if (e.model == m.model && e.precision == m.precision) m.compression_effects.push_back(&e);
    }
  }
  return out;
}

// fmt 9 has no '%' presentation.
std::string percent(double fraction, int decimals) {
  return fmt::format("{:.{}f}%", 100.0 * fraction, decimals);
}

std::string signed_loss(double share) {
  const std::string magnitude = fmt::format("{:.1f}%", 100.0 * std::abs(share));
  if (magnitude == "0.0%") return magnitude;
  return (share > 0 ? "\u2212" : "+") + magnitude;
}

std::string short_number(double v) {
  const double a = std::abs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string count_with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string hex(Rgb c) {
  return fmt::format("#{:02x}{:02x}{:02x}", c.red, c.green, c.blue);
}

std::string tick_label(double v) {
  return fmt::format("{:.3g}", v);
}

}  // namespace scalescope::html
