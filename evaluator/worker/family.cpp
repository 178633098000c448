#include "evaluator/worker/family.hpp"

namespace ptxbench::worker {

std::unique_ptr<FamilyHandler> make_family_handler(const std::string &family, const std::string &reference) {
  if (family == "gemm") return make_gemm_handler(reference);
  if (family == "attention_fwd" || family == "attention_bwd")
    return make_attention_handler(family, reference);
  return nullptr;
}

}  // namespace ptxbench::worker
