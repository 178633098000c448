// RunRecord <-> JSON. One field list per record drives both directions through the protocol's field
// codec (evaluator/protocol/fields.hpp: types and bounds checked, errors name the field), except
// that keys a record does not know are kept in its `extra` instead of being refused.
#include "traces/run_record.hpp"

#include <set>

#include <fmt/core.h>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"

namespace ptxbench::traces {

using Json = nlohmann::json;
using protocol::ProtocolError;
using protocol::codec::Bounds;

namespace {

/// A record type of this file: it keeps unknown keys in `extra`.
template <class T>
concept Record = requires(T r) {
  r.extra;
};

/// Its field list written over its `extra`; read back with the keys the list does not name kept in `extra`.
template <Record T>
Json write_record(const T &value);
template <Record T>
void read_record(const Json &j, T &value);

}  // namespace

// The parts' codecs (nlohmann ADL): this pair, unless a part has rules of its own (declared here, defined
// below).
template <Record T>
void to_json(Json &j, const T &r) {
  j = write_record(r);
}
template <Record T>
void from_json(const Json &j, T &r) {
  read_record(j, r);
}
void to_json(Json &j, const ResumeRecord &r);
void from_json(const Json &j, ResumeRecord &r);
void from_json(const Json &j, ShardRecord &r);

namespace {

/// The protocol's reader, plus rows of records read one by one so an error names the row
/// ("resumes[1].at").
class RecordReader : public protocol::codec::FieldReader {
 public:
  using FieldReader::FieldReader;
  using FieldReader::operator();
  template <Record T>
  void operator()(const char *key, std::vector<T> &rows, Bounds = {}) {
    Json raw;  // null when absent (or null): no rows
    FieldReader::operator()(key, raw);
    if (!raw.is_null()) rows = protocol::codec::read_rows<T>(raw, key);
  }
};

/// Collects the keys a field list names.
struct KeyNames {
  std::set<std::string, std::less<>> names;
  template <class T>
  void operator()(const char *key, T &, Bounds = {}) {
    names.insert(key);
  }
};

/// A field that must be a JSON object when present (a sub-document of another module's shape).
void require_object(const Json &j, const char *key) {
  if (!j.is_null() && !j.is_object()) throw ProtocolError(key, "expected an object, got " + j.dump());
}

// The field lists: a name, the member, and what the reader accepts.
template <class IO>
void fields(IO &io, ProgramInfo &r) {
  io("name", r.name);
  io("version", r.version);
  io("git_revision", r.git_revision);
}

template <class IO>
void fields(IO &io, GpuStagesRecord &r) {
  io("enabled", r.enabled);
  io("gpus", r.gpus);
  io("reason", r.reason);
}

template <class IO>
void fields(IO &io, ResumeRecord &r) {
  io("at", r.at);
  io("program_version", r.program_version);
  io("git_revision", r.git_revision);
  io("gpu_stages", r.gpu_stages);
  io("environment", r.environment);
}

template <class IO>
void fields(IO &io, ShardRecord &r) {
  io("index", r.index, Bounds{0, 1e6});
  io("count", r.count, Bounds{1, 1e6});
  io("config_hash", r.config_hash);
  io("cells", r.cells, Bounds{0});
  io("cells_total", r.cells_total, Bounds{0});
  io("split", r.split);
}

template <class IO>
void fields(IO &io, MergedShard &r) {
  io("index", r.index, Bounds{0, 1e6});
  io("dir", r.dir);
  io("records", r.records, Bounds{0});
}

template <class IO>
void fields(IO &io, MergedShards &r) {
  io("count", r.count, Bounds{0, 1e6});
  io("present", r.present);
}

template <class IO>
void fields(IO &io, EvaluatorServiceRecord &r) {
  io("url", r.url);
  io("authenticated", r.authenticated);
  io("deadline_seconds", r.deadline_seconds, Bounds{0});
  io("retry_seconds", r.retry_seconds, Bounds{0});
  io("in_flight", r.in_flight, Bounds{0});
  io("version", r.version);
  io("gpu_stages", r.gpu_stages);
  io("token_env", r.token_env);
}

template <class IO>
void fields(IO &io, ThroughputRecord &r) {
  io("wall_seconds", r.wall_seconds, Bounds{0});
  io("gpu_busy_fraction", r.gpu_busy_fraction);
  io("verdicts_made", r.verdicts_made, Bounds{0});
  io("verdicts_reused", r.verdicts_reused, Bounds{0});
  io("verdicts_per_gpu_hour", r.verdicts_per_gpu_hour, Bounds{0});
}

template <class IO>
void fields(IO &io, RunRecord &r) {
  io("format_version", r.format_version, Bounds{0, 1e6});
  io("run_id", r.run_id);
  io("created_at", r.created_at);
  io("program", r.program);
  io("config", r.config);
  io("tasks", r.tasks);
  io("evaluator_settings", r.evaluator_settings);
  io("gpu_stages", r.gpu_stages);
  io("environment", r.environment);
  io("resumes", r.resumes);
  io("config_hash", r.config_hash);
  io("run_seed", r.run_seed);
  io("evaluator_service", r.evaluator_service);
  io("shard", r.shard);
  io("shards", r.shards);
  io("throughput", r.throughput);
}

// The field lists come first: the helpers below find them by ordinary lookup (they are not ADL's).
template <Record T>
Json write_record(const T &value) {
  protocol::codec::FieldWriter w;
  w.out = value.extra.is_object() ? value.extra : Json::object();
  fields(w, const_cast<T &>(value));  // the writer only reads the members
  return std::move(w.out);
}

template <Record T>
void read_record(const Json &j, T &value) {
  value = T{};
  RecordReader reader(j);
  fields(reader, value);
  KeyNames known;
  fields(known, value);
  for (const auto &[key, v] : j.items())
    if (!known.names.count(key)) value.extra[key] = v;
}

/// Drops `key` when it holds an empty string (a field the file did not have).
void erase_if_empty(Json &j, const char *key) {
  if (const auto it = j.find(key);
      it != j.end() && it->is_string() && it->get_ref<const std::string &>().empty())
    j.erase(it);
}

}  // namespace

void to_json(Json &j, const GpuStagesRecord &r) {
  j = write_record(r);
  j.erase(r.enabled ? "reason" : "gpus");  // {enabled: true, gpus} or {enabled: false, reason}
}

void to_json(Json &j, const ResumeRecord &r) {
  j = write_record(r);
  protocol::codec::erase_if_null(j, "gpu_stages");
  protocol::codec::erase_if_null(j, "environment");
}
void from_json(const Json &j, ResumeRecord &r) {
  read_record(j, r);
  require_object(r.environment, "environment");
}

void to_json(Json &j, const ShardRecord &r) {
  j = write_record(r);
  protocol::codec::erase_if_null(j, "cells");
  protocol::codec::erase_if_null(j, "cells_total");
}
void from_json(const Json &j, ShardRecord &r) {
  read_record(j, r);
  if (r.index >= r.count)
    throw ProtocolError("index", fmt::format("must be below count {}, got {}", r.count, r.index));
}

void to_json(Json &j, const EvaluatorServiceRecord &r) {
  j = write_record(r);
  protocol::codec::erase_if_null(j, "token_env");
}

Json RunRecord::to_json() const {
  Json j = write_record(*this);
  for (const char *key : {"program", "config", "tasks", "evaluator_settings", "gpu_stages", "environment",
                          "config_hash", "run_seed", "evaluator_service", "shard", "shards", "throughput"})
    protocol::codec::erase_if_null(j, key);
  erase_if_empty(j, "run_id");
  erase_if_empty(j, "created_at");
  if (format_version == 0) j.erase("format_version");
  return j;
}

util::Expected<RunRecord> RunRecord::from_json(const Json &j) {
  RunRecord r;
  try {
    read_record(j, r);
    require_object(r.config, "config");
    require_object(r.evaluator_settings, "evaluator_settings");
    require_object(r.environment, "environment");
  } catch (const ProtocolError &e) {
    return util::unexpected(std::string(e.what()));
  } catch (const Json::exception &e) {  // not reached through the field codec; kept as a backstop
    return util::unexpected(std::string(e.what()));
  }
  return r;
}

}  // namespace ptxbench::traces
