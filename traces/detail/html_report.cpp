#include "traces/detail/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "traces/detail/run_view.hpp"
#include "traces/report.hpp"

namespace ptxbench::traces::detail {

std::string_view series_color(std::size_t index) {
  static constexpr std::string_view kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                                  "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
  return kPalette[index % std::size(kPalette)];
}

std::string_view status_color(std::string_view status) {
  static const std::map<std::string_view, std::string_view> kColors = {{"ok", "#2ca02c"},
                                                                       {"no_kernel", "#7f7f7f"},
                                                                       {"bad_manifest", "#bcbd22"},
                                                                       {"static_error", "#ffbb78"},
                                                                       {"compile_error", "#ff7f0e"},
                                                                       {"launch_error", "#c49c94"},
                                                                       {"runtime_error", "#d62728"},
                                                                       {"timeout", "#8c564b"},
                                                                       {"incorrect", "#9467bd"},
                                                                       {"nondeterministic", "#e377c2"},
                                                                       {"suspicious", "#17becf"},
                                                                       {"skipped", "#c7c7c7"},
                                                                       {"request_failed", "#393b79"}};
  auto it = kColors.find(status);
  return it == kColors.end() ? "#000000" : it->second;
}

std::string fast_label(double p) {
  std::string s = fmt::format("{}", p);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // fast_1.0, not fast_1
  return "fast_" + s;
}

bool gpu_unmeasured(const GroupReport &g) {
  return g.attempts > 0 && g.gpu_measured_attempts == 0;
}

std::string bound_units_text(const ProfileDistribution &d) {
  std::vector<const std::pair<const std::string, ProfileDistribution::Unit> *> units;
  for (const auto &entry : d.bound_units) units.push_back(&entry);
  std::stable_sort(units.begin(), units.end(),
                   [](const auto *a, const auto *b) { return a->second.attempts > b->second.attempts; });
  std::string out;
  for (const auto *u : units) {
    out += fmt::format("{}{} ×{}", out.empty() ? "" : ", ",
                       u->second.label.empty() ? u->first : u->second.label, u->second.attempts);
    if (const auto median = u->second.median()) out += fmt::format(" ({:.1f}%)", *median);
  }
  if (d.bound_unknown)
    out += fmt::format("{}no throughput metric ×{}", out.empty() ? "" : ", ", d.bound_unknown);
  return out.empty() ? "—" : out;
}

std::string spread_text(const Spread &s) {
  return fmt::format("{:.1f} [{:.1f}–{:.1f}] ({:.1f}–{:.1f})", s.median, s.p25, s.p75, s.min, s.max);
}

std::string library_spread_text(const Spread &s) {
  if (s.min == s.max) return fmt::format("{:.1f}", s.median);
  return fmt::format("{:.1f} ({:.1f}–{:.1f})", s.median, s.min, s.max);
}

namespace {

constexpr double kW = 380, kH = 250;                                // chart size, px
constexpr double kLeft = 48, kRight = 12, kTop = 34, kBottom = 36;  // plot margins, px

std::string fmt_px(double v) {
  return fmt::format("{:.1f}", v);
}

struct Series {
  std::string name;
  std::string_view color;
  std::vector<double> values;               ///< per turn, 0..1
  std::vector<std::optional<Interval>> ci;  ///< per turn, the 95% interval drawn as an error bar
  bool measured = true;  ///< false: the axis was never measured for it (no GPU stage ran): no line, a label
};

/// Legend swatches from (kLeft, y), wrapping at max_width; returns the SVG and the rows used.
std::pair<std::string, int> legend(const std::vector<std::pair<std::string, std::string_view>> &items,
                                   double y, double max_width) {
  std::string s;
  double x = kLeft;
  int rows = 1;
  for (const auto &[name, color] : items) {
    const double width = 26 + 6.5 * static_cast<double>(name.size());
    if (x > kLeft && x + width > max_width) {
      x = kLeft;
      y += 18;
      ++rows;
    }
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>", fmt_px(x),
                     fmt_px(y - 10), color);
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"lg\">{}</text>", fmt_px(x + 16), fmt_px(y),
                     html_escape(name));
    x += width;
  }
  return {s, rows};
}

