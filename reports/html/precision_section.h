// A sweep with a precision axis: per model, its precisions side by side (where the step goes in
// each, the throughput against the devices' default precision, and where a faster precision
// turns a point communication-bound).
#pragma once

#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

// The models that ran more than one precision: a view each over the points of every
// precision (the default bucket caps, uncompressed), named "MODEL: precisions compared".
// `first_index` numbers their anchors after the model sections'.
std::vector<ModelView> precision_views(const SweepReport& report, int first_index);

// "In bf16, cpu:2, batch 32/device turns communication-bound: ..." for each of the model's
// communication_bound_by_precision (reports/analysis/precision_analysis.h).
std::vector<std::string> precision_conclusions(const SweepReport& report,
                                               const ModelView& compared);

void precision_section(std::string& out, const SweepReport& report, const ModelView& compared);

}  // namespace scalescope::html
