// Evaluator CPU stages, second part: PTX line info (ptxas -lineinfo on annotated PTX, nvdisasm's line
// table) and the sanitizer's report parser. Linked into test_evaluator beside test_evaluator.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "evaluator/compile.hpp"
#include "evaluator/detail/profile_lines.hpp"
#include "evaluator/detail/sanitizer.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/nvrtc/nvrtc_compile.hpp"
#include "evaluator/ptx.hpp"
#include "evaluator/ptx_lines.hpp"
#include "evaluator/sass.hpp"
#include "support/support.hpp"
#include "util/files.hpp"

using namespace ptxbench;
using namespace ptxbench::evaluator;
namespace fs = std::filesystem;

namespace {

std::string data_file(const std::string &name) {
  return test::test_data(fs::path("evaluator") / name);
}

}  // namespace

namespace {

std::string solution_ptx(const std::string &task, const std::string &solution) {
  auto text =
      util::read_file(fs::path(PTXBENCH_SOURCE_DIR) / "tasks" / "solutions" / task / solution / "kernel.ptx");
  REQUIRE_MESSAGE(text.has_value(), text.error());
  return *text;
}

/// For each line of the annotated module: the `.loc` line number in effect there (0 = none yet).
std::map<int, int> loc_in_effect(const std::string &annotated) {
  auto tokens = lex_ptx(annotated);
  REQUIRE_MESSAGE(tokens.has_value(), tokens.error().text());
  std::map<int, int> by_line;
  int loc = 0;
  const auto &t = *tokens;
  for (std::size_t k = 0; k < t.size(); ++k) {
    if (t[k].text == ".loc" && k + 2 < t.size()) loc = std::stoi(t[k + 2].text);
    by_line[t[k].line] = loc;
  }
  return by_line;
}

/// Every instruction of `annotated` sits under a .loc naming its line in `original`.
void check_lines_follow_original(const std::string &original, const std::string &annotated,
                                 bool same_hash = true) {
  auto before = parse_ptx(original);
  auto after = parse_ptx(annotated);
  REQUIRE_MESSAGE(before.has_value(), before.error().text());
  REQUIRE_MESSAGE(after.has_value(), after.error().text());
  REQUIRE(after->instructions.size() == before->instructions.size());
  const auto loc = loc_in_effect(annotated);
  int wrong = 0;
  for (std::size_t k = 0; k < before->instructions.size(); ++k) {
    CHECK(after->instructions[k].mnemonic == before->instructions[k].mnemonic);
    if (loc.at(after->instructions[k].line) != before->instructions[k].line) ++wrong;
  }
  CHECK(wrong == 0);
  CHECK(after->functions.size() == before->functions.size());
  if (same_hash) CHECK(after->normalized_hash == before->normalized_hash);  // the hash ignores .loc/.file
}

/// nvdisasm -g: source line -> SASS opcode families attributed to it.
std::map<int, std::set<std::string>> sass_families_by_line(const fs::path &nvdisasm, const fs::path &cubin) {
  util::ProcessSpec spec;
  spec.argv = {nvdisasm.string(), "--print-line-info", "-c", cubin.string()};
  spec.env = util::scrubbed_environment(cubin.parent_path().string());
  auto r = util::run_process(spec);
  REQUIRE(r.has_value());
  REQUIRE_MESSAGE(r->ok(), r->stderr_text);
  std::map<int, std::set<std::string>> out;
  int line = 0;
  std::istringstream in(r->stdout_text);
  for (std::string l; std::getline(in, l);) {
    // //## File "kernel.ptx", line 56
    if (auto p = l.find("//## File \"kernel.ptx\", line "); p != std::string::npos) {
      line = std::stoi(l.substr(p + 29));
      continue;
    }
    SassListing one = parse_sass_listing("\t.section\t.text.k,\"ax\",@progbits\n" + l + "\n");
    if (line > 0 && !one.instructions.empty()) out[line].insert(one.instructions.front().family);
  }
  return out;
}

}  // namespace

