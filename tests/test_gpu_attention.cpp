// GPU tests of the attention references: our fp32 reference kernels against a
// float64 host computation (a few rows, exact conventions) and against cuDNN
// SDPA (whole tensors), forward and backward, causal and not, D = 64 and 128;
// the LSE convention (natural log) and the softmax scale.
//
// Without a GPU the program prints "SKIPPED: <reason>" and exits 77.
// `test_gpu_attention --cudnn-times=FILE` instead times our cuDNN calls at the
// core shapes and writes JSON (bench/fidelity_attention.py compares them with
// PyTorch's cuDNN attention backend).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "evaluator/worker/attention_reference.hpp"
#include "evaluator/worker/cudnn_sdpa.hpp"
#include "evaluator/worker/family.hpp"

namespace ref = ptxbench::worker::attention_reference;
namespace sdpa = ptxbench::worker::cudnn_sdpa;

namespace {

void cuda_ok(cudaError_t e, const char *what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// bf16 <-> float on the host (round to nearest even), independent of cuda_bf16.h.
std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
float from_bf16(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class T>
struct Device {
  T *ptr = nullptr;
  std::size_t count = 0;
  explicit Device(std::size_t n) : count(n) {
    cuda_ok(cudaMalloc(reinterpret_cast<void **>(&ptr), n * sizeof(T)), "cudaMalloc");
  }
  ~Device() { cudaFree(ptr); }
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  void upload(const std::vector<T> &h) {
    cuda_ok(cudaMemcpy(ptr, h.data(), count * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download() const {
    std::vector<T> h(count);
    cuda_ok(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }
  void fill_bytes(int byte) { cuda_ok(cudaMemset(ptr, byte, count * sizeof(T)), "memset"); }
};

enum class Draw { normal, spiky };

// Normal N(0,1), or the seed paper's spiky N(0,1) + N(0,100)·Bernoulli(0.001); never exactly zero.
std::vector<std::uint16_t> draw_bf16(std::size_t n, Draw draw, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01(0.f, 1.f), n100(0.f, 10.f);
  std::bernoulli_distribution spike(0.001);
  std::vector<std::uint16_t> out(n);
  for (auto &x : out) {
    float v = n01(rng);
    if (draw == Draw::spiky && spike(rng)) v += n100(rng);
    if (v == 0.f) v = 1e-3f;
    x = to_bf16(v);
  }
  return out;
}

std::vector<float> to_float(const std::vector<std::uint16_t> &b) {
  std::vector<float> f(b.size());
  std::transform(b.begin(), b.end(), f.begin(), from_bf16);
  return f;
}

// ‖got - want‖₂ / ‖want‖₂ and max |got - want|.
struct Error {
  double rel_l2 = 0, max_abs = 0, max_rel = 0;  // max_rel: max |got - want| / (1 + |want|)
  std::size_t nonfinite = 0;
};
Error compare(const std::vector<float> &got, const std::vector<float> &want) {
  Error e;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++e.nonfinite;
      continue;
    }
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    e.max_rel = std::max(e.max_rel, std::fabs(d) / (1 + std::fabs(want[i])));
  }
  e.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  return e;
}

struct Case {
  std::int64_t B, H, S, D;
  bool causal;
  float scale;
  ref::Problem ref_problem() const { return {B, H, S, D, scale, causal}; }
  sdpa::Problem sdpa_problem() const { return {B, H, S, D, scale, causal}; }
  std::size_t elems() const { return static_cast<std::size_t>(B * H * S * D); }
  std::size_t rows() const { return static_cast<std::size_t>(B * H * S); }
};

// Float64 host attention for single rows/columns of one head (x = bf16-rounded inputs as float).
struct HostHead {
  const Case &c;
  const float *q, *k, *v, *o, *d_o;  // head-local [S, D]
  const float *lse;                  // head-local [S] (given LSE for backward rows)
  bool vis(std::int64_t i, std::int64_t j) const { return !c.causal || j <= i; }
  double score(std::int64_t i, std::int64_t j) const {
    double s = 0;
    for (std::int64_t d = 0; d < c.D; ++d) s += static_cast<double>(q[i * c.D + d]) * k[j * c.D + d];
    return s * c.scale;
  }
  double lse_row(std::int64_t i) const {
    double m = -INFINITY;
    for (std::int64_t j = 0; j < c.S; ++j)
      if (vis(i, j)) m = std::max(m, score(i, j));
    double sum = 0;
    for (std::int64_t j = 0; j < c.S; ++j)
      if (vis(i, j)) sum += std::exp(score(i, j) - m);
    return m + std::log(sum);
  }
  std::vector<double> o_row(std::int64_t i) const {
    const double l = lse_row(i);
    std::vector<double> out(c.D, 0.0);
    for (std::int64_t j = 0; j < c.S; ++j)
      if (vis(i, j)) {
        const double p = std::exp(score(i, j) - l);
        for (std::int64_t d = 0; d < c.D; ++d) out[d] += p * v[j * c.D + d];
      }
    return out;
  }
  double delta(std::int64_t i) const {
    double s = 0;
    for (std::int64_t d = 0; d < c.D; ++d) s += static_cast<double>(d_o[i * c.D + d]) * o[i * c.D + d];
    return s;
  }
  double dp(std::int64_t i, std::int64_t j) const {
    double s = 0;
    for (std::int64_t d = 0; d < c.D; ++d) s += static_cast<double>(d_o[i * c.D + d]) * v[j * c.D + d];
    return s;
  }
  double p(std::int64_t i, std::int64_t j) const { return vis(i, j) ? std::exp(score(i, j) - lse[i]) : 0.0; }
  std::vector<double> dq_row(std::int64_t i) const {
    std::vector<double> out(c.D, 0.0);
    const double di = delta(i);
    for (std::int64_t j = 0; j < c.S; ++j) {
      const double ds = p(i, j) * (dp(i, j) - di);
      for (std::int64_t d = 0; d < c.D; ++d) out[d] += c.scale * ds * k[j * c.D + d];
    }
    return out;
  }
  void dkdv_row(std::int64_t j, std::vector<double> &dk, std::vector<double> &dv) const {
    dk.assign(c.D, 0.0);
    dv.assign(c.D, 0.0);
    for (std::int64_t i = 0; i < c.S; ++i) {
      const double pij = p(i, j);
      if (pij == 0.0) continue;
      const double ds = pij * (dp(i, j) - delta(i));
      for (std::int64_t d = 0; d < c.D; ++d) {
        dv[d] += pij * d_o[i * c.D + d];
        dk[d] += c.scale * ds * q[i * c.D + d];
      }
    }
  }
};

// max |got - want| / (1 + |want|) over a row.
double row_error(const float *got, const std::vector<double> &want) {
  double e = 0;
  for (std::size_t d = 0; d < want.size(); ++d)
    e = std::max(e, std::fabs(got[d] - want[d]) / (1 + std::fabs(want[d])));
  return e;
}

std::string describe(const Case &c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " S=" + std::to_string(c.S) +
         " D=" + std::to_string(c.D) + (c.causal ? " causal" : "") + " scale=" + std::to_string(c.scale);
}

struct ForwardData {
  std::vector<std::uint16_t> q, k, v;
};

void check_forward(const Case &c, std::uint64_t seed) {
  INFO(describe(c));
  ForwardData in{draw_bf16(c.elems(), Draw::normal, seed), draw_bf16(c.elems(), Draw::normal, seed + 1),
                 draw_bf16(c.elems(), Draw::normal, seed + 2)};
  Device<std::uint16_t> q(c.elems()), k(c.elems()), v(c.elems()), o_cudnn(c.elems());
  Device<float> o_ref(c.elems()), lse_ref(c.rows()), lse_cudnn(c.rows());
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  o_ref.fill_bytes(0xFF);  // NaN poison: every element must be written
  lse_ref.fill_bytes(0xFF);
  o_cudnn.fill_bytes(0xFF);
  lse_cudnn.fill_bytes(0xFF);
  ref::forward(q.ptr, k.ptr, v.ptr, o_ref.ptr, nullptr, lse_ref.ptr, c.ref_problem(), {}, nullptr);
  const auto &plan =
      sdpa::forward(q.ptr, k.ptr, v.ptr, o_cudnn.ptr, lse_cudnn.ptr, c.sdpa_problem(), nullptr);
  cuda_ok(cudaDeviceSynchronize(), "sync");
  MESSAGE("cuDNN " << sdpa::versions().cudnn << " forward plan " << plan.name << " (" << plan.plans_timed
                   << " timed)");

  const auto oref = o_ref.download(), lref = lse_ref.download(), lcud = lse_cudnn.download();
  const auto ocud = to_float(o_cudnn.download());
  // 1) our reference vs float64 on the host, a few rows of two heads: tight.
  const auto qf = to_float(in.q), kf = to_float(in.k), vf = to_float(in.v);
  for (std::int64_t head : {std::int64_t{0}, c.B * c.H - 1}) {
    const std::size_t off = static_cast<std::size_t>(head * c.S * c.D);
    HostHead hh{c, qf.data() + off, kf.data() + off, vf.data() + off, nullptr, nullptr, nullptr};
    for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, c.S / 2 + 3, c.S - 1}) {
      const double want_lse = hh.lse_row(i);
      const double got_ref = lref[head * c.S + i], got_cudnn = lcud[head * c.S + i];
      CHECK(std::fabs(got_ref - want_lse) < 1e-4 * (1 + std::fabs(want_lse)));
      // The LSE convention: cuDNN's Stats are the natural-log LSE of the *scaled* scores.
      CHECK(std::fabs(got_cudnn - want_lse) < 2e-3 * (1 + std::fabs(want_lse)));
      CHECK(row_error(oref.data() + off + i * c.D, hh.o_row(i)) < 1e-4);
    }
  }
  // 2) cuDNN vs our reference, whole tensors.
  const Error eo = compare(ocud, oref), el = compare(lcud, lref);
  MESSAGE("forward O rel_l2 " << eo.rel_l2 << " max_abs " << eo.max_abs << "; LSE max_abs " << el.max_abs);
  CHECK(compare(oref, oref).nonfinite == 0);
  CHECK(eo.nonfinite == 0);
  CHECK(eo.rel_l2 < 8e-3);
  CHECK(eo.max_rel < 2e-2);
  CHECK(el.nonfinite == 0);
  CHECK(el.max_abs < 5e-3);
}

/// Elements outside a task's tolerance (|got - want| > atol + rtol * |want|, or not finite), and the largest
/// share of the tolerance any element used.
struct ToleranceCount {
  std::size_t outside = 0;
  double max_used = 0;
  double atol_needed = 0;  ///< the smallest atol that the same rtol would pass
};
ToleranceCount count_outside(const std::vector<float> &got, const std::vector<float> &want, double atol,
                             double rtol) {
  ToleranceCount t;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double allowed = atol + rtol * std::fabs(want[i]);
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!std::isfinite(got[i]) || d > allowed) ++t.outside;
    if (std::isfinite(got[i])) {
      t.max_used = std::max(t.max_used, d / allowed);
      t.atol_needed = std::max(t.atol_needed, d - rtol * std::fabs(want[i]));
    }
  }
  return t;
}

struct OutputTolerance {
  double atol = 0, rtol = 0;
};

/// task_tolerance: nullptr, or the task's tolerances of dQ, dK and dV (three entries).
void check_backward(const Case &c, std::uint64_t seed, const OutputTolerance *task_tolerance = nullptr) {
  INFO(describe(c));
  const auto hq = draw_bf16(c.elems(), Draw::spiky, seed), hk = draw_bf16(c.elems(), Draw::spiky, seed + 1),
             hv = draw_bf16(c.elems(), Draw::spiky, seed + 2),
             hdo = draw_bf16(c.elems(), Draw::spiky, seed + 3);
  Device<std::uint16_t> q(c.elems()), k(c.elems()), v(c.elems()), o(c.elems()), d_o(c.elems());
  Device<std::uint16_t> dq_c(c.elems()), dk_c(c.elems()), dv_c(c.elems());
  Device<float> lse(c.rows()), dq_r(c.elems()), dk_r(c.elems()), dv_r(c.elems()), dq_r2(c.elems());
  q.upload(hq);
  k.upload(hk);
  v.upload(hv);
  d_o.upload(hdo);
  // O and LSE from OUR forward, so that both backward implementations see consistent inputs.
  ref::forward(q.ptr, k.ptr, v.ptr, nullptr, o.ptr, lse.ptr, c.ref_problem(), {}, nullptr);
  for (auto *b : {&dq_r, &dk_r, &dv_r, &dq_r2}) b->fill_bytes(0xFF);
  for (auto *b : {&dq_c, &dk_c, &dv_c}) b->fill_bytes(0xFF);
  ref::backward(q.ptr, k.ptr, v.ptr, o.ptr, d_o.ptr, lse.ptr, dq_r.ptr, dk_r.ptr, dv_r.ptr, c.ref_problem(),
                {}, nullptr);
  const auto &plan = sdpa::backward(q.ptr, k.ptr, v.ptr, o.ptr, d_o.ptr, lse.ptr, dq_c.ptr, dk_c.ptr,
                                    dv_c.ptr, c.sdpa_problem(), nullptr);
  cuda_ok(cudaDeviceSynchronize(), "sync");
  MESSAGE("cuDNN backward plan " << plan.name << " (" << plan.plans_timed << " timed)");

  const auto dqr = dq_r.download(), dkr = dk_r.download(), dvr = dv_r.download();
  // 1) reference vs float64 host rows (given O and LSE, as the task defines them).
  const auto qf = to_float(hq), kf = to_float(hk), vf = to_float(hv), dof = to_float(hdo),
             of = to_float(o.download());
  const auto lsef = lse.download();
  const std::int64_t head = c.B * c.H - 1;
  const std::size_t off = static_cast<std::size_t>(head * c.S * c.D);
  HostHead hh{c,
              qf.data() + off,
              kf.data() + off,
              vf.data() + off,
              of.data() + off,
              dof.data() + off,
              lsef.data() + head * c.S};
  for (std::int64_t i : {std::int64_t{0}, c.S / 3, c.S - 1}) {
    std::vector<double> dk, dv;
    hh.dkdv_row(i, dk, dv);
    CHECK(row_error(dqr.data() + off + i * c.D, hh.dq_row(i)) < 2e-3);
    CHECK(row_error(dkr.data() + off + i * c.D, dk) < 2e-3);
    CHECK(row_error(dvr.data() + off + i * c.D, dv) < 2e-3);
  }
  // 2) cuDNN vs our reference, whole tensors.
  const char *names[] = {"dQ", "dK", "dV"};
  const std::vector<float> *refs[] = {&dqr, &dkr, &dvr};
  Device<std::uint16_t> *cud[] = {&dq_c, &dk_c, &dv_c};
  for (int t = 0; t < 3; ++t) {
    const Error e = compare(to_float(cud[t]->download()), *refs[t]);
    MESSAGE("backward " << std::string(names[t]) << " rel_l2 " << e.rel_l2 << " max_abs " << e.max_abs);
    CHECK(compare(*refs[t], *refs[t]).nonfinite == 0);
    CHECK(e.nonfinite == 0);
    CHECK(e.rel_l2 < 1.5e-2);
    if (task_tolerance) {
      // The task's own per-element check applied to the library: a tolerance that cuDNN fails would
      // call a standard flash-attention backward incorrect.
      const ToleranceCount tc = count_outside(to_float(cud[t]->download()), *refs[t], task_tolerance[t].atol,
                                              task_tolerance[t].rtol);
      MESSAGE("cuDNN " << std::string(names[t]) << " under the task tolerance (atol "
                       << task_tolerance[t].atol << ", rtol " << task_tolerance[t].rtol << "): " << tc.outside
                       << " of " << refs[t]->size()
                       << " elements outside, largest share of the tolerance used " << tc.max_used
                       << ", atol needed at this rtol " << tc.atol_needed);
      CHECK(tc.outside == 0);
    }
  }
  // 3) the reference is deterministic (no atomics): bit-identical dQ on a rerun.
  ref::backward(q.ptr, k.ptr, v.ptr, o.ptr, d_o.ptr, lse.ptr, dq_r2.ptr, dk_r.ptr, dv_r.ptr, c.ref_problem(),
                {}, nullptr);
  const auto dq2 = dq_r2.download();
  CHECK(std::memcmp(dq2.data(), dqr.data(), dqr.size() * sizeof(float)) == 0);
}

bool g_gpu = false;

}  // namespace

