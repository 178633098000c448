// Task files: every shipped task loads and matches the suite's fixed shapes;
// every bad fixture is rejected with "<file>: <field>: <reason>". `ptxbench tasks` on the command line is
// test_cli's (it depends on the built binary).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "support/support.hpp"
#include "tasks/arch.hpp"
#include "tasks/task.hpp"
#include "util/enum_names.hpp"
#include "util/int_expr.hpp"

namespace fs = std::filesystem;
using namespace ptxbench::tasks;

namespace {

const fs::path kTaskDir = fs::path(PTXBENCH_SOURCE_DIR) / "tasks";
const fs::path kFixtures = fs::path(PTXBENCH_TEST_DATA) / "tasks";

const Task &require_task(const std::vector<Task> &tasks, std::string_view id) {
  const Task *t = find_task(tasks, id);
  REQUIRE_MESSAGE(t != nullptr, "missing task " << id);
  return *t;
}

std::int64_t eval(const std::string &expr, const Workload &w) {
  auto v = ptxbench::util::evaluate_int_expression(expr, w.symbols);
  REQUIRE_MESSAGE(v.has_value(), expr);
  return *v;
}

}  // namespace

TEST_CASE("every shipped task file loads, and the core suite has the seed paper's shapes") {
  auto loaded = load_task_dir(kTaskDir);
  REQUIRE_MESSAGE(loaded.has_value(), (loaded ? "" : loaded.error()));
  const auto &tasks = *loaded;
  CHECK(tasks.size() >= 11);
  for (std::size_t i = 1; i < tasks.size(); ++i) CHECK(tasks[i - 1].id < tasks[i].id);

  const Task &gemm = require_task(tasks, "gemm_n7168_k5120");
  CHECK(gemm.family == Family::gemm);
  CHECK(gemm.arch == "sm_90a");
  CHECK(gemm.reference == "cublaslt");
  REQUIRE(gemm.workloads.size() == 1);
  const Workload &w = gemm.workloads[0];
  CHECK(w.symbols.at("M") == 8192);
  CHECK(w.symbols.at("N") == 7168);
  CHECK(w.symbols.at("K") == 5120);
  CHECK(gemm.shape_of(*gemm.find_tensor("A"), w) == std::vector<std::int64_t>{8192, 5120});
  CHECK(gemm.shape_of(*gemm.find_tensor("B"), w) == std::vector<std::int64_t>{7168, 5120});
  CHECK(gemm.shape_of(*gemm.find_tensor("C"), w) == std::vector<std::int64_t>{8192, 7168});
  CHECK(eval(gemm.flops, w) == 2LL * 8192 * 7168 * 5120);
  REQUIRE(gemm.find_target("wgmma"));
  CHECK(gemm.find_target("wgmma")->ptx_mnemonic == "wgmma.mma_async");
  CHECK(gemm.find_target("wgmma")->sass_families == std::vector<std::string>{"HGMMA"});
  REQUIRE(gemm.find_target("tma_load"));
  CHECK(gemm.find_target("tma_load")->sass_families == std::vector<std::string>{"UTMALDG"});

  for (const char *id : {"mha_fwd_d128", "mha_fwd_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal"}) {
    CAPTURE(id);
    const Task &t = require_task(tasks, id);
    const Workload &a = t.workloads.at(0);
    CHECK(a.symbols.at("B") == 4);
    CHECK(a.symbols.at("H") == 48);
    CHECK(a.symbols.at("S") == 4096);
    CHECK(a.symbols.at("D") == 128);
    CHECK(t.causal == (std::string_view(id).find("causal") != std::string_view::npos));
    REQUIRE(t.find_scalar("softmax_scale"));
    CHECK(t.find_scalar("softmax_scale")->value == doctest::Approx(1.0 / std::sqrt(128.0)));
    const Tensor *lse = t.find_tensor("LSE");
    REQUIRE(lse);
    CHECK(lse->dtype == DType::f32);
    CHECK(t.shape_of(*lse, a) == std::vector<std::int64_t>{4, 48, 4096});
  }
  const Task &bwd = require_task(tasks, "mha_bwd_d128");
  CHECK(bwd.family == Family::attention_bwd);
  CHECK(bwd.find_tensor("O")->distribution == Distribution::derived);
  CHECK(bwd.find_tensor("dO")->distribution == Distribution::spiky);
  CHECK(bwd.find_tensor("dQ")->role == TensorRole::output);
  CHECK(eval(bwd.flops, bwd.workloads[0]) == 10LL * 4 * 48 * 4096 * 4096 * 128);
  CHECK(eval(require_task(tasks, "mha_bwd_d128_causal").flops, bwd.workloads[0]) ==
        5LL * 4 * 48 * 4096 * 4096 * 128);
  CHECK(eval(require_task(tasks, "mha_fwd_d128_causal").flops, bwd.workloads[0]) ==
        2LL * 4 * 48 * 4096 * 4096 * 128);

  // Secondary suite: the shapes the issue asks for.
  const Task &odd = require_task(tasks, "gemm_n4096_k4096");
  REQUIRE(odd.find_workload("M=3000"));
  CHECK(odd.find_workload("M=3000")->symbols.at("M") % 128 != 0);
  const Task &fp8 = require_task(tasks, "gemm_fp8_n7168_k5120");
  CHECK(fp8.find_tensor("A")->dtype == DType::e4m3);
  CHECK(fp8.find_scalar("scale_a"));
  CHECK(fp8.find_scalar("scale_b"));
  CHECK(fp8.find_target("wgmma")->sass_families == std::vector<std::string>{"QGMMA"});
  CHECK(require_task(tasks, "mha_fwd_d64").workloads[0].symbols.at("D") == 64);
  CHECK(require_task(tasks, "mha_fwd_d256").workloads[0].symbols.at("D") == 256);
  CHECK(require_task(tasks, "mha_fwd_d128_s1024").workloads[0].symbols.at("S") == 1024);
  CHECK(require_task(tasks, "mha_fwd_d128_s16384").workloads[0].symbols.at("S") == 16384);
  for (const char *id : {"gemm_n7168_k5120_sm100", "mha_fwd_d128_sm100"}) {
    const Task &t = require_task(tasks, id);
    CHECK(t.arch == "sm_100a");
    REQUIRE(t.find_target("tcgen05_mma"));
    CHECK(t.find_target("tcgen05_mma")->ptx_mnemonic == "tcgen05.mma");
  }

  for (const Task &t : tasks) {
    CAPTURE(t.id);
    CHECK(t.source.stem() == t.id);
    CHECK(!t.description.empty());
    for (const Tensor &tensor : t.tensors)
      if (tensor.role == TensorRole::output) {
        REQUIRE(t.tolerances.count(tensor.name));
        // the rationale: per output, or once for the task
        CHECK((!t.tolerances.at(tensor.name).reason.empty() || !t.tolerance_note.empty()));
      }
    if (t.family != Family::gemm) CHECK(t.find_scalar("softmax_scale"));
  }
}

