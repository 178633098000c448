// The pattern of an incorrect output's mismatches: clustering of synthetic error maps (a tile-edge residue,
// one batch and head, a single block, scattered elements, never-written NaN, a partial edge tile), the
// record's one codec and its coarse form, and the feedback text rendered from it.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/detail/feedback_mismatch.hpp"
#include "agent/detail/feedback_sections.hpp"
#include "agent/prompt_builder.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/mismatch.hpp"
#include "evaluator/worker/detail/mismatch_pattern.hpp"
#include "tasks/task.hpp"

namespace fs = std::filesystem;
namespace p = ptxbench::protocol;
namespace w = ptxbench::worker::detail;
using namespace ptxbench;
using nlohmann::json;

namespace {

bool has(const std::string &text, const std::string &needle) {
  return text.find(needle) != std::string::npos;
}
#define CHECK_HAS(text, needle) \
  CHECK_MESSAGE(has(text, needle), "missing: " << (needle) << "\n--- in:\n" << (text))

/// Flat index of coordinates in dims.
std::int64_t flat(const std::vector<w::NamedDim> &dims, const std::vector<std::int64_t> &c) {
  std::int64_t f = 0;
  for (std::size_t k = 0; k < dims.size(); ++k) f = f * dims[k].size + c[k];
  return f;
}

/// Every element of `dims` (rank 2 or 4) for which `wrong(b, h, row, col)` holds.
template <class F>
std::vector<std::int64_t> error_map(const std::vector<w::NamedDim> &dims, F wrong) {
  const bool four = dims.size() == 4;
  const std::int64_t nb = four ? dims[0].size : 1, nh = four ? dims[1].size : 1;
  const std::int64_t rows = dims[dims.size() - 2].size, cols = dims.back().size;
  std::vector<std::int64_t> out;
  for (std::int64_t b = 0; b < nb; ++b)
    for (std::int64_t h = 0; h < nh; ++h)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          if (wrong(b, h, r, c)) out.push_back(four ? flat(dims, {b, h, r, c}) : flat(dims, {r, c}));
  return out;
}

p::TensorMismatches analyze(const std::vector<w::NamedDim> &dims, const std::vector<std::int64_t> &sample,
                            std::vector<w::FlatMismatch> worst = {}, std::uint64_t nan = 0,
                            std::uint64_t unwritten = 0) {
  return w::analyze_mismatches("C", dims, sample.size(), nan, unwritten, sample, std::move(worst));
}

const p::TileResidue *residue(const p::DimSpread &d, std::int64_t tile) {
  for (const auto &r : d.tiles)
    if (r.tile == tile) return &r;
  return nullptr;
}

std::string render(const p::TensorMismatches &t, bool coarse = false) {
  p::MismatchPattern pattern;
  pattern.trial = 1;
  pattern.tensors = {t};
  if (coarse) pattern = p::coarse_pattern(pattern);
  return agent::detail::render_mismatch_pattern(pattern, nullptr, coarse ? "" : "W");
}

const std::vector<w::NamedDim> kGemm = {{"M", 256}, {"N", 256}};
const std::vector<w::NamedDim> kAttention = {{"B", 2}, {"H", 4}, {"S", 256}, {"D", 128}};

}  // namespace

TEST_CASE("clustering: the last 8 rows of every 64-row tile") {
  const auto sample = error_map(kGemm, [](auto, auto, auto r, auto) { return r % 64 >= 56; });
  const p::TensorMismatches t = analyze(kGemm, sample);
  REQUIRE(t.dims.size() == 2);
  CHECK(t.mismatches == 4 * 8 * 256);
  CHECK(t.share == doctest::Approx(8.0 / 64));
  CHECK(t.dims[0].coverage == "some");
  CHECK(t.dims[1].coverage == "all");
  const p::TileResidue *r64 = residue(t.dims[0], 64);
  REQUIRE(r64);
  CHECK(r64->first == 56);
  CHECK(r64->last == 63);
  CHECK(r64->tiles_touched == 4);
  CHECK(t.dims[0].ranges.size() == 4);
  CHECK(t.dims[0].ranges[1] == std::array<std::int64_t, 2>{120, 127});
  CHECK_FALSE(t.one_block);
  const std::string text = render(t);
  CHECK_HAS(text, "- C: 8192 of 65536 elements wrong (12%)\n");
  CHECK_HAS(text, "  where: rows (M) 56..63, 120..127, 184..191, 248..255 of 256, every column (N)\n");
  CHECK_HAS(text,
            "  all in rows 56..63 of every 64-row tile (the last 8); spread over 4 of 4 128x128 blocks\n");
}