std::string line_chart(const std::string &title, int turns, const std::vector<Series> &series) {
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto xpos = [&](int t) { return kLeft + (turns > 1 ? pw * t / (turns - 1) : pw / 2); };
  auto ypos = [&](double v) { return kTop + ph * (1.0 - v); };
  std::string s = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
      "{0} {1}\" "
      "role=\"img\" aria-label=\"{2}\"><title>{2}</title>",
      kW, kH, html_escape(title));
  s += fmt::format("<text x=\"{}\" y=\"14\" class=\"tt\">{}</text>", fmt_px(kLeft), html_escape(title));
  for (int i = 0; i <= 4; ++i) {
    double v = i / 4.0;
    s += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" class=\"grid\"/>", fmt_px(kLeft),
                     fmt_px(kLeft + pw), fmt_px(ypos(v)));
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"end\">{}%</text>", fmt_px(kLeft - 4),
                     fmt_px(ypos(v) + 4), i * 25);
  }
  for (int t = 0; t < turns; ++t) {
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">{}</text>", fmt_px(xpos(t)),
                     fmt_px(kTop + ph + 16), t);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">turn</text>",
                   fmt_px(kLeft + pw / 2), fmt_px(kH - 4));
  for (const auto &ser : series) {
    if (!ser.measured) continue;  // a never-measured axis is no 0% line
    std::string points;
    for (int t = 0; t < turns && t < static_cast<int>(ser.values.size()); ++t) {
      points += fmt::format("{},{} ", fmt_px(xpos(t)), fmt_px(ypos(ser.values[t])));
    }
    s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"3\"/>", points,
                     ser.color);
    // Error bars, nudged sideways per series so overlapping ones stay apart.
    const double nudge = (static_cast<double>(&ser - series.data()) - (series.size() - 1) / 2.0) * 4.0;
    for (int t = 0; t < turns && t < static_cast<int>(ser.ci.size()); ++t) {
      if (!ser.ci[t]) continue;
      const double x = xpos(t) + nudge, y0 = ypos(ser.ci[t]->lo), y1 = ypos(ser.ci[t]->hi);
      s += fmt::format(
          "<g class=\"errbar\" stroke=\"{0}\" stroke-width=\"1.5\"><line x1=\"{1}\" x2=\"{1}\" y1=\"{2}\" "
          "y2=\"{3}\"/><line x1=\"{4}\" x2=\"{5}\" y1=\"{2}\" y2=\"{2}\"/><line x1=\"{4}\" x2=\"{5}\" "
          "y1=\"{3}\" y2=\"{3}\"/></g>",
          ser.color, fmt_px(x), fmt_px(y0), fmt_px(y1), fmt_px(x - 3), fmt_px(x + 3));
    }
    for (int t = 0; t < turns && t < static_cast<int>(ser.values.size()); ++t) {
      std::string ci_text;
      if (t < static_cast<int>(ser.ci.size()) && ser.ci[t])
        ci_text = fmt::format(" (95% CI {:.1f}–{:.1f}%)", 100 * ser.ci[t]->lo, 100 * ser.ci[t]->hi);
      s += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"{}\"><title>{} turn {}: {:.1f}%{}</title></circle>",
          fmt_px(xpos(t)), fmt_px(ypos(ser.values[t])), ser.color, html_escape(ser.name), t,
          100 * ser.values[t], ci_text);
    }
  }
  std::vector<std::pair<std::string, std::string_view>> items;
  for (const auto &ser : series)
    items.emplace_back(ser.measured ? ser.name : ser.name + ": not measured",
                       ser.measured ? ser.color : "#c7c7c7");
  s += legend(items, 30, kW - kRight).first;
  if (!series.empty() &&
      std::none_of(series.begin(), series.end(), [](const Series &x) { return x.measured; }))
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" class=\"nm\" text-anchor=\"middle\">not measured (no GPU stage ran)</text>",
        fmt_px(kLeft + pw / 2), fmt_px(kTop + ph / 2));
  return s + "</svg>";
}

