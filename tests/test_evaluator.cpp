// Evaluator CPU stages: SASS listings, response parser, PTX lexer/parser, static checks, real ptxas runs,
// the CPU pipeline. The parse stage (response parser, launch manifest): test_evaluator_parse.cpp. PTX line
// info and the sanitizer parser: test_evaluator_lineinfo.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "evaluator/compile.hpp"
#include "evaluator/detail/kernel_printf.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/ptx.hpp"
#include "evaluator/sass.hpp"
#include "evaluator/static_checks.hpp"
#include "support/support.hpp"
#include "tasks/arch.hpp"
#include "util/files.hpp"

#include "evaluator_fixture.hpp"

using namespace ptxbench;
using namespace ptxbench::evaluator;
namespace fs = std::filesystem;

namespace {

using test::cpu_settings;
using test::replaced;
using test::evaluator_fixture::gemm_task;
using test::evaluator_fixture::kGoodManifest;
using test::evaluator_fixture::manifest_error;
using test::evaluator_fixture::manifest_with;

using test::evaluator_fixture::data_file;

// A PTX module that keeps ptxas busy for minutes: 60k FMAs over 600 live registers.
std::string slow_ptx() {
  std::string p =
      ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry slow(.param .u64 out)\n{\n";
  p += ".reg .f32 %f<602>;\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [out];\n";
  for (int i = 0; i < 600; ++i) p += "mov.f32 %f" + std::to_string(i) + ", 0f3F800000;\n";
  std::uint32_t x = 1;
  auto next = [&x] { return (x = x * 1664525u + 1013904223u) >> 8; };
  for (int k = 0; k < 60000; ++k) {
    auto a = std::to_string(next() % 600), b = std::to_string(next() % 600), c = std::to_string(next() % 600);
    p += "fma.rn.f32 %f" + a + ", %f" + b + ", %f" + c + ", %f" + a + ";\n";
  }
  for (int i = 0; i < 600; ++i)
    p += "st.global.f32 [%rd1+" + std::to_string(4 * i) + "], %f" + std::to_string(i) + ";\n";
  return p + "ret;\n}\n";
}
}  // namespace

TEST_CASE("sass: cuobjdump and nvdisasm listings parse to the same instructions") {
  SassListing a = parse_sass_listing(data_file("gemm_tma_wgmma.cuobjdump.sass"));
  SassListing b = parse_sass_listing(data_file("gemm_tma_wgmma.nvdisasm.sass"));
  CHECK(a.arch == "sm_90a");
  CHECK(b.arch == "sm_90a");
  REQUIRE(a.instructions.size() > 20);
  REQUIRE(a.instructions.size() == b.instructions.size());
  for (std::size_t i = 0; i < a.instructions.size(); ++i) {
    CHECK(a.instructions[i].offset == b.instructions[i].offset);
    CHECK(a.instructions[i].opcode == b.instructions[i].opcode);
    CHECK(a.instructions[i].predicate == b.instructions[i].predicate);
    CHECK(a.instructions[i].function == b.instructions[i].function);
  }
  CHECK(a.functions() == std::vector<std::string>{"gemm_tma_wgmma"});
  // 16-byte steps from 0.
  CHECK(a.instructions[0].offset == 0);
  CHECK(a.instructions[1].offset == 0x10);
  const SassInstruction *hgmma = a.find("gemm_tma_wgmma", 0x2f0);
  REQUIRE(hgmma != nullptr);
  CHECK(hgmma->opcode == "HGMMA.64x64x16.F32.BF16");
  CHECK(hgmma->family == "HGMMA");
  CHECK(hgmma->predicate.empty());
  const SassInstruction *branch = a.find("gemm_tma_wgmma", 0x260);
  REQUIRE(branch != nullptr);
  CHECK(branch->predicate == "@!P0");
  CHECK(branch->family == "BRA");
  auto counts = a.family_counts();
  CHECK(counts["HGMMA"] == 1);
  CHECK(counts["UTMALDG"] == 1);
  CHECK_FALSE(counts.contains("0x000fe20000000800"));  // encoding lines are not instructions
}

TEST_CASE("sass: family and targets") {
  CHECK(sass_family("HGMMA.64x128x16.F32.BF16") == "HGMMA");
  CHECK(sass_family("EXIT") == "EXIT");
  SassListing l = parse_sass_listing(
      "\tcode for sm_90a\n\t\tFunction : k\n        /*0000*/  @P1 UTMALDG.2D [UR8], [UR4] ;  /* 0x0 */\n"
      "                                   /* 0x000fe20000000800 */\n        /*0010*/   EXIT ;\n");
  REQUIRE(l.instructions.size() == 2);
  CHECK(l.instructions[0].predicate == "@P1");
  std::vector<tasks::TargetInstruction> targets{{"wgmma", "wgmma.mma_async", {"HGMMA", "QGMMA"}},
                                                {"tma_load", "cp.async.bulk.tensor", {"UTMALDG"}}};
  auto j = targets_in_sass(l, targets);
  CHECK(j["wgmma"] == false);
  CHECK(j["tma_load"] == true);
}

TEST_CASE("sass: disassembling a real cubin when a disassembler exists") {
  auto dis = find_disassembler();
  // A missing tool fails the case (scripts/install_deps.sh installs nvdisasm) rather than passing it unrun.
  REQUIRE_MESSAGE(dis, "no cuobjdump/nvdisasm found: install one (scripts/install_deps.sh)");
  util::TempDir dir("ptxbench-test");
  fs::path ptx = fs::path(PTXBENCH_TEST_DATA) / "evaluator" / "gemm_tma_wgmma.ptx";
  util::ProcessSpec spec;
  spec.argv = {"/usr/local/cuda/bin/ptxas", "-arch=sm_90a", ptx.string(), "-o",
               (dir.path() / "k.cubin").string()};
  spec.env = util::scrubbed_environment(dir.path().string());
  auto r = util::run_process(spec);
  REQUIRE(r.has_value());
  REQUIRE_MESSAGE(r->ok(), r->stderr_text);
  auto text = disassemble_cubin(*dis, dir.path() / "k.cubin", {});
  REQUIRE_MESSAGE(text.has_value(), text.error());
  SassListing l = parse_sass_listing(*text);
  CHECK(l.family_counts()["HGMMA"] == 1);
  CHECK(l.family_counts()["UTMALDG"] == 1);
}

// ---------------------------------------------------------------- PTX lexer

TEST_CASE("ptx lexer: comments and strings are not code") {
  const char *src = R"(.version 8.0
.target sm_90a
// wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 in a line comment
/* cp.async.bulk.tensor.2d in a
   block comment */
.file 1 "wgmma.mma_async.cu"
.visible .entry k(.param .u64 p)
{
  ret; // mov.u32 here is a comment too
}
)";
  auto m = parse_ptx(src);
  REQUIRE_MESSAGE(m.has_value(), m.error().text());
  REQUIRE(m->instructions.size() == 1);
  CHECK(m->instructions[0].mnemonic == "ret");
  CHECK(m->instructions[0].line == 9);
  CHECK(m->instructions_with_prefix("wgmma.mma_async").empty());
  CHECK(m->instructions_with_prefix("cp.async.bulk.tensor").empty());
}

