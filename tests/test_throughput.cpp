// Evaluation throughput on the CPU: the pre-started worker pool's protocol (with
// stand-in worker scripts: no GPU), a process given its input after it said
// "ready", the private protocol channel (lines a kernel's printf imitates on stdout
// are not the protocol), and the verdict cache's key and reuse.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>

#include "evaluator/detail/worker_pool.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/protocol/worker_output.hpp"
#include "evaluator/verdict_cache.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/subprocess.hpp"

namespace fs = std::filesystem;
namespace ev = ptxbench::evaluator;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

/// An executable shell script standing in for ptxbench-worker (the pool passes --prestart ...). bash:
/// `>&"$FD"` with a descriptor number above 9 (the protocol channel's) is beyond dash.
fs::path script(const fs::path &dir, const std::string &name, const std::string &body) {
  const fs::path p = dir / name;
  REQUIRE(ptxbench::util::write_file_atomic(p, "#!/bin/bash\n" + body));
  ::chmod(p.c_str(), 0755);
  return p;
}

// Says ready on the protocol channel, reads "JOB<TAB>RESULT" and writes the job's text into the result
// file.
const char *kGoodWorker =
    "echo ready >&\"$PTXBENCH_WORKER_CHANNEL_FD\"\n"
    "IFS=\"$(printf '\\t')\" read -r job result || exit 0\n"
    "cat \"$job\" > \"$result\"\n";

/// `program` started and past its "ready" line.
ptxbench::util::StartedProcess started_ready(const fs::path &program, const fs::path &home) {
  ptxbench::util::ProcessSpec spec;
  spec.argv = {program.string()};
  spec.env = ptxbench::util::scrubbed_environment(home.string());
  auto p = ptxbench::util::StartedProcess::start(spec);
  REQUIRE(p);
  REQUIRE(p->wait_for_line("ready", 5000ms));
  return std::move(*p);
}

ev::detail::WorkerKey key_for(const fs::path &worker) {
  return ev::detail::WorkerKey{worker, 0, "", 60};
}

}  // namespace

