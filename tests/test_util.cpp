// util: subprocesses (limits, process-group kill, capture caps, scrubbed env),
// integer expressions (every error class), files, hashing, <think> splitting.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>

#include "util/files.hpp"
#include "util/int_expr.hpp"
#include "util/strings.hpp"
#include "util/subprocess.hpp"
#include "util/think_tags.hpp"

using namespace ptxbench::util;
namespace fs = std::filesystem;

namespace {
ProcessSpec shell(const std::string &script, const std::string &home = "/tmp") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = scrubbed_environment(home);
  spec.limits.wall_time = std::chrono::milliseconds(10'000);
  return spec;
}
}  // namespace

// ---------------------------------------------------------------- expressions

TEST_CASE("int_expr: arithmetic, precedence, functions") {
  SymbolTable sym{{"M", 8192}, {"N", 7168}, {"K", 5120}};
  auto eval = [&](const char *text) {
    auto v = evaluate_int_expression(text, sym);
    REQUIRE_MESSAGE(v.has_value(), text << ": " << v.error());
    return *v;
  };
  CHECK(eval("1 + 2 * 3") == 7);
  CHECK(eval("(1 + 2) * 3") == 9);
  CHECK(eval("ceil_div(N, 128)") == 56);
  CHECK(eval("ceil_div(M - 1, 128)") == 64);
  CHECK(eval("ceil_div(8191, 128)") == 64);
  CHECK(eval("ceil_div(-5, 2)") == -2);
  CHECK(eval("min(M, N) + max(3, K)") == 7168 + 5120);
  CHECK(eval("-M + 1") == -8191);
  CHECK(eval("- -3") == 3);
  CHECK(eval("17 % 5") == 2);
  CHECK(eval("17 / 5") == 3);
  CHECK(eval("4 * (128*64 + 128*64) * 2") == 131072);
  CHECK(eval("  42  ") == 42);
  CHECK(eval("9223372036854775807") == INT64_MAX);
}

TEST_CASE("int_expr: every error class names the problem and the column") {
  SymbolTable sym{{"B", 4}, {"D", 128}, {"H", 48}, {"S", 4096}};
  auto error_of = [&](const char *text) {
    auto v = evaluate_int_expression(text, sym);
    REQUIRE_MESSAGE(!v.has_value(), text << " unexpectedly gave " << *v);
    return v.error();
  };
  CHECK(error_of("S + Q") == "unknown symbol 'Q' at column 5 (known: B, D, H, S)");
  CHECK(error_of("S / (D - 128)").find("division by zero at column 3") != std::string::npos);
  CHECK(error_of("S % 0").find("modulo by zero") != std::string::npos);
  CHECK(error_of("ceil_div(S, 0)").find("division by zero in ceil_div at column 1") != std::string::npos);
  CHECK(error_of("1000000000000000000000000000000").find("integer literal out of range") !=
        std::string::npos);
  CHECK(error_of("9223372036854775807 + 1").find("overflow") != std::string::npos);
  CHECK(error_of("S * S * S * S * S * S").find("overflow") != std::string::npos);
  CHECK(error_of("-9223372036854775807 - 2").find("overflow") != std::string::npos);
  CHECK(error_of("floor(S)").find("unknown function 'floor' at column 1") != std::string::npos);
  CHECK(error_of("min(S)").find("min takes 2 arguments, got 1") != std::string::npos);
  CHECK(error_of("(S + 1").find("expected ')' but the expression ended at column 7") != std::string::npos);
  CHECK(error_of("S +").find("expression ended") != std::string::npos);
  CHECK(error_of("").find("empty expression") != std::string::npos);
  CHECK(error_of("S 1").find("unexpected '1' at column 3") != std::string::npos);
  CHECK(error_of("1.5 * S").find("only integers") != std::string::npos);
  CHECK(error_of("S ^ 2").find("unexpected '^'") != std::string::npos);
  CHECK(error_of(std::string(200, '(').c_str()).find("nested deeper") != std::string::npos);
  CHECK(evaluate_int_expression(std::string(5000, '1'), sym).error().find("longer than") !=
        std::string::npos);
}

TEST_CASE("int_expr: no symbols defined") {
  auto v = evaluate_int_expression("X", {});
  REQUIRE_FALSE(v.has_value());
  CHECK(v.error() == "unknown symbol 'X' at column 1 (no symbols are defined)");
}

// ---------------------------------------------------------------- subprocess

