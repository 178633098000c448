// FlashInfer-Trace interchange (tasks/flashinfer.hpp): what maps onto a task family and how, what is refused
// and with which message, export -> import round trips, and the command line (`tasks import|export`, then
// `prompt show` and the CPU stages of `eval` on an imported task).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/support.hpp"
#include "tasks/flashinfer.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/subprocess.hpp"

namespace fs = std::filesystem;
using namespace ptxbench;
using nlohmann::json;
namespace fi = tasks::flashinfer;

namespace {

const fs::path kBinary = fs::path(PTXBENCH_BINARY_DIR) / "apps" / "ptxbench";
const fs::path kSource = fs::path(PTXBENCH_SOURCE_DIR);
const fs::path kData = fs::path(PTXBENCH_TEST_DATA) / "flashinfer";

json definition(const std::string &stem) {
  return json::parse(test::read_required(kData / (stem + ".json")));
}

std::vector<json> workloads(const std::string &stem) {
  auto lines = fi::parse_workloads_jsonl(test::read_required(kData / (stem + ".jsonl")), stem + ".jsonl");
  REQUIRE_MESSAGE(lines, lines.error());
  return *lines;
}

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// Imports and requires success.
json import_ok(const json &def, const std::vector<json> &lines, const tasks::Task &templ,
               const fi::ImportOptions &options = {}) {
  auto r = fi::import_definition(def, lines, templ, options);
  REQUIRE_MESSAGE(r, r.error());
  return r->task;
}

/// The refusal message of an import that must fail.
std::string refusal(const json &def, const std::vector<json> &lines, const tasks::Task &templ,
                    const fi::ImportOptions &options = {}) {
  auto r = fi::import_definition(def, lines, templ, options);
  REQUIRE_FALSE_MESSAGE(r, "imported, but should have been refused");
  return r.error();
}

std::string classify_error(const json &def) {
  auto m = fi::classify(def);
  REQUIRE_FALSE_MESSAGE(m, "classified, but should have been refused");
  return m.error();
}

/// A task document loaded as the loader sees it (the file's stem is its id).
tasks::Task load(const json &task, const fs::path &dir) {
  const fs::path file = dir / (task["id"].get<std::string>() + ".json");
  REQUIRE(util::write_file_atomic(file, task.dump(2)));
  auto t = tasks::load_task_file(file);
  REQUIRE_MESSAGE(t, t.error());
  return *t;
}

json symbols(std::initializer_list<std::pair<const char *, std::int64_t>> values) {
  json j = json::object();
  for (const auto &[k, v] : values) j[k] = v;
  return j;
}

/// What a task computes and how it is judged: every field but prose, title, id and tags.
void check_equivalent(const tasks::Task &a, const tasks::Task &b) {
  CHECK(a.family == b.family);
  CHECK(a.arch == b.arch);
  CHECK(a.causal == b.causal);
  CHECK(a.reference == b.reference);
  CHECK(a.symbols == b.symbols);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].dtype == b.tensors[i].dtype);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
    CHECK(a.tensors[i].role == b.tensors[i].role);
    CHECK(a.tensors[i].distribution == b.tensors[i].distribution);
  }
  REQUIRE(a.scalars.size() == b.scalars.size());
  for (std::size_t i = 0; i < a.scalars.size(); ++i) {
    CHECK(a.scalars[i].name == b.scalars[i].name);
    CHECK(a.scalars[i].type == b.scalars[i].type);
    CHECK(a.scalars[i].value == b.scalars[i].value);
  }
  const auto values = [](const std::vector<tasks::Workload> &list) {
    std::vector<util::SymbolTable> out;
    for (const auto &w : list) out.push_back(w.symbols);
    return out;
  };
  CHECK(values(a.workloads) == values(b.workloads));
  CHECK(values(a.hidden_workloads) == values(b.hidden_workloads));
  REQUIRE(a.ranges.size() == b.ranges.size());
  for (const auto &[s, r] : a.ranges) {
    REQUIRE(b.ranges.count(s));
    CHECK(r.min == b.ranges.at(s).min);
    CHECK(r.max == b.ranges.at(s).max);
    CHECK(r.multiple_of == b.ranges.at(s).multiple_of);
  }
  REQUIRE(a.targets.size() == b.targets.size());
  for (std::size_t i = 0; i < a.targets.size(); ++i) {
    CHECK(a.targets[i].ptx_mnemonic == b.targets[i].ptx_mnemonic);
    CHECK(a.targets[i].sass_families == b.targets[i].sass_families);
  }
  REQUIRE(a.tolerances.size() == b.tolerances.size());
  for (const auto &[name, tol] : a.tolerances) {
    CHECK(tol.atol == b.tolerances.at(name).atol);
    CHECK(tol.rtol == b.tolerances.at(name).rtol);
  }
  CHECK(a.flops == b.flops);
  CHECK(a.bytes == b.bytes);
}

