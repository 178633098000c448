#include "fuzz_common.hpp"

namespace ptxbench::fuzz {

tasks::Task gemm_task() {
  tasks::Task t;
  t.id = "fuzz_gemm";
  t.family = tasks::Family::gemm;
  t.arch = "sm_90a";
  t.title = "fuzz GEMM";
  t.description = "C = A * B^T";
  t.tensors = {
      {"A", tasks::DType::bf16, {"M", "K"}, tasks::TensorRole::input, tasks::Distribution::normal, ""},
      {"B", tasks::DType::bf16, {"N", "K"}, tasks::TensorRole::input, tasks::Distribution::normal, ""},
      {"C", tasks::DType::bf16, {"M", "N"}, tasks::TensorRole::output, tasks::Distribution::normal, ""}};
  t.symbols = {"M", "N", "K"};
  t.workloads = {{"M=4096", {{"M", 4096}, {"N", 4096}, {"K", 4096}}},
                 {"M=3000", {{"M", 3000}, {"N", 4096}, {"K", 4096}}}};
  tasks::TargetInstruction wgmma;
  wgmma.name = "wgmma";
  wgmma.ptx_mnemonic = "wgmma.mma_async";
  wgmma.sass_families = {"HGMMA"};
  tasks::TargetInstruction tma;
  tma.name = "tma_load";
  tma.ptx_mnemonic = "cp.async.bulk.tensor";
  tma.sass_families = {"UTMALDG"};
  t.targets = {wgmma, tma};
  t.reference = "cublaslt";
  t.tolerances["C"] = {0.125, 0.0078125};
  t.flops = "2*M*N*K";
  t.bytes = "2*(M*K + N*K + M*N)";
  return t;
}

}  // namespace ptxbench::fuzz