TEST_CASE("subprocess: exit code, stdout, stderr, stdin") {
  auto r = run_process(shell("cat; echo to-err >&2; exit 3"));
  REQUIRE(r.has_value());
  CHECK(r->exit_code == 3);
  CHECK_FALSE(r->ok());
  CHECK(r->stderr_text == "to-err\n");
  CHECK(r->describe() == "exit 3");

  ProcessSpec spec = shell("tr a-z A-Z");
  spec.stdin_data = std::string(300000, 'x');  // larger than a pipe buffer
  auto r2 = run_process(spec);
  REQUIRE(r2.has_value());
  CHECK(r2->ok());
  CHECK(r2->stdout_text == std::string(300000, 'X'));
}

TEST_CASE("subprocess: argv is never interpreted by a shell") {
  ProcessSpec spec;
  spec.argv = {"/bin/echo", "$(touch /tmp/ptxbench-test-should-not-exist)", ";", "rm", "-rf", "/"};
  spec.env = scrubbed_environment("/tmp");
  auto r = run_process(spec);
  REQUIRE(r.has_value());
  CHECK(r->stdout_text == "$(touch /tmp/ptxbench-test-should-not-exist) ; rm -rf /\n");
  CHECK_FALSE(fs::exists("/tmp/ptxbench-test-should-not-exist"));
}

TEST_CASE("subprocess: wall-clock limit kills the whole process group") {
  TempDir dir("ptxbench-test");
  fs::path pidfile = dir.path() / "grandchild.pid";
  // The grandchild ignores SIGTERM and outlives its parent's shell unless the group is killed.
  ProcessSpec spec =
      shell("trap '' TERM; (trap '' TERM; sleep 30) & echo $! > " + pidfile.string() + "; sleep 30");
  spec.limits.wall_time = std::chrono::milliseconds(300);
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_process(spec);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.has_value());
  CHECK(r->timed_out);
  CHECK(took < 3.0);
  CHECK(r->describe().find("timed out after") == 0);
  // The grandchild is gone too.
  std::ifstream in(pidfile);
  pid_t grandchild = 0;
  in >> grandchild;
  REQUIRE(grandchild > 0);
  bool alive = true;
  for (int i = 0; i < 100 && alive; ++i) {
    alive = ::kill(grandchild, 0) == 0;
    // A zombie still answers kill(0); check /proc state.
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid_s, comm, state;
    if (stat >> pid_s >> comm >> state && state == "Z") alive = false;
    if (alive) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK_FALSE(alive);
}

TEST_CASE("subprocess: a background child holding the pipes does not hang the caller") {
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_process(shell("sleep 20 & echo started"));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.has_value());
  CHECK(r->exit_code == 0);
  CHECK(r->stdout_text == "started\n");
  CHECK(took < 3.0);
}

TEST_CASE("subprocess: output beyond the cap is dropped and counted") {
  ProcessSpec spec = shell("head -c 100000 /dev/zero");
  spec.limits.max_output_bytes = 1000;
  auto r = run_process(spec);
  REQUIRE(r.has_value());
  CHECK(r->ok());
  CHECK(r->stdout_text.size() == 1000);
  CHECK(r->stdout_dropped == 99000);
}

TEST_CASE("subprocess: rlimits apply in the child") {
  ProcessSpec spec = shell("ulimit -n; ulimit -c; ulimit -f");
  spec.limits.open_files = 64;
  spec.limits.file_size_bytes = 1024 * 1024;
  auto r = run_process(spec);
  REQUIRE(r.has_value());
  CHECK(r->stdout_text == "64\n0\n2048\n");  // ulimit -f counts 512-byte blocks

  ProcessSpec cpu = shell("while :; do :; done");
  cpu.limits.cpu_seconds = 1;
  auto r2 = run_process(cpu);
  REQUIRE(r2.has_value());
  CHECK(r2->signaled);
  CHECK((r2->signal == SIGXCPU || r2->signal == SIGKILL));
  CHECK(r2->describe().find("killed by signal") == 0);

  ProcessSpec big = shell("head -c 5000000 /dev/zero > big.bin");
  TempDir dir("ptxbench-test");
  big.working_directory = dir.path().string();
  big.limits.file_size_bytes = 1u << 20;
  auto r3 = run_process(big);
  REQUIRE(r3.has_value());
  CHECK_FALSE(r3->ok());
  CHECK(fs::file_size(dir.path() / "big.bin") <= (1u << 20));
}

