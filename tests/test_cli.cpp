// The command line as a user meets it: every subcommand run as the built `ptxbench` binary, its exit code
// (the contract in `ptxbench --help`) and the message that tells the user what to do.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/subprocess.hpp"

namespace fs = std::filesystem;
using namespace ptxbench;

namespace {

const fs::path kBinary = fs::path(PTXBENCH_BINARY_DIR) / "apps" / "ptxbench";
const fs::path kSource = fs::path(PTXBENCH_SOURCE_DIR);

struct Outcome {
  int code = -1;
  std::string out, err;
};

Outcome run_cli(std::initializer_list<std::string> args, const fs::path &cwd = {}) {
  util::ProcessSpec spec;
  spec.argv = {kBinary.string()};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  for (const char *name : {"PATH", "HOME", "LD_LIBRARY_PATH"})
    if (const char *v = std::getenv(name)) spec.env[name] = v;
  spec.env["PTXBENCH_TASKS"] = (kSource / "tasks").string();
  spec.working_directory = cwd.string();
  spec.limits.wall_time = std::chrono::seconds(120);
  auto r = util::run_process(spec);
  REQUIRE_MESSAGE(r, "could not start " << kBinary.string());
  REQUIRE_FALSE(r->signaled);
  REQUIRE_FALSE(r->timed_out);
  return {r->exit_code, r->stdout_text, r->stderr_text};
}

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::string solution(const std::string &task, const std::string &name) {
  return (kSource / "tasks" / "solutions" / task / name / "response.md").string();
}

}  // namespace

TEST_CASE("ptxbench: --help names every subcommand and the exit codes; --version; usage errors exit 2") {
  const Outcome help = run_cli({"--help"});
  CHECK(help.code == cli::kExitOk);
  for (const char *sub :
       {"tasks", "eval", "doctor", "run", "resume", "export", "report", "show", "prompt", "slurm", "merge"})
    CHECK_MESSAGE(has(help.out, std::string("  ") + sub + " "), sub);
  CHECK(has(help.out, "Exit codes"));
  // NVRTC runs in its own executable (ptxbench-nvrtc): the CLI has no hidden helper subcommand left.
  CHECK(run_cli({"internal", "nvrtc", "--arch", "sm_90a"}).code == cli::kExitUsage);

  const Outcome version = run_cli({"--version"});
  CHECK(version.code == cli::kExitOk);
  CHECK(has(version.out, "ptxbench "));

  const Outcome none = run_cli({});
  CHECK(none.code == cli::kExitUsage);
  CHECK(has(none.err, "subcommand is required"));

  const Outcome typo = run_cli({"evl"});
  CHECK(typo.code == cli::kExitUsage);
  CHECK(has(typo.err, "unknown subcommand 'evl'"));

  const Outcome bad_flag = run_cli({"run", "--samples", "0"});
  CHECK(bad_flag.code == cli::kExitUsage);
  CHECK(has(bad_flag.err, "--samples"));
}