struct Outcome {
  int code = -1;
  std::string out, err;
};

Outcome run_cli(const std::vector<std::string> &args, const fs::path &tasks_dir) {
  util::ProcessSpec spec;
  spec.argv = {kBinary.string()};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  for (const char *name : {"PATH", "HOME", "LD_LIBRARY_PATH"})
    if (const char *v = std::getenv(name)) spec.env[name] = v;
  spec.env["PTXBENCH_TASKS"] = tasks_dir.string();
  spec.limits.wall_time = std::chrono::seconds(300);
  auto r = util::run_process(spec);
  REQUIRE_MESSAGE(r, "could not start " << kBinary.string());
  REQUIRE_FALSE(r->timed_out);
  return {r->exit_code, r->stdout_text, r->stderr_text};
}

}  // namespace

TEST_CASE("import: a GEMM definition maps onto the gemm family; the first workload shown, the rest hidden") {
  const tasks::Task &templ = test::repo_task("gemm_n7168_k5120");
  auto mapping = fi::classify(definition("gemm_n4096_k4096_bf16"));
  REQUIRE_MESSAGE(mapping, mapping.error());
  CHECK(mapping->family == tasks::Family::gemm);
  CHECK(fi::template_candidates(*mapping) == std::vector<std::string>{"gemm_n7168_k5120"});

  const json task = import_ok(definition("gemm_n4096_k4096_bf16"), workloads("gemm_n4096_k4096_bf16"), templ);
  CHECK(task["id"] == "fi_gemm_n4096_k4096_bf16");
  CHECK(task["family"] == "gemm");
  CHECK(task["symbols"] == json({"M", "N", "K"}));
  // Const axes are fixed symbols in every workload; the var axis takes the workload lines' values.
  CHECK(task["workloads"] ==
        json::array({{{"name", "M=4096"}, {"symbols", symbols({{"M", 4096}, {"N", 4096}, {"K", 4096}})}}}));
  std::vector<std::int64_t> hidden;
  for (const auto &w : task["hidden_workloads"]) {
    CHECK(w["symbols"]["N"] == 4096);
    CHECK(w["symbols"]["K"] == 4096);
    hidden.push_back(w["symbols"]["M"]);
  }
  CHECK(hidden == std::vector<std::int64_t>{3000, 1000, 8192, 1});
  // The range spans the values; gcd(4096, 3000, 1000, 8192, 1) = 1. Constants get no range.
  CHECK(task["ranges"] == json({{"M", {{"min", 1}, {"max", 8192}, {"multiple_of", 1}}}}));
  // From the template: targets, reference library, tolerances, formulas, arch.
  CHECK(task["reference"] == "cublaslt");
  CHECK(task["arch"] == templ.arch);
  CHECK(task["flops"] == templ.flops);
  CHECK(task["tolerances"]["C"]["rtol"] == templ.tolerances.at("C").rtol);
  CHECK(task["targets"].size() == templ.targets.size());
  CHECK(task["tags"]["template"] == "gemm_n7168_k5120");
  CHECK(task["tags"]["flashinfer_definition"] == "gemm_n4096_k4096_bf16");
  CHECK(task["tags"]["suite"] == "imported");
  CHECK(has(task["description"], "From the FlashInfer-Trace definition 'gemm_n4096_k4096_bf16'"));
  CHECK(has(task["title"], "N=4096 K=4096"));

  test::ScratchDir dir;
  const tasks::Task loaded = load(task, dir.path());
  CHECK(loaded.hidden_workloads.size() == 4);
  CHECK(loaded.ranges.at("M").contains(3000));

  SUBCASE("--shown-workload picks the shown one by index or uuid; --all-shown hides none") {
    fi::ImportOptions by_index;
    by_index.shown = "3";
    const json t3 =
        import_ok(definition("gemm_n4096_k4096_bf16"), workloads("gemm_n4096_k4096_bf16"), templ, by_index);
    CHECK(t3["workloads"][0]["symbols"]["M"] == 8192);
    CHECK(t3["hidden_workloads"].size() == 4);
    CHECK(t3["hidden_workloads"][0]["symbols"]["M"] == 4096);
    fi::ImportOptions by_uuid;
    by_uuid.shown = "3f0c5e6a-1b7d-4c2e-9a41-0d5b8e7f6a02";
    const json t2 =
        import_ok(definition("gemm_n4096_k4096_bf16"), workloads("gemm_n4096_k4096_bf16"), templ, by_uuid);
    CHECK(t2["workloads"][0]["symbols"]["M"] == 3000);
    fi::ImportOptions bad;
    bad.shown = "9";
    CHECK(has(refusal(definition("gemm_n4096_k4096_bf16"), workloads("gemm_n4096_k4096_bf16"), templ, bad),
              "shown workload '9': no such index"));
    fi::ImportOptions all;
    all.all_shown = true;
    const json ta =
        import_ok(definition("gemm_n4096_k4096_bf16"), workloads("gemm_n4096_k4096_bf16"), templ, all);
    CHECK(ta["workloads"].size() == 5);
    CHECK_FALSE(ta.contains("hidden_workloads"));
    CHECK(ta["ranges"]["M"]["max"] == 8192);
  }
}

