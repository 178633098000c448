#include "evaluator/worker/detail/execution_figures.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <string_view>

namespace ptxbench::worker::detail {
namespace {

// Tensor-core opcode families (matrix multiply-accumulate units) across generations.
const std::set<std::string> kTensorCoreFamilies = {"HGMMA",   "QGMMA",   "IGMMA",   "BGMMA",   "HMMA",
                                                   "IMMA",    "DMMA",    "BMMA",    "QMMA",    "OMMA",
                                                   "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA"};
// Warpgroup MMAs (wgmma): the four warps of a warpgroup each issue the instruction for one MMA.
const std::set<std::string> kWarpgroupMmaFamilies = {"HGMMA", "QGMMA", "IGMMA", "BGMMA"};
// Warp MMAs (mma.sync): one warp issues one MMA.
const std::set<std::string> kWarpMmaFamilies = {"HMMA", "QMMA", "IMMA", "DMMA", "BMMA"};

std::optional<int> parse_positive(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

struct Shape {
  int m = 0, n = 0, k = 0;
};

// "64x256x16" (GMMA, DMMA) or the compact warp-MMA spelling "16816" / "1688" / "16832" / "884"
// (m is 16 or 8, n is 8, k is the rest).
std::optional<Shape> parse_shape(std::string_view token) {
  if (token.empty() || !std::isdigit(static_cast<unsigned char>(token[0]))) return std::nullopt;
  if (const auto x1 = token.find('x'); x1 != std::string_view::npos) {
    const auto x2 = token.find('x', x1 + 1);
    if (x2 == std::string_view::npos) return std::nullopt;
    const auto m = parse_positive(token.substr(0, x1));
    const auto n = parse_positive(token.substr(x1 + 1, x2 - x1 - 1));
    const auto k = parse_positive(token.substr(x2 + 1));
    if (!m || !n || !k) return std::nullopt;
    return Shape{*m, *n, *k};
  }
  Shape s;
  std::string_view rest;
  if (token.starts_with("16")) {
    s.m = 16;
    rest = token.substr(2);
  } else if (token.starts_with("8")) {
    s.m = 8;
    rest = token.substr(1);
  } else {
    return std::nullopt;
  }
  if (!rest.starts_with("8")) return std::nullopt;
  s.n = 8;
  const auto k = parse_positive(rest.substr(1));
  if (!k) return std::nullopt;
  s.k = *k;
  return s;
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const auto dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

const std::set<std::string> kTmaLoadFamilies = {"UTMALDG"};

// The multiply-adds that MatrixWork collects outside the targets, from per-family sums of one pass over
// the counts: the FLOPs of MMAs with their shape in the opcode, the opcodes of those without, the FLOPs
// of FMA-pipe instructions.
protocol::MatrixWork matrix_work(const std::vector<TargetSpec> &targets,
                                 const std::map<std::string, double> &mma_flops,
                                 const std::map<std::string, std::set<std::string>> &mma_no_shape,
                                 const std::map<std::string, double> &fma_flops, double workload_flops) {
  using protocol::NonTargetFamilyWork;
  std::set<std::string> target_families;
  for (const auto &t : targets) target_families.insert(t.sass_families.begin(), t.sass_families.end());
  const auto share = [&](double flops) { return workload_flops > 0 ? flops / workload_flops : 0.0; };
  protocol::MatrixWork w;
  w.workload_flops = std::max(0.0, workload_flops);
  std::vector<NonTargetFamilyWork> families;
  for (const auto &[family, flops] : mma_flops) {
    if (target_families.count(family)) {
      w.target_flops += flops;
      continue;
    }
    w.non_target_tensor_flops += flops;
    families.push_back({family, "tensor", flops, share(flops)});
  }
  for (const auto &[family, opcodes] : mma_no_shape) {
    if (target_families.count(family) || !kTensorCoreFamilies.count(family)) continue;
    for (const auto &op : opcodes)
      if (w.unknown_opcodes.size() < protocol::MatrixWork::kMaxUnknownOpcodes)
        w.unknown_opcodes.push_back(op);
  }
  for (const auto &[family, flops] : fma_flops) {
    if (target_families.count(family)) continue;
    w.fma_flops += flops;
    families.push_back({family, "fma", flops, share(flops)});
  }
  std::sort(families.begin(), families.end(),
            [](const NonTargetFamilyWork &a, const NonTargetFamilyWork &b) { return a.flops > b.flops; });
  if (families.size() > protocol::MatrixWork::kMaxFamilies)
    families.resize(protocol::MatrixWork::kMaxFamilies);
  w.families = std::move(families);
  w.target_share = share(w.target_flops);
  w.non_target_tensor_share = share(w.non_target_tensor_flops);
  w.fma_share = share(w.fma_flops);
  return w;
}

}  // namespace

std::optional<int> fma_flops_per_thread(const std::string &opcode) {
  const std::string family = opcode.substr(0, opcode.find('.'));
  if (family == "FFMA" || family == "FFMA32I" || family == "DFMA") return 2;
  if (family == "HFMA2" || family == "HFMA232I" || family == "FFMA2") return 4;  // two lanes
  return std::nullopt;
}

bool is_tensor_core_family(const std::string &family) {
  return kTensorCoreFamilies.count(family) > 0;
}

bool is_matrix_target(const TargetSpec &t) {
  return !t.sass_families.empty() &&
         std::all_of(t.sass_families.begin(), t.sass_families.end(), is_tensor_core_family);
}

bool is_tma_load_family(const std::string &family) {
  return kTmaLoadFamilies.count(family) > 0;
}

std::optional<int> plain_load_bytes(const std::string &opcode) {
  const auto parts = split_dots(opcode);
  if (parts[0] != "LDG" && parts[0] != "LDGSTS" && parts[0] != "LD") return std::nullopt;
  int bytes = 4;  // no width modifier: 32 bits
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view m = parts[i];
    if (m == "128")
      bytes = 16;
    else if (m == "64")
      bytes = 8;
    else if (m == "U16" || m == "S16" || m == "16")
      bytes = 2;
    else if (m == "U8" || m == "S8" || m == "8")
      bytes = 1;
  }
  return bytes;
}

std::optional<MmaWork> mma_work(const std::string &opcode) {
  const auto parts = split_dots(opcode);
  const std::string family(parts[0]);
  int threads = 0;
  if (kWarpgroupMmaFamilies.count(family))
    threads = 128;
  else if (kWarpMmaFamilies.count(family))
    threads = 32;
  else
    return std::nullopt;
  bool sparse = false;
  std::optional<Shape> shape;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "SP") sparse = true;
    if (!shape) shape = parse_shape(parts[i]);
  }
  if (!shape) return std::nullopt;
  // Sparse MMAs skip half of A's products (2:4 structure): count the multiplies they really do.
  const double flops = 2.0 * shape->m * shape->n * shape->k * (sparse ? 0.5 : 1.0);
  return MmaWork{flops, threads};
}

