// The job file the evaluator (evaluator/gpu_stage.cpp) writes for one candidate and the worker reads:
// the candidate's cubin and entry, every workload concrete (shapes, tolerances, figures) with its
// resolved launch plan (grid, block, cluster, shared memory, parameters, tensor maps), the targets,
// the SASS listing (in the job, or handed over later in a file), and the policies.
//
// job.json: {version, task_id, family, reference, mode: "full"|"sanitize", device, cubin_path, entry,
//            stages: ["correctness","execution","timing"], workloads: [JobWorkload], targets: [TargetSpec],
//            sass: [SassInstruction], sass_path (when the listing comes later as a SassHandover file),
//            correctness: CorrectnessPolicy, timing: TimingPolicy, limits: WorkerLimits, cache_dir,
//            task (Task::to_json, recorded, not read)}
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

#include "evaluator/protocol/policies.hpp"
#include "evaluator/protocol/stages.hpp"

namespace ptxbench::protocol {

inline constexpr int kJobVersion = 2;

// ---- the resolved launch plan ---------------------------------------------------------------------

/// workspace: the scratch buffer the manifest's workspace_bytes asks for (zero-filled before every launch).
enum class ParamKind { tensor, scalar, tensor_map, workspace };
/// The name a workspace parameter (ResolvedParam::name) and the worker's buffer of it go by.
inline constexpr const char *kWorkspaceName = "workspace";
/// The most a manifest's workspace_bytes may ask for: 4 GiB (the H200 has 141 GB; the largest task's
/// tensors take under 2 GiB, and an fp32 partial sum per split of the largest output fits many times).
inline constexpr std::int64_t kMaxWorkspaceBytes = std::int64_t{4} << 30;
std::string to_string(ParamKind);
std::optional<ParamKind> param_kind_from_string(std::string_view);

enum class Swizzle { none, b32, b64, b128 };
std::string to_string(Swizzle);  ///< "none", "32B", "64B", "128B"
std::optional<Swizzle> swizzle_from_string(std::string_view);

/// One kernel parameter with every expression evaluated.
struct ResolvedParam {
  ParamKind kind = ParamKind::tensor;
  std::string name;
  std::string ptx_type;  ///< declared PTX type of the entry parameter (".u64", ".f32", ...)
  // tensor_map (a TMA descriptor the worker encodes):
  std::vector<std::int64_t> dims;           ///< innermost first, elements
  std::vector<std::int64_t> strides_bytes;  ///< for dims[1..], bytes
  std::vector<std::int64_t> box;            ///< innermost first
  Swizzle swizzle = Swizzle::none;
  std::string l2_promotion = "none";  ///< none | 64B | 128B | 256B
  std::string oob_fill = "zero";      ///< zero | nan
  std::string interleave = "none";    ///< none | 16B | 32B
  // scalar only:
  double scalar_value = 0;  ///< the value passed (a workload symbol or the task scalar's value)
  PTXBENCH_PROTOCOL_EQUALITY(ResolvedParam)
};

/// A fully resolved launch for one workload.
struct LaunchPlan {
  std::string workload;                                      ///< workload name
  std::map<std::string, std::int64_t, std::less<>> symbols;  ///< the workload's symbol values
  std::array<std::int64_t, 3> grid{1, 1, 1};
  std::array<std::int64_t, 3> block{1, 1, 1};
  std::array<std::int64_t, 3> cluster{1, 1, 1};
  std::int64_t shared_bytes = 0;  ///< dynamic shared memory, bytes
  /// bytes of the declared workspace (guarded, zero-filled before every launch); 0 = none
  std::int64_t workspace_bytes = 0;
  /// the SM count the manifest's `num_sms` resolved to (the task GPU's, or the evaluator's setting);
  /// 0 = not recorded (a plan from before device symbols)
  std::int64_t num_sms = 0;
  std::vector<ResolvedParam> params;
  PTXBENCH_PROTOCOL_EQUALITY(LaunchPlan)
};

// ---- workloads ------------------------------------------------------------------------------------

/// Element types the worker can allocate, fill and compare (tasks::DType, by name).
enum class ElemType { bf16, f16, f32, e4m3, e5m2, i32 };
std::string to_string(ElemType);
std::optional<ElemType> elem_type_from_string(std::string_view);
std::size_t size_of(ElemType);

/// How fresh inputs are drawn (tasks::Distribution, by name).
enum class InputDistribution { normal, uniform, spiky, derived };
std::string to_string(InputDistribution);
std::optional<InputDistribution> distribution_from_string(std::string_view);

/// One tensor of one workload, concrete.
struct TensorSpec {
  std::string name;
  ElemType type = ElemType::bf16;
  std::vector<std::int64_t> shape;  ///< elements, outermost first
  bool is_output = false;
  InputDistribution distribution = InputDistribution::normal;
  double atol = 0;  ///< outputs: |x - ref| <= atol + rtol·|ref|
  double rtol = 0;
  std::int64_t elements() const;
  std::size_t bytes() const { return static_cast<std::size_t>(elements()) * size_of(type); }
  PTXBENCH_PROTOCOL_EQUALITY(TensorSpec)
};

struct ScalarSpec {
  std::string name;
  std::string type = "f32";  ///< "f32" | "u32" | "s32" | "u64" | "s64"
  double value = 0;
  PTXBENCH_PROTOCOL_EQUALITY(ScalarSpec)
};

/// One workload, concrete: shapes, scalars and the figures the evaluator computed from the task.
struct WorkloadSpec {
  std::string name;
  std::map<std::string, std::int64_t> symbols;  ///< M, N, K / B, H, S, D
  std::vector<TensorSpec> tensors;
  std::vector<ScalarSpec> scalars;
  double flops = 0;  ///< FLOPs of one launch (task formula)
  double bytes = 0;  ///< minimum DRAM bytes of one launch (task formula)
  bool causal = false;
  const TensorSpec *find_tensor(const std::string &name) const;
  const ScalarSpec *find_scalar(const std::string &name) const;
  PTXBENCH_PROTOCOL_EQUALITY(WorkloadSpec)
};

/// JSON: the WorkloadSpec's fields with the plan under "launch".
struct JobWorkload {
  WorkloadSpec spec;
  LaunchPlan launch;
  PTXBENCH_PROTOCOL_EQUALITY(JobWorkload)
};

// ---- SASS and targets -----------------------------------------------------------------------------

struct SassInstruction {
  std::string function;      ///< mangled or extern "C" name, e.g. "gemm_tma_wgmma"
  std::uint32_t offset = 0;  ///< byte offset (PC) inside the function; 16-byte steps on sm_90
  std::string opcode;        ///< full opcode with modifiers, e.g. "HGMMA.64x128x16.F32.BF16"
  std::string family;        ///< opcode up to the first '.', e.g. "HGMMA"
  std::string predicate;     ///< guard predicate as written: "@P0", "@!PT", or "" when unguarded
  PTXBENCH_PROTOCOL_EQUALITY(SassInstruction)
};

/// The opcode family: text up to the first '.', e.g. "UTMALDG.2D" -> "UTMALDG".
std::string sass_family(std::string_view opcode);

/// The SASS listing handed over in a file (job.sass_path) when it was still being made as the job
/// started: the listing, or why there is none. JSON: {sass: [...]} or {error: "why"}.
struct SassHandover {
  std::vector<SassInstruction> sass;
  std::optional<std::string> error;
  PTXBENCH_PROTOCOL_EQUALITY(SassHandover)
};

struct TargetSpec {
  std::string name;
  std::vector<std::string> sass_families;
  PTXBENCH_PROTOCOL_EQUALITY(TargetSpec)
};

// ---- the job --------------------------------------------------------------------------------------

enum class JobMode { full, sanitize };  ///< sanitize: one trial, correctness only, under compute-sanitizer
std::string to_string(JobMode);

// kGpuStageNames: the worker's stages, by name, in its running order (evaluator/protocol/stages.hpp).

struct Job {
  std::string task_id, family, reference;
  JobMode mode = JobMode::full;
  int device = 0;
  std::string cubin_path, entry;
  std::vector<std::string> stages;  ///< a subset of kGpuStageNames
  std::vector<JobWorkload> workloads;
  /// The task's hidden workloads (never shown to the model), checked by the generalization stage only.
  std::vector<JobWorkload> hidden_workloads;
  bool time_hidden = false;  ///< the generalization stage also times each hidden workload it found correct
  std::vector<TargetSpec> targets;
  std::vector<SassInstruction> sass;
  std::string sass_path;  ///< "" = the listing is in `sass`; else a SassHandover file appears there
  CorrectnessPolicy correctness;
  TimingPolicy timing;
  WorkerLimits limits;
  ProfilePolicy profile;
  std::string cache_dir;  ///< library selections (cuBLASLt algorithm, cuDNN plan) are kept here; "" = none
  nlohmann::json task = nullptr;  ///< the task as the evaluator read it (recorded, not read)
  bool wants(const std::string &stage) const;
  PTXBENCH_PROTOCOL_EQUALITY(Job)
};

// to_json / from_json of each (nlohmann ADL). The readers throw ProtocolError naming the field.
void to_json(nlohmann::json &j, const ResolvedParam &p);
void from_json(const nlohmann::json &j, ResolvedParam &p);
void to_json(nlohmann::json &j, const LaunchPlan &p);
void from_json(const nlohmann::json &j, LaunchPlan &p);
void to_json(nlohmann::json &j, const TensorSpec &t);
void from_json(const nlohmann::json &j, TensorSpec &t);
void to_json(nlohmann::json &j, const ScalarSpec &s);
void from_json(const nlohmann::json &j, ScalarSpec &s);
void to_json(nlohmann::json &j, const JobWorkload &w);
void from_json(const nlohmann::json &j, JobWorkload &w);
void to_json(nlohmann::json &j, const SassInstruction &i);
void from_json(const nlohmann::json &j, SassInstruction &i);
void to_json(nlohmann::json &j, const SassHandover &h);
void from_json(const nlohmann::json &j, SassHandover &h);
void to_json(nlohmann::json &j, const TargetSpec &t);
void from_json(const nlohmann::json &j, TargetSpec &t);
void to_json(nlohmann::json &j, const Job &job);
/// Also checks the version, the stage names and that there is at least one workload.
void from_json(const nlohmann::json &j, Job &job);

}  // namespace ptxbench::protocol