TEST_CASE("to_json round-trips through the loader") {
  auto loaded = load_task_dir(kTaskDir);
  REQUIRE(loaded.has_value());
  fs::path dir = fs::temp_directory_path() / ("ptxbench_test_tasks_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const Task &t : *loaded) {
    CAPTURE(t.id);
    fs::path file = dir / (t.id + ".json");
    std::ofstream(file) << t.to_json().dump(2);
    auto again = load_task_file(file);
    REQUIRE_MESSAGE(again.has_value(), (again ? "" : again.error()));
    CHECK(again->to_json() == t.to_json());
  }
  fs::remove_all(dir);
}

TEST_CASE("a good fixture loads with its optional fields") {
  auto t = load_task_file(kFixtures / "good" / "tiny_gemm.json");
  REQUIRE_MESSAGE(t.has_value(), (t ? "" : t.error()));
  CHECK(t->id == "tiny_gemm");
  CHECK(t->find_tensor("B")->distribution == Distribution::uniform);
  CHECK(t->find_scalar("alpha")->value == 0.5);
  CHECK(t->shape_of(*t->find_tensor("C"), *t->find_workload("odd")) == std::vector<std::int64_t>{100, 64});
  CHECK(t->tags.at("suite") == "test");
  CHECK(t->find_tensor("Z") == nullptr);
  CHECK(t->find_workload("nope") == nullptr);
}