TEST_CASE("ptx line info: .loc per source line, old .loc/.file/.section dropped, the rest kept") {
  const std::string src = R"(.version 8.0
.target sm_90a
.address_size 64 // st.global.f32 in a comment
.file 7 "/tmp/model.cu", 1700000000, 12

.visible .entry k(
	.param .u64 p
)
{
	.reg .b64 %rd<4>;
	.reg .f32 %f<3>;
	.reg .pred %p<2>;
	.loc 7 3 5
	ld.param.u64 %rd1, [p]; cvta.to.global.u64 %rd2, %rd1;
	/* a comment with add.s32 %r1, %r2, %r3;
	   over two lines */ mov.f32 %f1, 0f3F800000;
$L__BB0_1: setp.eq.f32 %p1, %f1, %f1;
	@%p1 bra $L__BB0_2;
	{ .reg .f32 %t; mov.f32 %t, %f1; }
$L__BB0_2:
	st.global.f32 [%rd2], %f1;
	ret;
}
.section .debug_str { $L__info_string0: .b8 107 0 }
)";
  auto a = annotate_ptx_line_info(src);
  REQUIRE_MESSAGE(a.has_value(), a.error());
  const std::string &out = a->ptx;
  CHECK(out.find(".file 1 \"kernel.ptx\"") != std::string::npos);
  CHECK(out.find("/tmp/model.cu") == std::string::npos);
  CHECK(out.find(".loc 7") == std::string::npos);
  CHECK(out.find(".section") == std::string::npos);
  CHECK(a->dropped_directives == 3);
  // Lines 14, 16, 17, 18, 19 (one .loc for the inner block's mov), 21, 22.
  CHECK(a->loc_directives == 7);
  CHECK(out.find(".loc 1 14 1") != std::string::npos);
  CHECK(out.find(".loc 1 15 1") == std::string::npos);  // only comment text starts line 15
  CHECK(out.find(".loc 1 16 1") != std::string::npos);
  CHECK(out.find("$L__BB0_1:") != std::string::npos);
  CHECK(out.find("$L__BB0_2:") != std::string::npos);
  CHECK(out.find("/* a comment with add.s32 %r1, %r2, %r3;") != std::string::npos);  // comments kept
  check_lines_follow_original(src, out, /*same_hash=*/false);                        // the .section went
  // .file comes after the header (PTX requires .version first).
  CHECK(out.find(".file 1") > out.find(".address_size 64"));
  CHECK(out.size() <= 2 * src.size() + kPtxLineInfoSlackBytes);
}

TEST_CASE("ptx line info: errors for bad input, bad file names and oversized output") {
  CHECK_FALSE(annotate_ptx_line_info(".version 8.0\n.entry k( { ret; }").has_value());
  auto bad_name = annotate_ptx_line_info(".version 8.0\n.target sm_90a\n", "a\"b.ptx");
  REQUIRE_FALSE(bad_name.has_value());
  CHECK(bad_name.error().find(".file") != std::string::npos);
  // 3000 lines of "ret;" would more than double: refused with the bound in the message.
  std::string tiny = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n";
  for (int k = 0; k < 3000; ++k) tiny += "ret;\n";
  tiny += "}\n";
  auto big = annotate_ptx_line_info(tiny);
  REQUIRE_FALSE(big.has_value());
  CHECK(big.error().find("would exceed") != std::string::npos);
  // The same instructions three per line fit.
  std::string dense = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n";
  for (int k = 0; k < 1000; ++k) dense += "\tret; ret; ret;\n";
  dense += "}\n";
  auto ok = annotate_ptx_line_info(dense);
  REQUIRE_MESSAGE(ok.has_value(), ok.error());
  CHECK(ok->loc_directives == 1000);
  check_lines_follow_original(dense, ok->ptx);
}