TEST_CASE(
    "tasks: list and show as text and JSON; an unknown task is an environment error naming the way out") {
  auto loaded = tasks::load_task_dir(kSource / "tasks");
  REQUIRE(loaded.has_value());

  const Outcome list = run_cli({"tasks", "list"});
  CHECK(list.code == cli::kExitOk);
  CHECK(list.out.rfind("ID", 0) == 0);
  CHECK(has(list.out, "gemm_n7168_k5120"));
  CHECK(has(list.out, "mha_bwd_d128_causal"));
  CHECK(has(list.out, "gemm_n4096_k4096 "));
  CHECK(has(list.out, "M=4096; M=3000"));
  CHECK(has(list.out, "tcgen05_mma, tma_load"));

  const Outcome list_json = run_cli({"tasks", "list", "--json"});
  CHECK(list_json.code == cli::kExitOk);
  const auto array = nlohmann::json::parse(list_json.out);
  REQUIRE(array.is_array());
  CHECK(array.size() == loaded->size());
  CHECK(array[0]["id"] == loaded->front().id);

  const Outcome show = run_cli({"tasks", "show", "mha_fwd_d128"});
  CHECK(show.code == cli::kExitOk);
  CHECK(has(show.out, "mha_fwd_d128"));
  const Outcome fp8 = run_cli({"tasks", "show", "gemm_fp8_n7168_k5120"});
  CHECK(fp8.code == cli::kExitOk);
  CHECK(has(fp8.out, "scale_a f32 = 0.5"));
  CHECK(has(fp8.out, "M=8192 N=7168 K=5120"));
  const Outcome show_json = run_cli({"tasks", "show", "mha_bwd_d128", "--json"});
  CHECK(show_json.code == cli::kExitOk);
  const auto task_json = nlohmann::json::parse(show_json.out);
  CHECK(task_json["id"] == "mha_bwd_d128");
  CHECK(task_json["tolerances"].contains("dQ"));

  const Outcome unknown = run_cli({"tasks", "show", "no_such_task"});
  CHECK(unknown.code == cli::kExitEnvironment);
  CHECK(has(unknown.err, "unknown task 'no_such_task'"));
  CHECK(has(unknown.err, "tasks list"));
  const Outcome near_miss = run_cli({"tasks", "show", "mha_fwd_d12"});
  CHECK(near_miss.code == cli::kExitEnvironment);
  CHECK(has(near_miss.err, "unknown task 'mha_fwd_d12'. Did you mean: mha_fwd_d128"));

  const Outcome bad_dir =
      run_cli({"tasks", "list", "--tasks-dir", (fs::path(PTXBENCH_TEST_DATA) / "tasks" / "bad").string()});
  CHECK(bad_dir.code == cli::kExitEnvironment);
  CHECK(has(bad_dir.err, "unknown_dtype.json: tensors[0].dtype: unknown dtype 'bf17'"));
}

TEST_CASE("eval: ok, not ok, a missing file and an unknown task, in text and JSON") {
  const Outcome ok = run_cli({"eval", "--task", "gemm_n7168_k5120", "--no-gpu", "--response",
                              solution("gemm_n7168_k5120", "simple")});
  CHECK(ok.code == cli::kExitOk);
  CHECK(has(ok.out, "gemm_n7168_k5120: ok"));

  const Outcome json = run_cli({"eval", "--task", "gemm_n7168_k5120", "--no-gpu", "--json", "--response",
                                solution("gemm_n7168_k5120", "wgmma_tma")});
  CHECK(json.code == cli::kExitOk);
  const auto v = nlohmann::json::parse(json.out);
  CHECK(v["status"] == "ok");
  CHECK(v["stages"]["compile"]["status"] == "ok");
  CHECK(v["stages"]["timing"]["status"] == "skipped");
  // A run seed is drawn and recorded when none is given; --seed gives the same inputs again.
  CHECK(v["settings"]["run_seed"].get<std::uint64_t>() != 0);
  const Outcome seeded = run_cli({"eval", "--task", "gemm_n7168_k5120", "--no-gpu", "--json", "--seed",
                                  "987654321", "--response", solution("gemm_n7168_k5120", "wgmma_tma")});
  CHECK(seeded.code == cli::kExitOk);
  CHECK(nlohmann::json::parse(seeded.out)["settings"]["run_seed"] == 987654321);

  util::TempDir tmp("ptxbench-test-cli");
  const fs::path prose = tmp.path() / "prose.md";
  std::ofstream(prose) << "I would write a kernel, but here is only prose.\n";
  const Outcome not_ok =
      run_cli({"eval", "--task", "gemm_n7168_k5120", "--no-gpu", "--response", prose.string()});
  CHECK(not_ok.code == cli::kExitVerdictFailed);
  CHECK(has(not_ok.out, "no_kernel"));
  CHECK(has(not_ok.out, "```ptx"));  // the message says what was expected

  // Over the size limit (4 MiB): a verdict from the evaluator's parse stage with the file's real size.
  const fs::path huge = tmp.path() / "huge.md";
  std::ofstream(huge) << std::string((4u << 20) + 10, 'x');
  const Outcome too_large =
      run_cli({"eval", "--task", "gemm_n7168_k5120", "--no-gpu", "--json", "--response", huge.string()});
  CHECK(too_large.code == cli::kExitVerdictFailed);
  const auto big = nlohmann::json::parse(too_large.out);
  CHECK(big["stages"]["parse"]["status"] == "no_kernel");
  CHECK(has(big["stages"]["parse"]["summary"].get<std::string>(),
            "the response is 4194314 bytes, more than the limit of 4194304 bytes"));
  CHECK(big["stages"]["static"]["status"] == "skipped");

  const Outcome missing = run_cli({"eval", "--task", "gemm_n7168_k5120", "--response", "/no/such/file.md"});
  CHECK(missing.code == cli::kExitEnvironment);
  CHECK(has(missing.err, "/no/such/file.md"));

  const Outcome unknown = run_cli(
      {"eval", "--task", "no_such_task", "--no-gpu", "--response", solution("gemm_n7168_k5120", "simple")});
  CHECK(unknown.code == cli::kExitEnvironment);
  CHECK(has(unknown.err, "unknown task 'no_such_task'"));

  const Outcome no_task = run_cli({"eval", "--response", prose.string()});
  CHECK(no_task.code == cli::kExitUsage);
  CHECK(has(no_task.err, "--task"));
}

