// The CPU stages as functions from typed inputs to a typed outcome. Each stage returns its own
// StageResult and output and writes nothing else; the runner (evaluator.cpp) times them, stores each
// result in its verdict slot, skips the stages after a failure and joins the outputs into the
// CompiledCandidate.
#pragma once

#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/detail/candidate_types.hpp"
#include "evaluator/protocol/result.hpp"
#include "tasks/task.hpp"
#include "util/expected.hpp"
#include "util/files.hpp"

namespace ptxbench::evaluator {
struct CompileLimits;
struct DeviceSymbols;
struct EvaluatorSettings;
struct ParseLimits;
struct SassListing;
}  // namespace ptxbench::evaluator

namespace ptxbench::evaluator::detail {

/// What a stage returns: its result for the verdict, and its output (meaningful when the result is ok).
template <class Output>
struct StageOutcome {
  protocol::StageResult result;
  Output output;
};

/// Parse: the kernel block, the manifest, and the manifest resolved for every workload.
struct ParseOutput {
  ParsedResponse response;
  Manifest manifest;
  std::vector<LaunchPlan> plans;         ///< one per workload; ptx_type still empty (the PTX declares it)
  std::vector<LaunchPlan> hidden_plans;  ///< one per hidden workload that resolves
  std::map<std::string, std::string> hidden_plan_errors;  ///< hidden workload -> why it did not resolve
};
/// `device`: the symbols of the GPU the manifest's expressions may name (num_sms), recorded in the
/// stage's figures with the workspace each workload declares.
StageOutcome<ParseOutput> parse_stage(const tasks::Task &task, std::string_view text, std::size_t bytes,
                                      bool at_least, const ParseLimits &limits, const DeviceSymbols &device);

/// The PTX to check: the PTX block as given, or what the NVRTC child makes of a CUDA block. Its
/// failure is reported under the compile stage.
struct PtxSource {
  std::string ptx;
  std::optional<double> nvrtc_seconds;  ///< seconds, when NVRTC ran
};
StageOutcome<PtxSource> ptx_source_stage(const ParsedResponse &response, const tasks::Task &task,
                                         const EvaluatorSettings &settings,
                                         const std::filesystem::path &work);

/// Static checks of the PTX module against the task and the parse stage's plans.
struct StaticOutput {
  std::string kernel_hash;  ///< normalized hash of the module, or of the raw text when it does not parse
  std::vector<std::string> entry_param_types;
  std::vector<std::string> targets_in_ptx;
};
StageOutcome<StaticOutput> static_stage(const std::string &ptx, const Manifest &manifest,
                                        const std::vector<LaunchPlan> &plans, const tasks::Task &task,
                                        const CompileLimits &limits);

/// A disassembly still running: started by the compile stage, ended by finish_sass.
struct PendingSass {
  util::TempDir dir{"ptxbench-sass"};  ///< holds the cubin being disassembled; outlives `listing`
  std::future<util::Expected<std::string>> listing;  ///< nvdisasm / cuobjdump output, or why there is none
  const tasks::Task *task = nullptr;
  std::vector<std::string> targets_in_ptx;  ///< targets whose mnemonic the PTX has (for the SASS warning)
  ~PendingSass() {
    if (listing.valid()) listing.wait();  // the cubin's folder goes only after the disassembler is done
  }
};

/// ptxas on the PTX, the launch resources it implies, and the start of the SASS listing.
struct CompileInput {
  const std::string &ptx;
  bool from_ptx_block = true;  ///< the PTX is the model's own (line numbers map to the response)
  int kernel_first_line = 0;   ///< response line of the PTX block's first line
  const std::string &entry;
  const std::vector<LaunchPlan> &plans;
  const std::vector<std::string> &targets_in_ptx;  ///< the static stage's
  std::optional<double> nvrtc_seconds;
};
struct CompileOutput {
  std::string cubin;
  std::shared_ptr<PendingSass> pending_sass;              ///< set when the cubin was made
  nlohmann::json environment = nlohmann::json::object();  ///< tool paths used (ptxas, disassembler)
};
StageOutcome<CompileOutput> compile_stage(const CompileInput &in, const tasks::Task &task,
                                          const EvaluatorSettings &settings,
                                          const std::filesystem::path &work);

/// Ends a pending SASS listing: the compile stage's SASS figures, warnings and summary. Returns the
/// listing text, or the reason there is none (as the error).
util::Expected<std::string> finish_pending_sass(PendingSass &pending, protocol::StageResult &compile,
                                                SassListing &listing);

}  // namespace ptxbench::evaluator::detail