TEST_CASE("clustering: columns 64..127 of each 128-column tile, named 128 and not 64") {
  const std::vector<w::NamedDim> dims = {{"M", 128}, {"N", 512}};
  const auto sample = error_map(dims, [](auto, auto, auto r, auto c) { return c % 128 >= 64 && r == 5; });
  const p::TensorMismatches t = analyze(dims, sample);
  const p::TileResidue *r128 = residue(t.dims[1], 128);
  REQUIRE(r128);
  CHECK(r128->first == 64);
  CHECK(r128->last == 127);
  CHECK(residue(t.dims[1], 64)->last - residue(t.dims[1], 64)->first == 63);  // every residue of 64
  CHECK(t.dims[0].coverage == "one");
  const std::string text = render(t);
  CHECK_HAS(text, "row (M) 5 of 128");
  CHECK_HAS(text, "all in columns 64..127 of every 128-column tile (the last 64)");
  CHECK_FALSE(has(text, "64-column"));
}

TEST_CASE("clustering: one batch and one head only") {
  std::mt19937_64 rng(7);
  std::vector<std::int64_t> sample;
  for (int i = 0; i < 300; ++i)
    sample.push_back(flat(
        kAttention, {1, 2, static_cast<std::int64_t>(rng() % 256), static_cast<std::int64_t>(rng() % 128)}));
  const p::TensorMismatches t = analyze(kAttention, sample);
  REQUIRE(t.dims.size() == 4);
  CHECK(t.dims[0].coverage == "one");
  CHECK(t.dims[0].ranges == std::vector<std::array<std::int64_t, 2>>{{1, 1}});
  CHECK(t.dims[1].coverage == "one");
  CHECK(t.dims[1].ranges == std::vector<std::array<std::int64_t, 2>>{{2, 2}});
  CHECK(t.dims[2].coverage == "some");
  CHECK(t.blocks[1].total == 2 * 4 * 2 * 1);  // (B·H) x 2 row tiles x 1 column tile of 128
  CHECK(t.blocks[1].touched == 2);
  const std::string text = render(t);
  CHECK_HAS(text, "  where: B 1 only, H 2 only, rows (S) ");
  CHECK_HAS(text, "spread over 2 of 16 128x128 blocks");
}

TEST_CASE("clustering: a single 64x64 block") {
  const auto sample = error_map(kAttention, [](auto b, auto h, auto r, auto c) {
    return b == 0 && h == 3 && r >= 130 && r <= 150 && c >= 10 && c <= 20;
  });
  const p::TensorMismatches t = analyze(kAttention, sample);
  CHECK(t.one_block);
  CHECK(t.blocks[0].touched == 1);
  CHECK(t.blocks[0].total == 2 * 4 * 4 * 2);
  CHECK(t.dims[2].ranges == std::vector<std::array<std::int64_t, 2>>{{130, 150}});
  CHECK(t.dims[3].ranges == std::vector<std::array<std::int64_t, 2>>{{10, 20}});
  const std::string text = render(t);
  CHECK_HAS(text, "  where: B 0 only, H 3 only, rows (S) 130..150 of 256, columns (D) 10..20 of 128\n");
  CHECK_HAS(text, "  inside one 64x64 block\n");
}

