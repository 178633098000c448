// The static stage: the PTX module against the task and the
// manifest, before anything is compiled.
#pragma once

#include <cstddef>
#include <vector>

#include "evaluator/candidate.hpp"
#include "evaluator/ptx.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"

namespace ptxbench::evaluator {

/// Checks .target/.version, the entry, its parameters against the manifest
/// (count, kinds, types), launch bounds (.reqntid/.maxntid/.reqnctapercluster)
/// against each plan, target mnemonics, module-scope state and the instruction
/// count. Fills each plan's ResolvedParam::ptx_type. Returns the stage with its
/// figures (ARCHITECTURE.md: entry, ptx_version, ptx_target, targets_in_ptx,
/// instruction_count, module_globals).
StageResult run_static_checks(const PtxModule &module, const Manifest &manifest, const tasks::Task &task,
                              std::vector<LaunchPlan> &plans, std::size_t max_instructions);

/// {target name: present} for the task's targets (mnemonic prefix match on instructions only).
nlohmann::json targets_in_ptx(const PtxModule &module, const std::vector<tasks::TargetInstruction> &targets);

}  // namespace ptxbench::evaluator
