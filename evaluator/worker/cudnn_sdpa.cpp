// The only translation unit that includes the cuDNN frontend (see cudnn_sdpa.hpp).
#include "evaluator/worker/cudnn_sdpa.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <cudnn_frontend.h>

#include "evaluator/worker/family.hpp"
#include "evaluator/worker/selection_cache.hpp"

// CUDA runtime checks for the attention references. Kept here rather than using
// detail/cuda_check (which needs libcuda) so this code links with the runtime alone.
#define ATTN_CUDA(call) ::ptxbench::worker::attention_check((call), #call, __FILE__, __LINE__)
namespace ptxbench::worker {
inline void attention_check(cudaError_t e, const char *call, const char *file, int line) {
  if (e != cudaSuccess)
    throw WorkerError("runtime_error", std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                                           cudaGetErrorString(e) + ") at " + file + ":" +
                                           std::to_string(line));
}
}  // namespace ptxbench::worker

// The frontend, built with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, resolves every
// cuDNN symbol through this handle; we set it to the library we choose.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace ptxbench::worker::cudnn_sdpa {
namespace {

namespace fe = cudnn_frontend;

// Tensor uids of the graphs (fixed so execution needs no attribute lookups).
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

constexpr int kSelectionWarmups = 2;  // untimed launches per plan before its samples
constexpr int kSelectionSamples = 7;  // event-timed launches per plan (median kept)
constexpr std::int64_t kMaxWorkspaceBytes = std::int64_t{4} << 30;  // bytes; plans needing more are skipped

[[noreturn]] void library_error(const std::string &what) {
  throw WorkerError("library", "cuDNN: " + what);
}

std::string version_string(std::size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

// ---- run-time selection of the newest cuDNN -------------------------------------------

std::vector<std::string> candidate_libraries() {
  std::vector<std::string> out;
  auto add = [&](const std::string &p) {
    if (!p.empty() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  add("libcudnn.so.9");  // the loader's own search (LD_LIBRARY_PATH, ld.so.cache)
  std::string build_dir = PTXBENCH_CUDNN_BUILD_LIBDIR;
  if (!build_dir.empty()) add(build_dir + "/libcudnn.so.9");
  if (const char *dirs = std::getenv("PTXBENCH_CUDNN_SEARCH_DIRS")) {
    std::string s = dirs;
    for (std::size_t start = 0; start <= s.size();) {
      std::size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) add(s.substr(start, end - start) + "/libcudnn.so.9");
      start = end + 1;
    }
  }
  // nvidia-cudnn wheels inside Python environments (PyTorch ships the newest cuDNN on the H200).
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char *root_name : {"/opt", "/usr/local/lib", "/usr/lib"}) {
    const fs::path root = root_name;
    std::vector<fs::path> site_dirs;
    if (root == "/opt") {
      for (const auto &env : fs::directory_iterator(root, ec)) {
        fs::path lib = env.path() / ".venv" / "lib";
        for (const auto &py : fs::directory_iterator(lib, ec))
          site_dirs.push_back(py.path() / "site-packages");
      }
    } else {
      for (const auto &py : fs::directory_iterator(root, ec))
        if (py.path().filename().string().rfind("python3", 0) == 0) {
          site_dirs.push_back(py.path() / "dist-packages");
          site_dirs.push_back(py.path() / "site-packages");
        }
    }
    for (const auto &site : site_dirs) {
      fs::path lib = site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9";
      if (fs::exists(lib, ec)) add(lib.string());
    }
  }
  return out;
}

// Reads a candidate's version in a fresh link-map namespace, so that the
// sub-libraries it pulls in (libcudnn_graph.so.9, same soname in every build)
// never mix with the ones of the library finally chosen.
struct Probe {
  std::string path;  // resolved path
  std::size_t version = 0;
  std::string error;
};

Probe probe(const std::string &candidate) {
  Probe p;
  p.path = candidate;
  dlerror();
  void *h = dlmopen(LM_ID_NEWLM, candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    p.error = e ? e : "dlmopen failed";
    return p;
  }
  link_map *lm = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) p.path = lm->l_name;
  using GetVersion = std::size_t (*)();
  auto fn = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
  if (!fn)
    p.error = "no cudnnGetVersion";
  else
    p.version = fn();
  dlclose(h);
  return p;
}

struct Loaded {
  Versions versions;
  std::string error;  // non-empty: no usable cuDNN
};

Loaded load_newest() {
  Loaded out;
  out.versions.frontend = std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
                          std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
                          std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
  // The frontend dlopens libcudart for a few calls: make it the runtime this
  // binary runs on, not whichever major the loader finds first.
  const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), 0);

  std::vector<std::string> candidates;
  if (const char *forced = std::getenv("PTXBENCH_CUDNN_LIBRARY"); forced && *forced)
    candidates = {forced};
  else
    candidates = candidate_libraries();

  const Probe *best = nullptr;
  std::vector<Probe> probes;
  probes.reserve(candidates.size());
  for (const auto &c : candidates) probes.push_back(probe(c));
  for (const auto &p : probes) {
    nlohmann::json j = {{"path", p.path}};
    if (p.error.empty())
      j["version"] = version_string(p.version);
    else
      j["error"] = p.error;
    out.versions.candidates.push_back(j);
    if (!p.error.empty() || p.version / 10000 != CUDNN_MAJOR) continue;
    if (!best || p.version > best->version) best = &p;
  }
  if (!best) {
    out.error = "no usable libcudnn.so." + std::to_string(CUDNN_MAJOR) +
                " found (tried: " + out.versions.candidates.dump() +
                "); set PTXBENCH_CUDNN_LIBRARY to its path";
    return out;
  }
  dlerror();
  void *h = dlopen(best->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    out.error = "dlopen " + best->path + ": " + (e ? e : "failed");
    return out;
  }
  fe::cudnn_dlhandle = h;
  out.versions.cudnn = version_string(fe::detail::get_backend_version());
  out.versions.cudnn_library = best->path;
  return out;
}