std::string speedup_chart(const Report &r) {
  std::vector<const SpeedupPoint *> points;
  for (const auto &p : r.speedups) points.push_back(&p);
  const double row_h = 34;
  const double h = kTop + row_h * static_cast<double>(r.models.size()) + kBottom;
  const double w = 2 * kW, left = 150, pw = w - left - kRight;
  double lo = 0.25, hi = 4.0;  // at least 1/4x .. 4x on a log scale
  for (const auto *p : points) {
    lo = std::min(lo, p->speedup);
    hi = std::max(hi, p->speedup);
  }
  const double llo = std::log2(lo), lhi = std::log2(hi);
  auto xpos = [&](double v) { return left + pw * (std::log2(v) - llo) / (lhi - llo); };
  std::string s = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
      "{0} {1}\" "
      "role=\"img\" aria-label=\"speedup distribution\"><title>Speedup over the library, correct "
      "attempts</title>",
      w, fmt_px(h));
  s += fmt::format(
      "<text x=\"{}\" y=\"14\" class=\"tt\">Speedup over the library, correct attempts (log); bar = "
      "geomean, whisker = 95% CI</text>",
      fmt_px(kLeft));  // from the chart's left edge: the title is wider than the plot
  const double axis_y = kTop + row_h * static_cast<double>(r.models.size());
  for (int e = static_cast<int>(std::ceil(llo)); e <= static_cast<int>(std::floor(lhi)); ++e) {
    double v = std::pow(2.0, e);
    s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" class=\"{3}\"/>", fmt_px(xpos(v)),
                     fmt_px(kTop), fmt_px(axis_y), e == 0 ? "one" : "grid");
    s +=
        fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">{}x</text>", fmt_px(xpos(v)),
                    fmt_px(axis_y + 16), v >= 1 ? fmt::format("{:g}", v) : fmt::format("{:.3g}", v));
  }
  for (std::size_t m = 0; m < r.models.size(); ++m) {
    const double y = kTop + row_h * (static_cast<double>(m) + 0.5);
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"lg\" text-anchor=\"end\">{}</text>", fmt_px(left - 8),
                     fmt_px(y + 4), html_escape(r.models[m]));
    int i = 0;
    for (const auto *p : points) {
      if (p->model != r.models[m]) continue;
      const double jitter =
          ((i++ * 7) % 11 - 5) * 2.0;  // deterministic spread so equal speedups stay visible
      s += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"{}\" fill-opacity=\"0.8\"><title>{} {} turn {}: "
          "{:.3f}x</title></circle>",
          fmt_px(xpos(p->speedup)), fmt_px(y + jitter), series_color(m), html_escape(p->task),
          html_escape(p->trajectory_id), p->turn, p->speedup);
    }
    if (const GroupReport *g = r.find_model(r.models[m]); g && g->geomean_speedup) {
      if (const auto &ci = g->geomean_speedup_ci) {
        const double x0 = xpos(std::max(ci->lo, lo)), x1 = xpos(std::min(ci->hi, hi));
        s += fmt::format(
            "<g class=\"errbar\" stroke=\"#000000\" stroke-width=\"2\"><line x1=\"{0}\" x2=\"{1}\" "
            "y1=\"{2}\" "
            "y2=\"{2}\"/><line x1=\"{0}\" x2=\"{0}\" y1=\"{3}\" y2=\"{4}\"/><line x1=\"{1}\" x2=\"{1}\" "
            "y1=\"{3}\" y2=\"{4}\"/><title>geomean 95% CI {5:.3f}x–{6:.3f}x</title></g>",
            fmt_px(x0), fmt_px(x1), fmt_px(y + row_h / 2 - 4), fmt_px(y + row_h / 2 - 8),
            fmt_px(y + row_h / 2), ci->lo, ci->hi);
      }
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"3\" height=\"{}\" fill=\"#000000\"><title>geomean "
          "{:.3f}x</title></rect>",
          fmt_px(xpos(*g->geomean_speedup) - 1.5), fmt_px(y - row_h / 2 + 3), fmt_px(row_h - 6),
          *g->geomean_speedup);
    } else {
      const bool nm = g && gpu_unmeasured(*g);
      s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"{}\">{}</text>", fmt_px(left + 4), fmt_px(y + 4),
                       nm ? "nm" : "ax", nm ? "not measured (no GPU stage ran)" : "no correct timed attempt");
    }
  }
  return s + "</svg>";
}

std::string taxonomy_chart(const std::string &model, const GroupReport &g,
                           const std::vector<std::string> &statuses) {
  std::vector<std::pair<std::string, std::string_view>> items;
  for (const auto &st : statuses) items.emplace_back(st, status_color(st));
  auto [legend_svg, legend_rows] = legend(items, 32, kW - kRight);
  const double top = kTop + 18.0 * legend_rows, ph = kH - kTop - kBottom - 26;
  const double height = top + ph + kBottom;
  const double pw = kW - kLeft - kRight;
  const int turns = static_cast<int>(g.failures_by_turn.size());
  const double slot = turns ? pw / turns : pw;
  std::string s = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
      "{0} {1}\" "
      "role=\"img\" aria-label=\"failure taxonomy {2}\"><title>Failure taxonomy: {2}</title>",
      kW, fmt_px(height), html_escape(model));
  s += fmt::format("<text x=\"{}\" y=\"14\" class=\"tt\">Outcomes by turn: {}</text>", fmt_px(kLeft),
                   html_escape(model));
  s += legend_svg;
  for (int i = 0; i <= 4; ++i) {
    double y = top + ph * (1 - i / 4.0);
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"end\">{}%</text>", fmt_px(kLeft - 4),
                     fmt_px(y + 4), i * 25);
  }
  for (int t = 0; t < turns; ++t) {
    int total = 0;
    for (const auto &[st, n] : g.failures_by_turn[t]) total += n;
    const double x = kLeft + slot * t + slot * 0.15;
    double y = top + ph;
    for (const auto &st : statuses) {
      auto it = g.failures_by_turn[t].find(st);
      if (it == g.failures_by_turn[t].end() || total == 0) continue;
      const double bar = ph * it->second / total;
      y -= bar;
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>turn {}: {} {} of "
          "{}</title></rect>",
          fmt_px(x), fmt_px(y), fmt_px(slot * 0.7), fmt_px(bar), status_color(st), t, html_escape(st),
          it->second, total);
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">turn {} (n={})</text>",
                     fmt_px(x + slot * 0.35), fmt_px(top + ph + 16), t, total);
  }
  return s + "</svg>";
}