TEST_CASE("bad task files: each error names the file, the field and the reason") {
  struct Case {
    const char *file;
    const char *field_and_reason;  // expected after "<file>: "
  };
  const Case cases[] = {
      {"unknown_field", "flop: unknown field (known fields here: id, family"},
      {"wrong_type_title", "title: expected a string, got number"},
      {"missing_flops", "flops: missing required field"},
      {"unknown_dtype", "tensors[0].dtype: unknown dtype 'bf17' (known: bf16, f16, f32, e4m3, e5m2, i32)"},
      {"unknown_symbol_in_shape", "tensors[1].shape[1]: bad expression 'Q': unknown"},
      {"bad_expression", "flops: bad expression '2*M*N*'"},
      {"duplicate_tensor_name", "tensors[1].name: duplicate name 'A' (already used by a tensor)"},
      {"workload_missing_symbol", "workloads[1].symbols: missing symbol 'K'"},
      {"tolerance_for_input", "tolerances.A: 'A' is an input; tolerances apply to outputs only"},
      {"tolerance_for_unknown_tensor", "tolerances.Z: 'Z' is not a tensor of this task"},
      {"missing_tolerance", "tolerances: missing tolerance for output 'C'"},
      {"id_mismatch", "id: 'another_task' differs from the file name 'id_mismatch.json'"},
      {"overflow", "flops: at workload 'small': "},
      {"nonpositive_symbol", "workloads[0].symbols.M: 0 is not positive"},
      {"unknown_workload_symbol", "workloads[0].symbols.Z: unknown symbol 'Z' (declared symbols: M, N, K)"},
      {"wrong_reference", "reference: 'cudnn_sdpa_fwd' does not compute family 'gemm' (expected 'cublaslt')"},
      {"unknown_scalar_type", "scalars[0].type: unknown scalar type 'f128'"},
      {"rank_too_high", "tensors[2].shape: rank 6 (must be 1 to 5)"},
      {"symbol_clash", "scalars[0].name: duplicate name 'K' (already used by a symbol)"},
      {"two_errors", "tensors[0].role: unknown role 'inout' (known: input, output)"},
      {"two_errors", "targets[0].sass_families: must name at least one SASS opcode family"},
      {"workloads_not_array", "workloads: expected an array, got object"},
      {"negative_rtol", "tolerances.C.rtol: -1 is negative"},
      {"empty_tolerance_note", "tolerance_note: must not be empty (leave the field out instead)"},
      {"invalid_json", "invalid JSON: "},
      {"duplicate_key", "invalid JSON: key 'title' appears twice in one object"},
  };
  for (const Case &c : cases) {
    fs::path file = kFixtures / "bad" / (std::string(c.file) + ".json");
    CAPTURE(file);
    REQUIRE(fs::exists(file));
    auto t = load_task_file(file);
    REQUIRE_FALSE(t.has_value());
    const std::string expected = file.string() + ": " + c.field_and_reason;
    CHECK_MESSAGE(t.error().find(expected) != std::string::npos,
                  "got: " << t.error() << "\nwant: " << expected);
  }
  auto overflow = load_task_file(kFixtures / "bad" / "overflow.json");
  CHECK(overflow.error().find("overflow") != std::string::npos);
}

TEST_CASE("load_task_dir reports every bad file, and refuses a missing or empty directory") {
  auto all_bad = load_task_dir(kFixtures / "bad");
  REQUIRE_FALSE(all_bad.has_value());
  CHECK(all_bad.error().find("unknown_dtype.json: tensors[0].dtype") != std::string::npos);
  CHECK(all_bad.error().find("missing_flops.json: flops") != std::string::npos);

  auto missing = load_task_dir(kFixtures / "no_such_dir");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().find("not a directory") != std::string::npos);

  fs::path empty = fs::temp_directory_path() / ("ptxbench_empty_tasks_" + std::to_string(::getpid()));
  fs::create_directories(empty);
  auto none = load_task_dir(empty);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().find("no task files") != std::string::npos);
  fs::remove_all(empty);

  auto nofile = load_task_file(kFixtures / "bad" / "does_not_exist.json");
  REQUIRE_FALSE(nofile.has_value());
  CHECK(nofile.error().find("does_not_exist.json: cannot read") != std::string::npos);
}