TEST_CASE("ptx lexer: tokens") {
  auto toks = lex_ptx(
      "mov.f32 %f1, 0f3F800000; mov.f64 %fd1, 0d3FF0000000000000;\n"
      "@!%p1 bra $L__BB0_2; .shared::cta {%r1, %r2} %tid.x 1.5e-3 0x1F \"s\\\"q\"");
  REQUIRE_MESSAGE(toks.has_value(), toks.error().text());
  std::vector<std::string> texts;
  for (const auto &t : *toks) texts.push_back(t.text);
  CHECK(texts == std::vector<std::string>{"mov.f32",
                                          "%f1",
                                          ",",
                                          "0f3F800000",
                                          ";",
                                          "mov.f64",
                                          "%fd1",
                                          ",",
                                          "0d3FF0000000000000",
                                          ";",
                                          "@",
                                          "!",
                                          "%p1",
                                          "bra",
                                          "$L__BB0_2",
                                          ";",
                                          ".shared::cta",
                                          "{",
                                          "%r1",
                                          ",",
                                          "%r2",
                                          "}",
                                          "%tid.x",
                                          "1.5e-3",
                                          "0x1F",
                                          "\"s\\\"q\""});
  CHECK((*toks)[3].kind == PtxTokenKind::number);
  CHECK((*toks)[16].kind == PtxTokenKind::directive);
  CHECK((*toks)[25].kind == PtxTokenKind::string);
  CHECK((*toks)[13].line == 2);
  CHECK((*toks)[13].column == 7);
}

TEST_CASE("ptx lexer: errors carry a line") {
  auto a = lex_ptx(".version 8.0\n/* never closed\nret;");
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().text() == "line 2, column 1: unterminated /* comment (no closing */)");
  CHECK(a.error().line == 2);
  auto b = lex_ptx("mov.f32 %f1, 0f3F80;");
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().text().find("hex float '0f3F80' needs exactly 8 hex digits") != std::string::npos);
  auto c = lex_ptx("ret;\n\x01");
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().text().find("line 2, column 1: unexpected byte 0x01") != std::string::npos);
  auto d = lex_ptx(".file 1 \"unterminated\n");
  REQUIRE_FALSE(d.has_value());
  CHECK(d.error().text().find("unterminated string") != std::string::npos);
}

// ---------------------------------------------------------------- PTX parser