TEST_CASE("import: float16 GEMMs (the public definitions' dtype) and fp8 GEMMs with per-tensor scales") {
  json def = definition("gemm_n4096_k4096_bf16");
  for (const char *t : {"A", "B"}) def["inputs"][t]["dtype"] = "float16";
  def["outputs"]["C"]["dtype"] = "float16";
  const json task = import_ok(def, workloads("gemm_n4096_k4096_bf16"), test::repo_task("gemm_n7168_k5120"));
  for (const auto &t : task["tensors"]) CHECK(t["dtype"] == "f16");
  const std::string description = task["description"];
  CHECK_FALSE(has(description.substr(0, description.find("From the FlashInfer-Trace definition")), "bf16"));
  CHECK(has(task["tolerances"]["C"]["reason"],
            "Tolerances of the PTXBench task gemm_n7168_k5120 (bf16 there; an f16 "
            "output (11 significant bits) is rounded more finely"));
  CHECK(has(task["tolerances"]["C"]["reason"], "figures quoted for its M=8192 N=7168 K=5120"));
  CHECK(has(task["title"], "f16 GEMM"));

  json fp8 = definition("gemm_n4096_k4096_bf16");
  for (const char *t : {"A", "B"}) fp8["inputs"][t]["dtype"] = "float8_e4m3fn";
  auto m = fi::classify(fp8);
  REQUIRE_FALSE(m);
  CHECK(has(m.error(), "scale_a and scale_b"));
  fp8["inputs"]["scale_a"] = {{"shape", nullptr}, {"dtype", "float32"}};
  fp8["inputs"]["scale_b"] = {{"shape", nullptr}, {"dtype", "float32"}};
  auto m8 = fi::classify(fp8);
  REQUIRE_MESSAGE(m8, m8.error());
  CHECK(fi::template_candidates(*m8) == std::vector<std::string>{"gemm_fp8_n7168_k5120"});
  std::vector<json> lines = workloads("gemm_n4096_k4096_bf16");
  for (auto &l : lines) {
    l["workload"]["inputs"]["scale_a"] = {{"type", "scalar"}, {"value", 0.5}};
    l["workload"]["inputs"]["scale_b"] = {{"type", "scalar"}, {"value", 0.125}};
  }
  const json t8 = import_ok(fp8, lines, test::repo_task("gemm_fp8_n7168_k5120"));
  CHECK(t8["scalars"][0]["value"] == 0.5);
  CHECK(t8["scalars"][1]["value"] == 0.125);
  // A 16-bit definition with the fp8 template is a usage mistake, named.
  CHECK(has(refusal(definition("gemm_n4096_k4096_bf16"), workloads("gemm_n4096_k4096_bf16"),
                    test::repo_task("gemm_fp8_n7168_k5120")),
            "the template task gemm_fp8_n7168_k5120 has e4m3 inputs"));
}