TEST_CASE("similar_task_ids suggests close ids, closest first") {
  auto loaded = load_task_dir(kTaskDir);
  REQUIRE(loaded.has_value());
  auto near = similar_task_ids(*loaded, "mha_fwd_d12");
  REQUIRE_FALSE(near.empty());
  CHECK(near[0] == "mha_fwd_d128");
  auto typo = similar_task_ids(*loaded, "gemm_n7168_k5210");
  REQUIRE_FALSE(typo.empty());
  CHECK(typo[0] == "gemm_n7168_k5120");
  CHECK(similar_task_ids(*loaded, "zzzzzzzzzzzzzzzzzzzzzz").empty());
  CHECK(similar_task_ids(*loaded, "mha", 3).size() == 3);
}

TEST_CASE("default_task_dir honours PTXBENCH_TASKS, else finds the source tree") {
  ::setenv("PTXBENCH_TASKS", "/some/where", 1);
  CHECK(default_task_dir() == fs::path("/some/where"));
  ::unsetenv("PTXBENCH_TASKS");
  CHECK(fs::exists(default_task_dir() / "gemm_n7168_k5120.json"));
}

TEST_CASE("enum names") {
  CHECK(to_string(DType::e4m3) == "e4m3");
  CHECK(dtype_from_string("bf16") == DType::bf16);
  CHECK_FALSE(dtype_from_string("bfloat16").has_value());
  CHECK(size_of(DType::bf16) == 2);
  CHECK(size_of(DType::f32) == 4);
  CHECK(size_of(DType::e4m3) == 1);
  CHECK(to_string(Family::attention_bwd) == "attention_bwd");
  CHECK(to_string(Distribution::spiky) == "spiky");
  // Every DType round-trips through its one table, and nothing else is accepted.
  for (DType d : {DType::bf16, DType::f16, DType::f32, DType::e4m3, DType::e5m2, DType::i32})
    CHECK(dtype_from_string(to_string(d)) == d);
  CHECK_FALSE(dtype_from_string("").has_value());
}

TEST_CASE("util::EnumName: one table read both ways; unknown names and values are told apart") {
  enum class Colour { red, green, blue };
  static constexpr ptxbench::util::EnumName<Colour> kNames[] = {{Colour::red, "red"},
                                                                {Colour::green, "green"}};
  CHECK(ptxbench::util::enum_to_string(kNames, Colour::green) == "green");
  CHECK(ptxbench::util::enum_to_string(kNames, Colour::blue).empty());  // a table without it says nothing
  CHECK(ptxbench::util::enum_from_string(kNames, "red") == Colour::red);
  CHECK_FALSE(ptxbench::util::enum_from_string(kNames, "Red").has_value());
  CHECK(ptxbench::util::enum_names(kNames) == "red, green");
  static_assert(ptxbench::util::enum_from_string(kNames, "green") == Colour::green);
}

TEST_CASE("architecture facts: one row per architecture the loader accepts") {
  REQUIRE(known_archs().size() == 4);
  for (const ArchFacts &a : known_archs()) {
    CHECK(arch_facts(a.arch) == &a);
    CHECK(a.max_shared_bytes_per_block > 0);
    CHECK(a.min_ptx_version_x10 >= 80);
  }
  CHECK(arch_facts("sm_90") == nullptr);  // the plain target is not a task architecture
  const ArchFacts *hopper = arch_facts("sm_90a");
  REQUIRE(hopper != nullptr);
  REQUIRE(hopper->peaks.has_value());
  CHECK(hopper->peaks->bf16_flops_per_s ==
        doctest::Approx(1070.5e12).epsilon(1e-3));  // 4096 x 132 x 1.98 GHz
  CHECK(hopper->peaks->dram_bytes_per_s == doctest::Approx(4.8e12));
  CHECK(hopper->peaks->sm_count == 132);
  CHECK(hopper->max_shared_bytes_per_block == 232448);

  // The loader's list of known architectures is the table's.
  const std::string text =
      ptxbench::test::replaced(ptxbench::test::read_required(default_task_dir() / "gemm_n7168_k5120.json"),
                               "\"sm_90a\"", "\"sm_91z\"");
  ptxbench::test::ScratchDir dir("ptxbench-arch");
  { std::ofstream(dir.path() / "x.json") << text; }
  auto task = load_task_file(dir.path() / "x.json");
  REQUIRE_FALSE(task.has_value());
  CHECK_MESSAGE(
      task.error().find("unknown architecture 'sm_91z' (known: sm_90a, sm_100a, sm_103a, sm_120a)") !=
          std::string::npos,
      task.error());
}