const Loaded &loaded() {
  static const Loaded l = load_newest();
  return l;
}

// ---- handles, graphs and plan selection ---------------------------------------------------

std::mutex g_mutex;

cudnnHandle_t handle_for_current_device() {
  static std::map<int, cudnnHandle_t> handles;
  int device = 0;
  ATTN_CUDA(cudaGetDevice(&device));
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  if (auto st = fe::detail::create_handle(&h); st != CUDNN_STATUS_SUCCESS)
    library_error(std::string("cudnnCreate failed: ") + fe::detail::get_error_string(st));
  handles.emplace(device, h);
  return h;
}

enum class Direction { forward, backward };

using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::uint32_t, bool>;

struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;
  PlanChoice choice;
  void *workspace = nullptr;
  std::int64_t workspace_bytes = 0;
};

std::map<Key, std::unique_ptr<Entry>> g_cache;

Key make_key(Direction dir, const Problem &p) {
  int device = 0;
  ATTN_CUDA(cudaGetDevice(&device));
  std::uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &p.softmax_scale, sizeof scale_bits);
  return {device, static_cast<int>(dir), p.batch, p.heads, p.seq_len, p.head_dim, scale_bits, p.causal};
}

void check(fe::error_t status, const std::string &what) {
  if (status.is_bad()) library_error(what + ": " + status.get_message());
}

std::shared_ptr<fe::graph::Tensor_attributes> bhsd(fe::graph::Graph &g, const char *name, std::int64_t uid,
                                                   const Problem &p) {
  const std::int64_t b = p.batch, h = p.heads, s = p.seq_len, d = p.head_dim;
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({b, h, s, d})
                      .set_stride({h * s * d, s * d, d, 1})
                      .set_data_type(fe::DataType_t::BFLOAT16));
}