TEST_CASE("import: a dense attention prefill maps onto attention_fwd; constraints become the stated ranges") {
  const json def = definition("mha_dense_prefill_h16_d128");
  auto mapping = fi::classify(def);
  REQUIRE_MESSAGE(mapping, mapping.error());
  CHECK(mapping->family == tasks::Family::attention_fwd);
  CHECK_FALSE(mapping->causal);
  CHECK(mapping->head_dim == 128);
  const tasks::Task &templ = test::repo_task("mha_fwd_d128");
  const json task = import_ok(def, workloads("mha_dense_prefill_h16_d128"), templ);
  CHECK(task["family"] == "attention_fwd");
  CHECK(task["workloads"][0]["symbols"] == symbols({{"B", 2}, {"H", 16}, {"S", 4096}, {"D", 128}}));
  CHECK(task["workloads"][0]["name"] == "B=2,S=4096");
  CHECK(task["hidden_workloads"].size() == 3);
  // seq_len: the constraints' 64..8192, multiple of 64 (not the workloads' 576..4096); batch_size: spanned.
  CHECK(task["ranges"]["S"] == json({{"min", 64}, {"max", 8192}, {"multiple_of", 64}}));
  CHECK(task["ranges"]["B"] == json({{"min", 1}, {"max", 8}, {"multiple_of", 1}}));
  CHECK_FALSE(task["ranges"].contains("H"));
  CHECK(std::abs(task["scalars"][0]["value"].get<double>() - 1 / std::sqrt(128.0)) < 1e-12);
  CHECK(has(task["description"], "equal to 1/sqrt(D)"));
  CHECK(task["reference"] == "cudnn_sdpa_fwd");
  for (const auto &t : task["tensors"]) CHECK(t["dtype"] == (t["name"] == "LSE" ? "f32" : "bf16"));
  test::ScratchDir dir;
  load(task, dir.path());

  SUBCASE("a scale other than 1/sqrt(head_dim) is stated as its value") {
    std::vector<json> lines = workloads("mha_dense_prefill_h16_d128");
    for (auto &l : lines) l["workload"]["inputs"]["sm_scale"]["value"] = 0.125;
    const json t = import_ok(def, lines, templ);
    CHECK(t["scalars"][0]["value"] == 0.125);
    CHECK(has(t["description"], "equal to 0.125"));
    CHECK_FALSE(has(t["description"], "1/sqrt(D)"));
    lines[1]["workload"]["inputs"]["sm_scale"]["value"] = 0.25;
    CHECK(has(refusal(def, lines, templ), "different values (0.125 and 0.25)"));
  }
  SUBCASE("causal in the name takes the causal template") {
    json causal = def;
    causal["name"] = "mha_dense_prefill_causal_h16_d128";
    auto m = fi::classify(causal);
    REQUIRE(m);
    CHECK(m->causal);
    CHECK(fi::template_candidates(*m) == std::vector<std::string>{"mha_fwd_d128_causal"});
    CHECK(has(refusal(causal, {}, templ),
              "maps onto attention_fwd (causal), but the template task mha_fwd_d128"));
  }
}