TEST_CASE("hidden workloads and ranges: loaded, checked against the ranges, round-tripped") {
  auto loaded = load_task_dir(kTaskDir);
  REQUIRE(loaded.has_value());
  // The core tasks keep their headline shape and gain hidden ones within the stated ranges.
  const Task &gemm = require_task(*loaded, "gemm_n7168_k5120");
  REQUIRE(gemm.workloads.size() == 1);
  REQUIRE(gemm.hidden_workloads.size() >= 2);
  bool beyond_headline = false, off_tile = false;
  for (const auto &w : gemm.hidden_workloads) {
    const std::int64_t m = w.symbols.at("M");
    CHECK(gemm.ranges.at("M").contains(m));
    beyond_headline |= m > gemm.workloads[0].symbols.at("M");  // a grid written for M=8192 leaves rows out
    off_tile |= m % 64 != 0;                                   // an edge tile
  }
  CHECK(beyond_headline);
  CHECK(off_tile);
  for (const char *id : {"mha_fwd_d128", "mha_fwd_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal"}) {
    const Task &t = require_task(*loaded, id);
    CAPTURE(id);
    REQUIRE_FALSE(t.hidden_workloads.empty());
    bool s_off_tile = false, smaller_heads = false;
    for (const auto &w : t.hidden_workloads) {
      s_off_tile |= w.symbols.at("S") % 128 != 0;
      smaller_heads |= w.symbols.at("B") * w.symbols.at("H") <
                       t.workloads[0].symbols.at("B") * t.workloads[0].symbols.at("H");
      CHECK(w.symbols.at("D") == 128);
    }
    CHECK(s_off_tile);
    CHECK(smaller_heads);
    CHECK(t.find_workload(t.hidden_workloads[0].name) == &t.hidden_workloads[0]);  // one name space
  }

  // The loader refuses what the prompt could not promise.
  ptxbench::test::ScratchDir dir("ptxbench-hidden-tasks");
  const std::string base = ptxbench::test::read_required(kTaskDir / "gemm_n7168_k5120.json");
  struct Bad {
    std::string from, to, error;
  };
  const Bad bad[] = {
      {"\"max\": 16384", "\"max\": 8000",
       "ranges.M: workload 'M=8192' sets M = 8192, outside the stated range"},
      {"\"max\": 16384", "\"max\": 0", "ranges.M.max: 0 is not positive"},
      {"\"min\": 1,\n      \"max\": 16384", "\"min\": 20000,\n      \"max\": 16384",
       "ranges.M: min 20000 is above max 16384"},
      {"\"name\": \"M=77\"", "\"name\": \"M=8192\"", "duplicate workload name 'M=8192'"},
      {"\"ranges\": {", "\"ranges\": {\n    \"Q\": {\"min\": 1, \"max\": 2},",
       "ranges.Q: unknown symbol 'Q'"},
      {"\"max\": 16384", "\"max\": 16384, \"step\": 2", "ranges.M.step: unknown field"},
  };
  for (const Bad &b : bad) {
    CAPTURE(b.to);
    const fs::path file = dir.path() / "gemm_n7168_k5120.json";
    std::ofstream(file) << ptxbench::test::replaced(base, b.from, b.to);
    auto t = load_task_file(file);
    REQUIRE_FALSE(t.has_value());
    CHECK_MESSAGE(t.error().find(b.error) != std::string::npos, "got: " << t.error());
  }
  // Hidden workloads without ranges: the prompt would have nothing to state.
  nlohmann::json no_ranges = nlohmann::json::parse(base);
  no_ranges.erase("ranges");
  const fs::path file = dir.path() / "gemm_n7168_k5120.json";
  std::ofstream(file) << no_ranges.dump(2);
  auto t = load_task_file(file);
  REQUIRE_FALSE(t.has_value());
  CHECK(t.error().find("hidden_workloads: needs 'ranges'") != std::string::npos);
  // A multiple_of the workloads break.
  std::ofstream(file) << ptxbench::test::replaced(base, "\"max\": 16384",
                                                  "\"max\": 16384, \"multiple_of\": 8");
  auto m8 = load_task_file(file);
  REQUIRE_FALSE(m8.has_value());
  CHECK(m8.error().find("workload 'M=77' sets M = 77, outside the stated range") != std::string::npos);
}
