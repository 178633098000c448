// The attention families behind the worker's FamilyHandler interface:
//   attention_fwd  (reference "cudnn_sdpa_fwd"): Q, K, V -> O, LSE
//   attention_bwd  (reference "cudnn_sdpa_bwd"): Q, K, V, O, dO, LSE -> dQ, dK, dV
// Values come from our fp32 reference kernels (every head, every element);
// speed from cuDNN SDPA (cudnn_sdpa.hpp). For backward, O and LSE are derived
// inputs: our reference forward computes them from the trial's fresh Q, K, V,
// so the candidate, the reference and cuDNN all see the same consistent pair.
#include <cmath>
#include <string>
#include <vector>

#include "evaluator/worker/attention_reference.hpp"
#include "evaluator/worker/cudnn_sdpa.hpp"
#include "evaluator/worker/family.hpp"

namespace ptxbench::worker {
namespace {

struct Shape {
  std::int64_t B = 0, H = 0, S = 0, D = 0;
  float scale = 0;
  bool causal = false;
};

class AttentionHandler final : public FamilyHandler {
 public:
  explicit AttentionHandler(bool backward) : backward_(backward) {}

  std::string family() const override { return backward_ ? "attention_bwd" : "attention_fwd"; }

  std::string check_workload(const WorkloadSpec &w) const override {
    for (const char *sym : {"B", "H", "S", "D"})
      if (!w.symbols.count(sym)) return std::string("attention workload lacks the symbol ") + sym;
    const Shape s = shape_of(w);
    const std::vector<std::int64_t> bhsd{s.B, s.H, s.S, s.D}, bhs{s.B, s.H, s.S};
    auto expect = [&](const char *name, ElemType type, const std::vector<std::int64_t> &shape,
                      bool output) -> std::string {
      const TensorSpec *t = w.find_tensor(name);
      if (!t) return std::string("attention workload lacks tensor ") + name;
      if (t->type != type || t->shape != shape || t->is_output != output)
        return std::string("tensor ") + name + " must be " + (output ? "an output " : "an input ") +
               to_string(type) + (shape.size() == 4 ? " [B,H,S,D]" : " [B,H,S]");
      return "";
    };
    std::vector<std::string> problems;
    if (!backward_) {
      for (const char *n : {"Q", "K", "V"}) problems.push_back(expect(n, ElemType::bf16, bhsd, false));
      problems.push_back(expect("O", ElemType::bf16, bhsd, true));
      problems.push_back(expect("LSE", ElemType::f32, bhs, true));
    } else {
      for (const char *n : {"Q", "K", "V", "O", "dO"})
        problems.push_back(expect(n, ElemType::bf16, bhsd, false));
      problems.push_back(expect("LSE", ElemType::f32, bhs, false));
      for (const char *n : {"dQ", "dK", "dV"}) problems.push_back(expect(n, ElemType::bf16, bhsd, true));
      for (const char *n : {"O", "LSE"})
        if (const TensorSpec *t = w.find_tensor(n); t && t->distribution != InputDistribution::derived)
          problems.push_back(std::string("tensor ") + n +
                             " of attention backward must have distribution 'derived'");
    }
    for (const auto &p : problems)
      if (!p.empty()) return p;
    if (!(s.scale > 0) || !std::isfinite(s.scale)) return "softmax_scale must be a positive finite number";
    const char *why = attention_reference::unsupported_reason(reference_problem(s));
    return why;
  }

  void derive_inputs(const WorkloadSpec &w, const TensorSet &t, cudaStream_t stream) override {
    if (!backward_) return;
    const Shape s = shape_of(w);
    attention_reference::forward(t.at("Q").data, t.at("K").data, t.at("V").data, nullptr, t.at("O").data,
                                 t.at("LSE").as<float>(), reference_problem(s), {}, stream);
  }

  void run_reference(const WorkloadSpec &w, const TensorSet &t, const ReferenceSet &ref,
                     cudaStream_t stream) override {
    const Shape s = shape_of(w);
    if (!backward_) {
      attention_reference::forward(t.at("Q").data, t.at("K").data, t.at("V").data, ref.at("O"), nullptr,
                                   ref.at("LSE"), reference_problem(s), {}, stream);
    } else {
      attention_reference::backward(t.at("Q").data, t.at("K").data, t.at("V").data, t.at("O").data,
                                    t.at("dO").data, t.at("LSE").as<float>(), ref.at("dQ"), ref.at("dK"),
                                    ref.at("dV"), reference_problem(s), {}, stream);
    }
  }

  LibraryInfo prepare_library(const WorkloadSpec &w, const TensorSet &inputs, const TensorSet &outputs,
                              cudaStream_t stream) override {
    shape_ = shape_of(w);
    const cudnn_sdpa::Versions &v = cudnn_sdpa::versions();  // throws "library" when cuDNN is missing
    const cudnn_sdpa::PlanChoice &plan = launch(inputs, outputs, stream);
    LibraryInfo info;
    info.name = "cuDNN";
    info.version = v.cudnn;
    info.algo = {{"api", backward_ ? "cudnn_frontend sdpa_backward" : "cudnn_frontend sdpa (generate_stats)"},
                 {"frontend_version", v.frontend},
                 {"cudnn_library", v.cudnn_library},
                 {"cudnn_found", v.candidates},
                 {"plan", plan.to_json()},
                 {"best_ms", plan.median_ms},
                 {"default_ms", plan.heuristic_first_ms}};
    return info;
  }

  void run_library(const TensorSet &inputs, const TensorSet &outputs, cudaStream_t stream) override {
    launch(inputs, outputs, stream);
  }

 private:
  static Shape shape_of(const WorkloadSpec &w) {
    Shape s;
    auto sym = [&](const char *n) {
      auto it = w.symbols.find(n);
      return it == w.symbols.end() ? std::int64_t{0} : it->second;
    };
    s.B = sym("B");
    s.H = sym("H");
    s.S = sym("S");
    s.D = sym("D");
    const ScalarSpec *scale = w.find_scalar("softmax_scale");
    s.scale =
        scale ? static_cast<float>(scale->value) : 1.f / std::sqrt(static_cast<float>(s.D > 0 ? s.D : 1));
    s.causal = w.causal;
    return s;
  }

  static attention_reference::Problem reference_problem(const Shape &s) {
    return {s.B, s.H, s.S, s.D, s.scale, s.causal};
  }

  const cudnn_sdpa::PlanChoice &launch(const TensorSet &in, const TensorSet &out, cudaStream_t stream) const {
    const cudnn_sdpa::Problem p{shape_.B, shape_.H, shape_.S, shape_.D, shape_.scale, shape_.causal};
    if (!backward_)
      return cudnn_sdpa::forward(in.at("Q").data, in.at("K").data, in.at("V").data, out.at("O").data,
                                 out.at("LSE").as<float>(), p, stream);
    return cudnn_sdpa::backward(in.at("Q").data, in.at("K").data, in.at("V").data, in.at("O").data,
                                in.at("dO").data, in.at("LSE").as<float>(), out.at("dQ").data,
                                out.at("dK").data, out.at("dV").data, p, stream);
  }

  bool backward_;
  Shape shape_;
};

}  // namespace

std::unique_ptr<FamilyHandler> make_attention_handler(const std::string &family,
                                                      const std::string &reference) {
  if (family == "attention_fwd" && reference == "cudnn_sdpa_fwd")
    return std::make_unique<AttentionHandler>(false);
  if (family == "attention_bwd" && reference == "cudnn_sdpa_bwd")
    return std::make_unique<AttentionHandler>(true);
  return nullptr;
}

}  // namespace ptxbench::worker
