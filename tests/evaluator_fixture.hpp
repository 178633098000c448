// Shared by the evaluator's test files: the core GEMM task and a good launch manifest to mutate.
#pragma once

#include <filesystem>
#include <string>

#include <doctest/doctest.h>

#include "evaluator/evaluator.hpp"
#include "support/support.hpp"

namespace ptxbench::test::evaluator_fixture {

using namespace ptxbench::evaluator;

/// tests/data/evaluator/<name>, read.
inline std::string data_file(const std::string &name) {
  return test::test_data(std::filesystem::path("evaluator") / name);
}

inline const tasks::Task &gemm_task() {
  return test::repo_task("gemm_n7168_k5120");
}

inline const char *kGoodManifest = R"json({
  "entry": "gemm_tma_wgmma",
  "grid": ["ceil_div(N, 128)", "ceil_div(M, 128)", 1],
  "block": [128, 1, 1],
  "params": [{"tensor": "C"}, {"tensor_map": "A", "box": [64, 128], "swizzle": "128B"}, {"scalar": "N"}]
})json";

// The manifest with one substring replaced; the replacement must happen.
inline std::string manifest_with(const std::string &from, const std::string &to) {
  std::string m = kGoodManifest;
  auto pos = m.find(from);
  REQUIRE_MESSAGE(pos != std::string::npos, from);
  return m.replace(pos, from.size(), to);
}

inline std::string manifest_error(const std::string &text) {
  auto m = parse_manifest(text, gemm_task());
  REQUIRE_MESSAGE(!m.has_value(), text);
  return m.error();
}

}  // namespace ptxbench::test::evaluator_fixture
