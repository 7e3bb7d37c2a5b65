#include "reports/html/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace scalescope::svg {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

Document::Document(double width, double height, std::string_view chart, std::string_view title,
                   const Attrs& attrs)
    : width_(width), height_(height) {
  SS_CHECK(width > 0 && height > 0, "svg chart '{}': size {}x{} is not positive", chart, width,
           height);
  SS_CHECK(!chart.empty(), "svg chart '{}': needs a chart name", title);
  Attrs all = {{"viewBox", fmt::format("0 0 {} {}", num(width), num(height))},
               {"width", num(width)},
               {"height", num(height)},
               {"role", "img"},
               {"data-chart", std::string(chart)}};
  all.insert(all.end(), attrs.begin(), attrs.end());
  open_tag("svg", all);
  out_ += "<title>" + escape(title) + "</title>\n";
}

void Document::open_tag(std::string_view tag, const Attrs& attrs) {
  out_ += '<';
  out_ += tag;
  for (const Attr& a : attrs)
    fmt::format_to(std::back_inserter(out_), " {}=\"{}\"", a.name, escape(a.value));
  out_ += '>';
}

void Document::rect(double x, double y, double w, double h, const Attrs& attrs,
                    std::string_view tooltip) {
  Attrs all = {{"x", num(x)},
               {"y", num(y)},
               {"width", num(std::max(0.0, w))},
               {"height", num(std::max(0.0, h))}};
  all.insert(all.end(), attrs.begin(), attrs.end());
  open_tag("rect", all);
  if (!tooltip.empty()) out_ += "<title>" + escape(tooltip) + "</title>";
  out_ += "</rect>\n";
}

void Document::circle(double cx, double cy, double r, const Attrs& attrs,
                      std::string_view tooltip) {
  Attrs all = {{"cx", num(cx)}, {"cy", num(cy)}, {"r", num(r)}};
  all.insert(all.end(), attrs.begin(), attrs.end());
  open_tag("circle", all);
  if (!tooltip.empty()) out_ += "<title>" + escape(tooltip) + "</title>";
  out_ += "</circle>\n";
}

void Document::line(double x1, double y1, double x2, double y2, const Attrs& attrs) {
  Attrs all = {{"x1", num(x1)}, {"y1", num(y1)}, {"x2", num(x2)}, {"y2", num(y2)}};
  all.insert(all.end(), attrs.begin(), attrs.end());
  open_tag("line", all);
  out_ += "</line>\n";
}

void Document::polyline(const std::vector<Point>& points, const Attrs& attrs) {
  std::string coords;
  for (const Point& p : points) {
    if (!coords.empty()) coords += ' ';
    coords += num(p.x) + "," + num(p.y);
  }
  Attrs all = {{"points", coords}, {"fill", "none"}};
  all.insert(all.end(), attrs.begin(), attrs.end());
  open_tag("polyline", all);
  out_ += "</polyline>\n";
}

void Document::text(double x, double y, std::string_view text, const Attrs& attrs) {
  Attrs all = {{"x", num(x)}, {"y", num(y)}};
  all.insert(all.end(), attrs.begin(), attrs.end());
  open_tag("text", all);
  out_ += escape(text);
  out_ += "</text>\n";
}

void Document::open_group(const Attrs& attrs, std::string_view tooltip) {
  open_tag("g", attrs);
  if (!tooltip.empty()) out_ += "<title>" + escape(tooltip) + "</title>";
  out_ += '\n';
  ++open_groups_;
}

void Document::close_group() {
  SS_CHECK(open_groups_ > 0, "svg: close_group without an open group");
  --open_groups_;
  out_ += "</g>\n";
}

std::string Document::finish() && {
  SS_CHECK(open_groups_ == 0, "svg: {} group(s) left open", open_groups_);
  out_ += "</svg>";
  return std::move(out_);
}

LinearScale::LinearScale(double d0, double d1, double r0, double r1)
    : d0_(d0), d1_(d1), r0_(r0), r1_(r1) {
  SS_CHECK(d0 != d1, "linear scale: empty domain [{}, {}]", d0, d1);
}

double LinearScale::operator()(double v) const {
  return r0_ + (v - d0_) / (d1_ - d0_) * (r1_ - r0_);
}

std::vector<double> LinearScale::ticks(int count) const {
  const double lo = std::min(d0_, d1_);
  const double hi = std::max(d0_, d1_);
  const double raw = (hi - lo) / std::max(1, count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw * (1 - 1e-9)) break;  // 0.2 is enough for a raw step of 0.2000000001
  }
  std::vector<double> out;
  // A small tolerance so that a domain ending on a tick keeps it despite rounding.
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return out;
}

Log2Scale::Log2Scale(double d0, double d1, double r0, double r1)
    : l0_(std::log2(d0)), l1_(std::log2(d1)), r0_(r0), r1_(r1) {
  SS_CHECK(d0 > 0 && d1 > d0, "log2 scale: domain [{}, {}] is not 0 < low < high", d0, d1);
}

double Log2Scale::operator()(double v) const {
  return r0_ + (std::log2(v) - l0_) / (l1_ - l0_) * (r1_ - r0_);
}