TEST_CASE("ptx line info: the committed solutions compile with -lineinfo and nvdisasm names original lines") {
  auto ptxas = find_ptxas();
  REQUIRE_MESSAGE(ptxas.has_value(), "ptxas is needed for this test (CUDA toolkit)");
  auto dis = find_disassembler();
  REQUIRE_MESSAGE((dis && dis->kind == DisassemblerKind::nvdisasm),
                  "nvdisasm is needed for this test (scripts/install_deps.sh installs NVIDIA's pip wheel)");
  struct Case {
    std::string task, solution, ptx_prefix, sass_family;
  };
  const std::vector<Case> cases{
      {"gemm_n7168_k5120", "simple", "st.global", "STG"},
      {"gemm_n7168_k5120", "mma_sync", "mma.sync", "HMMA"},
      {"gemm_n7168_k5120", "wgmma_tma", "wgmma.mma_async", "HGMMA"},
      {"gemm_n7168_k5120", "probe_illegal_address", "ld.global", "LDG"},
      {"mha_fwd_d128", "flash_fwd", "st.global", "STG"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.solution);
    const std::string ptx = solution_ptx(c.task, c.solution);
    auto annotated = annotate_ptx_line_info(ptx);
    REQUIRE_MESSAGE(annotated.has_value(), annotated.error());
    check_lines_follow_original(ptx, annotated->ptx);
    CHECK(annotated->ptx.size() <= 2 * ptx.size() + kPtxLineInfoSlackBytes);

    util::TempDir dir("ptxbench-test");
    util::ProcessLimits limits;
    limits.wall_time = std::chrono::milliseconds(120'000);
    auto compiled = compile_ptx_with_line_info(*ptxas, ptx, "sm_90a", dir.path() / "lineinfo", limits);
    REQUIRE_MESSAGE(compiled.has_value(), compiled.error());
    CHECK(fs::file_size(compiled->cubin) > 1000);
    CHECK(compiled->loc_directives == annotated->loc_directives);

    auto module = parse_ptx(ptx);
    REQUIRE(module.has_value());
    // ptxas may attribute a SASS instruction to a neighbouring PTX line (the four chained wgmma
    // of one k-step share their HGMMAs out), so: some line holding the PTX instruction carries
    // the SASS family.
    const auto ptx_instructions = module->instructions_with_prefix(c.ptx_prefix);
    REQUIRE(!ptx_instructions.empty());
    std::set<int> ptx_lines;
    for (const PtxInstruction *i : ptx_instructions) ptx_lines.insert(i->line);
    const auto families = sass_families_by_line(dis->path, compiled->cubin);
    REQUIRE(!families.empty());
    int hits = 0;
    std::string where;  // the lines the family went to, for the failure message
    for (const auto &[l, f] : families)
      if (f.count(c.sass_family)) {
        where += std::to_string(l) + " ";
        hits += ptx_lines.count(l) ? 1 : 0;
      }
    CHECK_MESSAGE(hits > 0, c.sass_family << " at lines " << where);
    if (c.solution == "probe_illegal_address") {  // its faulting load, line 56, exactly
      REQUIRE(families.count(56) == 1);
      CHECK(families.at(56).count("LDG") == 1);
    }
    // Every line nvdisasm names holds an instruction in the original text.
    std::set<int> instruction_lines;
    for (const auto &i : module->instructions) instruction_lines.insert(i.line);
    for (const auto &[l, f] : families) CHECK_MESSAGE(instruction_lines.count(l) == 1, "line " << l);
  }
  // The probe's faulting load is line 56 of its PTX.
  CHECK(solution_ptx("gemm_n7168_k5120", "probe_illegal_address").find("\tld.global.f32 %f747, [%rd78];") !=
        std::string::npos);
}

TEST_CASE("ptx line info: a PTX that ptxas rejects is an error naming ptxas's message") {
  util::TempDir dir("ptxbench-test");
  auto r = compile_ptx_with_line_info(*find_ptxas(), data_file("gemm_tma_wgmma_broken.ptx"), "sm_90a",
                                      dir.path(), {});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().find("did not compile") != std::string::npos);
  CHECK(r.error().find("Unknown vector selector") != std::string::npos);
}