std::shared_ptr<fe::graph::Graph> build_graph(Direction dir, const Problem &p, cudnnHandle_t handle) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto q = bhsd(*g, "Q", kQ, p), k = bhsd(*g, "K", kK, p), v = bhsd(*g, "V", kV, p);
  const std::int64_t b = p.batch, h = p.heads, s = p.seq_len;
  if (dir == Direction::forward) {
    auto attrs = fe::graph::SDPA_attributes()
                     .set_name("sdpa_forward")
                     .set_generate_stats(true)
                     .set_attn_scale(p.softmax_scale)
                     .set_causal_mask(p.causal);
    auto [o, stats] = g->sdpa(q, k, v, attrs);
    o->set_output(true)
        .set_uid(kO)
        .set_dim({b, h, s, p.head_dim})
        .set_stride({h * s * p.head_dim, s * p.head_dim, p.head_dim, 1});
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({b, h, s, 1})
        .set_stride({h * s, s, 1, 1});
  } else {
    auto o = bhsd(*g, "O", kO, p), d_o = bhsd(*g, "dO", kDO, p);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_dim({b, h, s, 1})
                               .set_stride({h * s, s, 1, 1})
                               .set_data_type(fe::DataType_t::FLOAT));
    auto attrs = fe::graph::SDPA_backward_attributes()
                     .set_name("sdpa_backward")
                     .set_attn_scale(p.softmax_scale)
                     .set_causal_mask(p.causal);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, attrs);
    for (auto [t, uid] : {std::pair{dq, kDQ}, std::pair{dk, kDK}, std::pair{dv, kDV}})
      t->set_output(true)
          .set_uid(uid)
          .set_dim({b, h, s, p.head_dim})
          .set_stride({h * s * p.head_dim, s * p.head_dim, p.head_dim, 1});
  }
  check(g->validate(), "graph validation");
  check(g->build_operation_graph(handle), "operation graph");
  // Heuristics mode A lists the fused (flash) engines; the fallback list, tried only when
  // A offers nothing, holds unfused engines that materialize S×S scores.
  check(g->create_execution_plans({fe::HeurMode_t::A}), "heuristics");
  if (g->check_support().is_bad()) {
    check(g->create_execution_plans({fe::HeurMode_t::FALLBACK}), "fallback heuristics");
    check(g->check_support(), "no engine supports this attention problem");
  }
  return g;
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void ensure_workspace(Entry &e, std::int64_t bytes) {
  if (bytes <= e.workspace_bytes) return;
  if (e.workspace) ATTN_CUDA(cudaFree(e.workspace));
  e.workspace = nullptr;
  e.workspace_bytes = 0;
  ATTN_CUDA(cudaMalloc(&e.workspace, static_cast<std::size_t>(bytes)));
  e.workspace_bytes = bytes;
}

