// Run directories: run.json + trajectories.jsonl, one record per
// turn, appended and fsynced. This header is the format; exports and reports
// read only what is written here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/verdict.hpp"

#include "traces/run_record.hpp"
#include "util/expected.hpp"

namespace ptxbench::traces {

inline constexpr int kFormatVersion = 1;

/// One turn of one trajectory. Stored as one JSON line; field names are the format.
///   format_version   int
///   run_id           string
///   model            string  (endpoint name)
///   task_id          string
///   sample           int     (0-based)
///   turn             int     (0-based)
///   trajectory_id    string  "<model>/<task_id>/<sample>", "<model>/<variant>/<task_id>/<sample>" with
///   variants variant          string | null  the run variant (experiment arm); null in a run without
///   variants reference        {target_notes bool, packs [{name, version}]}  the reference material in the
///   system prompt messages         [{role, content}]  the full request sent (system, user, assistant, ...)
///   response         {content, reasoning, finish_reason, usage{prompt_tokens, completion_tokens,
///                     reasoning_tokens}, attempts, latency_seconds} | null on request failure
///   request_error    {kind, http_status, message, attempts} | null  (message starts with "not sent:" when
///                     the request was never made: endpoint given up after repeated failures, run budget used
///                     up)
///   candidate        {language, kernel_source, manifest_text, kernel_hash} | null
///   verdict          the evaluator's Verdict::to_json() | null (request failed)
///   feedback         string: the user message fed back for the next turn ("" on the last turn)
///   stop_reason      "" | "target_reached" | "turn_limit" | "token_budget" | "request_failed" | "run_budget"
///   timings          {request_s, cpu_stages_s, gpu_stage_s, orchestrator_cpu_ms,
///                     client_cpu_ms, evaluator_cpu_ms, ttft_s}  (client_cpu_ms, evaluator_cpu_ms: chat
///                     client and in-process CPU-stage CPU time; orchestrator_cpu_ms excludes both and the
///                     compilers; ttft_s: seconds to the first streamed byte of a streamed request, else
///                     null)
///   gpu              int | null  the GPU ordinal that ran the GPU stages (added by the agent)
///   repair_of        (repairs runs only) {seed_id, student_run_id, student_run_dir, student_model,
///                     student_trajectory_id, student_turn, category, feedback_source, seed_messages,
///                     seed_sample}: the failed student turn this teacher trajectory repairs; the first
///                     seed_messages messages of the request are the student's conversation up to its
///                     feedback
///   synthesized_reasoning  (repairs runs, verified repairs without reasoning, when asked)
///                     {content, instruction, finish_reason, usage{prompt_tokens, completion_tokens,
///                     estimated}, error}: the teacher's explanation of its repair, from one more request
///   started_at, finished_at   ISO-8601 UTC
struct RecordedMessage {
  std::string role;
  std::string content;
  bool operator==(const RecordedMessage &) const = default;
};

/// Token counts as the server reported them (or as estimated); a count the record lacks is nullopt.
struct TokenUsage {
  std::optional<std::int64_t> prompt_tokens;
  std::optional<std::int64_t> completion_tokens;
  std::optional<std::int64_t> reasoning_tokens;
  std::optional<bool> estimated;               ///< the counts are estimates (the server sent none)
  std::optional<std::string> estimate_reason;  ///< why they are estimates (written only when estimated)
  std::int64_t total() const { return prompt_tokens.value_or(0) + completion_tokens.value_or(0); }
};

struct ResponseRecord {
  std::string content;
  std::string reasoning;
  std::string finish_reason;
  TokenUsage usage;
  int attempts = 0;
  double latency_seconds = 0;  ///< seconds, over all attempts
};

struct RequestErrorRecord {
  std::string kind;  ///< llm::ChatErrorKind's name
  int http_status = 0;
  std::string message;
  std::optional<int> attempts;  ///< HTTP attempts made (absent in records of early versions)
};

struct CandidateRecord {
  std::string language;  ///< "ptx" | "cuda"
  std::string kernel_source;
  std::string manifest_text;
  std::string kernel_hash;
};

/// Seconds (_s) and CPU milliseconds (_ms) one turn took; a figure the record lacks is nullopt.
struct TurnTimings {
  std::optional<double> request_s, cpu_stages_s, gpu_stage_s;
  std::optional<double> orchestrator_cpu_ms, client_cpu_ms, evaluator_cpu_ms;
  std::optional<double> ttft_s;  ///< written always: null when the request was not streamed
};

/// The failed student turn a teacher trajectory repairs (repairs runs).
struct RepairOf {
  std::string seed_id;
  std::string student_run_id;
  std::string student_run_dir;
  std::string student_model;
  std::string student_trajectory_id;
  int student_turn = 0;
  std::string category;
  std::string feedback_source;
  int seed_messages = 0;  ///< the first seed_messages request messages are the student's conversation
  int seed_sample = 0;
  nlohmann::json to_json() const;
};

/// The teacher's explanation of a verified repair that came without reasoning (repairs runs).
struct SynthesizedReasoning {
  std::optional<std::string> content;  ///< null when the request failed
  std::string instruction;
  std::optional<std::string> finish_reason;
  std::optional<TokenUsage> usage;
  std::optional<std::string> error;  ///< null when the request succeeded
};

/// One turn record, typed. Records are data from disk: from_json never throws, a field of the
/// wrong type reads as absent, and top-level fields it does not know are kept in `extra` and
/// written back, so a record read and written again keeps everything it held. The verdict is kept as
/// written (protocol::Verdict::to_json) so that it round-trips byte for byte; readers take it typed from
/// decoded_verdict(), the protocol's one codec, and never read its keys.
struct TurnRecord {
  int format_version = kFormatVersion;
  std::string run_id;
  std::string model;
  std::string task_id;
  int sample = 0;
  int turn = 0;
  std::string trajectory_id;
  std::optional<std::string> variant;                    ///< null in a run without variants
  nlohmann::json reference;                              ///< {target_notes, packs}; null when not recorded
  std::optional<std::vector<RecordedMessage>> messages;  ///< nullopt when absent or unreadable
  std::optional<ResponseRecord> response;                ///< null on request failure
  std::optional<RequestErrorRecord> request_error;
  std::optional<CandidateRecord> candidate;
  nlohmann::json verdict;  ///< the evaluator's verdict object; null when the request failed
  std::string feedback;
  std::string stop_reason;
  std::optional<TurnTimings> timings;
  std::optional<int> gpu;
  std::optional<std::int64_t> seed;  ///< the sampling seed sent
  std::optional<RepairOf> repair_of;
  std::optional<SynthesizedReasoning> synthesized_reasoning;
  std::string started_at, finished_at;
  nlohmann::json extra = nlohmann::json::object();  ///< top-level fields this version does not know