TEST_CASE("sanitizer: frame lines in the formats compute-sanitizer prints") {
  using detail::parse_sanitizer_frame;
  auto f = parse_sanitizer_frame("at gemm_bf16+0x1f0 in kernel.ptx:56");
  REQUIRE(f.has_value());
  CHECK(f->function == "gemm_bf16");
  CHECK(f->offset == 0x1f0);
  CHECK(f->file == "kernel.ptx");
  CHECK(f->line == 56);
  f = parse_sanitizer_frame("at gemm_bf16+0x1f0 in /tmp/ptxbench-gpu-1/lineinfo/kernel.ptx:56");
  REQUIRE(f.has_value());
  CHECK(f->file == "/tmp/ptxbench-gpu-1/lineinfo/kernel.ptx");
  CHECK(f->line == 56);
  f = parse_sanitizer_frame("at col_kernel(const unsigned int *, unsigned int *, int, float)+0x490");
  REQUIRE(f.has_value());
  CHECK(f->function == "col_kernel(const unsigned int *, unsigned int *, int, float)");
  CHECK(f->offset == 0x490);
  CHECK(f->line == 0);
  f = parse_sanitizer_frame("Device Frame: helper+0x130 in kernel.ptx:196");
  REQUIRE(f.has_value());
  CHECK(f->caller);
  CHECK(f->lead.empty());
  CHECK(f->line == 196);
  f = parse_sanitizer_frame("and Read access at k+0x2c0 in kernel.ptx:47 [128 hazards]");
  REQUIRE(f.has_value());
  CHECK(f->lead == "and Read access");
  CHECK(f->line == 47);
  CHECK(f->rest == "[128 hazards]");
  f = parse_sanitizer_frame(
      "at 0x000000c8 in /home/u/src/helper.cuh:75:void projection<double>(double*, int)");
  REQUIRE(f.has_value());
  CHECK(f->offset == 0xc8);
  CHECK(f->file == "/home/u/src/helper.cuh");
  CHECK(f->line == 75);
  CHECK(f->function == "void projection<double>(double*, int)");
  CHECK_FALSE(parse_sanitizer_frame("Access at 0x40 is out of bounds").has_value());
  CHECK_FALSE(
      parse_sanitizer_frame("and is inside the nearest allocation at 0x7f00 of size 4 bytes").has_value());
  CHECK_FALSE(parse_sanitizer_frame("Saved host backtrace up to driver entry point at kernel launch time")
                  .has_value());
  CHECK_FALSE(parse_sanitizer_frame("by thread (0,0,0) in block (0,0,0)").has_value());
}

TEST_CASE("sanitizer: memcheck reports carry the PTX line and its text; host frames are dropped") {
  const std::string ptx = solution_ptx("gemm_n7168_k5120", "probe_illegal_address");
  const std::string output =
      util::read_file(fs::path(PTXBENCH_TEST_DATA) / "sanitizer_memcheck_lineinfo.txt").value();
  SassListing listing;
  listing.instructions.push_back({"gemm_bf16_probe_illegal_address", 0x1f0, "LDG.E", "LDG", ""});
  const detail::SanitizerSource source{"kernel.ptx", ptx, "PTX"};
  auto reports = detail::sanitizer_reports(output, listing, 8, &source);
  REQUIRE(reports.size() == 2);  // "Program hit" and the summary are not reports
  for (const auto &d : reports) {
    CAPTURE(d.text);
    REQUIRE(d.line.has_value());
    CHECK(*d.line == 56);
    CHECK(d.text.starts_with(
        "Invalid __global__ read of size 4 bytes; at gemm_bf16_probe_illegal_address+0x1f0 "
        "(SASS LDG.E); at PTX line 56: ld.global.f32 %f747, [%rd78];"));
    CHECK(d.text.find("Access at 0x40 is out of bounds") != std::string::npos);
    CHECK(d.text.find("bytes before the nearest allocation") != std::string::npos);
    CHECK(d.text.find("worker.cpp") == std::string::npos);
    CHECK(d.text.find("main.cpp") == std::string::npos);
    CHECK(d.text.find("Host Frame") == std::string::npos);
  }
  CHECK(reports[0].text.find("by thread (0,0,0)") != std::string::npos);
  CHECK(reports[1].text.find("by thread (1,0,0)") != std::string::npos);
  CHECK(detail::sanitizer_reports(output, listing, 1, &source).size() == 1);

  // Without line info (the fallback) the SASS opcode is still named and no line is set.
  auto plain = detail::sanitizer_reports(output, listing, 8, nullptr);
  REQUIRE(plain.size() == 2);
  CHECK_FALSE(plain[0].line.has_value());
  CHECK(plain[0].text.find("(SASS LDG.E) in kernel.ptx:56") != std::string::npos);
  CHECK(plain[0].text.find("PTX line") == std::string::npos);
}