// Builds every plan the heuristics listed, times each on the caller's buffers
// and keeps the fastest (cuDNN's heuristics' first choice is not always it).
void select_plan(Entry &e, cudnnHandle_t handle, std::unordered_map<std::int64_t, void *> &ptrs,
                 cudaStream_t stream) {
  auto &g = *e.graph;
  const std::int64_t count = g.get_execution_plan_count();
  cudaEvent_t start = nullptr, stop = nullptr;
  ATTN_CUDA(cudaEventCreate(&start));
  ATTN_CUDA(cudaEventCreate(&stop));
  struct EventGuard {
    cudaEvent_t a, b;
    ~EventGuard() {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
  } guard{start, stop};
  double best_ms = 0;
  std::string errors;
  for (std::int64_t i = 0; i < count; ++i) {
    nlohmann::json c = {{"index", i}};
    std::string name;
    if (g.get_plan_name_at_index(i, name).is_good()) c["name"] = name;
    auto fail = [&](const std::string &why) {
      c["error"] = why;
      e.choice.candidates.push_back(c);
      errors += "\n  plan " + std::to_string(i) + ": " + why;
    };
    if (auto st = g.build_plan_at_index(i); st.is_bad()) {
      fail("build: " + st.get_message());
      continue;
    }
    std::int64_t ws = 0;
    if (auto st = g.get_workspace_size_plan_at_index(i, ws); st.is_bad()) {
      fail("workspace: " + st.get_message());
      continue;
    }
    if (ws > kMaxWorkspaceBytes) {
      fail("needs " + std::to_string(ws) + " bytes of workspace");
      continue;
    }
    ensure_workspace(e, std::max<std::int64_t>(ws, 1));
    bool ok = true;
    for (int w = 0; w < kSelectionWarmups && ok; ++w) {
      auto st = g.execute_plan_at_index(handle, ptrs, e.workspace, i);
      if (st.is_bad()) {
        fail("execute: " + st.get_message());
        ok = false;
      }
    }
    if (!ok) continue;
    std::vector<float> samples;
    for (int r = 0; r < kSelectionSamples; ++r) {
      ATTN_CUDA(cudaEventRecord(start, stream));
      auto st = g.execute_plan_at_index(handle, ptrs, e.workspace, i);
      ATTN_CUDA(cudaEventRecord(stop, stream));
      ATTN_CUDA(cudaEventSynchronize(stop));
      if (st.is_bad()) {
        fail("execute: " + st.get_message());
        ok = false;
        break;
      }
      float ms = 0;
      ATTN_CUDA(cudaEventElapsedTime(&ms, start, stop));
      samples.push_back(ms);
    }
    if (!ok) continue;
    const double ms = median(samples);
    c["median_ms"] = ms;
    c["workspace_bytes"] = ws;
    e.choice.candidates.push_back(c);
    if (e.choice.plans_timed == 0) e.choice.heuristic_first_ms = ms;
    ++e.choice.plans_timed;
    if (e.choice.index < 0 || ms < best_ms) {
      best_ms = ms;
      e.choice.index = i;
      e.choice.name = name;
      e.choice.median_ms = ms;
      e.choice.workspace_bytes = ws;
    }
  }
  if (e.choice.index < 0) library_error("no execution plan ran:" + errors);
}

std::string selection_key(Direction dir, const Problem &p, const Versions &v) {
  std::uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &p.softmax_scale, sizeof scale_bits);
  return "cudnn_sdpa|" + std::string(dir == Direction::forward ? "fwd" : "bwd") + "|" +
         std::to_string(p.batch) + "," + std::to_string(p.heads) + "," + std::to_string(p.seq_len) + "," +
         std::to_string(p.head_dim) + "|scale " + std::to_string(scale_bits) + "|causal " +
         std::to_string(p.causal) + "|cudnn " + v.cudnn + "|frontend " + v.frontend;
}

// The plan an earlier worker chose for this problem (selection cache), built alone; false when there is
// none or it no longer builds or runs (then every plan is timed again).
bool cached_plan(Entry &e, cudnnHandle_t handle, std::unordered_map<std::int64_t, void *> &ptrs,
                 cudaStream_t stream, const std::string &key) {
  const auto cached = selection_cache_get(key);
  if (!cached || !cached->is_object()) return false;
  auto &g = *e.graph;
  const std::int64_t index = cached->value("index", std::int64_t{-1});
  std::string name;
  if (index < 0 || index >= g.get_execution_plan_count() || g.get_plan_name_at_index(index, name).is_bad() ||
      name != cached->value("name", std::string()))
    return false;
  std::int64_t ws = 0;
  if (g.build_plan_at_index(index).is_bad() || g.get_workspace_size_plan_at_index(index, ws).is_bad() ||
      ws > kMaxWorkspaceBytes)
    return false;
  ensure_workspace(e, std::max<std::int64_t>(ws, 1));
  if (g.execute_plan_at_index(handle, ptrs, e.workspace, index).is_bad()) return false;
  ATTN_CUDA(cudaStreamSynchronize(stream));
  e.choice.index = index;
  e.choice.name = name;
  e.choice.median_ms = cached->value("median_ms", 0.0);
  e.choice.heuristic_first_ms = cached->value("heuristic_first_ms", 0.0);
  e.choice.plans_timed = cached->value("plans_timed", 0);
  e.choice.workspace_bytes = ws;
  e.choice.from_cache = true;
  return true;
}