/// A rate and its Wilson 95% interval, the interval in a smaller grey span.
std::string pct_ci(int num, int den) {
  auto ci = wilson_interval(num, den);
  if (!ci) return "—";
  return fmt::format("{:.1f}% <span class=\"ci\">[{:.1f}–{:.1f}]</span>", 100.0 * num / den, 100 * ci->lo,
                     100 * ci->hi);
}

std::string with_ci(const std::string &value, const std::optional<Interval> &ci, int digits,
                    const char *suffix) {
  if (!ci) return value;
  return fmt::format("{} <span class=\"ci\">[{:.{}f}–{:.{}f}]{}</span>", value, ci->lo, digits, ci->hi,
                     digits, suffix);
}

std::string usd(const std::optional<double> &v) {
  return v ? fmt::format("${:.4f}", *v) : "—";
}

/// Horizontal bars of pass@1 per model (all tasks) with the bootstrap 95% interval as error bars.
std::string pass1_chart(const Report &r) {
  const double row_h = 26, left = 150, w = kW * 2, pw = w - left - kRight;
  const double h = kTop + row_h * 2 * static_cast<double>(r.models.size()) + kBottom;
  std::string s = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
      "{0} {1}\" role=\"img\" aria-label=\"pass@1 per model\"><title>pass@1 per model</title>",
      w, fmt_px(h));
  s += fmt::format(
      "<text x=\"{}\" y=\"14\" class=\"tt\">pass@1, all tasks (fast_1.0 lighter); whiskers = bootstrap 95% "
      "CI</text>",
      fmt_px(kLeft));
  const double axis_y = kTop + row_h * 2 * static_cast<double>(r.models.size());
  for (int i = 0; i <= 4; ++i) {
    const double x = left + pw * i / 4.0;
    s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" class=\"grid\"/>", fmt_px(x),
                     fmt_px(kTop), fmt_px(axis_y));
    s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">{:.2f}</text>", fmt_px(x),
                     fmt_px(axis_y + 16), i / 4.0);
  }
  for (std::size_t m = 0; m < r.models.size(); ++m) {
    const GroupReport *g = r.find_model(r.models[m]);
    if (!g) continue;
    for (int which = 0; which < 2; ++which) {
      const auto &values = which ? g->pass_fast1 : g->pass_correct;
      const auto &cis = which ? g->pass_fast1_ci : g->pass_correct_ci;
      const double y = kTop + row_h * (2 * static_cast<double>(m) + which);
      s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"lg\" text-anchor=\"end\">{} {}</text>",
                       fmt_px(left - 8), fmt_px(y + row_h / 2 + 4), html_escape(r.models[m]),
                       which ? "fast_1.0" : "correct");
      if (gpu_unmeasured(*g)) {  // no bar of 0: pass@1 was never measured
        s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"nm\">not measured (no GPU stage ran)</text>",
                         fmt_px(left + 4), fmt_px(y + row_h / 2 + 4));
        continue;
      }
      auto it = values.find(1);
      if (it == values.end()) continue;
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"{}\"><title>{} {} "
          "pass@1 {:.3f}</title></rect>",
          fmt_px(left), fmt_px(y + 4), fmt_px(pw * it->second), fmt_px(row_h - 8), series_color(m),
          which ? "0.45" : "1", html_escape(r.models[m]), which ? "fast_1.0" : "correct", it->second);
      if (auto c = cis.find(1); c != cis.end()) {
        const double x0 = left + pw * c->second.lo, x1 = left + pw * c->second.hi, ym = y + row_h / 2;
        s += fmt::format(
            "<g class=\"errbar\" stroke=\"#000000\" stroke-width=\"1.5\"><line x1=\"{0}\" x2=\"{1}\" "
            "y1=\"{2}\" "
            "y2=\"{2}\"/><line x1=\"{0}\" x2=\"{0}\" y1=\"{3}\" y2=\"{4}\"/><line x1=\"{1}\" x2=\"{1}\" "
            "y1=\"{3}\" y2=\"{4}\"/><title>95% CI {5:.3f}–{6:.3f}</title></g>",
            fmt_px(x0), fmt_px(x1), fmt_px(ym), fmt_px(ym - 5), fmt_px(ym + 5), c->second.lo, c->second.hi);
      }
    }
  }
  return s + "</svg>";
}