TEST_CASE("attention forward: reference vs float64 rows and vs cuDNN") {
  REQUIRE(g_gpu);
  for (std::int64_t D : {64, 128})
    for (bool causal : {false, true})
      check_forward({2, 3, 512, D, causal, 1.f / std::sqrt(float(D))}, 11 + D);
  // A sequence length that is not a multiple of the tile, and a non-default softmax scale.
  check_forward({1, 2, 333, 128, true, 0.3f}, 7);
  check_forward({1, 2, 256, 256, false, 1.f / 16.f}, 9);
}

TEST_CASE("attention backward: reference vs float64 rows and vs cuDNN, spiky inputs") {
  REQUIRE(g_gpu);
  for (std::int64_t D : {64, 128})
    for (bool causal : {false, true})
      check_backward({2, 2, 512, D, causal, 1.f / std::sqrt(float(D))}, 101 + D);
  check_backward({1, 2, 320, 128, true, 0.2f}, 5);
}

TEST_CASE("attention backward: cuDNN passes the core tasks' own tolerance on their workload") {
  REQUIRE(g_gpu);
  for (const char *id : {"mha_bwd_d128", "mha_bwd_d128_causal"}) {
    std::ifstream in(std::string(PTXBENCH_SOURCE_DIR) + "/tasks/" + id + ".json");
    REQUIRE(in);
    const auto task = nlohmann::json::parse(in);
    OutputTolerance t[3];
    const char *outputs[] = {"dQ", "dK", "dV"};
    for (int i = 0; i < 3; ++i) {
      const auto &tol = task.at("tolerances").at(outputs[i]);
      t[i] = {tol.at("atol").get<double>(), tol.at("rtol").get<double>()};
    }
    const auto &sym = task.at("workloads").at(0).at("symbols");
    INFO(id);
    // One batch of the task's workload (its H heads at its S and D): the worst element over many heads is
    // what a verdict sees; the full B would take four times the host-side draws and compares.
    check_backward(
        {1, sym.at("H").get<std::int64_t>(), sym.at("S").get<std::int64_t>(), sym.at("D").get<std::int64_t>(),
         task.at("causal").get<bool>(), task.at("scalars").at(0).at("value").get<float>()},
        211, t);
  }
}