TEST_CASE("clustering: scattered random elements claim no residue and no block") {
  const std::vector<w::NamedDim> dims = {{"B", 4}, {"H", 8}, {"S", 1024}, {"D", 128}};
  std::mt19937_64 rng(11);
  std::vector<std::int64_t> sample;
  for (int i = 0; i < 2000; ++i) sample.push_back(static_cast<std::int64_t>(rng() % (4 * 8 * 1024 * 128)));
  const p::TensorMismatches t = analyze(dims, sample);
  CHECK(t.dims[0].coverage == "all");
  CHECK(t.dims[1].coverage == "all");
  CHECK(t.dims[2].more_ranges);
  CHECK(t.dims[2].ranges.size() == w::kMaxDimRanges);
  CHECK_FALSE(t.one_block);
  CHECK(t.blocks[1].touched > 200);
  const std::string text = render(t);
  CHECK_HAS(text, "  where: every B, every H, rows (S) ");
  CHECK_HAS(text, ", ... of 1024");
  CHECK_FALSE(has(text, "of every 64-row tile"));
  CHECK_FALSE(has(text, "of every 128-row tile"));
  CHECK_FALSE(has(text, "inside one"));
  CHECK_HAS(text, "128x128 blocks");
}

TEST_CASE("clustering: every element wrong is said so, without sampled ranges or blocks") {
  const std::vector<w::NamedDim> dims = {{"B", 2}, {"H", 4}, {"S", 256}};
  std::mt19937_64 rng(5);
  std::vector<std::int64_t> sample;
  for (int i = 0; i < 300; ++i) sample.push_back(static_cast<std::int64_t>(rng() % (2 * 4 * 256)));
  // All 2048 elements are wrong; the worker kept a uniform sample of 300 of them.
  const p::TensorMismatches t = w::analyze_mismatches("LSE", dims, 2 * 4 * 256, 0, 0, sample, {});
  REQUIRE(t.mismatches == t.elements);
  const std::string text = render(t);
  CHECK_HAS(text, "- LSE: 2048 of 2048 elements wrong (100%)\n");
  CHECK_HAS(text, "  where: every element (the whole tensor, not a tile edge or a region)\n");
  CHECK_FALSE(has(text, "uniform sample"));
  CHECK_FALSE(has(text, "128x128 blocks"));
  // One element short of all: the pattern is described as before.
  const p::TensorMismatches most = w::analyze_mismatches("LSE", dims, 2 * 4 * 256 - 1, 0, 0, sample, {});
  CHECK_FALSE(has(render(most), "every element"));
}

TEST_CASE("clustering: never-written NaN and the worst elements, finite errors first") {
  // Rows 192..199 of M=200: the partial tile past the last full 64-row tile, never written, plus two
  // wrong values elsewhere.
  const std::vector<w::NamedDim> dims = {{"M", 200}, {"N", 64}};
  auto sample = error_map(dims, [](auto, auto, auto r, auto) { return r >= 192; });
  std::vector<w::FlatMismatch> worst;
  for (std::size_t i = 0; i < 10; ++i)
    worst.push_back({sample[i], std::numeric_limits<double>::quiet_NaN(), 0.5,
                     std::numeric_limits<double>::quiet_NaN(), true});
  const std::int64_t unwritten = static_cast<std::int64_t>(sample.size());
  const p::TensorMismatches edge =
      w::analyze_mismatches("C", dims, sample.size(), 0, sample.size(), sample, worst);
  CHECK(edge.dims[0].partial_tile_only);
  CHECK(edge.unwritten_count == static_cast<std::uint64_t>(unwritten));
  REQUIRE(edge.worst.size() == w::kMaxWorstElements);
  CHECK(edge.worst[0].kind == "unwritten");
  CHECK(edge.worst[0].index == std::vector<std::int64_t>{192, 0});
  std::string text = render(edge);
  CHECK_HAS(text,
            "- C: 512 of 12800 elements wrong (4%); 512 never written (still the NaN the outputs are "
            "filled with)\n");
  CHECK_HAS(text, "all in the rows past the last full 64-row tile");
  CHECK_HAS(text, "worst: C[192, 0] never written; C[192, 1] never written");

  // Finite errors rank above NaN and never-written ones, the largest error over tolerance first.
  worst.push_back({flat(dims, {3, 4}), 2.0, 1.0, 25.0, false});
  worst.push_back({flat(dims, {7, 9}), 9.0, 1.0, 200.0, false});
  worst.push_back({flat(dims, {8, 9}), std::numeric_limits<double>::quiet_NaN(), 1.0,
                   std::numeric_limits<double>::quiet_NaN(), false});
  sample.push_back(flat(dims, {3, 4}));
  sample.push_back(flat(dims, {7, 9}));
  sample.push_back(flat(dims, {8, 9}));
  const p::TensorMismatches mixed = w::analyze_mismatches("C", dims, sample.size(), 1, 512, sample, worst);
  REQUIRE(mixed.worst.size() == w::kMaxWorstElements);
  CHECK(mixed.worst[0].index == std::vector<std::int64_t>{7, 9});
  CHECK(mixed.worst[0].error_ratio == 200.0);
  CHECK(mixed.worst[1].index == std::vector<std::int64_t>{3, 4});
  CHECK(mixed.worst[2].kind == "nan");
  CHECK(mixed.worst[3].kind == "unwritten");
  CHECK_FALSE(mixed.dims[0].partial_tile_only);
  text = render(mixed);
  CHECK_HAS(text,
            "worst: C[7, 9] got 9, expected 1 (200x the tolerance); C[3, 4] got 2, expected 1 (25x the "
            "tolerance); C[8, 9] got NaN, expected 1; C[192, 0] never written\n");
  CHECK_HAS(text, "; 1 NaN written");
}