/// A small 0–100% box plot of the tensor pipe: whisker min–max, box p25–p75, median tick, and the
/// library's median as a black diamond.
std::string tensor_box(const Spread &c, const std::optional<Spread> &lib) {
  constexpr double w = 160, h = 18, pad = 4;
  auto x = [&](double pct) { return pad + (w - 2 * pad) * std::clamp(pct, 0.0, 100.0) / 100.0; };
  std::string s = fmt::format(
      "<svg class=\"box\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
      "{0} "
      "{1}\" role=\"img\" aria-label=\"tensor pipe {2}\"><title>tensor pipe % of peak: {2}{3}</title>",
      w, h, html_escape(spread_text(c)), lib ? "; library " + html_escape(library_spread_text(*lib)) : "");
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"9\" y2=\"9\" class=\"grid\"/>", fmt_px(x(0)),
                   fmt_px(x(100)));
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"9\" y2=\"9\" stroke=\"#1f77b4\" stroke-width=\"1.5\"/>",
                   fmt_px(x(c.min)), fmt_px(x(c.max)));
  s += fmt::format("<rect x=\"{}\" y=\"4\" width=\"{}\" height=\"10\" fill=\"#aec7e8\" stroke=\"#1f77b4\"/>",
                   fmt_px(x(c.p25)), fmt_px(std::max(1.0, x(c.p75) - x(c.p25))));
  s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"2\" y2=\"16\" stroke=\"#1f77b4\" stroke-width=\"2.5\"/>",
                   fmt_px(x(c.median)));
  if (lib) {
    const double lx = x(lib->median);
    s += fmt::format("<path class=\"lib\" d=\"M{} 3 L{} 9 L{} 15 L{} 9 Z\" fill=\"#000000\"/>", fmt_px(lx),
                     fmt_px(lx + 4), fmt_px(lx), fmt_px(lx - 4));
  }
  return s + "</svg>";
}

/// Where the time goes: per model × task, the bound units and the tensor pipe of the final correct
/// attempts; attempts without a profile are "not profiled", never 0%.
std::string profile_section(const Report &r) {
  if (r.groups.empty() || r.overall().profile.attempts == 0) return "";
  const ProfileDistribution &all = r.overall().profile;
  std::string h = "<h2>Where the time goes (profiles of the final correct attempts)</h2>\n";
  if (all.profiled == 0)
    return h +
           fmt::format(
               "<p class=\"note\">Not profiled: none of the {} final correct attempts carries a profile (no "
               "GPU, the profile stage off or skipped, or verdicts made before it existed).</p>\n",
               all.attempts);
  h += fmt::format(
      "<p class=\"note\">Per trajectory, its final correct attempt as the profile stage measured it. Bound "
      "by: "
      "the throughput metric closest to its peak, attempts ×n (median % of peak). Tensor pipe: "
      "<code>{}</code>, % of peak, median [p25–p75] (min–max); in the box, the black diamond is the "
      "library's median. Attempts without a profile are counted as not profiled, never as 0%.</p>\n",
      kTensorPipeMetric);
  h += "<table class=\"profile\"><tr><th>model</th><th>task</th><th>final correct "
       "attempts</th><th>profiled</th>"
       "<th>not profiled</th><th>bound by</th><th>tensor pipe %</th><th></th><th>library tensor pipe %</th>"
       "</tr>\n";
  for (const auto &g : r.groups) {
    const ProfileDistribution &d = g.profile;
    const bool none = d.profiled == 0;
    const std::string absent = none ? "not profiled" : "not measured";
    h += fmt::format(
        "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"bound\">{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>\n",
        g.scope == GroupScope::model_task ? "" : " class=\"all\"", html_escape(g.model), html_escape(g.task),
        d.attempts, d.profiled, d.not_profiled,
        d.attempts == 0 ? "—"
        : none          ? "not profiled"
                        : html_escape(bound_units_text(d)),
        d.tensor_pipe ? spread_text(*d.tensor_pipe) : absent,
        d.tensor_pipe ? tensor_box(*d.tensor_pipe, d.library_tensor_pipe) : "",
        d.library_tensor_pipe ? library_spread_text(*d.library_tensor_pipe) : absent);
  }
  return h + "</table>\n";
}

/// The document head (title, style sheet) and the run sources line.
std::string page_head(const Report &r) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>PTXBench report</title><style>"
      "body{font-family:sans-serif;margin:16px;color:#222;background:#ffffff}"
      "h1{font-size:22px}h2{font-size:18px;margin-top:28px}"
      "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px "
      "7px;text-align:right}"
      "td:first-child,td:nth-child(2),th{text-align:left}th{background:#f0f0f0}"
      ".charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #ddd;background:#fff}"
      ".tt{font-size:13px;font-weight:bold}.ax{font-size:11px;fill:#555}.lg{font-size:11px;fill:#222}"
      ".nm{font-size:12px;fill:#777;font-style:italic}.grid{stroke:#e4e4e4;stroke-width:1}.one{stroke:#444;"
      "stroke-width:1.5;stroke-dasharray:4 3}"
      ".warn{color:#a40}.ci{color:#777;font-size:11px}.note{font-size:12px;color:#555}.sig{font-weight:bold}"
      "tr.all "
      "td{background:#f7f7f7}td.bound{text-align:left}td.links{text-align:left;line-height:22px}a.traj{text-"
      "decoration:none;"
      "margin-right:8px;white-space:nowrap}.sq{display:inline-block;width:9px;height:9px;margin-left:1px;"
      "border:1px solid #888}</style></head><body>\n<h1>PTXBench report</h1>\n<p>Runs: ";
  for (std::size_t i = 0; i < r.sources.size(); ++i)
    h += (i ? ", " : "") + ("<code>" + html_escape(r.sources[i]) + "</code>");
  h += fmt::format(
      "</p><p>{} model(s), {} task(s), {} turn(s). Rates are over trajectories and cumulative: an axis "
      "counts once the trajectory reached it at any turn so far. fast_p = status ok, correct and speedup "
      "&gt; p.</p>\n",
      r.models.size(), r.tasks.size(), r.turns);
  return h;
}