TEST_CASE("subprocess: scrubbed environment keeps no secrets") {
  ::setenv("OPENAI_API_KEY", "sk-secret", 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  auto env = scrubbed_environment("/tmp/home");
  CHECK_FALSE(env.contains("OPENAI_API_KEY"));
  CHECK(env.at("HOME") == "/tmp/home");
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0");
  auto r = run_process(shell("env"));
  REQUIRE(r.has_value());
  CHECK(r->stdout_text.find("sk-secret") == std::string::npos);
  CHECK(r->stdout_text.find("HOME=/tmp") != std::string::npos);
  ::unsetenv("OPENAI_API_KEY");
}

TEST_CASE("subprocess: a missing program is an error value, not an exception") {
  ProcessSpec spec;
  spec.argv = {"/nonexistent/program"};
  auto r = run_process(spec);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().find("program not found") != std::string::npos);
  CHECK_FALSE(find_program("definitely-not-a-program-ptxbench").has_value());
  CHECK(find_program("sh").has_value());
}

// ---------------------------------------------------------------- files

TEST_CASE("files: atomic write, bounded read, fsynced append, TempDir") {
  fs::path kept;
  {
    TempDir dir("ptxbench-test");
    kept = dir.path();
    struct stat st {};
    REQUIRE(::stat(dir.path().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    fs::path f = dir.path() / "a.txt";
    REQUIRE(write_file_atomic(f, "hello").has_value());
    REQUIRE(write_file_atomic(f, "replaced").has_value());
    CHECK(*read_file(f) == "replaced");
    auto too_big = read_file(f, 4);
    REQUIRE_FALSE(too_big.has_value());
    CHECK(too_big.error().find("limit") != std::string::npos);
    CHECK_FALSE(read_file(dir.path() / "missing").has_value());
    CHECK_FALSE(read_file(dir.path()).has_value());
    fs::path log = dir.path() / "log.jsonl";
    REQUIRE(append_fsync(log, "{\"a\":1}\n").has_value());
    REQUIRE(append_fsync(log, "{\"a\":2}\n").has_value());
    CHECK(*read_file(log) == "{\"a\":1}\n{\"a\":2}\n");
    // No temp files left behind by the atomic writes.
    int count = 0;
    for (const auto &e : fs::directory_iterator(dir.path())) count += e.path().filename().string()[0] == '.';
    CHECK(count == 0);
    CHECK_FALSE(write_file_atomic(dir.path() / "no" / "such" / "dir.txt", "x").has_value());
  }
  CHECK_FALSE(fs::exists(kept));
}

TEST_CASE("files: append reports a short write (file size limit)") {
  TempDir dir("ptxbench-test");
  fs::path log = dir.path() / "log";
  // Run the append in a child with RLIMIT_FSIZE so that the write fails with EFBIG.
  ProcessSpec spec = shell("head -c 2000 /dev/zero >> " + log.string());
  spec.limits.file_size_bytes = 1000;
  auto r = run_process(spec);
  REQUIRE(r.has_value());
  CHECK_FALSE(r->ok());
  CHECK(fs::file_size(log) == 1000);
}

TEST_CASE("files: an atomic write replaces by rename, never in place") {
  TempDir dir("ptxbench-test");
  const fs::path f = dir.path() / "result.json";
  REQUIRE(write_file_atomic(f, "old contents").has_value());
  std::ifstream reader(f);  // a reader that opened the file before the replace
  REQUIRE(reader.good());
  struct stat before {};
  REQUIRE(::stat(f.c_str(), &before) == 0);
  REQUIRE(write_file_atomic(f, "new").has_value());
  struct stat after {};
  REQUIRE(::stat(f.c_str(), &after) == 0);
  CHECK(after.st_ino != before.st_ino);  // a new file took the name
  CHECK((after.st_mode & 0777) == 0644);
  std::string seen((std::istreambuf_iterator<char>(reader)), std::istreambuf_iterator<char>());
  CHECK(seen == "old contents");  // the open reader still sees a whole file, the old one
  CHECK(*read_file(f) == "new");
  // A name that cannot be replaced (a folder stands there): an error naming it, the folder untouched,
  // no temporary file left beside it.
  fs::create_directory(dir.path() / "taken");
  auto refused = write_file_atomic(dir.path() / "taken", "x");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().find("taken") != std::string::npos);
  CHECK(fs::is_directory(dir.path() / "taken"));
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);  // f, taken/
}

