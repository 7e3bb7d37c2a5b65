// What `scalescope compare` prints: a terminal table (the end of a CI log) and a pull-request
// comment (Markdown).
#pragma once

#include <string>

#include "reports/compare/compare.h"

namespace scalescope {

// A terminal table per compared point, the points not compared, and a verdict line last (what
// a CI log shows at its end). Environment differences come first.
std::string format_comparison_table(const Comparison& comparison);
// A pull-request comment: the verdict first, environment differences in a warning, the
// metrics that regressed or improved, the points not compared, then every metric in a
// collapsed section and the rule used.
std::string format_comparison_markdown(const Comparison& comparison);

}  // namespace scalescope