TEST_CASE("sanitizer: racecheck hazards name both accesses; device frames and other files") {
  const std::string src = [] {
    std::string s;
    for (int k = 1; k <= 60; ++k) s += "\tinstruction_" + std::to_string(k) + ";\n";
    return s;
  }();
  const detail::SanitizerSource source{"kernel.ptx", src, "PTX"};
  const std::string race =
      util::read_file(fs::path(PTXBENCH_TEST_DATA) / "sanitizer_racecheck_lineinfo.txt").value();
  auto reports = detail::sanitizer_reports(race, SassListing{}, 8, &source);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].line == 41);
  CHECK(reports[0].text ==
        "Error: Race reported between Write access at gemm_tile_race+0x1b0; at PTX line 41: instruction_41; "
        "and Read access at gemm_tile_race+0x2c0 [128 hazards]; at PTX line 47: instruction_47;");

  const std::string nested = R"(========= Invalid __shared__ write of size 4 bytes
=========     at helper+0x30 in kernel.ptx:12
=========     by thread (3,0,0) in block (1,0,0)
=========     Address 0x10000 is out of bounds
=========         Device Frame: k+0x90 in /abs/path/kernel.ptx:30
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: main in /src/kernel.ptx:31 [0x10] in app
========= Invalid __global__ read of size 2 bytes
=========     at k+0x120 in cuda_bf16.hpp:4000
=========     by thread (0,0,0) in block (0,0,0)
)";
  reports = detail::sanitizer_reports(nested, SassListing{}, 8, &source);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].line == 12);
  CHECK_MESSAGE(
      reports[0].text.find("called from k+0x90; at PTX line 30: instruction_30;") != std::string::npos,
      reports[0].text);
  CHECK(reports[0].text.find("line 31") == std::string::npos);
  CHECK_FALSE(reports[1].line.has_value());  // a location in another file is named, not quoted
  CHECK(reports[1].text.find("at k+0x120 in cuda_bf16.hpp:4000") != std::string::npos);
}

TEST_CASE("sanitizer: CUDA candidates' line info names kernel.cu lines (what the sanitizer stage matches)") {
  const std::string source =
      "extern \"C\" __global__ void k(float *out, const float *in) {\n"
      "  int i = threadIdx.x;\n"
      "  out[i] = 2.0f * in[i];\n"
      "}\n";
  auto ptx = nvrtc_compile_in_process(source, "sm_90a");
  REQUIRE_MESSAGE(ptx.has_value(), ptx.error());
  auto module = parse_ptx(*ptx);
  REQUIRE_MESSAGE(module.has_value(), module.error().text());
  auto tokens = lex_ptx(*ptx);
  REQUIRE(tokens.has_value());
  // .file <n> "kernel.cu" (perhaps with a path) and a .loc naming line 3, the store's line.
  std::string file_name;
  bool store_line = false;
  const auto &t = *tokens;
  for (std::size_t k = 0; k + 2 < t.size(); ++k) {
    if (t[k].text == ".file" && t[k + 2].kind == PtxTokenKind::string) file_name = t[k + 2].text;
    if (t[k].text == ".loc" && t[k + 2].text == "3") store_line = true;
  }
  CHECK(file_name.ends_with("kernel.cu\""));
  CHECK(store_line);
}

TEST_CASE("ptx line info: PTX from nvcc -G (.target debug, DWARF sections, .loc) gets its own lines") {
  // tests/data/sanitizer_nvcc_G_kernel.ptx: `nvcc -G -ptx -arch=sm_90a` of a 4-line kernel.
  const std::string ptx =
      util::read_file(fs::path(PTXBENCH_TEST_DATA) / "sanitizer_nvcc_G_kernel.ptx").value();
  auto a = annotate_ptx_line_info(ptx);
  REQUIRE_MESSAGE(a.has_value(), a.error());
  CHECK(a->ptx.find("debug") == std::string::npos);  // the target option and every .debug_* section
  CHECK(a->ptx.find("kernel.cu") == std::string::npos);
  CHECK(a->dropped_directives == 1 + 5 + 1 + 3);  // ", debug", five .loc, one .file, three sections
  check_lines_follow_original(ptx, a->ptx, /*same_hash=*/false);
  util::TempDir dir("ptxbench-test");
  auto compiled = compile_ptx_with_line_info(*find_ptxas(), ptx, "sm_90a", dir.path(), {});
  REQUIRE_MESSAGE(compiled.has_value(), compiled.error());
  CHECK(fs::file_size(compiled->cubin) > 500);
}

