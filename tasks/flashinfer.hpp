// FlashInfer-Trace interchange: a FlashInfer-Bench Definition (+ its Workload JSONL lines) to a PTXBench
// task document, and a task back to a Definition and workloads. Plain functions over JSON; expected
// failures (a definition that does not map onto a task family) are values whose message names the field.
//
// What maps (their field -> ours; README "FlashInfer-Trace import and export" has the table):
// - op_type "gemm" with inputs A[M,K], B[N,K] and output C[M,N] (bf16 or f16 throughout, or e4m3 inputs with
//   per-tensor scalar scales scale_a/scale_b and a bf16 C) -> family gemm;
// - op_type "mha_dense" (the dense layout PTXBench exports; FlashInfer's public attention op types are ragged
// or
//   paged and are refused) with q, k, v [batch, heads, seq, head_dim] bf16 -> attention_fwd (outputs
//   output + lse) or attention_bwd (outputs dq, dk, dv); "causal" in the name sets the causal mask.
// - const axes -> symbols with one value in every workload; var axes -> symbols whose values come from the
//   workload lines; the shown workload first, the others hidden; `ranges` from the definition's constraints
//   ("lo <= X <= hi", "X % m == 0") where given, else min, max and gcd of the workloads' values.
// - what the schema lacks (arch, targets, reference library, tolerances, flops/bytes, tensor prose, input
//   distributions) comes from a committed task of the family, the template.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tasks/task.hpp"
#include "util/expected.hpp"

namespace ptxbench::tasks::flashinfer {

/// What a definition maps onto, decided from its op_type, tensors and dtypes alone.
struct Mapping {
  Family family = Family::gemm;
  bool causal = false;
  DType input_dtype = DType::bf16;
  std::int64_t head_dim = 0;  ///< attention, when the head_dim axis is constant; else 0
};

/// Checks that a definition maps onto one of our families; the error names the field and why not
/// (paged KV cache, ragged batch, grouped-query heads, dtype, layout, unknown op_type, ...).
util::Expected<Mapping> classify(const nlohmann::json &definition);

/// Ids of committed tasks that can serve as the template of a mapping, best first
/// (e.g. {"mha_fwd_d64", "mha_fwd_d128"}): the caller takes the first it has.
std::vector<std::string> template_candidates(const Mapping &mapping);

/// The lines of a Workload JSONL file (blank lines skipped); errors name "<source>:<line>".
util::Expected<std::vector<nlohmann::json>> parse_workloads_jsonl(std::string_view text,
                                                                  std::string_view source);

struct ImportOptions {
  std::string id;  ///< the task id (and file stem); empty: "fi_" + the definition's name
  /// The workload shown to the model: a 0-based index into the workload lines or a workload uuid; empty:
  /// the definition's "ptxbench.shown:N" tag (the first N lines, written by export), else the first line.
  std::string shown;
  bool all_shown = false;          ///< every workload in `workloads`, none hidden
  bool ignore_input_data = false;  ///< accept 'safetensors' inputs (PTXBench draws its own values instead)
};

struct Imported {
  nlohmann::json task;             ///< a task document: tasks::load_task_file reads it
  std::vector<std::string> notes;  ///< what the user should know (dropped duplicate workloads, ...)
};

/// Maps `definition` and its workload lines onto a task of `templ`'s family. The result has been loaded
/// with tasks::load_task_file (through a temporary file), so a returned task is valid.
util::Expected<Imported> import_definition(const nlohmann::json &definition,
                                           const std::vector<nlohmann::json> &workloads, const Task &templ,
                                           const ImportOptions &options = {});

/// A task document as file text, its fields in the order of the committed task files.
std::string task_file_text(const nlohmann::json &task);

struct Exported {
  nlohmann::ordered_json definition;              ///< key order as the schema documents it
  std::vector<nlohmann::ordered_json> workloads;  ///< shown first, then hidden
  std::string workloads_jsonl() const;            ///< one line per workload
};

/// Writes a task as a Definition and Workload lines. Fails (naming the field) for what the schema cannot
/// say: a tensor dimension that is an expression rather than one symbol, a scalar type without a dtype.
/// Not carried: the task's targets, tolerances, reference library, flops/bytes, tensor prose and input
/// distributions (the template gives them back on import), its title, tags and workload names.
util::Expected<Exported> export_task(const Task &task);

}  // namespace ptxbench::tasks::flashinfer