TEST_CASE("started process: stdin is given after the ready line; the wall limit counts from then") {
  ptxbench::util::TempDir dir("ptxbench-test");
  const fs::path w = script(dir.path(), "w.sh", "echo ready\nread -r line\nsleep 2\necho \"got $line\"\n");
  const auto r = started_ready(w, dir.path()).finish("hello\n", 300ms);
  CHECK(r.timed_out);  // the sleep outlasts the limit counted from the handover
  CHECK(r.wall_seconds < 1.5);

  const auto r2 = started_ready(w, dir.path()).finish("hello\n", 10'000ms);
  CHECK(r2.ok());
  CHECK(r2.stdout_text.find("got hello") != std::string::npos);
}

TEST_CASE("started process: finish_until_line returns at the announced line; reap waits for the exit") {
  ptxbench::util::TempDir dir("ptxbench-test");
  // Announces its result, then takes 1 s to tear down and exits 3.
  const fs::path w = script(dir.path(), "w.sh",
                            "echo ready\nread -r line\necho \"note: unfinished business\"\n"
                            "echo \"finished 3\"\nsleep 1\necho teardown >&2\nexit 3\n");
  auto p = started_ready(w, dir.path());
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = p.finish_until_line("job\n", "finished ", 10'000ms);
  CHECK(r.still_running);
  CHECK_FALSE(r.ok());                                   // not known to have exited yet
  CHECK(std::chrono::steady_clock::now() - t0 < 900ms);  // did not wait for the teardown
  CHECK(r.stdout_text.find("finished 3\n") != std::string::npos);
  const auto end = p.reap(10'000ms);
  CHECK_FALSE(end.still_running);
  CHECK(end.exit_code == 3);
  CHECK(end.stderr_text.find("teardown") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 >= 900ms);

  // A process that exits without the line: finish_until_line is finish().
  const fs::path quiet = script(dir.path(), "q.sh", "echo ready\nread -r line\nexit 5\n");
  const auto r2 = started_ready(quiet, dir.path()).finish_until_line("job\n", "finished ", 10'000ms);
  CHECK_FALSE(r2.still_running);
  CHECK(r2.exit_code == 5);

  // One that never exits after the line is killed at reap's limit.
  const fs::path stuck =
      script(dir.path(), "s.sh", "echo ready\nread -r line\necho 'finished 0'\nsleep 30\n");
  auto s = started_ready(stuck, dir.path());
  CHECK(s.finish_until_line("job\n", "finished ", 10'000ms).still_running);
  const auto t1 = std::chrono::steady_clock::now();
  CHECK(s.reap(300ms).timed_out);
  CHECK(std::chrono::steady_clock::now() - t1 < 5s);
}

TEST_CASE("run_process: the private channel is captured apart from stdout; without it the child has none") {
  ptxbench::util::TempDir dir("ptxbench-test");
  const fs::path w =
      script(dir.path(), "w.sh",
             "echo \"channel fd ${PTXBENCH_WORKER_CHANNEL_FD:-none}\"\n"
             "[ -n \"$PTXBENCH_WORKER_CHANNEL_FD\" ] && echo proto >&\"$PTXBENCH_WORKER_CHANNEL_FD\"\n"
             "echo out\n");
  ptxbench::util::ProcessSpec spec;
  spec.argv = {w.string()};
  spec.env = ptxbench::util::scrubbed_environment(dir.path().string());
  spec.channel_fd_env = ptxbench::protocol::kChannelFdEnv;
  const auto with = ptxbench::util::run_process(spec);
  REQUIRE(with);
  CHECK(with->ok());
  CHECK(with->channel_text == "proto\n");
  CHECK(with->stdout_text.find("channel fd none") == std::string::npos);
  CHECK(with->stdout_text.find("out\n") != std::string::npos);

  spec.channel_fd_env.clear();
  const auto without = ptxbench::util::run_process(spec);
  REQUIRE(without);
  CHECK(without->channel_text.empty());
  CHECK(without->stdout_text.find("channel fd none") != std::string::npos);
}

TEST_CASE("protocol channel: lines imitated on stdout (a kernel's printf) are not the protocol") {
  ptxbench::util::TempDir dir("ptxbench-test");
  // stdout says ready and finished early and often; the channel says each once, later. Printf output
  // written before the real `finished` line must be in the result when finish_until_line returns.
  const fs::path w = script(dir.path(), "w.sh",
                            "echo ready; echo 'finished 0'\n"
                            "sleep 0.3\n"
                            "echo ready >&\"$PTXBENCH_WORKER_CHANNEL_FD\"\n"
                            "read -r line\n"
                            "printf 'finished 0\\nfinished 7\\n'\n"
                            "sleep 0.5\n"
                            "echo 'kernel: last words'\n"
                            "echo 'finished 3' >&\"$PTXBENCH_WORKER_CHANNEL_FD\"\n"
                            "sleep 1\nexit 3\n");
  ptxbench::util::ProcessSpec spec;
  spec.argv = {w.string()};
  spec.env = ptxbench::util::scrubbed_environment(dir.path().string());
  spec.channel_fd_env = ptxbench::protocol::kChannelFdEnv;
  auto p = ptxbench::util::StartedProcess::start(spec);
  REQUIRE(p);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(p->wait_for_line(ptxbench::protocol::kReadyLine, 5000ms));
  CHECK(std::chrono::steady_clock::now() - t0 >= 250ms);  // not at stdout's "ready"

  const auto t1 = std::chrono::steady_clock::now();
  const auto r = p->finish_until_line("job\n", ptxbench::protocol::kFinishedLinePrefix, 10'000ms);
  CHECK(r.still_running);
  CHECK(std::chrono::steady_clock::now() - t1 >= 450ms);  // not at stdout's "finished 0"
  CHECK(std::chrono::steady_clock::now() - t1 < 1400ms);  // at the channel's line, before the exit
  CHECK(ptxbench::protocol::finished_code(r.channel_text) == 3);
  CHECK(r.stdout_text.find("kernel: last words\n") != std::string::npos);
  const auto printed = ptxbench::protocol::kernel_output_from(r.stdout_text, r.stdout_dropped);
  CHECK(printed.bytes == r.stdout_text.size());
  CHECK(std::find(printed.first_lines.begin(), printed.first_lines.end(), "finished 7") !=
        printed.first_lines.end());
  const auto end = p->reap(10'000ms);
  CHECK(end.exit_code == 3);
}

TEST_CASE("worker pool: a worker is ready only when its channel says so, whatever its stdout says") {
  ptxbench::util::TempDir dir("ptxbench-test");
  ev::detail::WorkerPool pool;
  const fs::path liar = script(dir.path(), "liar.sh", "echo ready\nsleep 30\n");
  json none;
  CHECK_FALSE(pool.take(key_for(liar), 300ms, none));
  CHECK(none["replaced"] == 2);

  const fs::path late = script(dir.path(), "late.sh", "echo ready\nsleep 0.3\n" + std::string(kGoodWorker));
  json figures;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(pool.take(key_for(late), 5000ms, figures));
  CHECK(std::chrono::steady_clock::now() - t0 >= 250ms);
}

TEST_CASE("worker pool: reap_later keeps what it holds (the GPU lock) until the worker has exited") {
  ptxbench::util::TempDir dir("ptxbench-test");
  const fs::path exited = dir.path() / "exited";
  const fs::path w =
      script(dir.path(), "w.sh",
             "echo ready\nread -r line\necho 'finished 0'\nsleep 0.5\n: > '" + exited.string() + "'\n");
  auto p = started_ready(w, dir.path());
  CHECK(p.finish_until_line("job\n", "finished ", 10'000ms).still_running);
  // The held object records whether the worker had exited when it was let go.
  struct Held {
    fs::path marker;
    std::atomic<bool> *released_after_exit = nullptr;
    ~Held() { *released_after_exit = fs::exists(marker); }
  };
  std::atomic<bool> after_exit{false};
  auto held = std::make_shared<Held>();
  held->marker = exited;
  held->released_after_exit = &after_exit;
  std::weak_ptr<Held> watch = held;
  ev::detail::WorkerPool pool;
  pool.reap_later(std::move(p), std::move(held), 10'000ms);
  CHECK_FALSE(watch.expired());  // still tearing down: still held
  pool.wait_reaped();
  CHECK(watch.expired());
  CHECK(after_exit.load());
}

TEST_CASE("worker pool: a pre-started worker takes one job; the pool refills itself") {
  ptxbench::util::TempDir dir("ptxbench-test");
  const fs::path w = script(dir.path(), "worker.sh", kGoodWorker);
  ev::detail::WorkerPool pool;
  const auto key = key_for(w);
  json figures;
  auto first = pool.take(key, 5000ms, figures);
  REQUIRE(first);
  CHECK(figures["prestarted"] == false);  // nothing was waiting: started and waited for on the spot
  CHECK(figures["replaced"] == 0);
  pool.refill(key);
  CHECK(pool.waiting() == 1);
  pool.refill(key);  // one waiting worker per key is enough
  CHECK(pool.waiting() == 1);

  const fs::path job = dir.path() / "job.json", result = dir.path() / "result.json";
  REQUIRE(ptxbench::util::write_file_atomic(job, "{\"n\": 1}"));
  const auto r = first->finish(job.string() + "\t" + result.string() + "\n", 10'000ms);
  CHECK(r.ok());
  const auto written = ptxbench::util::read_file(result);
  REQUIRE(written);
  CHECK(*written == "{\"n\": 1}");

  json again;
  auto second = pool.take(key, 5000ms, again);
  REQUIRE(second);
  CHECK(again["prestarted"] == true);
  CHECK(pool.waiting() == 0);
}

TEST_CASE("worker pool: a refill after a GEMM job asks the next worker to warm cuBLASLt") {
  ptxbench::util::TempDir dir("ptxbench-test");
  const fs::path args = dir.path() / "args";
  // Appends its arguments to `args` (one line per start), then serves as the good worker.
  const fs::path w =
      script(dir.path(), "worker.sh", "echo \"$*\" >> '" + args.string() + "'\n" + std::string(kGoodWorker));
  const auto key = key_for(w);
  {
    ev::detail::WorkerPool pool;
    pool.refill(key, true);
    json figures;
    auto first = pool.take(key, 5000ms, figures);  // the one refill started: any job can take it
    REQUIRE(first);
    CHECK(figures["prestarted"] == true);
    pool.refill(key, false);
    json again;
    REQUIRE(pool.take(key, 5000ms, again));  // ready: its arguments are written
  }
  const auto lines = ptxbench::util::read_file(args);
  REQUIRE(lines);
  const std::size_t cut = lines->find('\n');
  REQUIRE(cut != std::string::npos);
  CHECK(lines->substr(0, cut).find("--prestart") != std::string::npos);
  CHECK(lines->substr(0, cut).find("--warm-cublaslt") != std::string::npos);
  CHECK(lines->substr(cut + 1).find("--prestart") != std::string::npos);
  CHECK(lines->substr(cut + 1).find("--warm-cublaslt") == std::string::npos);
}

TEST_CASE(
    "worker pool: a worker that dies before its job is replaced; one that never gets ready is not used") {
  ptxbench::util::TempDir dir("ptxbench-test");
  // Dies on its first start (leaves a marker), works from then on.
  const fs::path marker = dir.path() / "died-once";
  const fs::path flaky = script(dir.path(), "flaky.sh",
                                "if [ ! -e '" + marker.string() + "' ]; then : > '" + marker.string() +
                                    "'; exit 1; fi\n" + kGoodWorker);
  ev::detail::WorkerPool pool;
  json figures;
  auto w = pool.take(key_for(flaky), 5000ms, figures);
  CHECK(w);
  CHECK(figures["replaced"] == 1);

  // A waiting worker that died while idle: taken, found dead, replaced by a fresh one.
  const fs::path once =
      script(dir.path(), "once.sh",
             "if [ -e '" + (dir.path() / "idle-died").string() + "' ]; then\n" + std::string(kGoodWorker) +
                 "else : > '" + (dir.path() / "idle-died").string() + "'; exit 1; fi\n");
  pool.refill(key_for(once));
  CHECK(pool.waiting() == 1);
  json idle;
  auto fresh = pool.take(key_for(once), 5000ms, idle);
  CHECK(fresh);
  CHECK(idle["prestarted"] == true);
  CHECK(idle["replaced"] == 1);

  const fs::path dead = script(dir.path(), "dead.sh", "exit 4\n");
  json none;
  CHECK_FALSE(pool.take(key_for(dead), 5000ms, none));
  CHECK(none["replaced"] == 2);  // tried twice, then the caller runs a one-shot worker that says why

  const fs::path silent = script(dir.path(), "silent.sh", "sleep 30\n");
  json slow;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(pool.take(key_for(silent), 200ms, slow));
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // killed, not waited for
}

namespace {
// The GEMM task and its wgmma_tma reference response, as the verdict cache tests read them.
std::pair<ptxbench::tasks::Task, std::string> gemm_and_wgmma_response() {
  auto task =
      ptxbench::tasks::load_task_file(fs::path(PTXBENCH_SOURCE_DIR) / "tasks" / "gemm_n7168_k5120.json");
  REQUIRE(task);
  auto response = ptxbench::util::read_file(fs::path(PTXBENCH_SOURCE_DIR) / "tasks" / "solutions" /
                                            "gemm_n7168_k5120" / "wgmma_tma" / "response.md");
  REQUIRE(response);
  return {std::move(*task), std::move(*response)};
}
}  // namespace

TEST_CASE("verdict cache: the workspace size and the SM count are part of the key") {
  const auto [task_value, response_value] = gemm_and_wgmma_response();
  const auto *task = &task_value;
  const auto *response = &response_value;
  const auto with_workspace = [&](const std::string &bytes) {
    std::string r = *response;
    const auto at = r.rfind("\"params\": [");
    REQUIRE(at != std::string::npos);
    r.replace(at, 11, "\"workspace_bytes\": \"" + bytes + "\", \"params\": [{\"workspace\": true}, ");
    return r;
  };
  ev::EvaluatorSettings settings;
  ev::VerdictCache cache(json{{"gpu", "H200"}, {"driver", 580}});
  const auto small = cache.key(*task, with_workspace("4096"), settings);
  const auto large = cache.key(*task, with_workspace("8192"), settings);
  const auto per_sm = cache.key(*task, with_workspace("num_sms * 4096"), settings);
  REQUIRE(small);
  REQUIRE(large);
  REQUIRE(per_sm);
  CHECK(*small != *large);
  CHECK(*small != *cache.key(*task, *response, settings));
  // The same manifest on another SM count (the evaluator's num_sms setting) is another key.
  ev::EvaluatorSettings pcie = settings;
  pcie.num_sms = 114;
  CHECK(*cache.key(*task, with_workspace("num_sms * 4096"), pcie) != *per_sm);
  CHECK(*cache.key(*task, *response, pcie) != *cache.key(*task, *response, settings));
  // Setting the table's own value resolves the same plans; the settings record that it was set.
  ev::EvaluatorSettings explicit_132 = settings;
  explicit_132.num_sms = 132;
  CHECK(*cache.key(*task, with_workspace("num_sms * 4096"), explicit_132) != *per_sm);
}

TEST_CASE(
    "parse once: the cache key and the CPU stages take one parse; the same key and verdict as from text") {
  const auto [task_value, response_value] = gemm_and_wgmma_response();
  ev::EvaluatorSettings settings;
  settings.run_gpu = false;
  ev::VerdictCache cache(json{{"gpu", "H200"}, {"driver", 580}});
  ev::ParsedCandidate parsed = ev::parse_candidate(task_value, response_value, settings);
  REQUIRE(parsed.parsed());
  CHECK(parsed.parse.wall_seconds > 0);
  CHECK(parsed.plans.size() == task_value.workloads.size());
  // The key from the parsed candidate is the key from the text (old cache directories stay valid).
  const auto key = cache.key(task_value, parsed, settings);
  REQUIRE(key);
  CHECK(*key == *cache.key(task_value, response_value, settings));
  // The stages after parse on it give the verdict the text gives.
  const ev::CompiledCandidate from_parsed = ev::run_cpu_stages(task_value, std::move(parsed), settings);
  const ev::CompiledCandidate from_text = ev::run_cpu_stages(task_value, response_value, settings);
  CHECK(from_parsed.verdict.status == from_text.verdict.status);
  CHECK(from_parsed.verdict.parse.status == ev::Status::ok);
  CHECK(from_parsed.verdict.parse.summary == from_text.verdict.parse.summary);
  CHECK(from_parsed.verdict.parse.figures == from_text.verdict.parse.figures);
  CHECK(from_parsed.verdict.kernel_hash == from_text.verdict.kernel_hash);
  CHECK(from_parsed.manifest.entry == from_text.manifest.entry);
  // A response whose manifest does not resolve: no key, the stage fails as from text, and the split
  // kernel is kept for the record.
  std::string bad = response_value;
  const auto entry = bad.find("\"entry\"");
  REQUIRE(entry != std::string::npos);
  bad.replace(entry, 7, "\"entryx\"");
  ev::ParsedCandidate failed = ev::parse_candidate(task_value, bad, settings);
  CHECK_FALSE(failed.parsed());
  CHECK_FALSE(cache.key(task_value, failed, settings));
  CHECK_FALSE(failed.response.kernel_source.empty());
  const ev::CompiledCandidate failed_stages = ev::run_cpu_stages(task_value, std::move(failed), settings);
  CHECK(failed_stages.verdict.status == ev::run_cpu_stages(task_value, bad, settings).verdict.status);
  CHECK(failed_stages.verdict.compile.status == ev::Status::skipped);
}

TEST_CASE("run seed: a job's input seed is a hash of the run seed and the task") {
  const std::uint64_t a = ev::task_input_seed(20260101, "gemm_n7168_k5120");
  CHECK(a == ev::task_input_seed(20260101, "gemm_n7168_k5120"));  // fixed within a run
  CHECK(a != ev::task_input_seed(20260102, "gemm_n7168_k5120"));  // another run, other inputs
  CHECK(a != ev::task_input_seed(20260101, "mha_fwd_d128"));      // another task, other inputs
  CHECK(a != 0);
  CHECK(ev::task_input_seed(0, "") != 0);  // 0 would tell the worker to draw from the clock
  // Drawn seeds: never 0, within 53 bits (exact in every JSON reader), not the same twice.
  const std::uint64_t d1 = ev::draw_run_seed(), d2 = ev::draw_run_seed();
  CHECK(d1 != 0);
  CHECK(d1 < (std::uint64_t{1} << 53));
  CHECK(d1 != d2);
  // Recorded in the settings every verdict carries.
  ev::EvaluatorSettings s;
  s.run_seed = d1;
  CHECK(s.to_json()["run_seed"] == d1);
  CHECK(s.to_json()["correctness"]["borderline"]["low"] == 0.6);
}

TEST_CASE("verdict cache: a resent identical kernel reuses its verdict; any change misses") {
  const auto [task_value, response_value] = gemm_and_wgmma_response();
  const auto *task = &task_value;
  const auto *response = &response_value;
  ev::EvaluatorSettings settings;
  ev::VerdictCache cache(json{{"gpu", "H200"}, {"driver", 580}});
  const auto key = cache.key(*task, *response, settings);
  REQUIRE(key);
  CHECK_FALSE(cache.get(*key));

  // Comments and whitespace in the PTX do not change the normalized kernel hash.
  std::string commented = *response;
  const auto at = commented.find(".version");
  REQUIRE(at != std::string::npos);
  commented.insert(at, "// a comment the model added\n   \n");
  CHECK(cache.key(*task, commented, settings) == key);

  ev::Verdict v;
  v.status = ev::Status::ok;
  v.task_id = task->id;
  v.axes.speedup = 0.93;
  v.wall_seconds = 1.2;
  cache.put(*key, v, "m/gemm/0 turn 0");
  const auto hit = cache.get(*key);
  REQUIRE(hit);
  CHECK(hit->axes.speedup == doctest::Approx(0.93));
  CHECK(hit->reused_from["origin"] == "m/gemm/0 turn 0");
  CHECK(hit->wall_seconds == 0);
  CHECK(ev::Verdict::from_json(hit->to_json()).reused_from["origin"] == "m/gemm/0 turn 0");
  cache.put(*key, ev::Verdict{}, "later");  // the first verdict for a key is kept
  CHECK(cache.get(*key)->reused_from["origin"] == "m/gemm/0 turn 0");

  // A changed kernel, launch, setting or environment is another key.
  std::string changed = *response;
  const auto ret = changed.rfind("ret;");
  REQUIRE(ret != std::string::npos);
  changed.insert(ret, "add.u32 %r1, %r1, 0;\n");
  CHECK(cache.key(*task, changed, settings) != key);
  ev::EvaluatorSettings more_trials = settings;
  more_trials.correctness.trials = 5;
  CHECK(cache.key(*task, *response, more_trials) != key);
  // Another run seed fills other inputs: a verdict is reused only under the seed that made it.
  ev::EvaluatorSettings seeded = settings;
  seeded.run_seed = 1234567;
  const auto seeded_key = cache.key(*task, *response, seeded);
  CHECK(seeded_key != key);
  ev::EvaluatorSettings reseeded = settings;
  reseeded.run_seed = 7654321;
  CHECK(cache.key(*task, *response, reseeded) != seeded_key);
  CHECK(cache.key(*task, *response, seeded) == seeded_key);
  ev::EvaluatorSettings narrower = settings;
  narrower.correctness.borderline.high = 1.5;
  CHECK(cache.key(*task, *response, narrower) != key);
  ev::EvaluatorSettings other_paths = settings;
  other_paths.worker.prestart = false;
  other_paths.lock_dir = "/elsewhere";
  CHECK(cache.key(*task, *response, other_paths) == key);  // how it runs, not what it decides
  ev::VerdictCache other_gpu(json{{"gpu", "H100"}, {"driver", 580}});
  CHECK(other_gpu.key(*task, *response, settings) != key);

  // A verdict that reflects the machine (no GPU worker) is not kept.
  ev::Verdict machine;
  machine.correctness.summary = "the GPU worker could not start: program not found";
  machine.machine_fault = ev::MachineFault::worker_not_started;
  ev::VerdictCache fresh(json{{"gpu", "H200"}});
  fresh.put(*key, machine, "x");
  CHECK(fresh.size() == 0);
  // No kernel: not cacheable.
  CHECK_FALSE(cache.key(*task, "no kernel here", settings));
}
