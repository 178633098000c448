#include "evaluator/worker/family.hpp"

namespace ptxbench::worker {

ElemType elem_type_from_string(const std::string &name) {
  if (name == "bf16") return ElemType::bf16;
  if (name == "f16") return ElemType::f16;
  if (name == "f32") return ElemType::f32;
  if (name == "e4m3") return ElemType::e4m3;
  if (name == "e5m2") return ElemType::e5m2;
  if (name == "i32") return ElemType::i32;
  throw WorkerError("internal", "unknown element type '" + name + "'");
}

std::string to_string(ElemType t) {
  switch (t) {
    case ElemType::bf16:
      return "bf16";
    case ElemType::f16:
      return "f16";
    case ElemType::f32:
      return "f32";
    case ElemType::e4m3:
      return "e4m3";
    case ElemType::e5m2:
      return "e5m2";
    case ElemType::i32:
      return "i32";
  }
  return "?";
}

std::size_t size_of(ElemType t) {
  switch (t) {
    case ElemType::bf16:
    case ElemType::f16:
      return 2;
    case ElemType::f32:
    case ElemType::i32:
      return 4;
    case ElemType::e4m3:
    case ElemType::e5m2:
      return 1;
  }
  return 0;
}

InputDistribution distribution_from_string(const std::string &name) {
  if (name == "normal") return InputDistribution::normal;
  if (name == "uniform") return InputDistribution::uniform;
  if (name == "spiky") return InputDistribution::spiky;
  if (name == "derived") return InputDistribution::derived;
  throw WorkerError("internal", "unknown input distribution '" + name + "'");
}

std::int64_t TensorSpec::elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

const TensorSpec *WorkloadSpec::find_tensor(const std::string &n) const {
  for (const auto &t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

const ScalarSpec *WorkloadSpec::find_scalar(const std::string &n) const {
  for (const auto &s : scalars)
    if (s.name == n) return &s;
  return nullptr;
}

std::unique_ptr<FamilyHandler> make_family_handler(const std::string &family, const std::string &reference) {
  if (family == "gemm") return make_gemm_handler(reference);
  if (family == "attention_fwd" || family == "attention_bwd")
    return make_attention_handler(family, reference);
  return nullptr;
}

}  // namespace ptxbench::worker
