// The execution stage's figures (evaluator/protocol/execution.hpp): one codec whose JSON is the worker's
// former by-key JSON byte for byte (counted on the committed SASS listings, not instrumented, skipped for
// its cost), round trips, an older record with its defaults, malformed fields named.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/detail/execution_axis.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/execution.hpp"
#include "evaluator/sass.hpp"
#include "evaluator/verdict.hpp"
#include "evaluator/worker/detail/execution_figures.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;
namespace ev = ptxbench::evaluator;
namespace p = ptxbench::protocol;
namespace wd = ptxbench::worker::detail;
using nlohmann::json;
using ptxbench::worker::SassInstruction;
using ptxbench::worker::TargetSpec;

namespace {

// The worker's execution figures as it wrote them before the codec, key by key (execution_figures and
// uncounted_figures in evaluator/worker/detail/execution_figures.cpp, plus the three keys the stage added),
// kept here as the reference the codec must reproduce. `matrix_work` was already the MatrixWork codec's
// output and is taken from the typed figures.
json former_counted_figures(const std::vector<SassInstruction> &listing,
                            const std::vector<TargetSpec> &targets, const std::vector<wd::PcCount> &counts,
                            double workload_flops, double tma_box_bytes, const json &matrix_work,
                            const std::string &workload, std::uint64_t dropped) {
  static const std::set<std::string> kTensor = {"HGMMA",   "QGMMA",   "IGMMA",   "BGMMA",   "HMMA",
                                                "IMMA",    "DMMA",    "BMMA",    "QMMA",    "OMMA",
                                                "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA"};
  static const std::set<std::string> kWarpgroup = {"HGMMA", "QGMMA", "IGMMA", "BGMMA"};
  static const std::set<std::string> kWarp = {"HMMA", "QMMA", "IMMA", "DMMA", "BMMA"};
  std::map<std::pair<std::string, std::uint32_t>, const SassInstruction *> by_pc;
  std::set<std::string> functions;
  for (const auto &i : listing) {
    by_pc[{i.function, i.offset}] = &i;
    functions.insert(i.function);
  }
  std::map<std::string, std::uint64_t> family_warps, family_threads;
  std::map<std::string, double> family_flops;
  std::map<std::string, std::set<std::string>> no_shape;
  std::uint64_t total = 0, tensor = 0, unmatched = 0;
  double tensor_flops = 0, tma_bytes = 0, plain_bytes = 0;
  for (const auto &c : counts) {
    if (!functions.count(c.function)) continue;
    auto it = by_pc.find({c.function, c.offset});
    if (it == by_pc.end()) {
      ++unmatched;
      continue;
    }
    const SassInstruction &inst = *it->second;
    family_warps[inst.family] += c.warp_executions;
    family_threads[inst.family] += c.threads_on;
    total += c.warp_executions;
    if (kTensor.count(inst.family)) tensor += c.warp_executions;
    if (c.threads_on == 0) continue;
    if (wd::is_tma_load_family(inst.family)) tma_bytes += static_cast<double>(c.threads_on) * tma_box_bytes;
    if (const auto width = wd::plain_load_bytes(inst.opcode))
      plain_bytes += static_cast<double>(c.threads_on) * *width;
    if (const auto work = wd::mma_work(inst.opcode)) {
      const double flops =
          static_cast<double>(c.threads_on) / static_cast<double>(work->threads_per_op) * work->flops_per_op;
      family_flops[inst.family] += flops;
      tensor_flops += flops;
    } else if (!wd::fma_flops_per_thread(inst.opcode)) {
      no_shape[inst.family].insert(inst.opcode);
    }
  }
  std::map<std::string, std::uint64_t> static_count;
  for (const auto &i : listing) ++static_count[i.family];
  const auto share_of = [&](double flops) {
    return workload_flops > 0 ? json(flops / workload_flops) : json(nullptr);
  };
  const json tma_share = tma_box_bytes > 0 && tma_bytes + plain_bytes > 0
                             ? json(tma_bytes / (tma_bytes + plain_bytes))
                             : json(nullptr);
  json target_list = json::array();
  for (const auto &t : targets) {
    bool present = false;
    std::uint64_t warps = 0, threads = 0;
    bool flops_known = !t.sass_families.empty();
    double flops = 0;
    std::vector<std::string> unknown;
    for (const auto &f : t.sass_families) {
      present = present || static_count.count(f);
      if (family_warps.count(f)) warps += family_warps[f];
      if (family_threads.count(f)) threads += family_threads[f];
      if (!kWarpgroup.count(f) && !kWarp.count(f)) flops_known = false;
      if (family_flops.count(f)) flops += family_flops[f];
      if (no_shape.count(f)) unknown.insert(unknown.end(), no_shape[f].begin(), no_shape[f].end());
    }
    if (!unknown.empty()) flops_known = false;
    json row = {{"name", t.name},
                {"sass_families", t.sass_families},
                {"present_in_sass", present},
                {"warp_executions", warps},
                {"threads_on", threads},
                {"executed", threads > 0},
                {"work_flops", flops_known ? json(flops) : json(nullptr)},
                {"work_share", flops_known ? share_of(flops) : json(nullptr)},
                {"matrix_target", wd::is_matrix_target(t)}};
    if (!unknown.empty()) row["work_unknown_opcodes"] = unknown;
    if (!t.sass_families.empty() &&
        std::all_of(t.sass_families.begin(), t.sass_families.end(), wd::is_tma_load_family))
      row["byte_share"] = tma_share;
    target_list.push_back(std::move(row));
  }
  std::vector<std::pair<std::string, std::uint64_t>> top(family_warps.begin(), family_warps.end());
  std::sort(top.begin(), top.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  json top_list = json::array();
  for (std::size_t i = 0; i < top.size() && i < 12; ++i)
    top_list.push_back({{"family", top[i].first}, {"warp_executions", top[i].second}});
  json figures = {
      {"targets", target_list},
      {"top_opcodes", top_list},
      {"tensor_core_share", total ? static_cast<double>(tensor) / static_cast<double>(total) : 0.0},
      {"tensor_core_flops", tensor_flops},
      {"tensor_core_work_share", share_of(tensor_flops)},
      {"workload_flops", workload_flops > 0 ? json(workload_flops) : json(nullptr)},
      {"total_warp_instructions", total},
      {"load_bytes", {{"tma", tma_bytes}, {"plain", plain_bytes}, {"tma_share", tma_share}}},
      {"matrix_work", matrix_work},
      {"functions", std::vector<std::string>(functions.begin(), functions.end())},
      {"records", counts.size()},
      {"unmatched_records", unmatched}};
  figures["workload"] = workload;
  figures["instrumented"] = true;
  figures["dropped_records"] = dropped;
  return figures;
}

json former_uncounted_figures(const std::vector<SassInstruction> &listing,
                              const std::vector<TargetSpec> &targets, const std::string &why) {
  std::set<std::string> families;
  for (const auto &i : listing) families.insert(i.family);
  json rows = json::array();
  for (const auto &t : targets) {
    const bool present = std::any_of(t.sass_families.begin(), t.sass_families.end(),
                                     [&](const std::string &f) { return families.count(f) > 0; });
    const json zero_or_unknown = present ? json(nullptr) : json(0);
    rows.push_back({{"name", t.name},
                    {"sass_families", t.sass_families},
                    {"present_in_sass", present},
                    {"warp_executions", zero_or_unknown},
                    {"threads_on", zero_or_unknown},
                    {"executed", false},
                    {"counted", !present},
                    {"work_flops", nullptr},
                    {"work_share", nullptr},
                    {"matrix_target", wd::is_matrix_target(t)}});
  }
  return json{{"targets", rows}, {"instrumented", false}, {"not_instrumented", why}};
}

std::vector<SassInstruction> listing_of(const std::string &name) {
  const auto text = ptxbench::util::read_file(fs::path(PTXBENCH_TEST_DATA) / "execution" / (name + ".sass"));
  REQUIRE(text.has_value());
  auto listing = ev::parse_sass_listing(*text).instructions;
  REQUIRE(!listing.empty());
  return listing;
}

// Counts at every PC, varied by offset; every fifth PC issued with its predicate off; one record at a PC
// the listing lacks and one of another function.
std::vector<wd::PcCount> varied_counts(const std::vector<SassInstruction> &listing) {
  std::vector<wd::PcCount> counts;
  for (std::size_t k = 0; k < listing.size(); ++k) {
    const std::uint64_t warps = 100 + (listing[k].offset / 16) % 37 * 13;
    counts.push_back({listing[k].function, listing[k].offset, warps, k % 5 == 4 ? 0 : warps * 32 - k % 3});
  }
  if (!listing.empty()) counts.push_back({listing[0].function, 0xFFFFFFF0u, 7, 224});
  counts.push_back({"not_the_candidate", 0, 9, 288});
  return counts;
}

SassInstruction inst(std::uint32_t offset, const std::string &opcode) {
  return SassInstruction{"gemm", offset, opcode, opcode.substr(0, opcode.find('.'))};
}

const std::vector<TargetSpec> kAttentionTargets = {{"wgmma", {"HGMMA"}}, {"tma_load", {"UTMALDG"}}};

// Both sides as text: the codec's JSON must be the former writer's byte for byte.
void check_counted_same(const std::vector<SassInstruction> &listing, const std::vector<TargetSpec> &targets,
                        const std::vector<wd::PcCount> &counts, double flops, double box) {
  p::ExecutionFigures typed = wd::execution_figures(listing, targets, counts, flops, box);
  typed.workload = "B=1,H=16,S=4096";
  typed.instrumented = true;
  typed.dropped_records = 3;
  const json former = former_counted_figures(listing, targets, counts, flops, box, json(*typed.matrix_work),
                                             "B=1,H=16,S=4096", 3);
  CHECK(json(typed).dump() == former.dump());
  // And it reads back as it was written.
  CHECK(json(typed).get<p::ExecutionFigures>() == typed);
}

const char *kOlderRecord = R"({
  "targets": [{"name": "wgmma", "sass_families": ["HGMMA"], "present_in_sass": true,
               "warp_executions": 65536, "threads_on": 8388608, "executed": true,
               "work_flops": 1.099511627776e12, "work_share": 1.0}],
  "top_opcodes": [{"family": "HGMMA", "warp_executions": 65536}, {"family": "FFMA", "warp_executions": 4096}],
  "tensor_core_share": 0.61, "tensor_core_flops": 1.099511627776e12, "tensor_core_work_share": 1.0,
  "workload_flops": 1.099511627776e12, "total_warp_instructions": 107000,
  "functions": ["gemm"], "records": 212, "unmatched_records": 0})";

}  // namespace