/// One summary row: a model × task group at the end of its trajectories.
std::string summary_row(const GroupReport &g, const std::vector<double> &ps) {
  // Without a GPU run the GPU axes were not measured; a 0% there would read as the model's failure.
  const bool nm = gpu_unmeasured(g);
  auto gpu_pct = [&](int num) { return nm ? std::string("not measured") : pct_ci(num, g.trajectories); };
  // Hidden workloads: right on all of them, of the trajectories whose kernel was checked there.
  const std::string generalizes = nm ? std::string("not measured")
                                  : g.generalization_checked
                                      ? fmt::format("{}/{} {}", g.generalizing, g.generalization_checked,
                                                    pct_ci(g.generalizing, g.generalization_checked))
                                      : std::string("—");
  std::string h = fmt::format(
      "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
      html_escape(g.model), html_escape(g.task), g.trajectories, pct_ci(g.end.compiled, g.trajectories),
      gpu_pct(g.end.correct), gpu_pct(g.end.executed), generalizes);
  for (std::size_t i = 0; i < ps.size(); ++i) h += "<td>" + gpu_pct(g.end.fast[i]) + "</td>";
  auto pass1 = [nm](const std::map<int, double> &m, const std::map<int, Interval> &cis) {
    if (nm) return std::string("not measured");
    auto it = m.find(1);
    if (it == m.end()) return std::string("—");
    auto c = cis.find(1);
    return with_ci(fmt::format("{:.3f}", it->second),
                   c == cis.end() ? std::nullopt : std::optional<Interval>(c->second), 3, "");
  };
  h += fmt::format("<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                   pass1(g.pass_correct, g.pass_correct_ci), pass1(g.pass_fast1, g.pass_fast1_ci),
                   g.geomean_speedup
                       ? with_ci(fmt::format("{:.3f}x", *g.geomean_speedup), g.geomean_speedup_ci, 3, "x")
                       : "—",
                   g.best_speedup ? fmt::format("{:.3f}x", *g.best_speedup) : "—",
                   g.tokens_per_success ? fmt::format("{:.0f}", *g.tokens_per_success) : "—",
                   usd(g.cost_per_trajectory), usd(g.cost_per_success));
  return h;
}

std::string summary_section(const Report &r) {
  const auto &ps = r.options.fast_thresholds;
  std::string h =
      "<h2>Summary (end of "
      "trajectory)</h2>\n<table><tr><th>model</th><th>task</th><th>trajectories</th><th>compile</th>"
      "<th>correct</th><th>executed</th><th>generalizes</th>";
  for (double p : ps) h += "<th>" + fast_label(p) + "</th>";
  h += "<th>pass@1</th><th>fast_1.0 pass@1</th><th>geomean speedup</th><th>best</th><th>tokens/success</th>"
       "<th>cost/trajectory</th><th>cost/success</th></tr>\n";
  for (const auto &g : r.groups) h += summary_row(g, ps);
  h += "</table>\n";
  h += fmt::format(
      "<p class=\"note\">[lo–hi] = 95% interval: Wilson for rates; percentile bootstrap over trajectories "
      "(resampled within each model × task pair) for pass@k and the geomean speedup: {} resamples, seed "
      "<span id=\"seed\">{}</span>.</p>\n",
      r.options.bootstrap.resamples, r.options.bootstrap.seed);
  return h;
}

