// Repair-conditioned training sets (`ptxbench repairs`): which failed student
// turns a teacher is asked to repair. A failed turn (any status other than ok,
// or correct with its target instructions not executed) becomes a seed: the
// conversation the student had up to and including the feedback on that turn.
// Seeds are chosen stratified by task, failure category and student turn,
// under per-category and per-task caps, with a recorded shuffle seed; the
// coverage table says what was selected and what was left out and why.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm_clients/chat_client.hpp"
#include "traces/record.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent {

/// How seeds are chosen. Recorded in the repairs run's config (repairs.selection).
struct RepairSelectionSettings {
  int cap_per_category = 0;             ///< seeds per failure category; 0 = no cap
  int cap_per_task = 0;                 ///< seeds per task; 0 = no cap
  int max_seeds = 0;                    ///< seeds in all; 0 = no cap
  std::uint64_t seed = 0;               ///< seeds the shuffle within each (task, category, turn) stratum
  std::vector<std::string> categories;  ///< only these failure categories; empty = every one

  nlohmann::json to_json() const;
};

/// One failed student turn, as the teacher is shown it.
struct RepairSeed {
  std::string id;  ///< "<student run id>/<student trajectory id>/<turn>"
  std::string task_id;
  std::string category;  ///< the verdict status, or targets_not_executed (ok, correct, targets not run)
  std::string student_run_id;
  std::string student_run_dir;
  std::string student_model;  ///< traces::model_label of the student's record
  std::string student_trajectory_id;
  int student_turn = 0;
  std::string kernel_hash;      ///< of the failed attempt ("" without a kernel)
  std::string feedback_source;  ///< "recorded", or "regenerated" (a last turn's record carries none)
  /// The student's request, its answer (assistant) and the feedback on it (user, last).
  std::vector<llm::ChatMessage> conversation;

  nlohmann::json to_json() const;
  /// Error names the missing or mistyped field.
  static util::Expected<RepairSeed> from_json(const nlohmann::json &j);
};

/// Per task × category: failed student turns found, seeds selected, and why the rest were left out.
struct RepairCoverageRow {
  std::string task_id;
  std::string category;
  int failed = 0;
  int selected = 0;
  std::map<std::string, int> left_out;  ///< reason -> turns
};

struct RepairSelection {
  RepairSelectionSettings settings;
  std::vector<RepairSeed> seeds;  ///< ordered by task, category, student turn, then shuffle order
  std::vector<RepairCoverageRow> coverage;
  std::map<std::string, int> not_failures;  ///< student turns that are not repair candidates, by reason
  std::map<int, int> selected_by_turn;
  std::map<std::string, int> selected_by_model;
  int student_turns = 0;  ///< turn records read (the latest record of each turn)

  /// The coverage table printed before the teacher starts.
  std::string table() const;
  /// Settings and coverage (no conversations), for the run's config.
  nlohmann::json summary_json() const;
};

/// The feedback a student would have been sent after `record` (its last turn carries none); nullopt when
/// it cannot be rebuilt. `run` is the student run's run.json.
using FeedbackRegenerator =
    std::function<std::optional<std::string>(const traces::TurnRecord &record, const traces::RunRecord &run)>;
/// Rebuilds feedback with the student run's prompt templates and tasks (its config's prompt_dir and
/// task_dir, else the defaults) from the recorded verdict.
FeedbackRegenerator default_feedback_regenerator();

/// Selects seeds from student runs. Error only when no run holds a record.
util::Expected<RepairSelection> select_repairs(const std::vector<traces::LoadedRun> &students,
                                               const RepairSelectionSettings &settings,
                                               const FeedbackRegenerator &regenerate);

/// repair_seeds.jsonl: one seed per line. The hash is FNV-1a 64 of the file's bytes.
std::string seeds_jsonl(const std::vector<RepairSeed> &seeds);
/// Reads the seeds; when `expected_hash` is not empty the file must match it.
util::Expected<std::vector<RepairSeed>> load_repair_seeds(const std::filesystem::path &file,
                                                          const std::string &expected_hash);

/// The request asking a teacher to explain its verified repair (when the server returned no reasoning).
/// `instruction` is recorded with the answer.
std::vector<llm::ChatMessage> explanation_request(const RepairSeed &seed, const std::string &repair,
                                                  std::string *instruction = nullptr);

}  // namespace ptxbench::agent