TEST_CASE("doctor: one line per check; exit 0 only when every check passes") {
  const Outcome d = run_cli({"doctor"});
  CHECK((d.code == cli::kExitOk || d.code == cli::kExitEnvironment));
  const std::string all = d.out + d.err;
  CHECK(has(all, "ptxas"));
  CHECK(has(all, "GPU"));
  CHECK(has(all, "[FAIL]") == (d.code != cli::kExitOk));
}

TEST_CASE("run, resume, show, report, export on the embedded default; each on a missing run directory") {
  util::TempDir tmp("ptxbench-test-cli");
  const fs::path run = tmp.path() / "run";
  const Outcome r = run_cli({"run", "--out", run.string(), "--no-gpu", "--progress", "quiet"});
  REQUIRE_MESSAGE(r.code == cli::kExitOk, r.err);
  CHECK(has(r.out + r.err, run.string()));
  CHECK(fs::exists(run / "run.json"));
  CHECK(fs::exists(run / "trajectories.jsonl"));

  const Outcome again = run_cli({"resume", run.string(), "--progress", "quiet"});
  CHECK(again.code == cli::kExitOk);

  const Outcome show = run_cli({"show", run.string()});
  CHECK(show.code == cli::kExitOk);
  CHECK(has(show.out, "gemm_n7168_k5120"));

  const fs::path report = tmp.path() / "report";
  const Outcome rep = run_cli({"report", run.string(), "--out", report.string()});
  CHECK(rep.code == cli::kExitOk);
  CHECK(fs::exists(report / "report.md"));
  CHECK(fs::exists(report / "report.html"));
  const Outcome rep_no_out = run_cli({"report", run.string()});
  CHECK(rep_no_out.code == cli::kExitUsage);
  CHECK(has(rep_no_out.err, "--out"));

  const fs::path data = tmp.path() / "data.jsonl";
  const Outcome exp = run_cli({"export", run.string(), "--all", "--out", data.string()});
  CHECK(exp.code == cli::kExitOk);
  CHECK(fs::exists(data));
  CHECK(fs::exists(tmp.path() / "data.card.md"));
  CHECK(has(exp.out, "Wrote "));

  const fs::path nowhere = tmp.path() / "no_run_here";
  for (const char *sub : {"resume", "show", "export", "merge"}) {
    INFO(sub);
    const Outcome o = std::string(sub) == "export" || std::string(sub) == "merge"
                          ? run_cli({sub, nowhere.string(), "--out", (tmp.path() / "x").string()})
                          : run_cli({sub, nowhere.string()});
    CHECK(o.code == cli::kExitEnvironment);
    CHECK(has(o.err, "not a run directory"));
  }
  const Outcome missing_config = run_cli({"run", "--config", (tmp.path() / "none.json").string()});
  CHECK(missing_config.code == cli::kExitUsage);
  CHECK(has(missing_config.err, "none.json"));
}