TEST_CASE("import refuses what does not map, naming the field and the reason") {
  const tasks::Task &attention = test::repo_task("mha_fwd_d128");
  const tasks::Task &gemm = test::repo_task("gemm_n7168_k5120");

  // The committed refusal sample: a paged, grouped-query, base-2-LSE prefill.
  const std::string paged = classify_error(definition("gqa_paged_prefill_causal_h32_kv8_d128_ps16"));
  CHECK(has(paged, "definition 'gqa_paged_prefill_causal_h32_kv8_d128_ps16' (op_type 'gqa_paged')"));
  CHECK(has(paged, "inputs.k_cache [num_pages, page_size, num_kv_heads, head_dim] is a paged KV cache"));
  CHECK(has(paged, "grouped-query attention (ratio 4)"));
  CHECK(has(paged, "base-2 log-sum-exp"));
  CHECK(has(refusal(definition("gqa_paged_prefill_causal_h32_kv8_d128_ps16"), {}, attention),
            "paged KV cache"));

  json ragged = definition("gqa_paged_prefill_causal_h32_kv8_d128_ps16");
  ragged["op_type"] = "gqa_ragged";
  ragged["inputs"].erase("k_cache");
  ragged["inputs"].erase("v_cache");
  ragged["inputs"].erase("kv_indices");
  ragged["inputs"]["k"] = {{"shape", {"total_kv", "num_kv_heads", "head_dim"}}, {"dtype", "bfloat16"}};
  ragged["axes"]["total_kv"] = {{"type", "var"}};
  CHECK(has(classify_error(ragged), "inputs.qo_indptr/kv_indptr describe a ragged batch"));

  const json mha = definition("mha_dense_prefill_h16_d128");
  {
    json gqa = mha;
    gqa["axes"]["num_kv_heads"] = {{"type", "const"}, {"value", 4}};
    for (const char *t : {"k", "v"}) gqa["inputs"][t]["shape"][1] = "num_kv_heads";
    CHECK(has(classify_error(gqa),
              "inputs.k.shape [batch_size, num_kv_heads, seq_len, head_dim]: its head axis "
              "'num_kv_heads' differs from q's 'num_heads' (16 / 4 = 4): grouped-query"));
  }
  {
    json f16 = mha;
    for (const char *t : {"q", "k", "v"}) f16["inputs"][t]["dtype"] = "float16";
    CHECK(has(classify_error(f16), "q.dtype 'float16': the PTXBench attention reference runs bfloat16 only"));
  }
  {
    json nhd = mha;
    for (const char *t : {"q", "k", "v"})
      nhd["inputs"][t]["shape"] = {"batch_size", "seq_len", "num_heads", "head_dim"};
    nhd["outputs"]["output"]["shape"] = {"batch_size", "seq_len", "num_heads", "head_dim"};
    CHECK(has(classify_error(nhd), "sequence-major [B, S, H, D] (NHD)"));
  }
  {
    json d96 = mha;
    d96["axes"]["head_dim"]["value"] = 96;
    CHECK(has(classify_error(d96),
              "axes.head_dim: head_dim 96; the PTXBench attention reference supports 64, 128"));
  }
  {
    json base2 = mha;
    base2["outputs"]["lse"]["description"] = "The 2-based log-sum-exp of attention logits.";
    CHECK(
        has(classify_error(base2), "base-2 log-sum-exp; PTXBench attention tasks check the natural-log LSE"));
  }
  {
    json masked = mha;
    masked["inputs"]["mask"] = {{"shape", {"seq_len", "seq_len"}}, {"dtype", "bool"}};
    CHECK(has(classify_error(masked), "inputs.mask: the PTXBench attention forward takes no such input"));
  }
  const json g = definition("gemm_n4096_k4096_bf16");
  {
    json nn = g;
    nn["inputs"]["B"]["shape"] = {"K", "N"};
    CHECK(
        has(classify_error(nn), "inputs.B.shape [K, N]: B is [K, N]; PTXBench GEMM tasks compute C = A·Bᵀ"));
  }
  {
    json block = g;
    for (const char *t : {"A", "B"}) block["inputs"][t]["dtype"] = "float8_e4m3fn";
    block["axes"]["K_group"] = {{"type", "const"}, {"value", 32}};
    block["inputs"]["A_scale"] = {{"shape", {"M", "K_group"}}, {"dtype", "float32"}};
    CHECK(has(classify_error(block),
              "inputs.A_scale [M, K_group]: PTXBench GEMM tasks take A[M,K] and B[N,K] only"));
  }
  {
    json fp4 = g;
    for (const char *t : {"A", "B"}) fp4["inputs"][t]["dtype"] = "float4_e2m1";
    CHECK(has(classify_error(fp4), "inputs.A.dtype 'float4_e2m1'"));
  }
  {
    json rms = g;
    rms["op_type"] = "rmsnorm";
    CHECK(has(classify_error(rms), "op_type 'rmsnorm'): no PTXBench task family computes it"));
  }
  {
    json no_ref = g;
    no_ref.erase("reference");
    CHECK(has(classify_error(no_ref), "reference: required"));
  }

  SUBCASE("workload lines: recorded data, missing axes, another definition, duplicates, constraints") {
    std::vector<json> lines = workloads("gemm_n4096_k4096_bf16");
    std::vector<json> recorded = lines;
    recorded[1]["workload"]["inputs"]["A"] = {
        {"type", "safetensors"}, {"path", "a.safetensors"}, {"tensor_key", "A"}};
    CHECK(has(refusal(g, recorded, gemm),
              "workloads[1] (uuid 3f0c5e6a-1b7d-4c2e-9a41-0d5b8e7f6a02): "
              "workload.inputs.A: recorded tensor data ('safetensors')"));
    fi::ImportOptions ignore;
    ignore.ignore_input_data = true;
    import_ok(g, recorded, gemm, ignore);

    std::vector<json> missing = lines;
    missing[2]["workload"]["axes"].erase("M");
    CHECK(has(refusal(g, missing, gemm),
              "workloads[2] (uuid 3f0c5e6a-1b7d-4c2e-9a41-0d5b8e7f6a03): workload.axes: "
              "missing the variable axis 'M'"));
    std::vector<json> other = lines;
    other[0]["definition"] = "gemm_n1_k1";
    CHECK(has(refusal(g, other, gemm), "workloads[0]: definition: 'gemm_n1_k1' is not this definition"));
    std::vector<json> wrong_const = lines;
    wrong_const[0]["workload"]["axes"]["N"] = 2048;
    CHECK(has(refusal(g, wrong_const, gemm), "workload.axes.N: 2048 differs from the constant 4096"));
    CHECK(has(refusal(g, {}, gemm), "axes M are variable: give the workloads"));

    std::vector<json> repeated = lines;
    repeated.push_back(lines[1]);
    repeated.back()["workload"]["uuid"] = "another";
    auto r = fi::import_definition(g, repeated, gemm);
    REQUIRE_MESSAGE(r, r.error());
    CHECK(r->task["hidden_workloads"].size() == 4);
    REQUIRE(r->notes.size() == 1);
    CHECK(has(r->notes[0], "1 of 6 workloads repeat an earlier one's axis values"));

    json stated = g;
    stated["constraints"] = {"M % 8 == 0"};
    CHECK(has(refusal(stated, lines, gemm),
              "workloads[4] (uuid 3f0c5e6a-1b7d-4c2e-9a41-0d5b8e7f6a05): M = 1 lies "
              "outside the constraints' range 1..8192 (multiple of 8)"));
    stated["constraints"] = {"M * 2 < N"};
    CHECK(has(refusal(stated, lines, gemm),
              "constraints[0]: 'M * 2 < N' cannot be stated as a PTXBench range"));
  }
}

