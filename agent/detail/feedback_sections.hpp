// Verdict facts as feedback text, shared by the prompt builder's feedback and task prompts: tolerant
// readers of verdict figures, the sections a feedback template fills, and the parts per outcome.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/error.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"

namespace ptxbench::agent {
struct FeedbackSources;
}  // namespace ptxbench::agent

namespace ptxbench::agent::detail {

/// Template values by placeholder name.
using Values = std::map<std::string, std::string>;

std::string join(const std::vector<std::string> &items, std::string_view separator);

// Tolerant readers for verdict figures (other stages may omit keys): a wrong type reads as absent.
std::optional<double> num(const nlohmann::json &j, const char *key);
std::optional<bool> boolean(const nlohmann::json &j, const char *key);
std::string str(const nlohmann::json &j, const char *key, std::string fallback = "");
const nlohmann::json &array_at(const nlohmann::json &j, const char *key);

/// A stage's typed figures through a Verdict accessor (`&Verdict::compile_figures`): none when the stage
/// wrote none or they do not decode (the feedback says what it can without them).
template <class T>
std::optional<T> figures_of(const evaluator::Verdict &v,
                            std::optional<T> (evaluator::Verdict::*read)() const) {
  try {
    return (v.*read)();
  } catch (const protocol::ProtocolError &) {
    return std::nullopt;
  }
}

std::string diagnostics_section(const evaluator::StageResult &s);
/// The stage without the diagnostics its summary already says.
evaluator::StageResult without_summary_repeats(const evaluator::StageResult &s);
std::string sanitizer_section(const evaluator::Verdict &v);
std::string resources_section(const evaluator::Verdict &v);
std::string timing_section(const evaluator::Verdict &v, const std::string &library);
/// The hidden workloads' outcome for a kernel correct on the shown ones: "" when the task has none or
/// they were not checked. Names a failing hidden workload's symbol values only when the verdict's settings
/// say hidden_workloads.reveal; otherwise the promised ranges and the kind of failure.
std::string generalization_section(const tasks::Task &task, const evaluator::Verdict &v);
/// "M is any multiple of 1 from 1 to 16384; S is a multiple of 64 from 64 to 8192": the task's ranges.
std::string ranges_text(const tasks::Task &task);
std::string static_details(const tasks::Task &task, const evaluator::Verdict &v);
/// Workloads whose largest error lies near the tolerance (the correctness figures' margin): for an ok
/// verdict, how near and how often it failed on fresh inputs, and that it can fail on others; for an
/// incorrect one, that errors just past the tolerance point at precision. "" when none is borderline.
std::string near_tolerance_section(const evaluator::Verdict &v);
/// The correctness stage's rows through the protocol's codec; none when it wrote none or they do not
/// decode (the stage's summary and diagnostics still say what failed).
std::vector<protocol::CorrectnessWorkload> correctness_rows(const evaluator::Verdict &v);

/// Compile and static errors: the whole list, each error with its source line quoted, and a count as
/// summary when the summary would repeat one of them.
void add_listed_errors(Values &values, const evaluator::StageResult &stage, const FeedbackSources *sources);
/// Incorrect or nondeterministic: sets the values; returns the template name.
std::string correctness_feedback(const tasks::Task &task, const evaluator::Verdict &verdict,
                                 const evaluator::StageResult &full_stage, Values &values);
/// Status ok (or skipped GPU stages): sets the values; returns the template name.
std::string ok_feedback(const tasks::Task &task, const evaluator::Verdict &verdict,
                        const std::string &library, Values &values);

}  // namespace ptxbench::agent::detail