TEST_CASE("ptx parser: the nvcc-generated wgmma + TMA kernel") {
  std::string src = data_file("gemm_tma_wgmma.ptx");
  auto m = parse_ptx(src);
  REQUIRE_MESSAGE(m.has_value(), m.error().text());
  CHECK(m->version == "9.0");
  CHECK(m->target == "sm_90a");
  CHECK(m->address_size == 64);
  CHECK(m->entry_names() == std::vector<std::string>{"gemm_tma_wgmma"});
  const PtxFunction *f = m->find_function("gemm_tma_wgmma");
  REQUIRE(f != nullptr);
  CHECK(f->is_entry);
  CHECK(f->is_definition);
  REQUIRE(f->params.size() == 3);
  CHECK(f->params[0].type == ".u64");
  CHECK(f->params[0].array_size == 0);
  CHECK(f->params[1].type == ".b8");
  CHECK(f->params[1].align == 128);
  CHECK(f->params[1].array_size == 128);
  CHECK(f->params[1].size_bytes() == 128);
  CHECK(f->params[1].declaration() == ".param .align 128 .b8 gemm_tma_wgmma_param_1[128]");
  CHECK(f->params[2].type == ".u32");
  CHECK(f->maxntid == std::vector<std::int64_t>{128, 1, 1});
  // Instruction lines point at the real source lines.
  auto wgmma = m->instructions_with_prefix("wgmma.mma_async");
  REQUIRE(wgmma.size() == 1);
  CHECK(wgmma[0]->mnemonic == "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16");
  CHECK(wgmma[0]->base() == "wgmma");
  std::size_t line_start = 0;
  for (int i = 1; i < wgmma[0]->line; ++i) line_start = src.find('\n', line_start) + 1;
  CHECK(src.substr(line_start, src.find('\n', line_start) - line_start).find("wgmma.mma_async") !=
        std::string::npos);
  auto tma = m->instructions_with_prefix("cp.async.bulk.tensor");
  REQUIRE(tma.size() == 1);
  CHECK(tma[0]->mnemonic == "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes");
  CHECK(m->instructions_with_prefix("wgmma").size() == 4);  // fence, mma_async, commit_group, wait_group
  // Predicated branch with its guard.
  bool saw_guard = false;
  for (const auto &inst : m->instructions) saw_guard |= inst.predicate == "@%p1" && inst.mnemonic == "bra";
  CHECK(saw_guard);
  CHECK(m->instruction_lines("gemm_tma_wgmma").size() == m->instructions.size());
  CHECK(m->module_variables.empty());  // the shared arrays were demoted into the function
}

TEST_CASE("ptx parser: module variables, .func, prototypes and errors") {
  const char *src = R"(.version 8.7
.target sm_90a
.address_size 64
.global .align 4 .b32 counter;
.global .align 8 .u64 table[16] = {1, 2, 3};
.shared .align 16 .b8 tile[4096];
.extern .func (.param .b32 r) ext(.param .b32 x);
.func (.param .b32 r) twice(.param .b32 x)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [x];
  add.s32 %r2, %r1, %r1;
  st.param.b32 [r], %r2;
  ret;
}
.visible .entry k(.param .u64 .ptr .global .align 16 out, .param .f32 alpha)
.reqntid 256, 1, 1
.reqnctapercluster 2, 1, 1
{
  { .reg .pred p; LAB: @!p bra LAB; }
  ret;
}
)";
  auto m = parse_ptx(src);
  REQUIRE_MESSAGE(m.has_value(), m.error().text());
  REQUIRE(m->module_variables.size() == 3);
  CHECK(m->module_variables[0].name == "counter");
  CHECK(m->module_variables[0].state_space == ".global");
  CHECK(m->module_variables[1].array_size == 16);
  CHECK(m->module_variables[2].state_space == ".shared");
  CHECK(m->entry_names() == std::vector<std::string>{"k"});
  const PtxFunction *ext = m->find_function("ext");
  REQUIRE(ext != nullptr);
  CHECK_FALSE(ext->is_definition);
  const PtxFunction *k = m->find_function("k");
  REQUIRE(k != nullptr);
  REQUIRE(k->params.size() == 2);
  CHECK(k->params[0].ptr);
  CHECK(k->params[0].state_space == ".global");
  CHECK(k->params[0].align == 16);
  CHECK(k->params[0].type == ".u64");
  CHECK(k->reqntid == std::vector<std::int64_t>{256, 1, 1});
  CHECK(k->reqnctapercluster == std::vector<std::int64_t>{2, 1, 1});
  CHECK(m->instruction_lines("twice") == std::vector<int>{11, 12, 13, 14});
  CHECK(m->instruction_lines("k") == std::vector<int>{20, 21});

  auto unclosed = parse_ptx(".version 8.0\n.target sm_90a\n.visible .entry k()\n{\n ret;\n");
  REQUIRE_FALSE(unclosed.has_value());
  CHECK(unclosed.error().text() == "line 4: the body of 'k' is never closed (no matching '}')");
  CHECK(unclosed.error().line == 4);
  CHECK_FALSE(unclosed.error().column.has_value());
  auto missing_semicolon = parse_ptx(".visible .entry k()\n{\n mov.u32 %r1, 1\n}\n");
  REQUIRE_FALSE(missing_semicolon.has_value());
  CHECK(missing_semicolon.error().text().find("missing ';' after 'mov.u32'") != std::string::npos);
}

TEST_CASE("ptx: normalized hash ignores comments, whitespace and .loc") {
  auto a = parse_ptx(".version 8.0\n.target sm_90a\n.visible .entry k() { ret; }");
  auto b = parse_ptx(
      "// header\n.version   8.0\n\n.target sm_90a /* c */\n.visible .entry k()\n{\n\t.loc 1 2 3\n "
      "ret;\n}\n");
  auto c = parse_ptx(".version 8.0\n.target sm_90a\n.visible .entry k() { exit; }");
  REQUIRE((a && b && c));
  CHECK(a->normalized_hash == b->normalized_hash);
  CHECK(a->normalized_hash != c->normalized_hash);
  CHECK(a->normalized_hash.size() == 16);
}

// ---------------------------------------------------------------- response parser

// ---------------------------------------------------------------- static checks

