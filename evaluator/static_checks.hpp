// The static stage: the PTX module against the task and the
// manifest, before anything is compiled.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "evaluator/candidate.hpp"
#include "evaluator/ptx.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"

namespace ptxbench::evaluator {

/// The static stage's outcome: the stage, and what it learns from the PTX that later stages use.
struct StaticCheckResult {
  StageResult stage;
  /// The declared PTX type of each entry parameter, in order (".u64", ".b8", ...); empty when the
  /// manifest's entry is not in the module. The job needs them (with_param_types).
  std::vector<std::string> entry_param_types;
  std::vector<std::string> targets_in_ptx;  ///< the task's targets whose mnemonic the PTX has
};

/// Checks .target/.version, the entry, its parameters against the manifest (count, kinds, types),
/// launch bounds (.reqntid/.maxntid/.reqnctapercluster) against each plan, target mnemonics,
/// module-scope state and the instruction count. The stage's figures (ARCHITECTURE.md): entry,
/// ptx_version, ptx_target, targets_in_ptx, instruction_count, module_globals (every module-scope .global
/// variable), module_globals_written (those a kernel can write: the only ones warned about).
StaticCheckResult run_static_checks(const PtxModule &module, const Manifest &manifest,
                                    const tasks::Task &task, const std::vector<LaunchPlan> &plans,
                                    std::size_t max_instructions);

/// `plans` with each parameter's ptx_type set from `entry_param_types` (by position).
std::vector<LaunchPlan> with_param_types(std::vector<LaunchPlan> plans,
                                         const std::vector<std::string> &entry_param_types);

/// {target name: present} for the task's targets (mnemonic prefix match on instructions only).
nlohmann::json targets_in_ptx(const PtxModule &module, const std::vector<tasks::TargetInstruction> &targets);

}  // namespace ptxbench::evaluator