std::string comparison_section(const Report &r) {
  if (r.comparisons.empty()) return "";
  std::string h =
      "<h2>Model comparison (A − B, paired bootstrap 95% interval)</h2>\n<table "
      "class=\"cmp\"><tr><th>A</th>"
      "<th>B</th><th>task</th><th>pairs</th><th>pass@1 A</th><th>pass@1 B</th><th>pass@1 A−B</th>"
      "<th>fast_1.0 A</th><th>fast_1.0 B</th><th>fast_1.0 A−B</th></tr>\n";
  auto diff = [](double d, const std::optional<Interval> &ci) {
    if (!ci) return fmt::format("{:+.3f}", d);
    const bool sig = ci->lo > 0 || ci->hi < 0;
    return fmt::format("<span class=\"{}\">{:+.3f}</span> <span class=\"ci\">[{:+.3f}, {:+.3f}]</span>",
                       sig ? "sig" : "nsig", d, ci->lo, ci->hi);
  };
  const auto rate = [](double v, int measured) {
    return measured > 0 ? fmt::format("{:.3f}", v) : std::string("<span class=\"nm\">not measured</span>");
  };
  for (const auto &c : r.comparisons) {
    for (const auto &row : c.rows) {
      const bool both = row.measured_a > 0 && row.measured_b > 0;
      h += fmt::format(
          "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
          "td><td>{}</td><td>{}</td></tr>\n",
          row.task == "all" ? " class=\"all\"" : "", html_escape(c.model_a), html_escape(c.model_b),
          html_escape(row.task), row.pairs, rate(row.pass1_a, row.measured_a),
          rate(row.pass1_b, row.measured_b), both ? diff(row.pass1_diff, row.pass1_diff_ci) : "—",
          rate(row.fast1_a, row.measured_a), rate(row.fast1_b, row.measured_b),
          both ? diff(row.fast1_diff, row.fast1_diff_ci) : "—");
    }
  }
  h += "</table>\n<p class=\"note\">Bold differences: the interval excludes 0. Pairs: same task and sample "
       "index; pass@1 = share of trajectories correct at the end.</p>\n";
  return h;
}

/// Per-turn curves: one chart per axis, one line per model (over all tasks).
std::string curves_section(const Report &r) {
  const auto &ps = r.options.fast_thresholds;
  std::string h =
      "<h2>Per-turn curves (all tasks, cumulative over trajectories)</h2>\n<div class=\"charts\">\n";
  struct Axis {
    std::string name;
    bool gpu;  ///< measured by a GPU stage (compile is a CPU stage: measured in every run)
    std::function<int(const AxisCounts &)> get;
  };
  std::vector<Axis> axes = {{"compile", false, [](const AxisCounts &c) { return c.compiled; }},
                            {"correct", true, [](const AxisCounts &c) { return c.correct; }},
                            {"targets executed", true, [](const AxisCounts &c) { return c.executed; }}};
  for (std::size_t i = 0; i < ps.size(); ++i) {
    axes.push_back({fast_label(ps[i]), true, [i](const AxisCounts &c) { return c.fast[i]; }});
  }
  for (const auto &[name, gpu_axis, get] : axes) {
    std::vector<Series> series;
    for (std::size_t m = 0; m < r.models.size(); ++m) {
      const GroupReport *g = r.find_model(r.models[m]);
      if (!g) continue;
      Series s{
          r.models[m], series_color(m), {}, {}, g->trajectories > 0 && !(gpu_axis && gpu_unmeasured(*g))};
      for (const auto &row : g->by_turn) {
        s.values.push_back(g->trajectories ? static_cast<double>(get(row.cumulative)) / g->trajectories
                                           : 0.0);
        s.ci.push_back(wilson_interval(get(row.cumulative), g->trajectories));
      }
      series.push_back(std::move(s));
    }
    h += line_chart(name, r.turns, series) + "\n";
  }
  h += "</div>\n<p class=\"note\">Error bars: Wilson 95% intervals.</p>\n";
  return h;
}

std::string taxonomy_section(const Report &r) {
  std::set<std::string> seen;
  for (const auto &g : r.groups)
    for (const auto &m : g.failures_by_turn)
      for (const auto &[st, n] : m) seen.insert(st);
  std::vector<std::string> statuses;  // pipeline order, so stacks read the same in every chart
  for (const char *st :
       {"ok", "suspicious", "nondeterministic", "incorrect", "timeout", "runtime_error", "launch_error",
        "compile_error", "static_error", "bad_manifest", "no_kernel", "skipped", "request_failed"}) {
    if (seen.erase(st)) statuses.push_back(st);
  }
  statuses.insert(statuses.end(), seen.begin(), seen.end());
  std::string h = "<h2>Failure taxonomy (verdict status of each attempt)</h2>\n<div class=\"charts\">\n";
  for (const auto &m : r.models) {
    if (const GroupReport *g = r.find_model(m)) h += taxonomy_chart(m, *g, statuses) + "\n";
  }
  return h + "</div>\n";
}

/// Cost and request times.
std::string cost_section(const Report &r) {
  std::string h = "<h2>Cost and time</h2>\n";
  if (r.prices.empty())
    h += "<p class=\"note\">No prices in the run config (\"prices\": USD per million prompt / completion "
         "tokens "
         "per endpoint): costs are not shown.</p>\n";
  h += "<table><tr><th>model</th><th>task</th><th>attempts</th><th>prompt tokens</th><th>completion "
       "tokens</th>"
       "<th>cost</th><th>cost/turn</th><th>cost/trajectory</th><th>cost/success</th><th>request s/turn</th>"
       "<th>first token s</th></tr>\n";
  for (const auto &g : r.groups) {
    if (g.scope == GroupScope::task) continue;
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
        "td><td>{}"
        "</td><td>{}</td></tr>\n",
        html_escape(g.model), html_escape(g.task), g.attempts, g.prompt_tokens, g.completion_tokens,
        usd(g.cost_usd), usd(g.cost_per_attempt), usd(g.cost_per_trajectory), usd(g.cost_per_success),
        g.mean_request_seconds ? fmt::format("{:.2f}", *g.mean_request_seconds) : "—",
        g.mean_ttft_seconds ? fmt::format("{:.2f}", *g.mean_ttft_seconds) : "—");
  }
  return h + "</table>\n";
}