namespace {
StageResult static_stage(const std::string &ptx, const std::string &manifest_text = kGoodManifest) {
  auto module = parse_ptx(ptx);
  REQUIRE_MESSAGE(module.has_value(), module.error().text());
  auto m = parse_manifest(manifest_text, gemm_task());
  REQUIRE_MESSAGE(m.has_value(), m.error());
  std::vector<LaunchPlan> plans;
  for (const auto &w : gemm_task().workloads) plans.push_back(*resolve_launch(*m, gemm_task(), w));
  return run_static_checks(*module, *m, gemm_task(), plans, 200000).stage;
}
bool has_diagnostic(const StageResult &s, const std::string &severity, const std::string &fragment) {
  for (const auto &d : s.diagnostics)
    if (d.severity == severity && d.text.find(fragment) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("static: the good kernel passes and both targets are present") {
  StageResult s = static_stage(data_file("gemm_tma_wgmma.ptx"));
  CHECK_MESSAGE(s.status == Status::ok, s.summary);
  CHECK(s.figures["targets_in_ptx"]["wgmma"] == true);
  CHECK(s.figures["targets_in_ptx"]["tma_load"] == true);
  CHECK(s.figures["entry"] == "gemm_tma_wgmma");
  CHECK(s.figures["ptx_target"] == "sm_90a");
  CHECK(s.figures["ptx_version"] == "9.0");
  CHECK(s.figures["instruction_count"].get<int>() > 40);
  CHECK(s.figures["module_globals"].empty());
}

TEST_CASE("static: failures explain themselves") {
  const std::string good = data_file("gemm_tma_wgmma.ptx");
  StageResult sm90 = static_stage(replaced(good, ".target sm_90a", ".target sm_90"));
  CHECK(sm90.status == Status::static_error);
  CHECK(has_diagnostic(sm90, "error",
                       "`.target sm_90` lacks the 'a' suffix: this task needs `.target sm_90a`"));

  StageResult other = static_stage(replaced(good, ".target sm_90a", ".target sm_100a"));
  CHECK(has_diagnostic(other, "error", "`.target sm_100a` does not match this task's architecture sm_90a"));

  StageResult old_version = static_stage(replaced(good, ".version 9.0", ".version 7.8"));
  CHECK(has_diagnostic(old_version, "error", "`.version 7.8` is too old for sm_90a"));

  StageResult no_entry = static_stage(good, manifest_with("\"gemm_tma_wgmma\"", "\"gemm\""));
  CHECK(no_entry.status == Status::static_error);
  CHECK(has_diagnostic(
      no_entry, "error",
      "the manifest's entry 'gemm' is not in the module; the module's entries: gemm_tma_wgmma"));

  StageResult count = static_stage(good, manifest_with(", {\"scalar\": \"N\"}", ""));
  CHECK(has_diagnostic(count, "error",
                       "the manifest lists 2 parameter(s) but .entry gemm_tma_wgmma declares 3"));

  StageResult map_as_pointer = static_stage(replaced(
      good, ".param .align 128 .b8 gemm_tma_wgmma_param_1[128]", ".param .u64 gemm_tma_wgmma_param_1"));
  CHECK(has_diagnostic(map_as_pointer, "error", "a tensor map is passed by value as 128 bytes"));

  StageResult low_align = static_stage(replaced(good, ".param .align 128 .b8", ".param .align 8 .b8"));
  CHECK(has_diagnostic(low_align, "error", "a tensor map must be 64-byte aligned"));

  StageResult tensor_as_u32 = static_stage(
      replaced(good, ".param .u64 gemm_tma_wgmma_param_0", ".param .u32 gemm_tma_wgmma_param_0"));
  CHECK(has_diagnostic(tensor_as_u32, "error", "a tensor is passed as a 64-bit device pointer"));

  StageResult scalar_as_float = static_stage(
      replaced(good, ".param .u32 gemm_tma_wgmma_param_2", ".param .f32 gemm_tma_wgmma_param_2"));
  CHECK(has_diagnostic(scalar_as_float, "error",
                       "cannot hold it; use one of .u32, .s32, .b32, .u64, .s64, .b64"));

  // The workspace is a device pointer: .u64 (or .b64/.s64) passes, .u32 is refused with the fix.
  const std::string with_ws =
      replaced(good, ".param .u32 gemm_tma_wgmma_param_2",
               ".param .u32 gemm_tma_wgmma_param_2,\n\t.param .u64 gemm_tma_wgmma_ws");
  std::string ws_manifest =
      manifest_with("{\"scalar\": \"N\"}", "{\"scalar\": \"N\"}, {\"workspace\": true}");
  ws_manifest.replace(ws_manifest.find("\"params\""), 8, "\"workspace_bytes\": \"num_sms * 4\", \"params\"");
  StageResult ws_ok = static_stage(with_ws, ws_manifest);
  CHECK_MESSAGE(ws_ok.status == Status::ok, ws_ok.summary);
  StageResult ws_u32 = static_stage(
      replaced(with_ws, ".param .u64 gemm_tma_wgmma_ws", ".param .u32 gemm_tma_wgmma_ws"), ws_manifest);
  CHECK(ws_u32.status == Status::static_error);
  CHECK(has_diagnostic(
      ws_u32, "error",
      "parameter 4 ('gemm_tma_wgmma_ws', the manifest's workspace): the workspace is passed as a "
      "64-bit device pointer, but the entry declares `.param .u32 gemm_tma_wgmma_ws`; declare "
      "`.param .u64 gemm_tma_wgmma_ws`"));

  StageResult too_many_threads = static_stage(good, manifest_with("[128, 1, 1]", "[256, 1, 1]"));
  CHECK(has_diagnostic(too_many_threads, "error", "allows at most 128 threads (.maxntid 128, 1, 1)"));
}

namespace {
/// name -> may_be_written for the module's variables.
std::map<std::string, bool> written_by_name(const std::string &ptx) {
  auto module = parse_ptx(ptx);
  REQUIRE_MESSAGE(module.has_value(), module.error().text());
  std::map<std::string, bool> out;
  for (const auto &v : module->module_variables) out[v.name] = v.may_be_written;
  return out;
}
}  // namespace

TEST_CASE("static: module state the kernel writes, against tables and strings it only reads") {
  // NVRTC's front end on namespace-scope data (the source is the fixture's comment): constexpr and const
  // tables, printf and assert strings are .global but only read; a counter, a scratch array, a pointer
  // variable and a variable bumped through a .func are written.
  const auto nvrtc = written_by_name(data_file("module_state_nvrtc.ptx"));
  const std::string scale =
      "_ZN38_INTERNAL_87c0d51c_8_state_cu_b44ef68e40_GLOBAL__N__87c0d51c_8_state_cu_b44ef68e6kScaleE";
  for (const std::string read_only :
       {"kOrder", scale.c_str(), "$str", "$str$1", "$str$2", "__unnamed_1", "cscale"}) {
    REQUIRE_MESSAGE(nvrtc.count(read_only), read_only);
    CHECK_MESSAGE(nvrtc.at(read_only) == false, read_only);
  }
  for (const std::string written : {"launches", "partial", "handle", "via_call"}) {
    REQUIRE_MESSAGE(nvrtc.count(written), written);
    CHECK_MESSAGE(nvrtc.at(written) == true, written);
  }

  // Each way an address reaches a write, and the reads next to them.
  const std::string ptx = R"(.version 9.0
.target sm_90a
.address_size 64
.global .align 4 .b8 table[16] = {1, 0, 0, 0};
.global .align 4 .b8 direct_store[16];
.global .align 4 .b8 generic_store[16];
.global .align 4 .b8 pointed[16];
.global .align 8 .u64 pointers[1] = {generic(pointed)};
.global .align 4 .b8 handed[16];
.global .align 4 .b8 printed[8] = {37, 100, 10};
.global .align 4 .b8 bulk_dst[256];
.global .align 4 .b8 prefetched[256];
.global .align 4 .b8 looped[64];
.global .align 4 .u32 unused;
.func keep(.param .b64 keep_p)
{
  ret;
}
.visible .entry k(.param .u64 k_out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<12>;
  ld.global.u32 %r1, [table+4];
  mov.u64 %rd1, table;
  add.s64 %rd2, %rd1, 8;
  ld.global.nc.u32 %r2, [%rd2];
  st.global.u32 [direct_store+4], %r1;
  mov.u64 %rd3, generic_store;
  cvta.global.u64 %rd4, %rd3;
  st.u32 [%rd4+8], %r2;
  mov.u64 %rd5, handed;
  {
  .param .b64 param0;
  st.param.b64 [param0+0], %rd5;
  call.uni keep, (param0);
  }
  mov.u64 %rd10, printed;
  {
  .param .b64 param0;
  st.param.b64 [param0+0], %rd10;
  .param .b64 param1;
  st.param.b64 [param1+0], 0;
  .param .b32 retval0;
  call.uni (retval0), vprintf, (param0, param1);
  }
  mov.u64 %rd6, prefetched;
  cp.async.bulk.prefetch.L2.global [%rd6], 256;
  mov.u64 %rd7, bulk_dst;
  cp.async.bulk.global.shared::cta.bulk_group [%rd7], [%r3], 256;
$L_loop:
  add.s64 %rd9, %rd8, 4;
  st.global.u32 [%rd9], %r1;
  mov.u64 %rd8, looped;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_loop;
  ret;
}
)";
  const auto w = written_by_name(ptx);
  CHECK(w.at("table") == false);         // read directly and through a computed address
  CHECK(w.at("direct_store") == true);   // st to [sym+4]
  CHECK(w.at("generic_store") == true);  // st through a generic address (cvta)
  CHECK(w.at("pointed") == true);        // another variable's initializer holds its address
  CHECK(w.at("pointers") == false);      // a table of addresses nothing writes
  CHECK(w.at("handed") == true);         // passed to a .func the check does not follow
  CHECK(w.at("printed") == false);       // passed to vprintf, which only reads its format
  CHECK(w.at("prefetched") == false);    // cp.async.bulk.prefetch reads
  CHECK(w.at("bulk_dst") == true);       // a bulk copy's destination
  CHECK(w.at("looped") == true);         // the address reaches the store around a loop
  CHECK(w.at("unused") == false);

  // The static stage warns about the written ones only; the figures list both.
  std::string gemm = data_file("gemm_tma_wgmma.ptx");
  gemm =
      replaced(gemm, ".visible .entry",
               ".global .align 4 .b8 lut[16] = {1, 0, 0, 0};\n.global .align 1 .b8 $str[4] = {37, 100, 10};\n"
               ".visible .entry");
  gemm = replaced(gemm, "$L__BB0_4:", "$L__BB0_4:\n\tld.global.u32 %r1, [lut+4];");
  StageResult s = static_stage(gemm);
  CHECK(s.status == Status::ok);
  CHECK(s.figures["module_globals"] == nlohmann::json::array({"lut", "$str"}));
  CHECK(s.figures["module_globals_written"].empty());
  CHECK_FALSE(has_diagnostic(s, "warning", "module-scope"));
}

TEST_CASE("static: warnings for missing targets and module state; instruction limit") {
  std::string ptx = data_file("gemm_tma_wgmma.ptx");
  ptx = replaced(ptx, ".visible .entry",
                 ".global .align 4 .u32 launches;\n.global .align 4 .u32 unused;\n.visible .entry");
  ptx = replaced(ptx, "$L__BB0_4:", "$L__BB0_4:\n\tred.global.add.u32 [launches], 1;");
  ptx = replaced(ptx,
                 "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd3, "
                 "{%r7, %r8}], [%r3];",
                 "// TMA load removed");
  StageResult s = static_stage(ptx);
  CHECK(s.status == Status::ok);  // warnings only
  CHECK(s.figures["targets_in_ptx"]["tma_load"] == false);
  CHECK(s.figures["module_globals"] == nlohmann::json::array({"launches", "unused"}));
  CHECK(s.figures["module_globals_written"] == nlohmann::json::array({"launches"}));
  CHECK(has_diagnostic(s, "warning", "target tma_load absent: no `cp.async.bulk.tensor` instruction"));
  CHECK(has_diagnostic(s, "warning",
                       "module-scope .global variable 'launches' is written by the kernel and keeps state "
                       "across launches; results cached across launches are detected at run time"));
  CHECK_FALSE(has_diagnostic(s, "warning", "'unused'"));  // declared, never written

  auto module = parse_ptx(data_file("gemm_tma_wgmma.ptx"));
  auto m = parse_manifest(kGoodManifest, gemm_task());
  std::vector<LaunchPlan> plans{*resolve_launch(*m, gemm_task(), gemm_task().workloads[0])};
  StaticCheckResult limited = run_static_checks(*module, *m, gemm_task(), plans, 10);
  CHECK(limited.stage.status == Status::static_error);
  CHECK(has_diagnostic(limited.stage, "error", "more than the limit of 10"));
  // The stage reports the entry's parameter types; the plans it was given stay as the parse stage made them.
  REQUIRE(limited.entry_param_types.size() == 3);
  CHECK(limited.entry_param_types[0] == ".u64");
  CHECK(limited.entry_param_types[1] == ".b8");
  CHECK(plans[0].params[0].ptx_type.empty());
  const std::vector<LaunchPlan> typed = with_param_types(plans, limited.entry_param_types);
  CHECK(typed[0].params[0].ptx_type == ".u64");
  CHECK(typed[0].params[1].ptx_type == ".b8");
}

// ---------------------------------------------------------------- ptxas (real runs)

TEST_CASE("ptxas output parser") {
  PtxasReport r = parse_ptxas_output(
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "    8 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 16392 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
      "to ...\n"
      "ptxas warning : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register "
      "count\n"
      "ptxas k.ptx, line 37; error   : Unknown modifier '.bar'\n"
      "ptxas fatal   : Ptx assembly aborted due to errors\n");
  const PtxasFunctionInfo *k = r.find("k");
  REQUIRE(k != nullptr);
  CHECK(k->registers == 168);
  CHECK(k->barriers == 1);
  CHECK(k->shared_bytes == 16392);
  CHECK(k->constant_bytes == 400);
  CHECK(k->stack_bytes == 8);
  CHECK(k->spill_store_bytes == 16);
  CHECK(k->spill_load_bytes == 12);
  REQUIRE(r.warnings.size() == 2);
  CHECK(r.warnings[0].text.find("wgmma.mma_async instructions are serialized") != std::string::npos);
  CHECK(r.warnings[1].text.find("setmaxnreg ignored") != std::string::npos);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].text == "Unknown modifier '.bar'");
  CHECK(r.errors[0].line == 37);
}