TEST_CASE("LSE is natural-log and uses the scaled scores; the scale is honoured") {
  REQUIRE(g_gpu);
  // Half the default scale: the log2 convention or an unscaled/default-scaled LSE would all differ.
  const Case c{1, 1, 128, 64, false, 0.0625f};
  const auto hq = draw_bf16(c.elems(), Draw::normal, 3), hk = draw_bf16(c.elems(), Draw::normal, 4),
             hv = draw_bf16(c.elems(), Draw::normal, 5);
  Device<std::uint16_t> q(c.elems()), k(c.elems()), v(c.elems()), o(c.elems());
  Device<float> lse(c.rows());
  q.upload(hq);
  k.upload(hk);
  v.upload(hv);
  sdpa::forward(q.ptr, k.ptr, v.ptr, o.ptr, lse.ptr, c.sdpa_problem(), nullptr);
  cuda_ok(cudaDeviceSynchronize(), "sync");
  const auto l = lse.download();
  const auto qf = to_float(hq), kf = to_float(hk), vf = to_float(hv);
  HostHead hh{c, qf.data(), kf.data(), vf.data(), nullptr, nullptr, nullptr};
  for (std::int64_t i = 0; i < c.S; i += 17) {
    const double natural = hh.lse_row(i);
    CHECK(std::fabs(l[i] - natural) < 1e-3 * (1 + std::fabs(natural)));
    CHECK(std::fabs(l[i] - natural / std::log(2.0)) > 1e-2);  // not log2
  }
  const Case other{1, 1, 128, 64, false, 0.125f};
  HostHead hh2{other, qf.data(), kf.data(), vf.data(), nullptr, nullptr, nullptr};
  CHECK(std::fabs(l[5] - hh2.lse_row(5)) > 1e-3);  // the scale matters at this size
}