TEST_CASE("round trip: the committed samples import -> export -> import to the same task") {
  test::ScratchDir dir;
  struct Sample {
    const char *stem, *templ;
  };
  for (const Sample s : {Sample{"gemm_n4096_k4096_bf16", "gemm_n7168_k5120"},
                         Sample{"mha_dense_prefill_h16_d128", "mha_fwd_d128"}}) {
    CAPTURE(s.stem);
    const tasks::Task &templ = test::repo_task(s.templ);
    const json first = import_ok(definition(s.stem), workloads(s.stem), templ);
    const tasks::Task task = load(first, dir.path());
    auto exported = fi::export_task(task);
    REQUIRE_MESSAGE(exported, exported.error());
    const json def = json::parse(exported->definition.dump());
    // The schema's required fields, and the definition's own name and description back.
    for (const char *key : {"name", "op_type", "axes", "inputs", "outputs", "reference"})
      CHECK(def.contains(key));
    CHECK(def["name"] == s.stem);
    CHECK(def["description"] == definition(s.stem)["description"]);
    for (const auto &[name, axis] : definition(s.stem)["axes"].items()) {
      CHECK(def["axes"].contains(name));
      CHECK(def["axes"][name]["type"] == axis["type"]);
      if (axis["type"] == "const") CHECK(def["axes"][name]["value"] == axis["value"]);
    }
    CHECK(has(def["reference"], "def run("));
    CHECK(exported->workloads.size() == workloads(s.stem).size());
    const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    for (const auto &w : exported->workloads) {
      CHECK(w["definition"] == s.stem);
      CHECK(std::regex_match(w["workload"]["uuid"].get<std::string>(), uuid));
      CHECK(w["solution"].is_null());
    }
    auto lines = fi::parse_workloads_jsonl(exported->workloads_jsonl(), "exported.jsonl");
    REQUIRE(lines);
    const json second = import_ok(def, *lines, templ);
    CHECK(second == first);
  }
}