TEST_CASE("fnv1a64: the published FNV-1a 64 vectors, as a number and as hex") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);  // the offset basis
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ull);
  CHECK(fnv1a64_hex("") == "cbf29ce484222325");
  CHECK(fnv1a64_hex("a") == "af63dc4c8601ec8c");
  CHECK(fnv1a64_hex("foobar") == "85944171f73967e8");
  // Bytes, not characters: a NUL inside counts, a high byte is taken unsigned.
  CHECK(fnv1a64(std::string_view("a\0b", 3)) != fnv1a64("ab"));
  CHECK(fnv1a64("\xff") == ((0xcbf29ce484222325ull ^ 0xffull) * 0x100000001b3ull));
  // The hex form is the number, 16 digits with leading zeros kept, so either may be stored.
  for (const char *text : {"", "a", "run seed 2024-01-01", "7/gemm_n4096_k4096"}) {
    CAPTURE(text);
    const std::string hex = fnv1a64_hex(text);
    CHECK(hex.size() == 16);
    CHECK(std::stoull(hex, nullptr, 16) == fnv1a64(text));
  }
}

// ---------------------------------------------------------------- think tags

TEST_CASE("split_think_tags: blocks anywhere, a bare close, an unclosed block") {
  struct Case {
    std::string_view input, content, reasoning;
  };
  const Case cases[] = {
      {"<think>\nplan it\n</think>\n\nthe answer", "the answer", "plan it"},
      // The chat template opened the block in the prompt: a bare close.
      {"opened by the template</think>answer", "answer", "opened by the template"},
      {"<think>cut off while thinking", "", "cut off while thinking"},
      {"no tags at all", "no tags at all", ""},
      {"<think>one</think>mid<think>two</think>end", "midend", "one\ntwo"},
      // A bare close, then a block: both go to the reasoning, in order.
      {"a</think>b<think>c</think>d", "bd", "a\nc"},
      // The answer keeps its own layout: only leading white space goes, trailing and inner stay.
      {"<think> x </think>\n\n```ptx\n  mov;\n```\n", "```ptx\n  mov;\n```\n", "x"},
      // Cut off after some answer text: the text before the open tag is the answer.
      {"partial answer <think>still thinking", "partial answer ", "still thinking"},
      {"", "", ""},
      {"<think>\n\n</think>", "", ""},
  };
  for (const Case &c : cases) {
    CAPTURE(c.input);
    const ThinkSplit split = split_think_tags(c.input);
    CHECK(split.content == c.content);
    CHECK(split.reasoning == c.reasoning);
  }
}

TEST_CASE(
    "data_dir: the environment first, then the installed folder beside the executable, then the fallback") {
  TempDir installed("ptxbench-test-install");
  const fs::path fallback = "/nonexistent/fallback";
  ::unsetenv("PTXBENCH_TEST_DATA_DIR");
  CHECK(data_dir("PTXBENCH_TEST_DATA_DIR", "no/such/share/folder", fallback) == fallback);
  // An absolute installed path replaces the executable's folder (std::filesystem's operator/).
  CHECK(data_dir("PTXBENCH_TEST_DATA_DIR", installed.path(), fallback) == installed.path());
  ::setenv("PTXBENCH_TEST_DATA_DIR", "/from/env", 1);
  CHECK(data_dir("PTXBENCH_TEST_DATA_DIR", installed.path(), fallback) == "/from/env");
  ::setenv("PTXBENCH_TEST_DATA_DIR", "", 1);  // empty counts as unset
  CHECK(data_dir("PTXBENCH_TEST_DATA_DIR", installed.path(), fallback) == installed.path());
  ::unsetenv("PTXBENCH_TEST_DATA_DIR");
  CHECK(own_executable().filename() == "test_util");
}

TEST_CASE("strings: line_starting_with finds complete lines only") {
  using ptxbench::util::line_starting_with;
  CHECK(line_starting_with("ready\nfinished 0\n", "finished ") == "finished 0");
  CHECK(line_starting_with("finished 3\nrest", "finished ") == "finished 3");
  CHECK(line_starting_with("note: unfinished 1\n", "finished ").empty());  // only at a line's start
  CHECK(line_starting_with("ready\nfinished 0", "finished ").empty());     // not ended yet
  CHECK(line_starting_with("", "finished ").empty());
}
