// The SVG primitives under the HTML report's charts: escaping, numbers, scales, the document
// builder and legends.
#include "reports/html/svg.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(Svg, EscapesNumbersAndScales) {
  EXPECT_EQ(svg::escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(svg::num(12.0), "12");
  EXPECT_EQ(svg::num(12.5), "12.5");
  EXPECT_EQ(svg::num(-0.001), "0");
  EXPECT_EQ(svg::num(1.0 / 3), "0.33");
  const svg::LinearScale y(0, 1, 200, 0);
  EXPECT_DOUBLE_EQ(y(0.25), 150);
  EXPECT_EQ(y.ticks(5), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  const svg::Log2Scale x(1, 16, 0, 400);
  EXPECT_DOUBLE_EQ(x(4), 200);
  EXPECT_EQ(x.ticks(10), (std::vector<double>{1, 2, 4, 8, 16}));
  EXPECT_EQ(x.ticks(3), (std::vector<double>{1, 4, 16}));
  EXPECT_CONTAINS(testing_util::error_of([] { svg::Log2Scale(0, 4, 0, 1); }), "[0, 4]");

  svg::Document doc(100, 50, "test", "a <title>", {{"data-model", "x\"y"}});
  doc.open_group({{"data-bar", "1"}}, "tip & top");
  doc.rect(1, 2, 3, 4, {{"fill", "#fff"}});
  doc.close_group();
  const std::string out = std::move(doc).finish();
  EXPECT_EQ(out.rfind("<svg viewBox=\"0 0 100 50\"", 0), 0u);
  EXPECT_CONTAINS(out, "data-chart=\"test\"");
  EXPECT_CONTAINS(out, "data-model=\"x&quot;y\"");
  EXPECT_CONTAINS(out, "<title>a &lt;title&gt;</title>");
  EXPECT_CONTAINS(out, "<g data-bar=\"1\"><title>tip &amp; top</title>");
  EXPECT_CONTAINS(out, "<rect x=\"1\" y=\"2\" width=\"3\" height=\"4\" fill=\"#fff\">");
}

TEST(Svg, LegendsWrapBeforeTheirRightEdge) {
  const std::vector<svg::LegendItem> items = {
      {"input", "#000"}, {"forward", "#111"}, {"backward", "#222"}};
  double width = 0;
  for (const svg::LegendItem& item : items) width += svg::legend_item_width(item);
  EXPECT_EQ(svg::legend_rows({}, 0, 100), 0);
  EXPECT_EQ(svg::legend_rows(items, 0, width), 1);
  EXPECT_EQ(svg::legend_rows(items, 0, width - 1), 2);
  // One item per row when none fits beside another; a wide item still gets a row.
  EXPECT_EQ(svg::legend_rows(items, 0, 1), 3);
  svg::Document doc(200, 100, "test", "legend");
  svg::legend(doc, items, 0, 10, width - 1);
  const std::string out = std::move(doc).finish();
  EXPECT_CONTAINS(out, ">backward</text>");
  // The third item starts the second row, kLegendRowHeight below the first.
  EXPECT_CONTAINS(out, "<rect x=\"0\" y=\"22.5\"");
}

}  // namespace
}  // namespace scalescope