TEST_CASE("clustering: dimension names from the workload's symbols, ties in the usual order") {
  p::WorkloadSpec spec;
  spec.symbols = {{"B", 2}, {"H", 16}, {"S", 128}, {"D", 128}};
  p::TensorSpec t;
  t.name = "O";
  t.shape = {2, 16, 128, 128};
  const auto dims = w::named_dims(spec, t);
  REQUIRE(dims.size() == 4);
  CHECK(dims[0].name == "B");
  CHECK(dims[1].name == "H");
  CHECK(dims[2].name == "S");
  CHECK(dims[3].name == "D");
  spec.symbols = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  t.shape = {4096, 4096};
  const auto mn = w::named_dims(spec, t);
  CHECK(mn[0].name == "M");
  CHECK(mn[1].name == "N");
  t.shape = {77, 4096};
  CHECK(w::named_dims(spec, t)[0].name.empty());
}

TEST_CASE("record: one codec, round trip, refusals naming the field, the coarse form") {
  const auto sample = error_map(
      kAttention, [](auto b, auto h, auto r, auto c) { return b == 1 && h == 0 && r % 64 == 63 && c < 3; });
  p::MismatchPattern pattern;
  pattern.trial = 2;
  pattern.tensors = {w::analyze_mismatches("dQ", kAttention, sample.size(), 0, 0, sample,
                                           {{sample[0], 1.5, 0.25, 12.5, false}}),
                     w::analyze_mismatches("dK", kAttention, 0, 0, 0, {}, {})};
  const json j = pattern;
  CHECK(j["tensors"][0]["dims"][2]["tiles"][0] ==
        json{{"tile", 64}, {"first", 63}, {"last", 63}, {"tiles_touched", 4}});
  CHECK(j["tensors"][0]["worst"][0]["index"] == json{1, 0, 63, 0});
  const auto back = json::parse(j.dump()).get<p::MismatchPattern>();
  CHECK(back == pattern);

  json unknown = j;
  unknown["tensors"][0]["dims"][0]["stride"] = 4;
  CHECK_THROWS_WITH_AS(unknown.get<p::MismatchPattern>(), doctest::Contains("tensors"), p::ProtocolError);
  json bad_kind = j;
  bad_kind["tensors"][0]["worst"][0]["kind"] = "weird";
  CHECK_THROWS_AS(bad_kind.get<p::MismatchPattern>(), p::ProtocolError);
  json bad_share = j;
  bad_share["tensors"][0]["share"] = 2.0;
  CHECK_THROWS_AS(bad_share.get<p::MismatchPattern>(), p::ProtocolError);

  const p::MismatchPattern coarse = p::coarse_pattern(pattern);
  CHECK(coarse.coarse);
  const json cj = coarse;
  const std::string dumped = cj.dump();
  CHECK_FALSE(has(dumped, "256"));  // no size
  CHECK_FALSE(has(dumped, "\"index\":[1"));
  CHECK(coarse.tensors[0].worst[0].index.empty());
  CHECK(coarse.tensors[0].dims[2].ranges.empty());
  CHECK(coarse.tensors[0].dims[2].tiles.empty());
  CHECK(coarse.tensors[0].elements == 0);
  CHECK(coarse.tensors[0].share == pattern.tensors[0].share);
  CHECK(json::parse(dumped).get<p::MismatchPattern>() == coarse);
  const std::string text = agent::detail::render_mismatch_pattern(coarse, nullptr, "");
  CHECK(text ==
        "Pattern of the mismatches (trial 2):\n"
        "- dQ: wrong in under 0.1% of its elements\n"
        "  where: a single B, a single H, some rows (S), some columns (D)\n"
        "  spread over more than one 128x128 block\n"
        "  worst: dQ got 1.5, expected 0.25 (12.5x the tolerance)\n"
        "- dK: correct\n");
}