const PlanChoice &run(Direction dir, const Problem &p, std::unordered_map<std::int64_t, void *> ptrs,
                      cudaStream_t stream) {
  if (p.batch <= 0 || p.heads <= 0 || p.seq_len <= 0 || p.head_dim <= 0)
    throw WorkerError("internal", "cudnn_sdpa: non-positive problem size");
  const Loaded &l = loaded();
  if (!l.error.empty()) library_error(l.error);
  std::lock_guard lock(g_mutex);
  cudnnHandle_t handle = handle_for_current_device();
  if (auto st = fe::detail::set_stream(handle, stream); st != CUDNN_STATUS_SUCCESS)
    library_error(std::string("cudnnSetStream: ") + fe::detail::get_error_string(st));
  const Key key = make_key(dir, p);
  auto it = g_cache.find(key);
  if (it == g_cache.end()) {
    auto e = std::make_unique<Entry>();
    e->graph = build_graph(dir, p, handle);
    const std::string cache_key = selection_key(dir, p, l.versions);
    if (!cached_plan(*e, handle, ptrs, stream, cache_key)) {
      select_plan(*e, handle, ptrs, stream);
      selection_cache_put(cache_key, {{"name", e->choice.name},
                                      {"index", e->choice.index},
                                      {"median_ms", e->choice.median_ms},
                                      {"heuristic_first_ms", e->choice.heuristic_first_ms},
                                      {"plans_timed", e->choice.plans_timed}});
    }
    // Only the chosen plan's workspace is needed from now on.
    if (e->workspace_bytes > std::max<std::int64_t>(e->choice.workspace_bytes, 1)) {
      ATTN_CUDA(cudaStreamSynchronize(stream));
      ATTN_CUDA(cudaFree(e->workspace));
      e->workspace = nullptr;
      e->workspace_bytes = 0;
      ensure_workspace(*e, std::max<std::int64_t>(e->choice.workspace_bytes, 1));
    }
    it = g_cache.emplace(key, std::move(e)).first;
  }
  Entry &e = *it->second;
  check(e.graph->execute_plan_at_index(handle, ptrs, e.workspace, e.choice.index), "execute");
  return e.choice;
}

}  // namespace

nlohmann::json PlanChoice::to_json() const {
  return {{"name", name},
          {"index", index},
          {"median_ms", median_ms},
          {"heuristic_first_ms", heuristic_first_ms},
          {"workspace_bytes", workspace_bytes},
          {"plans_timed", plans_timed},
          {"from_cache", from_cache},
          {"candidates", candidates}};
}

const Versions &versions() {
  const Loaded &l = loaded();
  if (!l.error.empty()) library_error(l.error);
  return l.versions;
}

const PlanChoice &forward(const void *q, const void *k, const void *v, void *o, float *lse,
                          const Problem &problem, cudaStream_t stream) {
  return run(Direction::forward, problem,
             {{kQ, const_cast<void *>(q)},
              {kK, const_cast<void *>(k)},
              {kV, const_cast<void *>(v)},
              {kO, o},
              {kStats, lse}},
             stream);
}

const PlanChoice &backward(const void *q, const void *k, const void *v, const void *o, const void *d_o,
                           const float *lse, void *dq, void *dk, void *dv, const Problem &problem,
                           cudaStream_t stream) {
  return run(Direction::backward, problem,
             {{kQ, const_cast<void *>(q)},
              {kK, const_cast<void *>(k)},
              {kV, const_cast<void *>(v)},
              {kO, const_cast<void *>(o)},
              {kDO, const_cast<void *>(d_o)},
              {kStats, const_cast<float *>(lse)},
              {kDQ, dq},
              {kDK, dk},
              {kDV, dv}},
             stream);
}

std::string prewarm() {
  const Loaded &l = loaded();
  if (!l.error.empty()) return l.error;
  // The handle only: building and running a tiny graph ahead (to load cuDNN's engine libraries) costs
  // more locked set-up time than it saves the job's library selection.
  try {
    std::lock_guard lock(g_mutex);
    (void)handle_for_current_device();
  } catch (const WorkerError &e) {
    return e.what();
  }
  return "";
}

void clear_cache() {
  std::lock_guard lock(g_mutex);
  for (auto &[key, e] : g_cache)
    if (e->workspace) cudaFree(e->workspace);
  g_cache.clear();
}

}  // namespace ptxbench::worker::cudnn_sdpa
