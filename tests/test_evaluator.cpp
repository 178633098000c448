// Evaluator CPU stages: SASS listings, response parser, PTX lexer/parser,
// manifest, static checks, real ptxas runs.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "evaluator/sass.hpp"
#include "util/files.hpp"

using namespace ptxbench;
using namespace ptxbench::evaluator;
namespace fs = std::filesystem;

namespace {
std::string data_file(const std::string &name) {
  auto text = util::read_file(fs::path(PTXBENCH_TEST_DATA) / "evaluator" / name);
  REQUIRE_MESSAGE(text.has_value(), text.error());
  return *text;
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
  if (!dis) {
    MESSAGE("no cuobjdump/nvdisasm found: skipping the live disassembly check");
    return;
  }
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