namespace {

/// What the counted PCs add up to, per SASS family and in total (only the candidate's own functions).
struct CountTally {
  std::set<std::string> functions;  ///< the candidate's functions (from the listing)
  std::map<std::string, std::uint64_t> family_warps, family_threads;
  std::map<std::string, double> family_flops;             ///< FLOPs of the family's executed MMAs
  std::map<std::string, double> family_fma_flops;         ///< FLOPs of the family's executed FMA-pipe FMAs
  std::map<std::string, std::set<std::string>> no_shape;  ///< executed opcodes whose work is unknown
  std::map<std::string, std::uint64_t> static_count;      ///< instructions per family in the listing
  std::uint64_t total = 0, tensor = 0, unmatched = 0;
  double tensor_flops = 0;
  double tma_bytes = 0, plain_bytes = 0;
};

CountTally tally_counts(const std::vector<SassInstruction> &listing, const std::vector<PcCount> &counts,
                        double tma_box_bytes) {
  CountTally t;
  std::map<std::pair<std::string, std::uint32_t>, const SassInstruction *> by_pc;
  for (const auto &i : listing) {
    by_pc[{i.function, i.offset}] = &i;
    t.functions.insert(i.function);
    ++t.static_count[i.family];
  }
  for (const auto &c : counts) {
    if (!t.functions.count(c.function)) continue;  // not the candidate's code
    auto it = by_pc.find({c.function, c.offset});
    if (it == by_pc.end()) {
      ++t.unmatched;
      continue;
    }
    const SassInstruction &inst = *it->second;
    t.family_warps[inst.family] += c.warp_executions;
    t.family_threads[inst.family] += c.threads_on;
    t.total += c.warp_executions;
    if (kTensorCoreFamilies.count(inst.family)) t.tensor += c.warp_executions;
    if (c.threads_on == 0) continue;  // predicated off everywhere: no work done
    if (is_tma_load_family(inst.family)) t.tma_bytes += static_cast<double>(c.threads_on) * tma_box_bytes;
    if (const auto width = plain_load_bytes(inst.opcode))
      t.plain_bytes += static_cast<double>(c.threads_on) * *width;
    if (const auto work = mma_work(inst.opcode)) {
      // Threads with the predicate on, over the threads one MMA takes: MMAs done.
      const double flops =
          static_cast<double>(c.threads_on) / static_cast<double>(work->threads_per_op) * work->flops_per_op;
      t.family_flops[inst.family] += flops;
      t.tensor_flops += flops;
    } else if (const auto fma = fma_flops_per_thread(inst.opcode)) {
      t.family_fma_flops[inst.family] += static_cast<double>(c.threads_on) * *fma;
    } else {
      t.no_shape[inst.family].insert(inst.opcode);
    }
  }
  return t;
}

/// One target's row: present, executed, its warps and threads, and its work (FLOPs) or byte share.
protocol::TargetExecution target_row(const TargetSpec &t, const CountTally &tally, double workload_flops,
                                     std::optional<double> tma_share) {
  bool present = false;
  std::uint64_t warps = 0, threads = 0;
  // FLOPs are meaningful only when every family is an MMA with its shape in the opcode.
  bool flops_known = !t.sass_families.empty();
  double flops = 0;
  std::vector<std::string> unknown;
  const auto add = [](const auto &map, const std::string &key, auto &acc) {
    if (const auto it = map.find(key); it != map.end()) acc += it->second;
  };
  for (const auto &f : t.sass_families) {
    present = present || tally.static_count.count(f);
    add(tally.family_warps, f, warps);
    add(tally.family_threads, f, threads);
    add(tally.family_flops, f, flops);
    if (!kWarpgroupMmaFamilies.count(f) && !kWarpMmaFamilies.count(f)) flops_known = false;
    if (const auto it = tally.no_shape.find(f); it != tally.no_shape.end())
      unknown.insert(unknown.end(), it->second.begin(), it->second.end());
  }
  if (!unknown.empty()) flops_known = false;
  protocol::TargetExecution row;
  row.name = t.name;
  row.sass_families = t.sass_families;
  row.present_in_sass = present;
  row.warp_executions = warps;
  row.threads_on = threads;
  // Executed = some thread had its predicate on: ptxas often turns a short dead branch into a
  // predicated instruction that warps issue but never run.
  row.executed = threads > 0;
  if (flops_known) {
    row.work_flops = flops;
    if (workload_flops > 0) row.work_share = flops / workload_flops;
  }
  row.matrix_target = is_matrix_target(t);
  row.work_unknown_opcodes = std::move(unknown);
  row.tma_load_target = !t.sass_families.empty() &&
                        std::all_of(t.sass_families.begin(), t.sass_families.end(), is_tma_load_family);
  if (row.tma_load_target) row.byte_share = tma_share;
  return row;
}

}  // namespace

