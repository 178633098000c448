#include "traces/detail/run_view.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/core.h>

#include "traces/record.hpp"
#include "util/files.hpp"

namespace ptxbench::traces::detail {

const Json *field(const Json &j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

const Json *object_field(const Json &j, std::string_view key) {
  const Json *f = field(j, key);
  return f && f->is_object() ? f : nullptr;
}

std::optional<std::string> string_field(const Json &j, std::string_view key) {
  const Json *f = field(j, key);
  if (!f || !f->is_string()) return std::nullopt;
  return f->get<std::string>();
}

std::optional<double> number_field(const Json &j, std::string_view key) {
  const Json *f = field(j, key);
  if (!f || !f->is_number()) return std::nullopt;
  return f->get<double>();
}

std::optional<bool> bool_field(const Json &j, std::string_view key) {
  const Json *f = field(j, key);
  if (!f || !f->is_boolean()) return std::nullopt;
  return f->get<bool>();
}

std::optional<long long> int_field(const Json &j, std::string_view key) {
  const Json *f = field(j, key);
  if (!f || !f->is_number_integer()) return std::nullopt;
  return f->get<long long>();
}

namespace {

using TrajectoryKey = std::tuple<std::size_t, std::string, std::string, int>;  ///< run, model, task, sample

void warn_skipped(RunIndex &index, const LoadedRun &run, int malformed, int other_version) {
  if (malformed) {
    index.warnings.push_back(fmt::format("{}: {} record(s) lack model, task_id, sample or turn; skipped",
                                         run.dir.string(), malformed));
  }
  if (other_version) {
    index.warnings.push_back(
        fmt::format("{}: {} record(s) have a format_version other than {} (written by another ptxbench "
                    "version); skipped",
                    run.dir.string(), other_version, kFormatVersion));
  }
  index.malformed_records += malformed;
  index.other_version_records += other_version;
}

}  // namespace

RunIndex index_runs(const std::vector<LoadedRun> &runs) {
  RunIndex index;
  // (run, model, task, sample) -> turn -> record; std::map gives the documented order.
  std::map<TrajectoryKey, std::map<int, const TurnRecord *>> grouped;
  std::map<TrajectoryKey, std::string> ids;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const LoadedRun &run = runs[r];
    index.skipped_partial_lines += run.skipped_partial_lines;
    for (const auto &w : run.warnings) index.warnings.push_back(fmt::format("{}: {}", run.dir.string(), w));
    int run_malformed = 0, run_other_version = 0;
    for (const TurnRecord &record : run.turns) {
      if (record.format_version != kFormatVersion) {
        ++run_other_version;
        continue;
      }
      if (!record.has_identity) {
        ++run_malformed;
        continue;
      }
      auto key = std::make_tuple(r, model_label(record), record.task_id, record.sample);
      auto &turns = grouped[key];
      // A turn that ended in a request failure and was sent again by `resume` is replaced, not repeated.
      if (auto old = turns.find(record.turn);
          old != turns.end() && old->second->stop_reason != "request_failed")
        ++index.duplicate_turn_records;
      turns[record.turn] = &record;
      if (!ids.count(key)) {
        ids[key] = record.trajectory_id.empty()
                       ? fmt::format("{}/{}/{}", record.model, record.task_id, record.sample)
                       : record.trajectory_id;
      }
      ++index.usable_records;
    }
    warn_skipped(index, run, run_malformed, run_other_version);
  }
  if (index.duplicate_turn_records) {
    index.warnings.push_back(
        fmt::format("{} turn record(s) repeated a trajectory's turn; the later record was kept",
                    index.duplicate_turn_records));
  }
  for (auto &[key, turns] : grouped) {
    TrajectoryView t;
    t.run_index = std::get<0>(key);
    t.model = std::get<1>(key);
    t.task_id = std::get<2>(key);
    t.sample = std::get<3>(key);
    t.trajectory_id = ids[key];
    const TurnRecord &first = *turns.begin()->second;
    t.variant = first.variant.value_or("");
    const LoadedRun &run = runs[t.run_index];
    t.run_id =
        !first.run_id.empty() ? first.run_id : (!run.run.run_id.empty() ? run.run.run_id : run.dir.string());
    for (auto &[turn, record] : turns) t.turns.push_back(record);
    index.trajectories.push_back(std::move(t));
  }
  return index;
}

std::string normalize_kernel_source(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      auto end = s.find("*/", i + 2);
      i = end == std::string_view::npos ? s.size() : end + 2;
    } else if (c == '"' || c == '\'') {
      // A literal: copied verbatim up to the unescaped closing quote (or the line end).
      out += c;
      ++i;
      while (i < s.size() && s[i] != c && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size()) out += s[i++];
        out += s[i++];
      }
      if (i < s.size() && s[i] == c) out += s[i++];
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string normalized_kernel_hash(std::string_view source) {
  return util::fnv1a64_hex(normalize_kernel_source(source));
}

std::string kernel_hash_of(const TurnRecord &record) {
  if (const auto v = record.decoded_verdict(); v && !v->kernel_hash.empty()) return v->kernel_hash;
  if (const auto &c = record.candidate) {
    if (!c->kernel_hash.empty()) return c->kernel_hash;
    if (!c->kernel_source.empty()) return normalized_kernel_hash(c->kernel_source);
  }
  return "";
}

std::size_t utf8_length(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(
      text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace ptxbench::traces::detail

namespace ptxbench::traces::detail {
std::string no_usable_records_message(const std::vector<LoadedRun> &runs, const RunIndex &index) {
  std::string why = runs.empty() ? "no run directories given" : "no usable turn records in";
  for (const auto &r : runs) why += " " + r.dir.string();
  if (index.other_version_records) {
    why += fmt::format(" ({} record(s) of another format version; this ptxbench reads version {})",
                       index.other_version_records, kFormatVersion);
  } else if (index.malformed_records) {
    why += fmt::format(" ({} record(s) lack model, task_id, sample or turn)", index.malformed_records);
  } else if (index.skipped_partial_lines) {
    why += fmt::format(" (only {} unreadable or partial line(s))", index.skipped_partial_lines);
  } else if (!runs.empty()) {
    why += " (trajectories.jsonl is empty: the run recorded no turn yet)";
  }
  return why;
}
}  // namespace ptxbench::traces::detail