namespace {

/// The cubin the evaluator runs for `ptx` (ptxas -lineinfo), disassembled with the line table the compile
/// stage asks for: the PTX's own lines for a PTX answer, kernel.cu's for a CUDA answer's NVRTC output.
SassListing evaluated_listing(const std::string &ptx, SassLineInfo lines) {
  auto ptxas = find_ptxas();
  REQUIRE_MESSAGE(ptxas.has_value(), "ptxas is needed for this test (CUDA toolkit)");
  auto dis = find_disassembler();
  REQUIRE_MESSAGE((dis && dis->kind == DisassemblerKind::nvdisasm),
                  "nvdisasm is needed for this test (scripts/install_deps.sh installs NVIDIA's pip wheel)");
  util::TempDir dir("ptxbench-test");
  util::ProcessLimits limits;
  limits.wall_time = std::chrono::milliseconds(120'000);
  auto run = run_ptxas(*ptxas, ptx, "sm_90a", dir.path(), limits);
  REQUIRE_MESSAGE(run.has_value(), run.error());
  REQUIRE_MESSAGE(run->ok, run->failure);
  const fs::path cubin = dir.path() / "evaluated.cubin";
  REQUIRE(util::write_file_atomic(cubin, run->cubin).has_value());
  auto text = disassemble_cubin(*dis, cubin, limits, lines);
  REQUIRE_MESSAGE(text.has_value(), text.error());
  return parse_sass_listing(*text);
}

SassListing evaluated_listing_with_ptx_lines(const std::string &ptx) {
  return evaluated_listing(ptx, SassLineInfo::ptx);
}

std::string nth_line(const std::string &text, int n) {
  std::istringstream in(text);
  std::string line;
  for (int i = 0; i < n && std::getline(in, line); ++i) {
  }
  const auto b = line.find_first_not_of(" \t");
  return b == std::string::npos ? "" : line.substr(b);
}

}  // namespace

TEST_CASE("profile lines: sampled PCs of an evaluated PTX cubin land on the lines the model wrote") {
  const std::string ptx = solution_ptx("gemm_n7168_k5120", "mma_sync");
  const SassListing listing = evaluated_listing_with_ptx_lines(ptx);
  REQUIRE(!listing.source_lines.empty());
  for (const auto &[pc, where] : listing.source_lines) CHECK(where.file == ".nv_debug_ptx_txt");

  // Samples as CUPTI would hand them over: every HMMA PC 10 samples waiting on the math pipe, and one
  // shared-memory load much hotter, waiting on its scoreboard.
  protocol::PcSampling sampling;
  const SassInstruction *hot_load = nullptr;
  for (const auto &inst : listing.instructions) {
    if (inst.opcode.rfind("HMMA", 0) == 0) {
      sampling.pcs.push_back({inst.function, inst.offset, 10, {{"math_pipe_throttle", 10}}});
      sampling.samples += 10;
    } else if (!hot_load && inst.opcode.rfind("LDSM", 0) == 0 &&
               listing.source_lines.count({inst.function, inst.offset})) {
      hot_load = &inst;
    }
  }
  REQUIRE(hot_load != nullptr);
  REQUIRE(sampling.pcs.size() > 20);
  sampling.pcs.insert(
      sampling.pcs.begin(),
      {hot_load->function, hot_load->offset, 5000, {{"short_scoreboard", 4900}, {"wait", 100}}});
  sampling.samples += 5000 + 777;  // 777 in PCs not handed over (cut by the worker's bound)

  evaluator::detail::map_hot_lines(sampling, listing, ptx, /*cuda=*/false);
  CHECK(sampling.line_error == "");
  CHECK(sampling.line_source == "kernel.ptx");
  REQUIRE(!sampling.hot_lines.empty());
  CHECK(sampling.hot_lines.size() <= evaluator::detail::kMaxHotLines);
  CHECK(sampling.pcs.size() <= evaluator::detail::kMaxKeptPcs);

  // The hottest line is the load's PTX line: its own text, its warp states, its SASS opcode.
  const protocol::HotLine &top = sampling.hot_lines.front();
  const int load_line = listing.source_lines.at({hot_load->function, hot_load->offset}).line;
  CHECK(top.line == load_line);
  CHECK(top.text == nth_line(ptx, load_line));
  CHECK(top.text.rfind("ldmatrix", 0) == 0);
  REQUIRE(!top.reasons.empty());
  CHECK(top.reasons.front().reason == "short_scoreboard");
  CHECK(top.samples >= 5000);
  CHECK(top.share == doctest::Approx(static_cast<double>(top.samples) / sampling.samples));
  REQUIRE(!top.opcodes.empty());
  CHECK(top.opcodes.front().rfind("LDSM", 0) == 0);

  // The HMMA samples land on the PTX lines holding mma.sync (ptxas may hand an HMMA to a neighbouring
  // line of the same chain, so most, not all); every kept line's text is that line of the answer.
  std::uint64_t on_lines = 0, on_mma = 0;
  for (const auto &h : sampling.hot_lines) {
    CHECK(h.text == nth_line(ptx, h.line));
    CHECK(h.text.size() <= evaluator::detail::kMaxHotLineChars);
    if (h.line == load_line) continue;
    on_lines += h.samples;
    if (h.text.rfind("mma.sync", 0) == 0) on_mma += h.samples;
  }
  REQUIRE(on_lines > 0);
  CHECK(on_mma * 10 >= on_lines * 8);
}

TEST_CASE("profile lines: CUDA answers count kernel.cu lines only; unmapped samples say why") {
  // A listing as nvdisasm --print-line-info prints it for an NVRTC cubin: kernel.cu lines (with the
  // folder NVRTC recorded), and a toolkit header's inlined code.
  const std::string listing_text = R"(
        .section        .text.k,"ax",@progbits
        //## File "/tmp/job/kernel.cu", line 3
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        //## File "/usr/local/cuda/include/cuda_fp16.hpp", line 900
        /*0010*/                   HADD2.F32 R2, -RZ, R4.H0_H0 ;
        //## File "/tmp/job/kernel.cu", line 5
        /*0020*/                   FFMA R3, R2, R2, R3 ;
        /*0030*/                   EXIT ;
)";
  SassListing listing = parse_sass_listing(listing_text);
  REQUIRE(listing.instructions.size() == 4);
  REQUIRE(listing.source_lines.size() == 4);
  CHECK(listing.source_lines.at({"k", 0x20}).line == 5);
  CHECK(listing.source_lines.at({"k", 0x30}).line == 5);  // a comment covers what follows it
  CHECK(listing.source_lines.at({"k", 0x10}).file == "/usr/local/cuda/include/cuda_fp16.hpp");