TEST_CASE("ptxas: a real compile of the good kernel") {
  auto ptxas = find_ptxas();
  REQUIRE_MESSAGE(ptxas.has_value(), "ptxas is needed for this test (CUDA toolkit)");
  util::TempDir dir("ptxbench-test");
  auto run = run_ptxas(*ptxas, data_file("gemm_tma_wgmma.ptx"), "sm_90a", dir.path(), {});
  REQUIRE_MESSAGE(run.has_value(), run.error());
  REQUIRE_MESSAGE(run->ok, run->failure);
  CHECK(run->cubin.size() > 1000);
  CHECK(run->cubin.substr(1, 3) == "ELF");
  const PtxasFunctionInfo *f = run->report.find("gemm_tma_wgmma");
  REQUIRE(f != nullptr);
  CHECK(f->registers > 16);
  CHECK(f->shared_bytes == 16392);  // 16384 tile + 8 barrier
  CHECK(f->spill_store_bytes == 0);
}

TEST_CASE("ptxas: a broken kernel gives the message and the line") {
  util::TempDir dir("ptxbench-test");
  auto run = run_ptxas(*find_ptxas(), data_file("gemm_tma_wgmma_broken.ptx"), "sm_90a", dir.path(), {});
  REQUIRE(run.has_value());
  CHECK_FALSE(run->ok);
  REQUIRE(!run->report.errors.empty());
  CHECK(run->report.errors[0].text == "Unknown vector selector: 'q'");
  CHECK(run->report.errors[0].line == 36);
}