TEST_CASE("execution figures: the codec writes the former by-key JSON byte for byte, counted") {
  // The committed kernels' SASS (tests/data/execution), with and without a tensor map, FLOPs known or not.
  for (const char *name : {"mha_fwd_d128_wgmma_tma", "mha_bwd_d128_wgmma", "mha_fwd_d128_probe_pv_mma_sync",
                           "decoy_wgmma_discarded"}) {
    CAPTURE(name);
    const auto listing = listing_of(name);
    const auto counts = varied_counts(listing);
    check_counted_same(listing, kAttentionTargets, counts, 2.0 * 4096 * 4096 * 128 * 16, 64.0 * 128 * 2);
    check_counted_same(listing, kAttentionTargets, counts, 0, 0);
    check_counted_same(listing, {{"mma_sync", {"HMMA"}}, {"absent", {"QGMMA"}}}, counts, 1e9, 0);
  }
  // A tcgen05 target: its opcode has no shape, so work is unknown and the opcodes are listed.
  const std::vector<SassInstruction> tc = {inst(0x00, "UTCHMMA.2CTA"), inst(0x10, "HMMA.16816.F32.BF16"),
                                           inst(0x20, "LDG.E.128"), inst(0x30, "FFMA")};
  check_counted_same(tc, {{"tcgen05_mma", {"UTCHMMA"}}, {"tma_load", {"UTMALDG"}}},
                     {{"gemm", 0x00, 1, 1}, {"gemm", 0x10, 1024, 32768}, {"gemm", 0x20, 8, 256}}, 4e6, 2048);
  // No targets, no counts.
  check_counted_same(tc, {}, {}, 0, 0);
}