std::vector<double> Log2Scale::ticks(int max_count) const {
  const int first = static_cast<int>(std::ceil(l0_ - 1e-9));
  const int last = static_cast<int>(std::floor(l1_ + 1e-9));
  int stride = 1;
  while ((last - first) / stride + 1 > std::max(1, max_count)) stride *= 2;
  std::vector<double> out;
  for (int e = first; e <= last; e += stride) out.push_back(std::exp2(e));
  return out;
}

void x_axis(Document& doc, const std::vector<Tick>& ticks, double y, double x0, double x1,
            double grid_top, std::string_view title) {
  for (const Tick& t : ticks) {
    if (grid_top < y) doc.line(t.position, grid_top, t.position, y, {{"class", "svg-grid"}});
    doc.line(t.position, y, t.position, y + 4, {{"class", "svg-axis"}});
    doc.text(t.position, y + 16, t.label, {{"class", "svg-tick"}, {"text-anchor", "middle"}});
  }
  doc.line(x0, y, x1, y, {{"class", "svg-axis"}});
  if (!title.empty()) {
    doc.text((x0 + x1) / 2, y + 34, title, {{"class", "svg-label"}, {"text-anchor", "middle"}});
  }
}

void y_axis(Document& doc, const std::vector<Tick>& ticks, double x, double y0, double y1,
            double grid_right, std::string_view title) {
  for (const Tick& t : ticks) {
    if (grid_right > x) doc.line(x, t.position, grid_right, t.position, {{"class", "svg-grid"}});
    doc.line(x - 4, t.position, x, t.position, {{"class", "svg-axis"}});
    doc.text(x - 7, t.position + 4, t.label, {{"class", "svg-tick"}, {"text-anchor", "end"}});
  }
  doc.line(x, y0, x, y1, {{"class", "svg-axis"}});
  if (!title.empty()) {
    const double cy = (y0 + y1) / 2;
    const double cx = x - 48;
    doc.text(cx, cy, title,
             {{"class", "svg-label"},
              {"text-anchor", "middle"},
              {"transform", fmt::format("rotate(-90 {} {})", num(cx), num(cy))}});
  }
}

double text_width(std::string_view text, double font_px) {
  // Average advance of a proportional sans-serif face: about 0.58 em.
  return static_cast<double>(text.size()) * font_px * 0.58;
}

double legend_item(Document& doc, double x, double y, const LegendItem& item) {
  const double swatch = item.line ? 22.0 : 11.0;
  if (item.line) {
    Attrs attrs = {{"stroke", item.color}, {"stroke-width", "2"}};
    if (item.dashed) attrs.push_back({"stroke-dasharray", "5 3"});
    doc.line(x, y, x + swatch, y, attrs);
    if (item.marker) {
      doc.circle(x + swatch / 2, y, 3.5,
                 {{"fill", item.hollow_marker ? "#ffffff" : item.color},
                  {"stroke", item.color},
                  {"stroke-width", "1.5"}});
    }
  } else {
    doc.rect(x, y - 5.5, swatch, swatch, {{"fill", item.color}, {"rx", "2"}});
  }
  doc.text(x + swatch + 5, y + 4, item.label, {{"class", "svg-legend"}});
  return x + legend_item_width(item);
}

double legend_item_width(const LegendItem& item) {
  return (item.line ? 22.0 : 11.0) + 5 + text_width(item.label) + 14;
}

namespace {

// Calls place(item, x, y) for each item where legend() draws it; returns the rows used.
template <typename Place>
int lay_out_legend(const std::vector<LegendItem>& items, double x0, double y0, double max_x,
                   const Place& place) {
  int rows = items.empty() ? 0 : 1;
  double x = x0;
  double y = y0;
  for (const LegendItem& item : items) {
    if (x > x0 && x + legend_item_width(item) > max_x) {
      ++rows;
      x = x0;
      y += kLegendRowHeight;
    }
    place(item, x, y);
    x += legend_item_width(item);
  }
  return rows;
}

}  // namespace

void legend(Document& doc, const std::vector<LegendItem>& items, double x0, double y0,
            double max_x) {
  lay_out_legend(items, x0, y0, max_x, [&doc](const LegendItem& item, double x, double y) {
    legend_item(doc, x, y, item);
  });
}

FigureBox figure_box(const std::vector<LegendItem>& legend, const FigureLayout& layout) {
  FigureBox b;
  const double margin = b.width - b.right;
  b.width = std::max(b.width, b.left + layout.plot_width + margin);
  b.right = b.width - margin;
  b.top = 12 + legend_rows(legend, b.left, b.right) * kLegendRowHeight + layout.headroom;
  b.bottom = b.top + layout.plot_height;
  b.height = b.bottom + 48 + static_cast<double>(layout.note_lines) * 15;
  return b;
}

Document figure(const FigureBox& box, const std::vector<LegendItem>& items, std::string_view chart,
                std::string_view title, const Attrs& attrs) {
  Document doc(box.width, box.height, chart, title, attrs);
  legend(doc, items, box.left, 16, box.right);
  return doc;
}

void figure_notes(Document& doc, const FigureBox& box, const std::vector<std::string>& notes) {
  double y = box.bottom + 50;
  for (const std::string& n : notes) {
    doc.text(box.left, y, n, {{"class", "svg-note"}});
    y += 15;
  }
}

int legend_rows(const std::vector<LegendItem>& items, double x0, double max_x) {
  return lay_out_legend(items, x0, 0, max_x, [](const LegendItem&, double, double) {});
}

}  // namespace scalescope::svg