TEST_CASE("reference on a subset of heads writes exactly those heads, bit-identical to the full run") {
  REQUIRE(g_gpu);
  const Case c{2, 3, 192, 64, true, 0.125f};
  const auto hq = draw_bf16(c.elems(), Draw::normal, 21), hk = draw_bf16(c.elems(), Draw::normal, 22),
             hv = draw_bf16(c.elems(), Draw::normal, 23);
  Device<std::uint16_t> q(c.elems()), k(c.elems()), v(c.elems());
  Device<float> full(c.elems()), part(c.elems());
  q.upload(hq);
  k.upload(hk);
  v.upload(hv);
  full.fill_bytes(0xFF);
  part.fill_bytes(0xFF);
  ref::forward(q.ptr, k.ptr, v.ptr, full.ptr, nullptr, nullptr, c.ref_problem(), {}, nullptr);
  ref::forward(q.ptr, k.ptr, v.ptr, part.ptr, nullptr, nullptr, c.ref_problem(), {4, 1}, nullptr);
  const auto f = full.download(), p = part.download();
  const std::size_t per_head = static_cast<std::size_t>(c.S * c.D);
  for (int head = 0; head < c.B * c.H; ++head) {
    const bool chosen = head == 1 || head == 4;
    bool all_nan = true, equal = true;
    for (std::size_t i = head * per_head; i < (head + 1) * per_head; ++i) {
      all_nan = all_nan && std::isnan(p[i]);
      equal = equal && std::memcmp(&p[i], &f[i], 4) == 0;
    }
    CHECK(chosen == equal);
    CHECK(chosen != all_nan);
  }
}