TEST_CASE("ptxas: a kernel that compiles for too long is stopped") {
  util::TempDir dir("ptxbench-test");
  util::ProcessLimits limits;
  limits.wall_time = std::chrono::milliseconds(1000);
  auto t0 = std::chrono::steady_clock::now();
  auto run = run_ptxas(*find_ptxas(), slow_ptx(), "sm_90a", dir.path(), limits);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(run.has_value());
  CHECK_FALSE(run->ok);
  CHECK(run->failure.find("ptxas took longer than 1.0 s") == 0);
  CHECK(seconds < 5.0);
}

// ---------------------------------------------------------------- the CPU stages end to end

TEST_CASE("evaluate: the good wgmma + TMA response compiles with resource figures") {
  Verdict v = evaluate(gemm_task(), data_file("response_good_gemm.md"), cpu_settings());
  CHECK_MESSAGE(v.parse.status == Status::ok, v.parse.summary);
  CHECK_MESSAGE(v.static_checks.status == Status::ok, v.static_checks.summary);
  CHECK_MESSAGE(v.compile.status == Status::ok, v.compile.summary);
  CHECK(v.status == Status::ok);
  CHECK(v.kernel_hash.size() == 16);
  CHECK(v.compile.figures["registers"].get<int>() > 16);
  CHECK(v.compile.figures["shared_bytes"] == 16392);
  CHECK(v.compile.figures["spill_store_bytes"] == 0);
  CHECK(v.compile.figures["stack_bytes"] == 0);
  CHECK(v.compile.figures.contains("warnings"));
  CHECK(v.static_checks.figures["targets_in_ptx"]["wgmma"] == true);
  CHECK(v.static_checks.figures["targets_in_ptx"]["tma_load"] == true);
  // A missing disassembler fails the case (scripts/install_deps.sh installs nvdisasm) rather than
  // dropping the SASS checks; the verdict without one is checked below with a path that does not exist.
  REQUIRE_MESSAGE(find_disassembler(), "no cuobjdump/nvdisasm found: install one (scripts/install_deps.sh)");
  CHECK(v.compile.figures["sass_available"] == true);
  CHECK(v.compile.figures["targets_in_sass"]["wgmma"] == true);
  CHECK(v.compile.figures["targets_in_sass"]["tma_load"] == true);
  CHECK(v.compile.figures["sass_families"]["HGMMA"] == 1);
  {
    EvaluatorSettings without = cpu_settings();
    without.disassembler_path = "/nonexistent/nvdisasm";
    const Verdict no_sass = evaluate(gemm_task(), data_file("response_good_gemm.md"), without);
    CHECK_MESSAGE(no_sass.compile.status == Status::ok, no_sass.compile.summary);
    CHECK(no_sass.compile.figures["sass_available"] == false);
    CHECK(has_diagnostic(no_sass.compile, "note", "no cuobjdump/nvdisasm: SASS checks skipped"));
  }
  for (const StageResult *s : {&v.correctness, &v.execution, &v.timing}) {
    CHECK(s->status == Status::skipped);
    CHECK(s->summary == "disabled by --no-gpu");
  }
  auto j = v.to_json();
  CHECK(j["axes"]["correct"].is_null());
  CHECK(j["settings"]["run_gpu"] == false);
  CHECK(j["stages"]["compile"]["status"] == "ok");
}