TEST_CASE("feedback: the pattern section of an incorrect verdict, bounded; older verdicts as before") {
  const fs::path root = PTXBENCH_SOURCE_DIR;
  auto loaded = agent::PromptBuilder::load(root / "prompts");
  REQUIRE_MESSAGE(loaded.has_value(), (loaded ? "" : loaded.error()));
  const agent::PromptBuilder &builder = *loaded;
  auto task_or = tasks::load_task_file(root / "tasks" / "mha_bwd_d128.json");
  REQUIRE(task_or.has_value());
  const tasks::Task &task = *task_or;

  // Attention backward: two elements of dQ wrong, in one head, at the last row of a 64-row tile.
  const std::vector<w::NamedDim> dims = {{"B", 2}, {"H", 16}, {"S", 4096}, {"D", 128}};
  const std::vector<std::int64_t> sample = {flat(dims, {1, 7, 1023, 64}), flat(dims, {1, 7, 2047, 65})};
  p::MismatchPattern pattern;
  pattern.trial = 1;
  pattern.tensors = {w::analyze_mismatches(
                         "dQ", dims, 2, 0, 0, sample,
                         {{sample[0], 0.8125, 0.5625, 6.25, false}, {sample[1], -1.5, -1.125, 9.5, false}}),
                     w::analyze_mismatches("dK", dims, 0, 0, 0, {}, {}),
                     w::analyze_mismatches("dV", dims, 0, 0, 0, {}, {})};

  evaluator::Verdict v;
  v.task_id = task.id;
  v.parse.status = v.static_checks.status = v.compile.status = evaluator::Status::ok;
  v.correctness.status = evaluator::Status::incorrect;
  v.correctness.summary = "workload B=2,H=16,S=4096: 0 of 1 trials passed";
  json row = {{"name", "B=2,H=16,S=4096"},
              {"trials", 1},
              {"passed", 0},
              {"mismatches", 2},
              {"first_mismatch",
               {{"tensor", "dQ"}, {"index", {1, 7, 1023, 64}}, {"got", 0.8125}, {"expected", 0.5625}}},
              {"deterministic", true}};
  v.correctness.figures = {{"workloads", json::array({row})}};
  v.finalize_status();
  const std::string before = builder.feedback(task, v);
  CHECK_FALSE(has(before, "Pattern of the mismatches"));  // a verdict without the record: as before
  CHECK_HAS(before, "first mismatch dQ[1, 7, 1023, 64]");

  row["mismatch_pattern"] = pattern;
  v.correctness.figures = {{"workloads", json::array({row})}};
  const std::string section = agent::detail::mismatch_pattern_section(task, v);
  const std::string expected =
      "Pattern of the mismatches (B=2,H=16,S=4096, trial 1):\n"
      "- dQ: 2 of 16777216 elements wrong\n"
      "  where: B 1 only, H 7 only, rows (S) 1023, 2047 of 4096, columns (D) 64..65 of 128\n"
      "  all in row 127 of every 128-row tile; spread over 2 of 1024 128x128 blocks\n"
      "  worst: dQ[1, 7, 2047, 65] got -1.5, expected -1.125 (9.5x the tolerance); dQ[1, 7, 1023, 64] got "
      "0.8125, expected 0.5625 (6.25x the tolerance)\n"
      "- dK, dV: correct\n";
  CHECK(section == expected);
  const std::string after = builder.feedback(task, v);
  CHECK_HAS(after, expected);
  CHECK_HAS(after, "first mismatch dQ[1, 7, 1023, 64]");

  // Bounded: many failing tensors still give at most kMaxPatternLines lines.
  p::MismatchPattern many;
  for (int i = 0; i < 6; ++i)
    many.tensors.push_back(
        w::analyze_mismatches("T" + std::to_string(i), dims, 2, 0, 0, sample, {{sample[0], 1, 0, 3, false}}));
  const std::string bounded = agent::detail::render_mismatch_pattern(many, &task, "x");
  CHECK(std::count(bounded.begin(), bounded.end(), '\n') ==
        static_cast<long>(agent::detail::kMaxPatternLines));
  CHECK_HAS(bounded, "more lines\n");

  // A record this build cannot read: no section, and the rest of the feedback stands.
  row["mismatch_pattern"] = json{{"trial", "one"}};
  v.correctness.figures = {{"workloads", json::array({row})}};
  CHECK(agent::detail::mismatch_pattern_section(task, v).empty());
}

