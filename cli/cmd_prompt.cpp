// `ptxbench prompt show|packs`: exactly what a model is sent for a task under a run config's variant,
// with sizes, and the knowledge packs that variants can select.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "agent/knowledge_pack.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/run_config.hpp"
#include "cli/cli.hpp"
#include "evaluator/candidate.hpp"
#include "evaluator/protocol/stages.hpp"
#include "evaluator/status.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"

namespace ptxbench::cli {
namespace {

namespace fs = std::filesystem;

struct PromptOptions {
  std::string config_file;  ///< empty = examples/default_run.json
  std::string task_id;
  std::string variant;        ///< empty = the config's first arm
  std::string turn_feedback;  ///< a status name: also print the feedback a verdict of that status gets
  std::string verdict_file;   ///< a verdict JSON (`ptxbench eval --json`): print the feedback it gets instead
  std::string response_file;  ///< the answer that verdict judged: its kernel's lines quoted in the feedback
  std::string prompt_dir;     ///< packs: templates folder (default: the installed/source prompts/)
  bool messages_only =
      false;  ///< print the messages' text only, no sizes or settings (what a reader model sees)
};

/// A verdict whose first non-ok stage has `status`, with placeholder texts where a real verdict's
/// figures would go: it shows the shape and size of the feedback, not a real evaluation.
evaluator::Verdict illustrative_verdict(const tasks::Task &task, evaluator::Status status) {
  using evaluator::Status;
  evaluator::Verdict v;
  v.task_id = task.id;
  std::vector<evaluator::StageResult *> stages;  // the status order (evaluator/protocol/stages.hpp)
  for (const auto &row : protocol::kStageTable)
    if (row.decides_status) stages.push_back(&v.stage(row.stage));
  const int count = static_cast<int>(stages.size());
  int failing = count;  // ok: every stage passes
  switch (status) {
    case Status::no_kernel:
    case Status::bad_manifest:
      failing = 0;
      break;
    case Status::static_error:
      failing = 1;
      break;
    case Status::compile_error:
      failing = 2;
      break;
    case Status::launch_error:
    case Status::runtime_error:
    case Status::timeout:
    case Status::incorrect:
    case Status::nondeterministic:
      failing = 3;
      break;
    case Status::suspicious:
      failing = 5;
      break;
    default:
      break;
  }
  for (int i = 0; i < count; ++i) {
    if (i < failing) {
      stages[i]->status = Status::ok;
      stages[i]->summary = "ok";
    } else if (i == failing) {
      stages[i]->status = status;
      stages[i]->summary = "<the failing stage's one-line summary>";
      stages[i]->diagnostics.push_back({"error", "<the stage's diagnostics, each on its own line>", {}});
    }
  }
  if (failing > 3) v.axes.correct = true;
  if (failing > 4) v.axes.targets_executed = true;
  v.finalize_status();
  return v;
}

std::string size_line(const std::string &text) {
  return fmt::format("{} chars, ~{} tokens ({})", text.size(), agent::estimate_tokens(text),
                     agent::kTokenEstimateName);
}

/// The arm --variant names (the config's first arm without it); nullptr, with the error printed, when the
/// config has no such variant.
const agent::Variant *chosen_arm(const std::vector<agent::Variant> &arms, const agent::RunConfig &config,
                                 const PromptOptions &o, const fs::path &config_file) {
  if (o.variant.empty()) return &arms.front();
  const agent::Variant *arm = nullptr;
  for (const auto &a : arms)
    if (a.name == o.variant) arm = &a;
  if (arm != nullptr) return arm;
  std::string known;
  for (const auto &a : config.variants) known += (known.empty() ? "" : ", ") + a.name;
  fmt::print(stderr, "error: --variant {}: {} has no such variant (it has: {})\n", o.variant,
             config_file.string(), known.empty() ? "none" : known);
  return nullptr;
}

/// The feedback message to print after the task message: the one a real verdict (--verdict, with its
/// answer's lines when --response is given) gets, or an illustrative one for --turn-feedback's status.
struct FeedbackChoice {
  std::optional<evaluator::Status> status;    ///< --turn-feedback
  std::optional<evaluator::Verdict> verdict;  ///< --verdict
  std::string kernel_source;                  ///< --response's kernel block
  bool cuda = false;
  std::string label;  ///< what the heading says the feedback follows