namespace {

// Times our cuDNN path at the core shapes, like triton.testing.do_bench: L2
// cleared (256 MB memset) before each sample, CUDA events, median.
int write_cudnn_times(const std::string &path) {
  constexpr std::int64_t B = 4, H = 48, S = 4096, D = 128;
  const std::size_t n = B * H * S * D;
  Device<std::uint16_t> q(n), k(n), v(n), o(n), d_o(n), dq(n), dk(n), dv(n);
  Device<float> lse(B * H * S);
  Device<std::uint8_t> flush(256u << 20);
  std::uint64_t seed = 1;
  for (auto *b : {&q, &k, &v, &d_o}) b->upload(draw_bf16(n, Draw::normal, seed++));
  cudaEvent_t e0, e1;
  cuda_ok(cudaEventCreate(&e0), "event");
  cuda_ok(cudaEventCreate(&e1), "event");
  nlohmann::json out = {{"cudnn", sdpa::versions().cudnn},
                        {"cudnn_library", sdpa::versions().cudnn_library},
                        {"frontend", sdpa::versions().frontend},
                        {"shape", {{"B", B}, {"H", H}, {"S", S}, {"D", D}}},
                        {"rows", nlohmann::json::array()}};
  const float scale = 1.f / std::sqrt(float(D));
  for (bool backward : {false, true})
    for (bool causal : {false, true}) {
      const sdpa::Problem p{B, H, S, D, scale, causal};
      // Forward first: O and LSE for the backward come from cuDNN's own forward here.
      const auto &fplan = sdpa::forward(q.ptr, k.ptr, v.ptr, o.ptr, lse.ptr, p, nullptr);
      const sdpa::PlanChoice *plan = &fplan;
      auto launch = [&] {
        if (backward)
          plan = &sdpa::backward(q.ptr, k.ptr, v.ptr, o.ptr, d_o.ptr, lse.ptr, dq.ptr, dk.ptr, dv.ptr, p,
                                 nullptr);
        else
          plan = &sdpa::forward(q.ptr, k.ptr, v.ptr, o.ptr, lse.ptr, p, nullptr);
      };
      for (int w = 0; w < 5; ++w) launch();
      std::vector<float> ms;
      for (int r = 0; r < 100; ++r) {
        cuda_ok(cudaMemsetAsync(flush.ptr, r & 0xff, flush.count, nullptr), "flush");
        cuda_ok(cudaEventRecord(e0, nullptr), "record");
        launch();
        cuda_ok(cudaEventRecord(e1, nullptr), "record");
        cuda_ok(cudaEventSynchronize(e1), "sync");
        float t = 0;
        cuda_ok(cudaEventElapsedTime(&t, e0, e1), "elapsed");
        ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      const double flops = 4.0 * B * H * S * S * D * (causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
      out["rows"].push_back({{"direction", backward ? "bwd" : "fwd"},
                             {"causal", causal},
                             {"median_ms", median},
                             {"tflops", flops / (median * 1e-3) / 1e12},
                             {"plan", plan->to_json()}});
      std::printf("ours cuDNN %s%s: %.3f ms (%.0f TFLOP/s), plan %s of %d\n", backward ? "bwd" : "fwd",
                  causal ? " causal" : "", median, flops / (median * 1e-3) / 1e12, plan->name.c_str(),
                  plan->plans_timed);
    }
  // Our fp32 reference at the core shape: its time (the worker runs it every trial) and its
  // agreement with cuDNN on the full tensors (non-causal; O and LSE from cuDNN's forward above).
  {
    const ref::Problem rp{B, H, S, D, scale, false};
    const sdpa::Problem p{B, H, S, D, scale, false};
    Device<float> o_ref(n), lse_ref(B * H * S), dq_ref(n), dk_ref(n), dv_ref(n);
    sdpa::forward(q.ptr, k.ptr, v.ptr, o.ptr, lse.ptr, p, nullptr);
    sdpa::backward(q.ptr, k.ptr, v.ptr, o.ptr, d_o.ptr, lse.ptr, dq.ptr, dk.ptr, dv.ptr, p, nullptr);
    float fwd_ms = 0, bwd_ms = 0;
    cuda_ok(cudaEventRecord(e0, nullptr), "record");
    ref::forward(q.ptr, k.ptr, v.ptr, o_ref.ptr, nullptr, lse_ref.ptr, rp, {}, nullptr);
    cuda_ok(cudaEventRecord(e1, nullptr), "record");
    cuda_ok(cudaEventSynchronize(e1), "sync");
    cuda_ok(cudaEventElapsedTime(&fwd_ms, e0, e1), "elapsed");
    cuda_ok(cudaEventRecord(e0, nullptr), "record");
    ref::backward(q.ptr, k.ptr, v.ptr, o.ptr, d_o.ptr, lse.ptr, dq_ref.ptr, dk_ref.ptr, dv_ref.ptr, rp, {},
                  nullptr);
    cuda_ok(cudaEventRecord(e1, nullptr), "record");
    cuda_ok(cudaEventSynchronize(e1), "sync");
    cuda_ok(cudaEventElapsedTime(&bwd_ms, e0, e1), "elapsed");
    const Error eo = compare(to_float(o.download()), o_ref.download());
    const Error el = compare(lse.download(), lse_ref.download());
    const Error eq = compare(to_float(dq.download()), dq_ref.download());
    const Error ek = compare(to_float(dk.download()), dk_ref.download());
    const Error ev = compare(to_float(dv.download()), dv_ref.download());
    out["reference"] = {
        {"forward_ms", fwd_ms},
        {"backward_ms", bwd_ms},
        {"cudnn_vs_reference_rel_l2",
         {{"O", eo.rel_l2}, {"LSE", el.rel_l2}, {"dQ", eq.rel_l2}, {"dK", ek.rel_l2}, {"dV", ev.rel_l2}}},
        {"cudnn_vs_reference_max_rel",
         {{"O", eo.max_rel},
          {"LSE", el.max_rel},
          {"dQ", eq.max_rel},
          {"dK", ek.max_rel},
          {"dV", ev.max_rel}}}};
    std::printf("fp32 reference at the core shape: forward %.1f ms, backward %.1f ms\n", fwd_ms, bwd_ms);
    std::printf(
        "cuDNN vs reference rel_l2: O %.2e LSE %.2e dQ %.2e dK %.2e dV %.2e (max_rel O %.2e dQ %.2e)\n",
        eo.rel_l2, el.rel_l2, eq.rel_l2, ek.rel_l2, ev.rel_l2, eo.max_rel, eq.max_rel);
  }
  std::ofstream(path) << out.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  g_gpu = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--cudnn-times=", 0) == 0) {
      try {
        return write_cudnn_times(a.substr(14));
      } catch (const std::exception &ex) {
        std::fprintf(stderr, "error: %s\n", ex.what());
        return 1;
      }
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
