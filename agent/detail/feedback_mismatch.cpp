// "Pattern of the mismatches" from the worker's typed record: per output tensor the count, where the wrong
// elements sit and the worst of them.
#include "agent/detail/feedback_mismatch.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/core.h>

#include "agent/detail/feedback_sections.hpp"
#include "evaluator/protocol/error.hpp"

namespace ptxbench::agent::detail {

using nlohmann::json;
using protocol::DimSpread;
using protocol::MismatchElement;
using protocol::MismatchPattern;
using protocol::TensorMismatches;
using protocol::TileResidue;

namespace {

constexpr std::size_t kWorstShown = 4;  // worst elements listed per tensor

std::string num_text(double v) {
  return fmt::format("{:.4g}", v);
}

// How much of a hidden shape's output was wrong, coarse enough not to give its size away.
std::string coarse_share_text(double share) {
  for (const auto &[bound, text] : {std::pair{0.001, "under 0.1%"}, std::pair{0.01, "under 1%"},
                                    std::pair{0.1, "under 10%"}, std::pair{0.5, "under half"}})
    if (share < bound) return std::string(text) + " of its elements";
  return "most of its elements";
}

std::string ranges_text(const DimSpread &d) {
  std::vector<std::string> parts;
  for (const auto &r : d.ranges)
    parts.push_back(r[0] == r[1] ? std::to_string(r[0]) : fmt::format("{}..{}", r[0], r[1]));
  if (d.more_ranges) parts.push_back("...");
  return join(parts, ", ");
}

/// The dimension's name: the task's shape symbol, else the record's, else its position.
std::string dim_name(const tasks::Tensor *tensor, const TensorMismatches &t, std::size_t k) {
  if (tensor && tensor->shape.size() == t.dims.size() && !tensor->shape[k].empty()) return tensor->shape[k];
  if (!t.dims[k].name.empty()) return t.dims[k].name;
  return fmt::format("dimension {}", k);
}

// "rows 56..63 of every 64-row tile (the last 8)": the tile size whose residues the mismatches share,
// preferring 128 when it says as much (their span no wider) since it also says which half.
std::optional<std::string> residue_text(const DimSpread &d, const std::string &word) {
  const TileResidue *r64 = nullptr, *r128 = nullptr;
  for (const auto &r : d.tiles) (r.tile == 64 ? r64 : r.tile == 128 ? r128 : r64) = &r;
  auto span = [](const TileResidue *r) { return r->last - r->first + 1; };
  auto narrow = [&](const TileResidue *r) { return r && r->tiles_touched >= 2 && span(r) < r->tile; };
  const TileResidue *pick = narrow(r128) && (!narrow(r64) || span(r128) <= span(r64)) ? r128
                            : narrow(r64)                                             ? r64
                                                                                      : nullptr;
  if (!pick) return std::nullopt;
  const std::string tile = fmt::format("every {}-{} tile", pick->tile, word);
  if (pick->first == pick->last) return fmt::format("{} {} of {}", word, pick->first, tile);
  std::string text = fmt::format("{}s {}..{} of {}", word, pick->first, pick->last, tile);
  if (pick->last == pick->tile - 1) text += fmt::format(" (the last {})", span(pick));
  if (pick->first == 0) text += fmt::format(" (the first {})", span(pick));
  return text;
}

// "B 0 only", "every H", "rows (S) 1984..1991 of 2048".
std::string where_part(const DimSpread &d, const std::string &name, const std::string &word, bool coarse) {
  if (word.empty()) {
    if (d.coverage == "all") return "every " + name;
    if (coarse) return d.coverage == "one" ? "a single " + name : "some " + name + " values";
    return d.coverage == "one" ? fmt::format("{} {} only", name, ranges_text(d))
                               : fmt::format("{} in {}", name, ranges_text(d));
  }
  if (d.coverage == "all") return fmt::format("every {} ({})", word, name);
  if (coarse) return fmt::format("{} {}s ({})", d.coverage == "one" ? "a single" : "some", word, name);
  return fmt::format("{}{} ({}) {} of {}", word, d.coverage == "one" ? "" : "s", name, ranges_text(d),
                     d.size);
}

std::string element_text(const MismatchElement &e, const std::string &tensor) {
  std::string where = tensor;
  if (!e.index.empty()) {
    std::vector<std::string> parts;
    for (const auto i : e.index) parts.push_back(std::to_string(i));
    where += "[" + join(parts, ", ") + "]";
  }
  if (e.kind == "unwritten") return where + " never written";
  if (e.kind == "nan") return where + " got NaN, expected " + num_text(e.expected);
  if (e.kind == "reference_not_finite") return where + " got " + num_text(e.got) + ", expected not finite";
  if (e.kind == "infinite") return where + " got an infinite value, expected " + num_text(e.expected);
  return fmt::format("{} got {}, expected {} ({}x the tolerance)", where, num_text(e.got),
                     num_text(e.expected), num_text(e.error_ratio));
}

std::vector<std::string> tensor_lines(const TensorMismatches &t, const tasks::Task *task, bool coarse) {
  std::vector<std::string> lines;
  std::string head = coarse ? fmt::format("{}: wrong in {}", t.tensor, coarse_share_text(t.share))
                            : fmt::format("{}: {} of {} elements wrong", t.tensor, t.mismatches, t.elements);
  if (!coarse && t.share >= 0.01) head += fmt::format(" ({:.0f}%)", 100 * t.share);
  if (t.unwritten_count)
    head += coarse ? "; some never written (still the NaN the outputs are filled with)"
                   : fmt::format("; {} never written (still the NaN the outputs are filled with)",
                                 t.unwritten_count);
  if (t.nan_count) head += coarse ? "; some NaN written" : fmt::format("; {} NaN written", t.nan_count);
  lines.push_back("- " + head);

  const tasks::Tensor *tensor = task ? task->find_tensor(t.tensor) : nullptr;
  const std::size_t rank = t.dims.size();
  // Every element wrong: a sample's scattered indices and blocks would only suggest a pattern there is not.
  const bool all_wrong = !coarse && t.elements > 0 && t.mismatches >= t.elements;
  if (all_wrong) lines.push_back("  where: every element (the whole tensor, not a tile edge or a region)");
  if (rank > 0 && !all_wrong) {
    std::vector<std::string> where, tiles;
    for (std::size_t k = 0; k < rank; ++k) {
      const std::string word = k + 1 == rank ? "column" : k + 2 == rank ? "row" : "";
      const DimSpread &d = t.dims[k];
      const std::string name = dim_name(tensor, t, k);
      where.push_back(where_part(d, name, word, coarse));
      if (word.empty() || d.coverage == "all") continue;
      if (d.partial_tile_only)
        tiles.push_back(fmt::format("the {}s past the last full 64-{} tile", word, word));
      else if (auto r = residue_text(d, word))
        tiles.push_back(*r);
    }
    std::string line = "  where: " + join(where, ", ");
    if (!coarse && t.sampled < t.mismatches) line += fmt::format(" (from a uniform sample of {})", t.sampled);
    lines.push_back(line);
    std::string cluster;
    if (!tiles.empty()) cluster = "all in " + join(tiles, "; ");
    std::string blocks;
    const protocol::BlockCount *b64 = nullptr, *b128 = nullptr;
    for (const auto &b : t.blocks) (b.tile == 64 ? b64 : b128) = &b;
    if (t.one_block && !coarse && t.sampled == 1)
      blocks = "";  // one element: its index says it
    else if (t.one_block)
      blocks = b64 && b64->touched == 1 ? "inside one 64x64 block" : "inside one 128x128 block";
    else if (!coarse && b128 && t.sampled > 1)
      blocks = fmt::format("spread over {} of {} 128x128 blocks", b128->touched, b128->total);
    else if (coarse)
      blocks = "spread over more than one 128x128 block";
    if (rank >= 2 && !blocks.empty()) cluster += (cluster.empty() ? "" : "; ") + blocks;
    if (!cluster.empty()) lines.push_back("  " + cluster);
  }
  if (!t.worst.empty()) {
    std::vector<std::string> worst;
    for (std::size_t i = 0; i < t.worst.size() && i < kWorstShown; ++i)
      worst.push_back(element_text(t.worst[i], t.tensor));
    lines.push_back("  worst: " + join(worst, "; "));
  }
  return lines;
}

}  // namespace

std::string render_mismatch_pattern(const MismatchPattern &p, const tasks::Task *task,
                                    const std::string &workload) {
  std::vector<std::string> lines;
  lines.push_back(workload.empty()
                      ? fmt::format("Pattern of the mismatches (trial {}):", p.trial)
                      : fmt::format("Pattern of the mismatches ({}, trial {}):", workload, p.trial));
  std::vector<std::string> correct;
  for (const auto &t : p.tensors) {
    if (t.mismatches == 0 && t.share == 0 && t.worst.empty()) {
      correct.push_back(t.tensor);
      continue;
    }
    for (auto &l : tensor_lines(t, task, p.coarse)) lines.push_back(std::move(l));
  }
  if (!correct.empty()) lines.push_back("- " + join(correct, ", ") + ": correct");
  if (lines.size() > kMaxPatternLines) {
    const std::size_t dropped = lines.size() - (kMaxPatternLines - 1);
    lines.resize(kMaxPatternLines - 1);
    lines.push_back(fmt::format("  ... {} more lines", dropped));
  }
  std::string out;
  for (const auto &l : lines) out += l + "\n";
  return out;
}

std::string mismatch_pattern_section(const tasks::Task &task, const evaluator::Verdict &v) {
  for (const protocol::CorrectnessWorkload &w : correctness_rows(v))
    if (w.mismatch_pattern) return render_mismatch_pattern(*w.mismatch_pattern, &task, w.name);
  return "";
}

std::string hidden_mismatch_pattern_section(const tasks::Task &task, const evaluator::Verdict &v) {
  if (!v.generalizes || v.generalizes->value != false) return "";
  const json &hidden = v.settings.is_object() && v.settings.contains("hidden_workloads")
                           ? v.settings["hidden_workloads"]
                           : json::object();
  const bool reveal = boolean(hidden, "reveal") == true;
  int ordinal = 0;
  for (const auto &f : v.generalizes->failed) {
    ++ordinal;  // as generalization_section numbers them
    if (f.kind != "incorrect") continue;
    const auto figures = figures_of(v, &evaluator::Verdict::generalization_figures);
    for (const protocol::HiddenWorkload &w :
         figures ? figures->workloads : std::vector<protocol::HiddenWorkload>{}) {
      if (w.name != f.workload) continue;
      if (!w.check || !w.check->mismatch_pattern) return "";
      const auto p = protocol::coarse_pattern(*w.check->mismatch_pattern);  // coarse whatever was written
      return render_mismatch_pattern(
          p, &task, reveal ? "shape " + f.workload : fmt::format("unseen shape {}", ordinal));
    }
    return "";
  }
  return "";
}

}  // namespace ptxbench::agent::detail