  const std::string source = "// k\n__global__ void k(float *x) {\n  float a = 0;\n  // loop\n" +
                             std::string(4, ' ') + "a = fmaf(a, a, a); " + std::string(300, 'x') + "\n}\n";
  protocol::PcSampling s;
  s.samples = 100;
  s.pcs = {{"k", 0x10, 50, {{"wait", 50}}},
           {"k", 0x20, 30, {{"math_pipe_throttle", 30}}},
           {"k", 0x0, 20, {{"long_scoreboard", 20}}}};
  evaluator::detail::map_hot_lines(s, listing, source, /*cuda=*/true);
  CHECK(s.line_source == "kernel.cu");
  REQUIRE(s.hot_lines.size() == 2);  // the header's 50 samples count in no line
  CHECK(s.hot_lines[0].line == 5);
  CHECK(s.hot_lines[0].share == doctest::Approx(0.3));
  CHECK(s.hot_lines[0].opcodes == std::vector<std::string>{"FFMA"});
  CHECK(s.hot_lines[0].text.size() == evaluator::detail::kMaxHotLineChars);
  CHECK(s.hot_lines[0].text.rfind("a = fmaf(a, a, a); xxx", 0) == 0);
  CHECK(s.hot_lines[0].text.substr(s.hot_lines[0].text.size() - 3) == "...");
  CHECK(s.hot_lines[1].line == 3);
  CHECK(s.hot_lines[1].text == "float a = 0;");