protocol::ExecutionFigures execution_figures(const std::vector<SassInstruction> &listing,
                                             const std::vector<TargetSpec> &targets,
                                             const std::vector<PcCount> &counts, double workload_flops,
                                             double tma_box_bytes) {
  const CountTally tally = tally_counts(listing, counts, tma_box_bytes);
  const std::optional<double> tma_share =
      tma_box_bytes > 0 && tally.tma_bytes + tally.plain_bytes > 0
          ? std::optional<double>(tally.tma_bytes / (tally.tma_bytes + tally.plain_bytes))
          : std::nullopt;
  protocol::ExecutionFigures figures;
  for (const auto &t : targets) figures.targets.push_back(target_row(t, tally, workload_flops, tma_share));
  std::vector<std::pair<std::string, std::uint64_t>> top(tally.family_warps.begin(),
                                                         tally.family_warps.end());
  std::sort(top.begin(), top.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  for (std::size_t i = 0; i < top.size() && i < 12; ++i)
    figures.top_opcodes.push_back({top[i].first, top[i].second});
  figures.tensor_core_share =
      tally.total ? static_cast<double>(tally.tensor) / static_cast<double>(tally.total) : 0.0;
  figures.tensor_core_flops = tally.tensor_flops;
  if (workload_flops > 0) {
    figures.tensor_core_work_share = tally.tensor_flops / workload_flops;
    figures.workload_flops = workload_flops;
  }
  figures.total_warp_instructions = tally.total;
  figures.load_bytes = {tally.tma_bytes, tally.plain_bytes, tma_share};
  figures.matrix_work =
      matrix_work(targets, tally.family_flops, tally.no_shape, tally.family_fma_flops, workload_flops);
  figures.functions.assign(tally.functions.begin(), tally.functions.end());
  figures.records = counts.size();
  figures.unmatched_records = tally.unmatched;
  return figures;
}

namespace {

bool in_listing(const TargetSpec &t, const std::set<std::string> &families) {
  return std::any_of(t.sass_families.begin(), t.sass_families.end(),
                     [&](const std::string &f) { return families.count(f) > 0; });
}

std::set<std::string> listing_families(const std::vector<SassInstruction> &listing) {
  std::set<std::string> families;
  for (const auto &i : listing) families.insert(i.family);
  return families;
}

}  // namespace

InstrumentationPlan plan_instrumentation(const std::vector<SassInstruction> &listing,
                                         const std::vector<TargetSpec> &targets, bool correct,
                                         double estimated_ms, const FeedbackBudgets &budgets) {
  InstrumentationPlan plan;
  const std::set<std::string> families = listing_families(listing);
  for (const auto &t : targets)
    if (!in_listing(t, families)) plan.absent_targets.push_back(t.name);
  if (!targets.empty() && plan.absent_targets.size() == targets.size()) {
    plan.decision = Instrumentation::no_target_in_sass;
    return plan;
  }
  const bool over = !correct                       ? estimated_ms > budgets.incorrect_ms
                    : !plan.absent_targets.empty() ? estimated_ms > budgets.partial_targets_ms
                                                   : false;
  if (over) plan.decision = Instrumentation::over_feedback_budget;
  return plan;
}

protocol::ExecutionFigures uncounted_figures(const std::vector<SassInstruction> &listing,
                                             const std::vector<TargetSpec> &targets, const std::string &why) {
  const std::set<std::string> families = listing_families(listing);
  protocol::ExecutionFigures figures;
  figures.instrumented = false;
  figures.not_instrumented = why;
  for (const auto &t : targets) {
    const bool present = in_listing(t, families);
    protocol::TargetExecution row;
    row.name = t.name;
    row.sass_families = t.sass_families;
    row.present_in_sass = present;
    if (!present) {  // what is not in the SASS cannot run: 0 is exact; the present ones were not counted
      row.warp_executions = 0;
      row.threads_on = 0;
    }
    row.counted = !present;
    row.matrix_target = is_matrix_target(t);
    figures.targets.push_back(std::move(row));
  }
  return figures;
}

}  // namespace ptxbench::worker::detail
