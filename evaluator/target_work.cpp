#include "evaluator/target_work.hpp"

#include <map>
#include <vector>

#include "util/strings.hpp"

namespace ptxbench::evaluator {

std::string family_words(const std::string &family) {
  static const std::map<std::string, std::string> kWords = {
      {"HMMA", "mma.sync"},          {"IMMA", "integer mma.sync"}, {"DMMA", "fp64 mma.sync"},
      {"QMMA", "fp8 mma.sync"},      {"BMMA", "binary mma.sync"},  {"HGMMA", "wgmma"},
      {"QGMMA", "fp8 wgmma"},        {"IGMMA", "integer wgmma"},   {"BGMMA", "binary wgmma"},
      {"FFMA", "fp32 fma"},          {"FFMA32I", "fp32 fma"},      {"FFMA2", "paired fp32 fma"},
      {"HFMA2", "half2/bf16x2 fma"}, {"HFMA232I", "half2 fma"},    {"DFMA", "fp64 fma"}};
  const auto it = kWords.find(family);
  return it == kWords.end() ? family : it->second + " (" + family + ")";
}

std::string non_target_work_text(const protocol::MatrixWork &w, const protocol::RedundantWorkPolicy &policy,
                                 std::size_t limit) {
  std::vector<std::string> parts;
  for (const auto &f : w.families) {
    if (parts.size() == limit) break;
    if ((f.unit == "fma" && !policy.count_fma_pipe) || f.share < 0.0005) continue;
    parts.push_back(family_words(f.family) + " " + util::percent_text(f.share));
  }
  return util::join(parts, ", ");
}

std::optional<std::string> redundant_work_shortfall(const protocol::ExecutionFigures &figures,
                                                    double min_work_share,
                                                    const protocol::RedundantWorkPolicy &policy) {
  std::vector<std::string> ran;  // "wgmma, doing 100% of the task's FLOPs"
  for (const auto &t : figures.targets) {
    if (!t.matrix_target || !t.executed) continue;
    if (t.work_share && *t.work_share < min_work_share) return std::nullopt;
    ran.push_back(t.name + (t.work_share
                                ? " did " + util::percent_text(*t.work_share) + " of the task's FLOPs"
                                : std::string(" executed")));
  }
  if (ran.empty()) return std::nullopt;
  const std::optional<protocol::MatrixWork> &work = figures.matrix_work;
  if (!work || !policy.exceeded(*work)) return std::nullopt;
  const double outside = policy.non_target_share(*work);
  std::string line =
      "target " + util::join(ran, ", and ") + ", but multiply-add instructions outside the targets did " +
      util::percent_text(outside) + " of them as well (" + non_target_work_text(*work, policy) + ")";
  if (outside >= min_work_share)
    line +=
        ": enough to compute the outputs without the target, so the target's own work counts as "
        "repeated (for example its results multiplied by 0 or never stored)";
  else
    line +=
        ": part of the task's matmuls runs on other units beside the target (done twice, or moved off "
        "it)";
  line += ". Targets count as executed only when multiply-add work outside them stays at or under " +
          util::percent_text(policy.max_non_target_share) +
          " of the task's FLOPs: compute the outputs from the target's results and drop the other path";
  return line;
}

}  // namespace ptxbench::evaluator
