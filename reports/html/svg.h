// Small SVG primitives for the HTML report's charts: a document builder that escapes every
// text and attribute value it is given, linear and base-2 logarithmic scales with their
// ticks, and axes with grid lines. Nothing here knows about sweeps; html.cpp composes charts.
//
// The SVG is meant to be inlined in an HTML page (no xmlns attribute: HTML5 parses inline
// <svg> into the SVG namespace by itself, and the page then names no URL at all). Axis text
// and grid lines carry CSS classes (svg-axis, svg-grid, svg-tick, svg-label) that the page
// styles; data shapes carry their colours as attributes.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scalescope::svg {

// &, <, >, " and ' as character references: safe both as element text and inside a quoted
// attribute value.
std::string escape(std::string_view text);

// Coordinates and lengths as short text: at most 2 decimals, no trailing zeros ("12",
// "12.5", "-0.25"). Keeps the markup small and stable across platforms.
std::string num(double v);

// One attribute; the value is escaped when written.
struct Attr {
  std::string name;
  std::string value;
};
using Attrs = std::vector<Attr>;

struct Point {
  double x = 0;
  double y = 0;
};

// Builds one <svg> element. Shapes are appended in drawing order (later ones on top).
class Document {
 public:
  // <svg viewBox="0 0 width height" data-chart="chart" role="img"> with <title>title</title>
  // as its first child; `attrs` are added to the <svg> element (data-model, data-batch, ...).
  // REQUIRES: width, height > 0; chart non-empty.
  Document(double width, double height, std::string_view chart, std::string_view title,
           const Attrs& attrs = {});

  double width() const { return width_; }
  double height() const { return height_; }

  // A non-empty `tooltip` becomes the shape's <title> child (the browser shows it on hover).
  void rect(double x, double y, double w, double h, const Attrs& attrs,
            std::string_view tooltip = {});
  void circle(double cx, double cy, double r, const Attrs& attrs, std::string_view tooltip = {});
  void line(double x1, double y1, double x2, double y2, const Attrs& attrs);
  void polyline(const std::vector<Point>& points, const Attrs& attrs);
  void text(double x, double y, std::string_view text, const Attrs& attrs = {});
  // <g> ... </g>: groups shapes so that a reader (or a test) can find them as one item. A
  // non-empty `tooltip` is the group's <title> (shown on hover over any of its shapes).
  void open_group(const Attrs& attrs, std::string_view tooltip = {});
  void close_group();

  // The finished element. REQUIRES: every group closed.
  std::string finish() &&;

 private:
  void open_tag(std::string_view tag, const Attrs& attrs);
  double width_;
  double height_;
  std::string out_;
  int open_groups_ = 0;
};

// value → pixel, linear. The domain may be given in either order of the range (y axes run
// upwards: range bottom, top).
class LinearScale {
 public:
  // REQUIRES: d0 != d1.
  LinearScale(double d0, double d1, double r0, double r1);
  double operator()(double v) const;
  // Round tick values (steps of 1, 2 or 5 × 10^k) within the domain, about `count` of them.
  std::vector<double> ticks(int count) const;

 private:
  double d0_, d1_, r0_, r1_;
};

// value → pixel on a base-2 logarithmic axis (device counts, speedups).
class Log2Scale {
 public:
  // REQUIRES: 0 < d0 < d1.
  Log2Scale(double d0, double d1, double r0, double r1);
  double operator()(double v) const;
  // The powers of two within the domain; when there would be more than `max_count`, every
  // second (fourth, ...) one.
  std::vector<double> ticks(int max_count) const;

 private:
  double l0_, l1_, r0_, r1_;
};

struct Tick {
  double position = 0;  // pixel
  std::string label;
};

// A horizontal axis line at pixel `y` from `x0` to `x1`: tick marks and labels below it, a
// light vertical grid line from each tick up to `grid_top` (no grid when grid_top >= y), and
// `title` centred under the labels.
void x_axis(Document& doc, const std::vector<Tick>& ticks, double y, double x0, double x1,
            double grid_top, std::string_view title);
// A vertical axis at pixel `x` from `y0` (bottom) to `y1` (top): labels left of it, a light
// horizontal grid line from each tick to `grid_right` (none when grid_right <= x), and `title`
// rotated along the axis.
void y_axis(Document& doc, const std::vector<Tick>& ticks, double x, double y0, double y1,
            double grid_right, std::string_view title);

// A legend entry: a swatch (a filled square, or a line when `line` is set; dashed when
// `dashed`) and its label. Returns the x just after the label, for the next entry: label width
// is estimated from its length (no text measurement without a browser).
struct LegendItem {
  std::string label;
  std::string color;
  bool line = false;
  bool dashed = false;
  bool marker = false;         // a circle on the line (filled unless hollow)
  bool hollow_marker = false;  // an open circle
};
double legend_item(Document& doc, double x, double y, const LegendItem& item);
// How far legend_item advances x for `item`.
double legend_item_width(const LegendItem& item);

// A legend: items left to right from (x0, y0), wrapping to a new row before max_x, rows
// kLegendRowHeight apart; legend_rows says how many rows the same call draws.
inline constexpr double kLegendRowHeight = 18;
void legend(Document& doc, const std::vector<LegendItem>& items, double x0, double y0,
            double max_x);
int legend_rows(const std::vector<LegendItem>& items, double x0, double max_x);

// How a chart lays out its figure: the legend in rows at the top, a plot under it, then the x
// axis and lines of notes.
struct FigureLayout {
  double plot_height = 240;
  size_t note_lines = 0;
  // At least this wide a plot: a chart whose groups need more than the pages' usual width
  // widens the figure.
  double plot_width = 0;
  // From the legend to the plot: more where values are written above bars.
  double headroom = 8;
};
// Where a figure puts things.
struct FigureBox {
  double width = 560;
  double left = 62;  // room for the y axis' labels
  double right = 538;
  double top = 0;
  double bottom = 0;
  double height = 0;
};
FigureBox figure_box(const std::vector<LegendItem>& legend, const FigureLayout& layout);
// A chart's document (`chart` and `title` as Document's) of `box`'s size, its legend drawn.
Document figure(const FigureBox& box, const std::vector<LegendItem>& items, std::string_view chart,
                std::string_view title, const Attrs& attrs = {});
// `notes`, a line each, where figure_box left room for them.
void figure_notes(Document& doc, const FigureBox& box, const std::vector<std::string>& notes);

// A scale's domain.
struct Domain {
  double lo = 0;
  double hi = 0;
};
// No scale: the chart places along that axis itself (groups of bars).
struct NoScale {
  NoScale(double, double, double, double) {}
};
// A chart's plot: its edges (a FigureBox's) and its scales (LinearScale, Log2Scale or NoScale),
// x over the plot's width and y up its height.
template <class X, class Y>
struct Frame {
  Frame(const FigureBox& box, Domain x_domain, Domain y_domain)
      : left(box.left),
        right(box.right),
        top(box.top),
        bottom(box.bottom),
        x(x_domain.lo, x_domain.hi, box.left, box.right),
        y(y_domain.lo, y_domain.hi, box.bottom, box.top) {}
  double left, right, top, bottom;
  X x;
  Y y;
};
// Estimated width in pixels of `text` at the page's chart font size (11 px).
double text_width(std::string_view text, double font_px = 11.0);

}  // namespace scalescope::svg