TEST_CASE("execution figures: not instrumented and skipped forms are the former JSON") {
  const auto listing = listing_of("mha_fwd_d128_wgmma_tma");
  const std::vector<TargetSpec> targets = {
      {"wgmma", {"HGMMA"}}, {"mma_sync", {"HMMA"}}, {"tma", {"UTMALDG"}}};
  const std::string why = "target mma_sync is not in the compiled SASS, so the targets did not all execute";
  const p::ExecutionFigures uncounted = wd::uncounted_figures(listing, targets, why);
  CHECK(json(uncounted).dump() == former_uncounted_figures(listing, targets, why).dump());
  CHECK(json(uncounted).get<p::ExecutionFigures>() == uncounted);
  CHECK_FALSE(uncounted.instrumented);
  REQUIRE(uncounted.target("mma_sync") != nullptr);
  CHECK(uncounted.target("mma_sync")->warp_executions == std::uint64_t{0});
  CHECK(uncounted.target("mma_sync")->counted == true);
  CHECK_FALSE(uncounted.target("wgmma")->warp_executions.has_value());
  CHECK(uncounted.target("nope") == nullptr);

  // Skipped for its cost: only the estimate.
  const json estimate = json(p::ExecutionFigures{.instrumented = false, .estimated_seconds = 2.5});
  CHECK(estimate.dump() == json{{"estimated_seconds", 2.5}}.dump());
  const auto back = p::execution_figures_from_figures(estimate);
  REQUIRE(back.has_value());
  CHECK_FALSE(back->instrumented);
  CHECK(back->targets.empty());
  CHECK(json(*back).dump() == estimate.dump());
  // Nothing written (no SASS listing, CUPTI unavailable): no figures.
  CHECK_FALSE(p::execution_figures_from_figures(json::object()).has_value());
  CHECK_FALSE(p::execution_figures_from_figures(json()).has_value());
}

