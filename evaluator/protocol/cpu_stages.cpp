#include "evaluator/protocol/cpu_stages.hpp"

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using codec::plain_json;
using nlohmann::json;

namespace {

std::optional<bool> flag_of(const std::map<std::string, bool> &flags, const std::string &key) {
  const auto it = flags.find(key);
  return it == flags.end() ? std::nullopt : std::optional<bool>(it->second);
}

}  // namespace

std::optional<bool> StaticFigures::target_in_ptx(const std::string &target) const {
  return flag_of(targets_in_ptx, target);
}

std::optional<bool> CompileFigures::target_in_sass(const std::string &target) const {
  return targets_in_sass ? flag_of(*targets_in_sass, target) : std::nullopt;
}

template <class IO>
void fields(IO &io, ParseFigures &f) {
  io("language", f.language);
  io("kernel_first_line", f.kernel_first_line, Bounds{0});
  io("kernel_blocks_seen", f.kernel_blocks_seen, Bounds{0});
  io("json_blocks_seen", f.json_blocks_seen, Bounds{0});
  io("kernel_bytes", f.kernel_bytes);
  io("num_sms", f.num_sms, Bounds{1});
  io("num_sms_source", f.num_sms_source);
  io("workspace_bytes", f.workspace_bytes);
}

template <class IO>
void fields(IO &io, StaticFigures &f) {
  io("entry", f.entry);
  io("ptx_version", f.ptx_version);
  io("ptx_target", f.ptx_target);
  io("instruction_count", f.instruction_count);
  io("entries", f.entries);
  io("targets_in_ptx", f.targets_in_ptx);
  io("module_globals", f.module_globals);
  io("module_globals_written", f.module_globals_written);
}

template <class IO>
void fields(IO &io, CompileFigures &f) {
  io("nvrtc_seconds", f.nvrtc_seconds, Bounds{0});
  io("ptxas_seconds", f.ptxas_seconds, Bounds{0});
  io("warnings", f.warnings);
  io("registers", f.registers, Bounds{0});
  io("spill_store_bytes", f.spill_store_bytes, Bounds{0});
  io("spill_load_bytes", f.spill_load_bytes, Bounds{0});
  io("shared_bytes", f.shared_bytes, Bounds{0});
  io("stack_bytes", f.stack_bytes, Bounds{0});
  io("barriers", f.barriers, Bounds{0});
  io("cubin_bytes", f.cubin_bytes);
  io("sass_available", f.sass_available);
  io("targets_in_sass", f.targets_in_sass);
  io("sass_families", f.sass_families);
  io("sass_instruction_count", f.sass_instruction_count);
  io("sass_wait_seconds", f.sass_wait_seconds, Bounds{0});
}

void to_json(json &j, const ParseFigures &f) {
  j = plain_json(f);
  codec::erase_if_null(j, "workspace_bytes");  // only when the manifest declares one; num_sms stays null
}

void from_json(const json &j, ParseFigures &f) {
  codec::read_plain(j, f);
}

void to_json(json &j, const StaticFigures &f) {
  j = plain_json(f);
  codec::erase_if_null(j, "module_globals_written");  // absent in older records; the stage always writes it
}

void from_json(const json &j, StaticFigures &f) {
  codec::read_plain(j, f);
}

void to_json(json &j, const CompileFigures &f) {
  j = plain_json(f);
  codec::erase_nulls(j);
}

void from_json(const json &j, CompileFigures &f) {
  codec::read_plain(j, f);
}

std::optional<ParseFigures> parse_figures_from_figures(const json &figures) {
  return codec::figures_record<ParseFigures>(figures);
}

std::optional<StaticFigures> static_figures_from_figures(const json &figures) {
  return codec::figures_record<StaticFigures>(figures);
}

std::optional<CompileFigures> compile_figures_from_figures(const json &figures) {
  return codec::figures_record<CompileFigures>(figures);
}

}  // namespace ptxbench::protocol