  // Read as a PTX answer, the same listing names no line of it.
  protocol::PcSampling as_ptx = s;
  as_ptx.hot_lines.clear();
  as_ptx.line_source.clear();
  evaluator::detail::map_hot_lines(as_ptx, listing, source, /*cuda=*/false);
  CHECK(as_ptx.hot_lines.empty());
  CHECK(as_ptx.line_error == "no sampled instruction maps to a line of the kernel's source");

  // A listing made without line info.
  protocol::PcSampling bare = as_ptx;
  bare.line_error.clear();
  evaluator::detail::map_hot_lines(bare, parse_sass_listing(R"(
        .section        .text.k,"ax",@progbits
        /*0000*/                   EXIT ;
)"),
                                   source, true);
  CHECK(bare.line_error == "the SASS listing has no line info");
  CHECK(bare.hot_lines.empty());
}

TEST_CASE(
    "profile lines: a CUDA answer's sampled PCs land on its own kernel.cu lines (NVRTC, ptxas, nvdisasm)") {
  // A committed CUDA answer (warp-specialized TMA + wgmma GEMM, wgmma in an inlined asm helper), compiled
  // the way the evaluator compiles CUDA (NVRTC with -lineinfo, then ptxas on its PTX) and disassembled with
  // kernel.cu's line table, the way the compile stage does it for a CUDA answer.
  const std::string response = test::test_data("answers/27_cuda_warp_specialized_gemm.md");
  auto parsed = parse_response(response);
  REQUIRE(parsed.has_value());
  REQUIRE(parsed->language == KernelLanguage::cuda);
  const std::string &source = parsed->kernel_source;
  auto ptx = nvrtc_compile_in_process(source, "sm_90a");
  REQUIRE_MESSAGE(ptx.has_value(), ptx.error());
  const SassListing listing = evaluated_listing(*ptx, SassLineInfo::source);
  REQUIRE(!listing.source_lines.empty());

  // The kernel body's lines that call the answer's inlined wgmma helper: nvdisasm names an inlined
  // function's instructions by the line that calls it, so the model reads its own call, not the helper.
  std::set<int> call_lines;
  int line_no = 0;
  {
    std::istringstream in(source);
    for (std::string l; std::getline(in, l);) {
      ++line_no;
      if (l.find("wgmma_m64n256k16(acc") != std::string::npos) call_lines.insert(line_no);
    }
  }
  REQUIRE(!call_lines.empty());

  // Samples as CUPTI would hand them over: 100 on every HGMMA PC (waiting on the math pipe), 1 on every
  // other instruction of the kernel.
  protocol::PcSampling sampling;
  std::size_t hgmma = 0;
  for (const auto &inst : listing.instructions) {
    const bool mma = inst.opcode.rfind("HGMMA", 0) == 0;
    hgmma += mma;
    const std::uint64_t n = mma ? 100 : 1;
    sampling.pcs.push_back({inst.function, inst.offset, n, {{mma ? "math_pipe_throttle" : "wait", n}}});
    sampling.samples += n;
  }
  REQUIRE(hgmma > 0);
  evaluator::detail::map_hot_lines(sampling, listing, source, /*cuda=*/true);
  CHECK(sampling.line_error == "");
  CHECK(sampling.line_source == "kernel.cu");
  REQUIRE(!sampling.hot_lines.empty());
  // Every kept line is a line of the answer's code block, quoted as written.
  for (const auto &h : sampling.hot_lines) {
    CHECK(h.line >= 1);
    CHECK(h.line <= line_no);
    std::string line = nth_line(source, h.line);
    line.erase(line.find_last_not_of(" \t\r") + 1);
    const std::size_t cut = evaluator::detail::kMaxHotLineChars;
    CHECK(h.text == (line.size() <= cut ? line : line.substr(0, cut - 3) + "..."));
  }
  // The hottest line calls the wgmma helper, and most HGMMA samples land on such calls (ptxas may hand
  // one to a neighbouring statement it scheduled beside them).
  CHECK(call_lines.count(sampling.hot_lines.front().line) == 1);
  std::uint64_t on_calls = 0;
  for (const auto &h : sampling.hot_lines)
    if (call_lines.count(h.line)) on_calls += h.samples;
  CHECK(on_calls * 2 >= hgmma * 100);
  CHECK(sampling.hot_lines.front().reasons.front().reason == "math_pipe_throttle");
}