TEST_CASE("prompt show and packs; slurm status on a folder that is not a Slurm run") {
  const Outcome show = run_cli({"prompt", "show", "--task", "gemm_n7168_k5120"});
  CHECK(show.code == cli::kExitOk);
  CHECK(has(show.out, "gemm_n7168_k5120"));
  CHECK(has(show.out, "== first request:"));
  // --messages-only: the messages' text with one separator between them, none of the framing.
  const Outcome bare = run_cli(
      {"prompt", "show", "--task", "gemm_n7168_k5120", "--messages-only", "--turn-feedback", "incorrect"});
  CHECK(bare.code == cli::kExitOk);
  CHECK(has(bare.out, "You are an expert GPU kernel engineer"));
  CHECK(has(bare.out, "# Task gemm_n7168_k5120"));
  CHECK_FALSE(has(bare.out, "== "));
  CHECK_FALSE(has(bare.out, "variant:"));
  std::size_t separators = 0;
  for (auto at = bare.out.find("---- next message ----"); at != std::string::npos;
       at = bare.out.find("---- next message ----", at + 1))
    ++separators;
  CHECK(separators == 2);
  // --verdict: the feedback a real verdict gets (here a correct one with the profile stage an H200 wrote).
  {
    util::TempDir dir("ptxbench-test-cli");
    std::ifstream in(fs::path(PTXBENCH_TEST_DATA) / "profile" / "gemm_wgmma_tma_stage.json");
    nlohmann::json verdict = {{"status", "ok"},
                              {"task_id", "gemm_n7168_k5120"},
                              {"stages", nlohmann::json::object()},
                              {"axes", {{"correct", true}, {"targets_executed", true}, {"speedup", 0.88}}}};
    for (const char *stage : {"parse", "static", "compile", "correctness", "execution", "timing"})
      verdict["stages"][stage] = {{"status", "ok"}, {"summary", ""}};
    verdict["stages"]["profile"] = nlohmann::json::parse(in);
    const fs::path file = dir.path() / "verdict.json";
    REQUIRE(util::write_file_atomic(file, verdict.dump()));
    const Outcome real = run_cli(
        {"prompt", "show", "--task", "gemm_n7168_k5120", "--messages-only", "--verdict", file.string()});
    CHECK(real.code == cli::kExitOk);
    CHECK(has(real.out, "Hardware profile of one launch of workload M=8192"));
    CHECK(has(real.out, "tensor pipe at 87.2% (library 99.3%)"));  // the verdict's figures, not placeholders
    const Outcome both = run_cli({"prompt", "show", "--task", "gemm_n7168_k5120", "--verdict", file.string(),
                                  "--turn-feedback", "incorrect"});
    CHECK(both.code == cli::kExitUsage);
    const Outcome not_verdict = run_cli(
        {"prompt", "show", "--task", "gemm_n7168_k5120", "--verdict", (dir.path() / "none").string()});
    CHECK(not_verdict.code == cli::kExitUsage);
    CHECK(has(not_verdict.err, "--verdict"));
  }
  const Outcome unknown = run_cli({"prompt", "show", "--task", "no_such_task"});
  CHECK(unknown.code == cli::kExitEnvironment);
  CHECK(has(unknown.err, "unknown task 'no_such_task'"));

  const Outcome packs = run_cli({"prompt", "packs"});
  CHECK(packs.code == cli::kExitOk);
  CHECK(has(packs.out, "ptx-hopper"));

  util::TempDir tmp("ptxbench-test-cli");
  const Outcome status = run_cli({"slurm", "status", tmp.path().string()});
  CHECK(status.code == cli::kExitEnvironment);
  CHECK(has(status.err, "slurm.json"));
}