TEST_CASE("execution figures: an older record reads with the defaults and decides the axis as before") {
  const json older = json::parse(kOlderRecord);
  const auto f = p::execution_figures_from_figures(older);
  REQUIRE(f.has_value());
  CHECK(f->instrumented);  // older counted records have no `instrumented`: they were all counted
  CHECK_FALSE(f->matrix_work.has_value());
  CHECK(f->dropped_records == 0);
  CHECK(f->workload.empty());
  CHECK(f->load_bytes == p::LoadBytes{});
  REQUIRE(f->targets.size() == 1);
  CHECK_FALSE(f->targets[0].matrix_target);
  CHECK_FALSE(f->targets[0].tma_load_target);
  CHECK(f->targets[0].work_share == 1.0);
  CHECK(f->top_opcodes[1] == p::TopOpcode{"FFMA", 4096});
  ev::StageResult stage;
  stage.status = ev::Status::ok;
  stage.figures = older;
  const auto axis = ev::detail::targets_executed_axis(stage, true, 0.75, 0.5, {});
  CHECK(axis.value == true);
  CHECK(axis.shortfalls.empty());
}

TEST_CASE("execution figures: malformed fields are refused, naming the field") {
  const json good = json::parse(kOlderRecord);
  const auto error_of = [](const json &j) {
    try {
      (void)j.get<p::ExecutionFigures>();
    } catch (const p::ProtocolError &e) {
      return e.field();
    }
    return std::string("(read)");
  };
  json bad = good;
  bad["targets"][0]["executed"] = "yes";
  CHECK(error_of(bad) == "targets[0].executed");
  bad = good;
  bad["targets"][0]["byte_share"] = 1.5;
  CHECK(error_of(bad) == "targets[0].byte_share");
  bad = good;
  bad["targets"][0]["warp_executions"] = -1;
  CHECK(error_of(bad) == "targets[0].warp_executions");
  bad = good;
  bad["targets"][0]["bogus"] = 1;
  CHECK(error_of(bad) == "targets[0].bogus");
  bad = good;
  bad["tensor_core_share"] = 1.2;
  CHECK(error_of(bad) == "tensor_core_share");
  bad = good;
  bad["top_opcodes"][0]["family"] = 3;
  CHECK(error_of(bad).rfind("top_opcodes", 0) == 0);
  bad = good;
  bad["load_bytes"] = {{"tma", 1}, {"plain", 1}, {"tma_share", 2}};
  CHECK(error_of(bad) == "load_bytes.tma_share");
  bad = good;
  bad["matrix_work"] = {{"fma_share", "most"}};
  CHECK(error_of(bad) == "matrix_work.fma_share");
  bad = good;
  bad["targets"] = {{"name", "wgmma"}};
  CHECK(error_of(bad) == "targets");
  bad = good;
  bad["surprise"] = true;
  CHECK(error_of(bad) == "surprise");
  // The axis fails closed on them, saying which field.
  ev::StageResult stage;
  stage.status = ev::Status::ok;
  bad = good;
  bad["targets"][0]["work_share"] = "all";
  stage.figures = bad;
  const auto axis = ev::detail::targets_executed_axis(stage, true, 0.75, 0.5, {});
  CHECK(axis.value == false);
  REQUIRE(axis.shortfalls.size() == 1);
  CHECK(axis.shortfalls[0].find("targets[0].work_share") != std::string::npos);
}
