#include "agent/detail/feedback_profile.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "evaluator/protocol/error.hpp"

namespace ptxbench::agent::detail {
namespace {

using protocol::KernelProfile;
using protocol::ProfileMetric;

/// Three significant digits, trailing zeros kept ("2.00", "16.2", "985"), so equal precision reads equal.
std::string three_digits(double v) {
  const int before = v >= 1 ? static_cast<int>(std::floor(std::log10(v))) + 1 : 1;
  return fmt::format("{:.{}f}", v, std::max(0, 3 - before));
}

std::string quantity(double v, const std::string &unit) {
  if (unit == "%") return fmt::format("{:.1f}%", v);
  if (unit == "ns") return v >= 1e6 ? three_digits(v / 1e6) + " ms" : three_digits(v / 1e3) + " us";
  if (unit == "byte") {
    if (v >= 1e9) return three_digits(v / 1e9) + " GB";
    if (v >= 1e6) return three_digits(v / 1e6) + " MB";
    return three_digits(v / 1e3) + " KB";
  }
  if (unit == "Hz") return three_digits(v / 1e9) + " GHz";
  return fmt::format("{:.4g} {}", v, unit);
}

/// "label 41.2% (library 88.0%)"; "" when the metric was not measured.
std::string figure(const KernelProfile &p, const char *name, bool with_label = true) {
  const ProfileMetric *m = p.find(name);
  if (!m) return "";
  std::string out = (with_label ? m->label + " " : std::string()) + quantity(m->value, m->unit);
  if (m->library) out += " (library " + quantity(*m->library, m->unit) + ")";
  return out;
}

std::string joined(const std::vector<std::string> &parts) {
  std::string out;
  for (const auto &p : parts)
    if (!p.empty()) out += (out.empty() ? "" : "; ") + p;
  return out;
}

/// "- a; b; c\n", or "" when none was measured.
std::string bullet(const std::vector<std::string> &parts) {
  const std::string line = joined(parts);
  return line.empty() ? "" : "- " + line + "\n";
}

std::string occupancy_line(const KernelProfile &p) {
  const auto &o = p.occupancy;
  std::string out =
      fmt::format("occupancy: {} block{} of {} threads per SM = {} warps, {:.1f}% of the SM's {} warp slots",
                  o.blocks_per_sm, o.blocks_per_sm == 1 ? "" : "s", o.block_threads, o.warps_per_sm,
                  o.theoretical_pct, o.max_warps_per_sm);
  out += fmt::format(", limited by {}", o.limiter);
  if (o.limiter == "registers")
    out += fmt::format(" ({} per thread)", o.registers_per_thread);
  else if (o.limiter == "shared memory")
    out += fmt::format(" ({} B per block)", o.shared_bytes);
  if (const std::string achieved = figure(p, "sm__warps_active.avg.pct_of_peak_sustained_active", false);
      !achieved.empty())
    out += "; achieved " + achieved;
  if (o.cluster_size > 1 && o.active_clusters)
    out += fmt::format("; clusters of {}: at most {} resident at once on {} SMs", o.cluster_size,
                       *o.active_clusters, o.sm_count);
  if (o.sm_count > 0 && o.grid_blocks > 0 && o.blocks_per_sm > 0) {
    const double waves =
        static_cast<double>(o.grid_blocks) / (static_cast<double>(o.blocks_per_sm) * o.sm_count);
    out += fmt::format("; grid of {} blocks = {:.2f} waves", o.grid_blocks, waves);
  }
  return out;
}

/// What a warp state means, for the states whose CUPTI name does not say it plainly.
std::string stall_gloss(const std::string &reason) {
  static const std::map<std::string, std::string> gloss = {
      {"selected", "issuing an instruction"},
      {"not_selected", "ready, but another warp issued"},
      {"long_scoreboard", "waiting for a global or local memory result"},
      {"short_scoreboard", "waiting for a shared memory or special-function result"},
      {"barrier", "waiting at a block barrier, or in wgmma.wait_group for its warpgroup's wgmma operations"},
      {"membar", "waiting on a memory fence"},
      {"wait", "fixed-latency dependency"},
      {"math_pipe_throttle", "the math pipe it needs is busy"},
      {"mio_throttle", "shared-memory instruction queue full"},
      {"lg_throttle", "global/local memory instruction queue full"},
      {"tex_throttle", "texture unit queue full"},
      {"dispatch_stall", "dispatch stall"},
      {"drain", "draining memory stores at exit"},
      {"sleeping", "sleeping or waiting on an mbarrier"},
      {"branch_resolving", "resolving a branch"},
      {"no_instructions", "instruction fetch miss"},
      {"imc_miss", "constant cache miss"},
      {"misc", "other"}};
  const auto it = gloss.find(reason);
  return it == gloss.end() ? reason : reason + " (" + it->second + ")";
}

/// Hot lines the feedback shows (the record keeps more).
constexpr std::size_t kShownHotLines = 3;

std::string percent_of(std::uint64_t part, std::uint64_t whole) {
  return fmt::format("{:.0f}%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
}

/// The PC-sampling lines: the kernel's warp states, then its hottest source lines. "" when not sampled.
std::string sampling_lines(const protocol::PcSampling &s) {
  if (s.samples == 0) return s.unavailable.empty() ? "" : "- where the warps wait: " + s.unavailable + "\n";
  std::string out =
      s.launches > 1
          ? fmt::format("- where the warps are ({} PC samples over {} launches): ", s.samples, s.launches)
          : fmt::format("- where the warps are ({} PC samples of one launch): ", s.samples);
  std::vector<std::string> parts;
  std::set<std::string> glossed;  // states explained in this line; the hot lines explain the others they show
  for (std::size_t i = 0; i < s.reasons.size() && i < 5; ++i) {
    parts.push_back(stall_gloss(s.reasons[i].reason) + " " + percent_of(s.reasons[i].samples, s.samples));
    glossed.insert(s.reasons[i].reason);
  }
  out += fmt::format("{}", fmt::join(parts, ", ")) + "\n";
  if (s.hot_lines.empty()) {
    if (!s.line_error.empty()) out += "- hot lines not named: " + s.line_error + "\n";
    return out;
  }
  const std::string what = s.line_source == "kernel.cu" ? "CUDA source" : "PTX";
  // A stalled warp is charged to the instruction it cannot issue yet: the consumer of a slow result, not
  // its producer.
  out += fmt::format(
      "- hottest lines of your {} (share of the samples; what the warps there were doing; a waiting warp is "
      "counted at the instruction it cannot issue yet, so the slow result it waits for usually comes from a "
      "line above{}):\n",
      what,
      s.line_source == "kernel.cu"
          ? "; the code of an inlined __device__ function is counted at the line of your kernel that calls it"
          : "");
  std::uint64_t shown = 0;  // samples of the lines shown
  std::vector<std::string> unexplained;  // glosses of the lines' states that the summary line did not list
  // CUPTI's `barrier` state covers two waits: at a block barrier, charged to the first instruction after it
  // (often a branch or an add, which reads as if that instruction were slow), and a warpgroup's
  // wgmma.wait_group (SASS WARPGROUP.DEPBAR) waiting for its own wgmma operations. One note for each shown.
  bool block_barrier = false, wgmma_wait = false;
  for (std::size_t i = 0; i < s.hot_lines.size() && i < kShownHotLines; ++i) {
    const protocol::HotLine &h = s.hot_lines[i];
    shown += h.samples;
    std::vector<std::string> reasons;
    // States under 1% of the line's samples are noise beside its main one.
    for (const auto &r : h.reasons)
      if (reasons.empty() || 100 * r.samples >= h.samples) {
        reasons.push_back(r.reason + " " + percent_of(r.samples, h.samples));
        if (glossed.insert(r.reason).second && stall_gloss(r.reason) != r.reason)
          unexplained.push_back(stall_gloss(r.reason));
      }
    if (!h.reasons.empty() && h.reasons.front().reason == "barrier")
      (!h.opcodes.empty() && h.opcodes.front().starts_with("WARPGROUP") ? wgmma_wait : block_barrier) = true;
    out += fmt::format("  line {} ({}; {}{}): {}\n", h.line, percent_of(h.samples, s.samples),
                       fmt::format("{}", fmt::join(reasons, ", ")),
                       h.opcodes.empty() ? "" : "; SASS " + h.opcodes.front(), h.text);
  }
  if (shown * 2 < s.samples)
    out += fmt::format("  (these lines hold {} of the samples: the time is spread over many lines)\n",
                       percent_of(shown, s.samples));
  if (!unexplained.empty())
    out += fmt::format("  (their other warp states: {})\n", fmt::join(unexplained, "; "));
  if (block_barrier)
    out +=
        "  (warps held at a block barrier such as bar.sync are counted at the first instruction after it: "
        "such a line waiting on `barrier` means the warps wait there for the block's slowest warp to "
        "arrive)\n";
  if (wgmma_wait)
    out +=
        "  (`barrier` on a wgmma.wait_group line is the warpgroup waiting for its own earlier wgmma "
        "operations to complete, which is expected while the tensor pipe is busy; it is not a block "
        "barrier)\n";
  return out;
}

}  // namespace

std::string profile_section(const evaluator::Verdict &v, const std::string &library) {
  const evaluator::StageResult &s = v.profiling;
  if (s.status == evaluator::Status::skipped && s.summary.empty()) return "";
  std::optional<KernelProfile> p;
  try {
    p = v.kernel_profile();
  } catch (const protocol::ProtocolError &) {
    p.reset();
  }
  if (!p) return "Hardware profile: " + (s.summary.empty() ? std::string("not measured") : s.summary) + "\n";
  const std::string beside = p->library_source == "measured" || p->library_source == "cached"
                                 ? ", beside " + library + " on the same workload"
                                 : "";
  std::string out = "Hardware profile of one launch of workload " + p->workload + beside +
                    " (Nsight Compute metric names, so `ncu --metrics` shows the same):\n";
  if (const ProfileMetric *b = p->bound_unit()) {
    out += "- busiest unit (the highest share of its own peak): " + b->label + " at " +
           quantity(b->value, b->unit);
    if (b->library) out += " (library " + quantity(*b->library, b->unit) + ")";
    out += " [" + b->name + "]";
    // When the library is bound elsewhere, say where: the two kernels are limited by different units.
    const ProfileMetric *lib = nullptr;
    for (const auto &m : p->metrics)
      if (m.throughput && m.library && std::isfinite(*m.library) && (!lib || *m.library > *lib->library))
        lib = &m;
    if (lib && lib != b)
      out += "; the library's busiest: " + lib->label + " at " + quantity(*lib->library, lib->unit);
    out += "\n";
  }
  // The profiler replays the launch at whatever clock the GPU then runs: its duration is not the timed one.
  if (std::string d =
          bullet({figure(*p, "gpu__time_duration.sum"), figure(*p, "sm__cycles_elapsed.avg.per_second")});
      !d.empty())
    out += d.substr(0, d.size() - 1) +
           " (the profiler's replay at its own clock; for speed use the timed medians)\n";
  out += bullet({figure(*p, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                 figure(*p, "sm__inst_issued.avg.pct_of_peak_sustained_active"),
                 figure(*p, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
                 figure(*p, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
                 figure(*p, "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),
                 figure(*p, "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active")});
  out +=
      bullet({figure(*p, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
              figure(*p, "dram__throughput.avg.pct_of_peak_sustained_elapsed"), figure(*p, "dram__bytes.sum"),
              figure(*p, "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
              figure(*p, "lts__t_sector_hit_rate.pct"),
              figure(*p, "l1tex__throughput.avg.pct_of_peak_sustained_active")});
  out += "- " + occupancy_line(*p) + "\n";
  out += sampling_lines(p->pc_sampling);
  out +=
      "The busiest unit is the first candidate for what bounds the kernel: compare it with the library's "
      "figure for that unit; when even the busiest unit is well below its peak, the warps' states and "
      "the hot lines say what keeps it waiting. ";
  // Each gloss only where its figure is shown.
  if (p->find("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"))
    out += "Memory throughput is the busiest of the memory units (DRAM, L2, L1/shared). ";
  if (p->find("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"))
    out += "The FMA pipe also runs integer multiply-adds (address arithmetic). ";
  if (p->find("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"))
    out += "The ALU pipe runs integer adds, logic, shifts and comparisons. ";
  if (p->find("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"))
    out += "The load/store pipe counts issued global, local and shared memory instructions. ";
  out +=
      "Occupancy and its limiter matter when too few warps hide latency; a design with one block per SM "
      "(warp specialization, setmaxnreg) is register-limited by choice, so read its tensor-pipe and "
      "issue-slot figures instead.\n";
  return out;
}

}  // namespace ptxbench::agent::detail