TEST_CASE("run_cpu_stages: a deferred SASS listing gives the same compile stage once finished") {
  const std::string response = data_file("response_good_gemm.md");
  CompiledCandidate now = run_cpu_stages(gemm_task(), response, cpu_settings());
  CHECK(now.pending_sass == nullptr);
  CompiledCandidate later = run_cpu_stages(gemm_task(), response, cpu_settings(), /*defer_sass=*/true);
  REQUIRE(later.verdict.compile.status == Status::ok);
  REQUIRE(later.pending_sass != nullptr);
  CHECK(later.verdict.compile.figures["sass_available"] == false);  // not yet known
  CHECK(later.sass.empty());
  CHECK(finish_sass(later) == finish_sass(now));
  CHECK(later.pending_sass == nullptr);
  CHECK(finish_sass(later).empty());  // a second call has nothing to wait for
  CHECK(later.sass == now.sass);
  for (const char *key : {"sass_available", "targets_in_sass", "sass_families"})
    CHECK_MESSAGE(later.verdict.compile.figures[key] == now.verdict.compile.figures[key], key);
  CHECK(later.verdict.compile.summary == now.verdict.compile.summary);
  CHECK(later.verdict.compile.summary.find("; SASS: ") != std::string::npos);
  CHECK(later.verdict.compile.diagnostics.size() == now.verdict.compile.diagnostics.size());
}

TEST_CASE("evaluate: a broken kernel reports compile_error with ptxas's message and line") {
  Verdict v = evaluate(gemm_task(), data_file("response_broken_gemm.md"), cpu_settings());
  CHECK(v.status == Status::compile_error);
  REQUIRE(!v.compile.diagnostics.empty());
  const Diagnostic &d = v.compile.diagnostics[0];
  CHECK(d.line == 36);
  CHECK(d.text == "ptxas, line 36 of the PTX block (response line 39): Unknown vector selector: 'q'");
  CHECK(v.correctness.status == Status::skipped);
  CHECK(v.correctness.summary == "not run: an earlier stage ended with compile_error");
}