/// A repairs run (`ptxbench repairs`): the teacher's fix rates and what a kept example cost.
std::string repairs_section(const Report &r) {
  if (!r.repairs) return "";
  const RepairOutcomes &o = *r.repairs;
  std::string h = fmt::format(
      "<h2>Repairs: the teacher's fix rate</h2>\n<p class=\"note\">A trajectory (student failure × teacher "
      "sample) is fixed when a turn is correct, executed its target instructions and reached the run's "
      "target with status ok. {} trajectories over {} student failures; {} failures fixed by at least one "
      "sample. Wilson 95% intervals.</p>\n",
      o.trajectories, o.seeds, o.seeds_fixed);
  auto rows = [&](const std::string &title, const auto &groups) {
    h += fmt::format("<table><tr><th>{}</th><th>fixed</th><th>trajectories</th><th>fix rate</th></tr>\n",
                     html_escape(title));
    for (const auto &[key, c] : groups)
      h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                       html_escape(fmt::format("{}", key)), c.fixed, c.trajectories,
                       pct_ci(c.fixed, c.trajectories));
    h += "</table>\n";
  };
  rows("failure category", o.by_category);
  rows("task", o.by_task);
  rows("student model", o.by_student_model);
  const auto tokens = o.tokens_per_kept_example();
  h += fmt::format(
      "<table><tr><th>kept examples</th><th>reasoning: teacher / synthesized / none</th><th>tokens</th>"
      "<th>tokens per kept example</th><th>cost</th><th>cost per kept example</th></tr>\n<tr><td>{}</td>"
      "<td>{} / {} / {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>\n",
      o.all.fixed, o.reasoning_from_teacher, o.reasoning_synthesized, o.reasoning_missing,
      o.prompt_tokens + o.completion_tokens, tokens ? fmt::format("{:.0f}", *tokens) : "—", usd(o.cost_usd),
      usd(o.cost_per_kept_example()));
  return h;
}

/// Every trajectory, linked to its page: one row per model × task, one link per sample, a square per turn.
std::string trajectories_section(const Report &r) {
  std::string h =
      "<h2>Trajectories</h2>\n<p class=\"note\">One square per turn, coloured by its verdict status; open a "
      "trajectory for its turns (feedback, reasoning, kernel diff, verdict).</p>\n<table class=\"traj\">"
      "<tr><th>model</th><th>task</th><th>trajectories</th></tr>\n";
  std::map<std::pair<std::string, std::string>, std::vector<const TrajectoryPage *>> by_pair;
  for (const auto &p : r.pages) by_pair[{p.model, p.task_id}].push_back(&p);
  for (const auto &[key, pages] : by_pair) {
    h += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"links\">", html_escape(key.first),
                     html_escape(key.second));
    for (const auto *p : pages) {
      h += fmt::format("<a class=\"traj\" href=\"{}\" title=\"{}\">s{} ", html_escape(p->file),
                       html_escape(p->trajectory_id), p->sample);
      for (const auto &t : p->turns)
        h += fmt::format("<span class=\"sq\" style=\"background:{}\" title=\"turn {}: {}\"></span>",
                         status_color(t.status), t.turn, html_escape(t.status));
      h += "</a> ";
    }
    h += "</td></tr>\n";
  }
  return h + "</table>\n";
}

std::string warnings_section(const Report &r) {
  if (r.warnings.empty()) return "";
  std::string h = "<h2>Warnings</h2><ul class=\"warn\">";
  for (const auto &w : r.warnings) h += "<li>" + html_escape(w) + "</li>";
  return h + "</ul>\n";
}

}  // namespace

std::string render_html_report(const Report &r) {
  std::string h = page_head(r);
  h += summary_section(r);
  h += comparison_section(r);
  h += curves_section(r);
  h += "<h2>pass@1 per model</h2>\n<div class=\"charts\">" + pass1_chart(r) +
       "</div>\n<h2>Speedup distribution per model</h2>\n<div class=\"charts\">" + speedup_chart(r) +
       "</div>\n" + profile_section(r);
  h += taxonomy_section(r);
  h += cost_section(r);
  h += repairs_section(r);
  h += trajectories_section(r);
  h += warnings_section(r);
  h += "<p>Tables in report.md; data in summary.csv, by_turn.csv, pass_at_k.csv, failures.csv, "
       "speedups.csv, profiles.csv, comparison.csv.</p>\n";
  return h + "</body></html>\n";
}

}  // namespace ptxbench::traces::detail
