#include "evaluator/protocol/execution.hpp"

#include <algorithm>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using codec::erase_if_null;
using codec::plain_json;
using codec::read_plain;
using nlohmann::json;

// byte_share is read and written apart: present (possibly null) exactly for TMA-load targets.
template <class IO>
void fields(IO &io, TargetExecution &t) {
  io("name", t.name);
  io("sass_families", t.sass_families);
  io("present_in_sass", t.present_in_sass);
  io("warp_executions", t.warp_executions);
  io("threads_on", t.threads_on);
  io("executed", t.executed);
  io("counted", t.counted);
  io("work_flops", t.work_flops, Bounds{0});
  io("work_share", t.work_share, Bounds{0});
  io("matrix_target", t.matrix_target);
  io("work_unknown_opcodes", t.work_unknown_opcodes);
}

template <class IO>
void fields(IO &io, TopOpcode &o) {
  io("family", o.family);
  io("warp_executions", o.warp_executions);
}

template <class IO>
void fields(IO &io, LoadBytes &b) {
  io("tma", b.tma, Bounds{0});
  io("plain", b.plain, Bounds{0});
  io("tma_share", b.tma_share, Bounds{0, 1});
}

// The targets are read apart (their errors name the row).
template <class IO>
void fields(IO &io, ExecutionFigures &f) {
  io("instrumented", f.instrumented);
  io("not_instrumented", f.not_instrumented);
  io("estimated_seconds", f.estimated_seconds, Bounds{0});
  io("workload", f.workload);
  io("top_opcodes", f.top_opcodes);
  io("tensor_core_share", f.tensor_core_share, Bounds{0, 1});
  io("tensor_core_flops", f.tensor_core_flops, Bounds{0});
  io("tensor_core_work_share", f.tensor_core_work_share, Bounds{0});
  io("workload_flops", f.workload_flops, Bounds{0});
  io("total_warp_instructions", f.total_warp_instructions);
  io("load_bytes", f.load_bytes);
  io("matrix_work", f.matrix_work);
  io("functions", f.functions);
  io("records", f.records);
  io("unmatched_records", f.unmatched_records);
  io("dropped_records", f.dropped_records);
}

const TargetExecution *ExecutionFigures::target(std::string_view name) const {
  const auto it =
      std::find_if(targets.begin(), targets.end(), [&](const TargetExecution &t) { return t.name == name; });
  return it == targets.end() ? nullptr : &*it;
}

void to_json(json &j, const TargetExecution &t) {
  j = plain_json(t);
  erase_if_null(j, "counted");
  if (t.work_unknown_opcodes.empty()) j.erase("work_unknown_opcodes");
  if (t.tma_load_target) j["byte_share"] = t.byte_share ? json(*t.byte_share) : json(nullptr);
}

void from_json(const json &j, TargetExecution &t) {
  t = TargetExecution{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  json rest = j;
  if (const auto it = rest.find("byte_share"); it != rest.end()) {
    t.tma_load_target = true;
    if (!it->is_null()) {
      if (!it->is_number()) throw ProtocolError("byte_share", "expected a number or null, got " + it->dump());
      const double v = it->get<double>();
      if (v < 0 || v > 1) throw ProtocolError("byte_share", "must be within [0, 1], got " + it->dump());
      t.byte_share = v;
    }
    rest.erase(it);
  }
  codec::read_fields(rest, t);  // sets only the listed fields
}

void to_json(json &j, const TopOpcode &o) {
  j = plain_json(o);
}
void from_json(const json &j, TopOpcode &o) {
  read_plain(j, o);
}

void to_json(json &j, const LoadBytes &b) {
  j = plain_json(b);
}
void from_json(const json &j, LoadBytes &b) {
  read_plain(j, b);
}

void to_json(json &j, const ExecutionFigures &f) {
  if (f.estimated_seconds) {
    j = json{{"estimated_seconds", *f.estimated_seconds}};
    return;
  }
  if (!f.instrumented) {
    j = json{{"targets", f.targets}, {"instrumented", false}};
    if (f.not_instrumented) j["not_instrumented"] = *f.not_instrumented;
    return;
  }
  j = plain_json(f);
  j["targets"] = f.targets;
  erase_if_null(j, "not_instrumented");
  erase_if_null(j, "estimated_seconds");
  erase_if_null(j, "matrix_work");
}

void from_json(const json &j, ExecutionFigures &f) {
  f = ExecutionFigures{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  json rest = j;
  if (const auto it = rest.find("targets"); it != rest.end()) {
    f.targets = codec::read_rows<TargetExecution>(*it, "targets");
    rest.erase(it);
  }
  codec::read_fields(rest, f);
  // The skipped form says nothing of `instrumented`: nothing was.
  if (f.estimated_seconds && !j.contains("instrumented")) f.instrumented = false;
}

std::optional<ExecutionFigures> execution_figures_from_figures(const json &figures) {
  if (!figures.is_object() || figures.empty()) return std::nullopt;
  return figures.get<ExecutionFigures>();
}

}  // namespace ptxbench::protocol
