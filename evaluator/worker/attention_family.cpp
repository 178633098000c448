// Placeholder for the attention families (owned by h8, who replaces this file):
// until then attention tasks report "no handler" from the worker.
#include "evaluator/worker/family.hpp"

namespace ptxbench::worker {

std::unique_ptr<FamilyHandler> make_attention_handler(const std::string &, const std::string &) {
  return nullptr;
}

}  // namespace ptxbench::worker
