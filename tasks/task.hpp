// A benchmark task: what the kernel must compute, on which shapes, for which
// architecture, and how it is judged. Loaded from tasks/<id>.json and
// schema-validated (errors name the file, the field and the reason).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"
#include "util/int_expr.hpp"

namespace ptxbench::tasks {

enum class DType { bf16, f16, f32, e4m3, e5m2, i32 };
std::string to_string(DType);
std::optional<DType> dtype_from_string(std::string_view);
std::size_t size_of(DType);

enum class Family { gemm, attention_fwd, attention_bwd };
std::string to_string(Family);

enum class TensorRole { input, output };

/// How a tensor's fresh random values are drawn (never zeros).
enum class Distribution {
  normal,   ///< N(0, 1)
  uniform,  ///< U(-1, 1)
  spiky,    ///< N(0,1) + N(0,100)·Bernoulli(0.001): the seed paper's backward inputs
  derived,  ///< computed by the reference from other inputs (e.g. O and LSE for backward)
};
std::string to_string(Distribution);

struct Tensor {
  std::string name;  ///< e.g. "A", "Q", "LSE"
  DType dtype = DType::bf16;
  std::vector<std::string> shape;  ///< outermost first, as symbol expressions, e.g. {"M","K"}
  TensorRole role = TensorRole::input;
  Distribution distribution = Distribution::normal;
  std::string description;  ///< one line for the prompt, e.g. "row-major, K contiguous"
};

struct Scalar {
  std::string name;          ///< e.g. "softmax_scale", "scale_a"
  std::string type = "f32";  ///< PTX-ish: "f32", "u32", "s32", "u64", "s64"
  double value = 0;          ///< the value passed (same on every workload)
  std::string description;
};

struct Workload {
  std::string name;           ///< e.g. "core", "M=8191"
  util::SymbolTable symbols;  ///< concrete values of M, N, K / B, H, S, D
};

/// What the prompt promises about one symbol's values across every workload of the task, shown or hidden:
/// min <= value <= max and value % multiple_of == 0. The kernel must be right for every such value.
struct SymbolRange {
  std::int64_t min = 1;
  std::int64_t max = 1;
  std::int64_t multiple_of = 1;
  bool contains(std::int64_t v) const { return v >= min && v <= max && v % multiple_of == 0; }
};

/// An instruction the task targets, with the SASS opcode families proving it ran.
struct TargetInstruction {
  std::string name;                        ///< short, e.g. "wgmma", "tma_load", "tcgen05_mma"
  std::string ptx_mnemonic;                ///< prefix matched on PTX instructions, e.g. "wgmma.mma_async"
  std::vector<std::string> sass_families;  ///< opcode families, e.g. {"HGMMA","QGMMA"}; {"UTMALDG"}
  std::string description;                 ///< one line for the prompt (and any doubt about the SASS mapping)
};

struct Tolerance {
  double atol = 0;     ///< absolute tolerance
  double rtol = 0;     ///< relative tolerance: |x - ref| <= atol + rtol·|ref|
  std::string reason;  ///< why these numbers (error sources of a correct kernel)
};

struct Task {
  std::string id;  ///< file stem, e.g. "gemm_n7168_k5120"
  Family family = Family::gemm;
  std::string arch;         ///< "sm_90a" or "sm_100a"
  std::string title;        ///< one line
  std::string description;  ///< prose for the prompt: the math, layouts, conventions
  std::vector<Tensor> tensors;
  std::vector<Scalar> scalars;
  std::vector<std::string> symbols;  ///< symbol names usable in expressions, e.g. {"M","N","K"}
  std::vector<Workload> workloads;   ///< first one is the headline shape
  /// Checked for correctness like `workloads` but never shown to the model (its prompt states only
  /// `ranges`): a kernel that is right for the shown shapes only does not generalize.
  std::vector<Workload> hidden_workloads;
  /// The variable symbols' promised ranges (the prompt states them); every workload, shown or hidden,
  /// lies inside. A symbol without a range takes only the shown values.
  std::map<std::string, SymbolRange> ranges;
  std::vector<TargetInstruction> targets;
  std::string reference;                        ///< "cublaslt" | "cudnn_sdpa_fwd" | "cudnn_sdpa_bwd"
  bool causal = false;                          ///< attention: causal mask
  std::map<std::string, Tolerance> tolerances;  ///< per output tensor name
  /// Why the tolerances are what they are, when one explanation covers several outputs: the prompt states it
  /// once after the per-output lines (each Tolerance::reason is then only what is particular to that output).
  std::string tolerance_note;
  std::string flops;                        ///< integer expression: FLOPs of one launch
  std::string bytes;                        ///< integer expression: minimum DRAM bytes of one launch
  std::map<std::string, std::string> tags;  ///< free-form ("suite": "core"|"secondary", "layout": "TN")
  std::filesystem::path source;             ///< the JSON file it was loaded from

  const Tensor *find_tensor(std::string_view name) const;
  const Scalar *find_scalar(std::string_view name) const;
  /// A shown or hidden workload by name.
  const Workload *find_workload(std::string_view name) const;
  const TargetInstruction *find_target(std::string_view name) const;
  /// Shape of a tensor at a workload (outermost first); throws on a bug (task validated on load).
  std::vector<std::int64_t> shape_of(const Tensor &t, const Workload &w) const;
  nlohmann::json to_json() const;
};

/// Loads and validates one task file. Error: "<file>: <field>: <reason>".
util::Expected<Task> load_task_file(const std::filesystem::path &path);

/// Loads every tasks/*.json in a directory (sorted by id). Errors for all bad files joined by newlines.
util::Expected<std::vector<Task>> load_task_dir(const std::filesystem::path &dir);

/// Finds a task by id in a loaded list (nullptr if absent).
const Task *find_task(const std::vector<Task> &tasks, std::string_view id);

/// Ids close to `id` (edit distance or substring), closest first, at most `max_results`:
/// for "unknown task" messages.
std::vector<std::string> similar_task_ids(const std::vector<Task> &tasks, std::string_view id,
                                          std::size_t max_results = 5);

/// Finds the tasks directory: $PTXBENCH_TASKS, then <exe>/../share/ptxbench/tasks, then the source tree.
std::filesystem::path default_task_dir();

}  // namespace ptxbench::tasks