TEST_CASE("evaluate: bad input becomes a verdict") {
  Verdict none = evaluate(gemm_task(), "I don't know.", cpu_settings());
  CHECK(none.status == Status::no_kernel);
  CHECK(none.static_checks.status == Status::skipped);

  std::string text = data_file("response_good_gemm.md");
  Verdict bad_manifest =
      evaluate(gemm_task(), replaced(text, "\"box\": [64, 128]", "\"box\": [64, 999]"), cpu_settings());
  CHECK(bad_manifest.status == Status::bad_manifest);
  CHECK(bad_manifest.parse.summary.find("params[1].box[1]: 999 is outside 1..256") != std::string::npos);

  Verdict syntax = evaluate(gemm_task(), replaced(text, "\tret;\n\n}", "\tret;\n\n"), cpu_settings());
  CHECK(syntax.status == Status::static_error);
  CHECK(syntax.static_checks.summary.find("is never closed") != std::string::npos);

  Verdict huge = evaluate(gemm_task(), std::string(50u << 20, 'x'), cpu_settings());
  CHECK(huge.status == Status::no_kernel);
}

// ---------------------------------------------------------------- line info for sanitizer reports

TEST_CASE("verdict: a status outside the enum, read back from a trace, is a runtime_error that names it") {
  Verdict v;
  v.task_id = "gemm";
  v.parse.status = v.static_checks.status = v.compile.status = Status::ok;
  v.correctness.status = Status::ok;
  v.finalize_status();
  nlohmann::json j = v.to_json();
  j["stages"]["correctness"]["status"] = "exploded";
  j["status"] = "exploded";
  const Verdict back = Verdict::from_json(j);
  CHECK(back.correctness.status == Status::runtime_error);
  CHECK(back.correctness.summary.find("unknown stage status \"exploded\"") == 0);
  CHECK(back.status == Status::runtime_error);  // recomputed from the stages
  CHECK(Verdict::from_json(v.to_json()).to_json() == v.to_json());
}

// ---------------------------------------------------------------- the kernel's printf in the verdict

TEST_CASE("kernel printf: a call to vprintf in the PTX is found; one in a comment or another name is not") {
  const std::string calls =
      ".version 8.0\n.target sm_90a\n.address_size 64\n"
      ".extern .func (.param .b32 func_retval0) vprintf (.param .b64 a, .param .b64 b);\n"
      ".visible .entry k()\n{\n.reg .b64 %rd<3>;\n.reg .b32 %r<2>;\n"
      "{\n.param .b64 p0;\nst.param.b64 [p0], %rd1;\n.param .b64 p1;\nst.param.b64 [p1], %rd2;\n"
      ".param .b32 rv;\ncall.uni (rv), vprintf, (p0, p1);\n}\nret;\n}\n";
  CHECK(detail::ptx_calls_printf(calls));
  CHECK_FALSE(detail::ptx_calls_printf(
      ".version 8.0\n// call.uni (rv), vprintf, (p0, p1);\n.visible .entry k()\n{\nret;\n}\n"));
  CHECK_FALSE(detail::ptx_calls_printf(".version 8.0\n.visible .entry vprintf_like()\n{\nret;\n}\n"));
  CHECK_FALSE(detail::ptx_calls_printf("/* never closed"));
}

TEST_CASE("kernel printf: a timeout says what the kernel printed before the limit, or that it calls printf") {
  const auto timed_out = [] {
    Verdict v;
    v.correctness.status = Status::timeout;
    v.correctness.summary =
        "the kernel did not finish within 10 s (workload w): an endless loop or a deadlock";
    v.correctness.diagnostics.push_back({"error", v.correctness.summary, std::nullopt});
    v.timing.status = Status::skipped;
    v.timing.summary = "not run";
    return v;
  };
  Verdict printed = timed_out();
  detail::note_printf_in_timeouts(printed, protocol::kernel_output_from("x\ny\n", 4'700'000), true);
  CHECK(
      printed.correctness.summary.find("an endless loop or a deadlock; the kernel printed 4700004 bytes with "
                                       "printf before the limit") != std::string::npos);
  CHECK(printed.correctness.diagnostics.front().text == printed.correctness.summary);
  CHECK(printed.timing.summary == "not run");  // only stages that timed out

  Verdict silent = timed_out();  // what the launch that hung printed never reached stdout
  detail::note_printf_in_timeouts(silent, protocol::kernel_output_from("", 0), true);
  CHECK(silent.correctness.summary.find("; the kernel calls printf (device printf is slow") !=
        std::string::npos);

  Verdict no_printf = timed_out();
  const std::string before = no_printf.correctness.summary;
  detail::note_printf_in_timeouts(no_printf, protocol::kernel_output_from("", 0), false);
  CHECK(no_printf.correctness.summary == before);
}

TEST_CASE("verdict: kernel_output survives a round trip; a verdict without one reads as before") {
  Verdict v;
  v.task_id = "gemm";
  const nlohmann::json without = v.to_json();
  CHECK_FALSE(without.contains("kernel_output"));
  CHECK_FALSE(Verdict::from_json(without).kernel_output.has_value());
  v.kernel_output = protocol::kernel_output_from("ready\nfinished 0\n", 0);
  const nlohmann::json j = v.to_json();
  REQUIRE(j.contains("kernel_output"));
  CHECK(j["kernel_output"]["bytes"] == 17);
  const Verdict back = Verdict::from_json(j);
  REQUIRE(back.kernel_output.has_value());
  CHECK(*back.kernel_output == *v.kernel_output);
}