  /// model, task_id, sample and turn were present with the right types (readers skip records without).
  bool has_identity = true;

  nlohmann::json to_json() const;
  static TurnRecord from_json(const nlohmann::json &j);

  /// The verdict object, or nullptr when there is none (request failed).
  const nlohmann::json *verdict_object() const { return verdict.is_object() ? &verdict : nullptr; }
  /// The verdict decoded by protocol::Verdict::from_json; nullopt when there is none (request failed) or
  /// it cannot be read (a record is data from disk: never throws).
  std::optional<protocol::Verdict> decoded_verdict() const;
};

/// Appends records to <dir>/trajectories.jsonl with fsync after each. Not thread-safe: callers
/// serialize appends (the agent holds one lock around it). Invalid UTF-8 in model output is
/// replaced (U+FFFD) rather than rejected, so a record is never lost to an encoding error.
class TrajectoryWriter {
 public:
  explicit TrajectoryWriter(std::filesystem::path run_dir);
  /// Error (e.g. disk full: ENOSPC, or EFBIG under RLIMIT_FSIZE with SIGXFSZ ignored) leaves the file
  /// valid up to the last complete record: a partial write is truncated away.
  util::Expected<void> append(const TurnRecord &record);
  const std::filesystem::path &path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The label a record's model is grouped under in summaries and reports: the endpoint name, or
/// "<model>@<variant>" for a turn of a run variant, so that arms of one model compare like models.
std::string model_label(const TurnRecord &record);

struct LoadedRun {
  std::filesystem::path dir;
  RunRecord run;  ///< run.json; a default RunRecord when it is missing or unreadable (see run_error)
  /// Why run.json could not be read ("run.json: shard.index: expected an integer"); "" when it was read or
  /// is missing. Reports and exports go on without it (a warning says so); resume refuses the run.
  std::string run_error;
  std::vector<TurnRecord> turns;      ///< every complete, parseable record
  int skipped_partial_lines = 0;      ///< truncated/unparseable lines (e.g. the tail of a killed run)
  std::vector<std::string> warnings;  ///< mixed format versions, missing run.json, ...
};

/// Cuts a trailing incomplete line (the tail of a write cut short by SIGKILL or a full disk) so that
/// the next append starts on a fresh line. Returns the number of bytes removed (0 if none; the file
/// may be missing). Call before appending to an existing run (resume).
util::Expected<std::size_t> truncate_partial_tail(const std::filesystem::path &jsonl_path);

/// Reads a run directory. Error only when the directory or trajectories.jsonl is missing; a run.json that
/// is not valid JSON or has a malformed field is a warning and `run_error`.
util::Expected<LoadedRun> load_run(const std::filesystem::path &dir);

}  // namespace ptxbench::traces