TEST_CASE("round trip: the core tasks export -> import to an equivalent task (hidden and ranges included)") {
  test::ScratchDir dir;
  for (const char *id : {"gemm_n7168_k5120", "gemm_n4096_k4096", "gemm_fp8_n7168_k5120", "mha_fwd_d128",
                         "mha_fwd_d128_causal", "mha_fwd_d64", "mha_bwd_d128", "mha_bwd_d128_causal"}) {
    CAPTURE(id);
    tasks::Task original = test::repo_task(id);
    // With hidden workloads and ranges (as item 1 of issue 32 gives the core tasks), they must survive too.
    if (original.hidden_workloads.empty()) {
      tasks::Workload extra = original.workloads.front();
      const std::string var = original.family == tasks::Family::gemm ? "M" : "S";
      extra.symbols[var] = var == "M" ? 8000 : 1024;
      extra.name = var + "=" + std::to_string(extra.symbols[var]);
      original.hidden_workloads.push_back(extra);
      original.ranges[var] = {1, 16384, var == "M" ? 1 : 64};
      json j = original.to_json();
      j["id"] = std::string(id);
      original = load(j, dir.path());
    }
    auto exported = fi::export_task(original);
    REQUIRE_MESSAGE(exported, exported.error());
    const json def = json::parse(exported->definition.dump());
    auto mapping = fi::classify(def);
    REQUIRE_MESSAGE(mapping, mapping.error());
    const tasks::Task &templ = test::repo_task(fi::template_candidates(*mapping).front());
    auto lines = fi::parse_workloads_jsonl(exported->workloads_jsonl(), "exported.jsonl");
    REQUIRE(lines);
    fi::ImportOptions options;
    options.id = id;
    const json back = import_ok(def, *lines, templ, options);
    const tasks::Task reread = load(back, dir.path());
    check_equivalent(original, reread);
  }
}

TEST_CASE("export refuses what the schema cannot say") {
  tasks::Task t = test::repo_task("gemm_n7168_k5120");
  t.tensors[0].shape = {"M", "2*K"};
  auto r = fi::export_task(t);
  REQUIRE_FALSE(r);
  CHECK(has(r.error(), "tensors[0].shape[1] '2*K' is an expression"));
  tasks::Task s = test::repo_task("mha_fwd_d128");
  s.scalars[0].type = "f64";
  auto r2 = fi::export_task(s);
  REQUIRE_FALSE(r2);
  CHECK(has(r2.error(), "scalars[0] 'softmax_scale' of type f64"));
}

