// The self-contained HTML page of a report: inline CSS and SVG charts drawn
// here (per-turn curves per axis, speedup distribution per model, failure
// taxonomy); no scripts and no external resources.
#pragma once

#include <string>
#include <string_view>

#include "traces/report.hpp"

namespace ptxbench::traces::detail {

std::string render_html_report(const Report &report);

/// Column and chart name of fast_p: "fast_0.5", "fast_1.0".
std::string fast_label(double p);
/// The colour (#rrggbb) a series (model index) is drawn in; stable across charts.
std::string_view series_color(std::size_t index);
/// The colour a verdict status is drawn in in the failure taxonomy.
std::string_view status_color(std::string_view status);

}  // namespace ptxbench::traces::detail
