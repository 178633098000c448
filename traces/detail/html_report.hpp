// The self-contained HTML page of a report: inline CSS and SVG charts drawn
// here (per-turn curves per axis, speedup distribution per model, failure
// taxonomy); no scripts and no external resources.
#pragma once

#include <string>
#include <string_view>

namespace ptxbench::traces {
struct GroupReport;
struct ProfileDistribution;
struct Report;
struct Spread;
}  // namespace ptxbench::traces

namespace ptxbench::traces::detail {

std::string render_html_report(const Report &report);

/// Column and chart name of fast_p: "fast_0.5", "fast_1.0".
std::string fast_label(double p);
/// A GPU axis (correct, executed, fast_p, pass@k) of the group was never measured: it has attempts and no
/// correctness stage ran for any of them (a CPU-only run). Shown as "not measured", never as 0%.
bool gpu_unmeasured(const GroupReport &g);

/// The bound units of a profile distribution, most attempts first: "tensor pipe ×2 (87.2%), DRAM
/// throughput ×1 (80.0%)", each with the median % of peak of the attempts it bound; "—" when none.
std::string bound_units_text(const ProfileDistribution &d);
/// "61.5 [50.2–72.8] (40.0–87.2)": median [p25–p75] (min–max), % of peak.
std::string spread_text(const Spread &s);
/// "99.3", or "97.0 (95.0–99.3)" when the values differ: the library's figure (median, range).
std::string library_spread_text(const Spread &s);

/// The colour (#rrggbb) a series (model index) is drawn in; stable across charts.
std::string_view series_color(std::size_t index);
/// The colour a verdict status is drawn in in the failure taxonomy.
std::string_view status_color(std::string_view status);

}  // namespace ptxbench::traces::detail