TEST_CASE("feedback: a hidden shape's pattern is coarse, named as the generalization section names it") {
  const fs::path root = PTXBENCH_SOURCE_DIR;
  auto task_or = tasks::load_task_file(root / "tasks" / "mha_fwd_d128.json");
  REQUIRE(task_or.has_value());
  const tasks::Task &task = *task_or;
  // B=1, H=5, S=1000: wrong only past the last full 64-row tile of head 3.
  const std::vector<w::NamedDim> dims = {{"B", 1}, {"H", 5}, {"S", 1000}, {"D", 128}};
  const auto sample =
      error_map(dims, [](auto, auto h, auto r, auto c) { return h == 3 && r >= 960 && c < 128; });
  p::MismatchPattern exact;
  exact.trial = 1;
  exact.tensors = {
      w::analyze_mismatches("O", dims, sample.size(), 0, 0, sample, {{sample[5], 3.0, 1.0, 40.0, false}})};
  evaluator::Verdict v;
  evaluator::Generalization g;
  g.value = false;
  g.passed = 1;
  g.total = 2;
  evaluator::Generalization::Failure f;
  f.workload = "B=1,H=5,S=1000";
  f.kind = "incorrect";
  f.summary = "wrong";
  f.wrong_share = exact.tensors[0].share;
  g.failed = {f};
  v.generalizes = g;
  // The worker writes the coarse form; an exact one (an older or hand-made record) is made coarse too.
  for (const bool coarse_written : {true, false}) {
    v.generalization.figures = {
        {"workloads",
         json::array({{{"name", "B=1,H=5,S=1000"},
                       {"kind", "incorrect"},
                       {"mismatch_pattern", coarse_written ? p::coarse_pattern(exact) : exact}}})}};
    const std::string text = agent::detail::hidden_mismatch_pattern_section(task, v);
    CHECK(text ==
          "Pattern of the mismatches (unseen shape 1, trial 1):\n"
          "- O: wrong in under 1% of its elements\n"
          "  where: every B, a single H, some rows (S), every column (D)\n"
          "  all in the rows past the last full 64-row tile; inside one 128x128 block\n"
          "  worst: O got 3, expected 1 (40x the tolerance)\n");
    CHECK_FALSE(has(text, "1000"));
    CHECK_FALSE(has(text, "960"));
    const std::string section = agent::detail::generalization_section(task, v);
    CHECK_HAS(section, text);
  }
}