TEST_CASE("command line: tasks import into a tasks folder, prompt show and eval's CPU stages on it; export") {
  test::ScratchDir dir;
  const fs::path tasks_dir = dir.path() / "tasks";
  fs::create_directories(tasks_dir);
  const fs::path repo_tasks = kSource / "tasks";
  const Outcome imported = run_cli({"tasks", "import", (kData / "gemm_n4096_k4096_bf16.json").string(),
                                    "--workloads", (kData / "gemm_n4096_k4096_bf16.jsonl").string(), "-o",
                                    tasks_dir.string() + "/", "--tasks-dir", repo_tasks.string()},
                                   repo_tasks);
  INFO(imported.err);
  REQUIRE(imported.code == 0);
  CHECK(has(imported.err, "1 shown, 4 hidden workloads"));
  const fs::path file = tasks_dir / "fi_gemm_n4096_k4096_bf16.json";
  REQUIRE(fs::exists(file));
  auto loaded = tasks::load_task_file(file);
  REQUIRE_MESSAGE(loaded, loaded.error());

  const Outcome listed = run_cli({"tasks", "list"}, tasks_dir);
  CHECK(listed.code == 0);
  CHECK(has(listed.out, "fi_gemm_n4096_k4096_bf16"));
  const Outcome prompt = run_cli({"prompt", "show", "--task", "fi_gemm_n4096_k4096_bf16"}, tasks_dir);
  INFO(prompt.err);
  CHECK(prompt.code == 0);
  CHECK(has(prompt.out, "FlashInfer-Trace gemm_n4096_k4096_bf16"));

  // An id through the output file's name; a refused definition exits 2 with the reason.
  const Outcome named = run_cli({"tasks", "import", (kData / "mha_dense_prefill_h16_d128.json").string(),
                                 "--workloads", (kData / "mha_dense_prefill_h16_d128.jsonl").string(), "-o",
                                 (tasks_dir / "attn_sample.json").string(), "--shown-workload", "1"},
                                repo_tasks);
  INFO(named.err);
  CHECK(named.code == 0);
  auto attn = tasks::load_task_file(tasks_dir / "attn_sample.json");
  REQUIRE_MESSAGE(attn, attn.error());
  CHECK(attn->workloads.front().symbols.at("S") == 1024);
  const Outcome refused = run_cli(
      {"tasks", "import", (kData / "gqa_paged_prefill_causal_h32_kv8_d128_ps16.json").string()}, repo_tasks);
  CHECK(refused.code == 2);
  CHECK(has(refused.err, "cannot import"));
  CHECK(has(refused.err, "paged KV cache"));

  const Outcome exported = run_cli(
      {"tasks", "export", "fi_gemm_n4096_k4096_bf16", "-o", (dir.path() / "def.json").string()}, tasks_dir);
  INFO(exported.err);
  CHECK(exported.code == 0);
  const json def = json::parse(test::read_required(dir.path() / "def.json"));
  CHECK(def["name"] == "gemm_n4096_k4096_bf16");
  const std::string jsonl = test::read_required(dir.path() / "def.jsonl");
  CHECK(std::count(jsonl.begin(), jsonl.end(), '\n') == 5);
  const Outcome help = run_cli({"tasks", "import", "--help"}, repo_tasks);
  CHECK(help.code == 0);
  CHECK(has(help.out, "--shown-workload"));
}

TEST_CASE(
    "command line: the committed GEMM solution of the same shapes passes eval's CPU stages on an import") {
  test::ScratchDir dir;
  const fs::path repo_tasks = kSource / "tasks";
  const Outcome imported =
      run_cli({"tasks", "import", (kData / "gemm_n4096_k4096_bf16.json").string(), "--workloads",
               (kData / "gemm_n4096_k4096_bf16.jsonl").string(), "-o", dir.path().string()},
              repo_tasks);
  INFO(imported.err);
  REQUIRE(imported.code == 0);
  const Outcome eval =
      run_cli({"eval", "--tasks-dir", dir.path().string(), "--task", "fi_gemm_n4096_k4096_bf16", "--response",
               (repo_tasks / "solutions/gemm_n4096_k4096/simple/response.md").string(), "--json", "--no-gpu"},
              dir.path());
  INFO(eval.err);
  REQUIRE(eval.code == 0);
  const json verdict = json::parse(eval.out);
  CHECK(verdict["task_id"] == "fi_gemm_n4096_k4096_bf16");
  for (const char *stage : {"parse", "static", "compile"}) CHECK(verdict["stages"][stage]["status"] == "ok");
}