  bool any() const { return status || verdict; }
  std::string text(const agent::PromptBuilder &builder, const tasks::Task &task) const {
    if (verdict) {
      const agent::FeedbackSources sources{kernel_source, cuda ? std::string_view() : kernel_source, cuda};
      return builder.feedback(task, *verdict, kernel_source.empty() ? nullptr : &sources);
    }
    return builder.feedback(task, illustrative_verdict(task, *status));
  }
};

/// Reads --verdict (and --response) into `choice`. false (error printed) when a file cannot be used.
bool load_verdict(const PromptOptions &o, FeedbackChoice &choice) {
  const auto text = util::read_file(o.verdict_file);
  if (!text) {
    fmt::print(stderr, "error: --verdict {}: {}\n", o.verdict_file, text.error());
    return false;
  }
  try {
    choice.verdict = evaluator::Verdict::from_json(nlohmann::json::parse(*text));
  } catch (const std::exception &e) {
    fmt::print(stderr, "error: --verdict {}: not a verdict (as `ptxbench eval --json` writes): {}\n",
               o.verdict_file, e.what());
    return false;
  }
  choice.label = "the verdict in " + o.verdict_file;
  if (o.response_file.empty()) return true;
  const auto response = evaluator::read_response(o.response_file, {});
  if (!response) {
    fmt::print(stderr, "error: --response {}: {}\n", o.response_file, response.error());
    return false;
  }
  const auto parsed = evaluator::parse_response(response->text);
  if (!parsed) {
    fmt::print(stderr, "error: --response {}: {}\n", o.response_file, parsed.error().message);
    return false;
  }
  choice.kernel_source = parsed->kernel_source;
  choice.cuda = parsed->language == evaluator::KernelLanguage::cuda;
  return true;
}

/// What a model is sent for `task` under `arm`: the messages, their sizes and the variant's settings.
void print_prompt(const PromptOptions &o, const agent::RunConfig &config, const agent::Variant &arm,
                  const tasks::Task &task, const agent::PromptBuilder &builder,
                  const FeedbackChoice &feedback_choice) {
  const std::string system = builder.system_prompt(task, {arm.target_notes, arm.packs});
  const std::string user = builder.task_prompt(task);
  if (o.messages_only) {
    // Exactly the texts, separated by one marker line a reader cannot mistake for prompt content.
    fmt::print("{}\n\n---- next message ----\n\n{}\n", system, user);
    if (feedback_choice.any())
      fmt::print("\n---- next message ----\n\n{}\n", feedback_choice.text(builder, task));
    return;
  }
  std::string packs;
  for (const auto &p : arm.packs)
    packs += fmt::format("{}{} v{}", packs.empty() ? "" : ", ", p, builder.packs().at(p).version);
  fmt::print("== system message: {}\n   variant: {}; history: {}; target notes: {}; packs: {}\n{}\n",
             size_line(system), arm.name.empty() ? "(none)" : arm.name,
             agent::to_string(config.history_of(arm)), arm.target_notes ? "yes" : "no",
             packs.empty() ? "none" : packs, system);
  fmt::print("== user message (task): {}\n{}\n", size_line(user), user);
  std::size_t total = system.size() + user.size();
  if (feedback_choice.any()) {
    const std::string feedback = feedback_choice.text(builder, task);
    if (feedback_choice.verdict)
      fmt::print("== user message (feedback after {}): {}\n{}\n", feedback_choice.label, size_line(feedback),
                 feedback);
    else
      fmt::print(
          "== user message (feedback after a {} verdict; <...> stands for the verdict's figures): {}\n{}\n",
          o.turn_feedback, size_line(feedback), feedback);
    total += feedback.size();
  }
  fmt::print("== first request: {} chars, ~{} tokens ({})\n", system.size() + user.size(),
             (system.size() + user.size() + 3) / 4, agent::kTokenEstimateName);
  if (feedback_choice.any())
    fmt::print("== with the feedback: {} chars, ~{} tokens\n", total, (total + 3) / 4);
}

int show(const PromptOptions &o) {
  const fs::path config_file =
      o.config_file.empty() ? agent::default_examples_dir() / "default_run.json" : fs::path(o.config_file);
  auto config = agent::load_run_config(config_file);
  if (!config) {
    fmt::print(stderr, "error: {}\n", config.error());
    return kExitUsage;
  }
  const auto arms = config->arms();
  const agent::Variant *arm = chosen_arm(arms, *config, o, config_file);
  if (arm == nullptr) return kExitUsage;
  FeedbackChoice feedback;
  if (!o.turn_feedback.empty() && !o.verdict_file.empty()) {
    fmt::print(stderr, "error: --turn-feedback and --verdict: give one\n");
    return kExitUsage;
  }
  if (!o.response_file.empty() && o.verdict_file.empty()) {
    fmt::print(stderr, "error: --response needs --verdict (the verdict of that answer)\n");
    return kExitUsage;
  }
  if (!o.verdict_file.empty() && !load_verdict(o, feedback)) return kExitUsage;
  if (!o.turn_feedback.empty()) {
    feedback.status = evaluator::status_from_string(o.turn_feedback);
    if (!feedback.status || *feedback.status == evaluator::Status::skipped) {
      fmt::print(stderr,
                 "error: --turn-feedback {}: expected a verdict status such as incorrect or compile_error\n",
                 o.turn_feedback);
      return kExitUsage;
    }
  }
  const fs::path task_dir = config->task_dir.empty() ? tasks::default_task_dir() : config->task_dir;
  auto all = tasks::load_task_dir(task_dir);
  if (!all) {
    fmt::print(stderr, "error: cannot load tasks from {}: {}\n", task_dir.string(), all.error());
    return kExitEnvironment;
  }
  const tasks::Task *task = tasks::find_task(*all, o.task_id);
  if (task == nullptr) {
    fmt::print(stderr, "error: unknown task '{}' in {} (see `ptxbench tasks list`)\n", o.task_id,
               task_dir.string());
    return kExitEnvironment;  // as `tasks show` and `eval` answer an unknown task
  }
  const fs::path prompt_dir = config->prompt_dir_of(*arm);
  auto builder =
      agent::PromptBuilder::load(prompt_dir.empty() ? agent::PromptBuilder::default_dir() : prompt_dir);
  if (!builder) {
    fmt::print(stderr, "error: cannot load prompt templates: {}\n", builder.error());
    return kExitEnvironment;
  }
  if (auto ok = builder->check_packs(arm->packs); !ok) {
    fmt::print(stderr, "error: variant '{}': {}\n", arm->name, ok.error());
    return kExitUsage;
  }
  print_prompt(o, *config, *arm, *task, *builder, feedback);
  return kExitOk;
}

int list_packs(const PromptOptions &o) {
  const fs::path dir = o.prompt_dir.empty() ? agent::PromptBuilder::default_dir() : fs::path(o.prompt_dir);
  auto packs = agent::load_knowledge_packs(dir / "packs");
  if (!packs) {
    fmt::print(stderr, "error: {}\n", packs.error());
    return kExitEnvironment;
  }
  fmt::print("{:<16} {:>7} {:>8}  {}\n", "pack", "version", "tokens", "covers");
  for (const auto &[name, p] : *packs)
    fmt::print("{:<16} {:>7} {:>8}  {}\n", name, p.version, agent::estimate_tokens(p.text), p.covers);
  fmt::print("(tokens: {} estimate; packs live in {})\n", agent::kTokenEstimateName,
             (dir / "packs").string());
  return kExitOk;
}

}  // namespace

void register_prompt_commands(CLI::App &app, Action &action) {
  auto o = std::make_shared<PromptOptions>();
  CLI::App *prompt =
      app.add_subcommand("prompt", "Show prompts exactly as models receive them; list knowledge packs");
  prompt->require_subcommand(1);
  CLI::App *show_cmd = prompt->add_subcommand(
      "show",
      "Print the system and task messages a model is sent for a task (and a feedback message), with sizes");
  show_cmd->add_option("--task", o->task_id, "task id")->required();
  show_cmd->add_option("--config", o->config_file,
                       "run config whose variants and prompt settings apply "
                       "(default: examples/default_run.json)");
  show_cmd->add_option("--variant", o->variant, "the config variant (default: the first, or none)");
  show_cmd->add_option(
      "--turn-feedback", o->turn_feedback,
      "also print the feedback after a verdict of this status (e.g. incorrect, compile_error)");
  show_cmd->add_option("--verdict", o->verdict_file,
                       "also print the feedback the model gets after this verdict (a `ptxbench eval --json` "
                       "file) instead of an illustrative one");
  show_cmd->add_option("--response", o->response_file,
                       "with --verdict: the answer it judged, so the feedback quotes the kernel's own lines");
  show_cmd->add_flag("--messages-only", o->messages_only,
                     "print only the messages' text, without sizes or settings (e.g. to hand a reader "
                     "model exactly what a model is sent)");
  show_cmd->callback([o, &action] { action.run = [o] { return show(*o); }; });
  CLI::App *packs_cmd =
      prompt->add_subcommand("packs", "List the knowledge packs: name, version, size, what each covers");
  packs_cmd->add_option("--prompts", o->prompt_dir,
                        "prompts folder (default: the installed or source prompts/)");
  packs_cmd->callback([o, &action] { action.run = [o] { return list_packs(*o); }; });
}

}  // namespace ptxbench::cli
