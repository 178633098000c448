#include "evaluator/protocol/profile.hpp"

#include <cmath>

#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using nlohmann::json;

namespace {

// An optional number travels as a number or null.
json optional_json(const std::optional<double> &v) {
  return v ? json(*v) : json(nullptr);
}
json optional_json(const std::optional<int> &v) {
  return v ? json(*v) : json(nullptr);
}

template <class T>
void read_optional(const json &j, const char *key, std::optional<T> &out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    out.reset();
    return;
  }
  if (!it->is_number()) throw ProtocolError(key, "expected a number or null");
  out = it->template get<T>();
}

template <class IO>
void plain_fields(IO &io, ProfileMetric &m) {
  io("name", m.name);
  io("label", m.label);
  io("unit", m.unit);
  io("value", m.value);
  io("throughput", m.throughput);
}

template <class IO>
void plain_fields(IO &io, Occupancy &o) {
  io("block_threads", o.block_threads, codec::Bounds{0});
  io("registers_per_thread", o.registers_per_thread, codec::Bounds{0});
  io("shared_bytes", o.shared_bytes, codec::Bounds{0});
  io("blocks_per_sm", o.blocks_per_sm, codec::Bounds{0});
  io("warps_per_sm", o.warps_per_sm, codec::Bounds{0});
  io("max_warps_per_sm", o.max_warps_per_sm, codec::Bounds{0});
  io("theoretical_pct", o.theoretical_pct, codec::Bounds{0, 100});
  io("limiter", o.limiter);
  io("cluster_size", o.cluster_size, codec::Bounds{1});
  io("grid_blocks", o.grid_blocks, codec::Bounds{0});
  io("sm_count", o.sm_count, codec::Bounds{0});
}

template <class IO>
void plain_fields(IO &io, KernelProfile &p) {
  io("workload", p.workload);
  io("metrics", p.metrics);
  io("unavailable", p.unavailable);
  io("occupancy", p.occupancy);
  io("passes", p.passes, codec::Bounds{0});
  io("library_source", p.library_source);
  io("pc_sampling", p.pc_sampling);
}

/// Reads the plain fields and the named optional ones; any other key is refused.
template <class T, class Optionals>
void read_with_optionals(const json &j, T &value, Optionals &&optionals) {
  json plain = j;
  if (!plain.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  optionals(plain);
  codec::FieldReader r(plain);
  plain_fields(r, value);
  r.finish();
}

}  // namespace

// Found by argument-dependent lookup from codec::write_fields / read_fields: not in the unnamed namespace.
template <class IO>
void fields(IO &io, StallCount &c) {
  io("reason", c.reason);
  io("samples", c.samples);
}

template <class IO>
void fields(IO &io, SampledPc &pc) {
  io("function", pc.function);
  io("offset", pc.offset);
  io("samples", pc.samples);
  io("reasons", pc.reasons);
}

template <class IO>
void fields(IO &io, HotLine &l) {
  io("line", l.line, codec::Bounds{0});
  io("text", l.text);
  io("samples", l.samples);
  io("share", l.share, codec::Bounds{0, 1});
  io("reasons", l.reasons);
  io("opcodes", l.opcodes);
}

template <class IO>
void fields(IO &io, PcSampling &s) {
  io("samples", s.samples);
  io("dropped_samples", s.dropped_samples);
  io("period_log2", s.period_log2, codec::Bounds{0, 31});
  io("launches", s.launches, codec::Bounds{1, 1024});
  io("reasons", s.reasons);
  io("pcs", s.pcs);
  io("hot_lines", s.hot_lines);
  io("line_source", s.line_source);
  io("line_error", s.line_error);
  io("unavailable", s.unavailable);
}

void to_json(json &j, const ProfileMetric &m) {
  codec::FieldWriter w;
  plain_fields(w, const_cast<ProfileMetric &>(m));
  j = std::move(w.out);
  j["library"] = optional_json(m.library);
}
void from_json(const json &j, ProfileMetric &m) {
  read_with_optionals(j, m, [&](json &plain) {
    read_optional(plain, "library", m.library);
    plain.erase("library");
  });
}

void to_json(json &j, const Occupancy &o) {
  codec::FieldWriter w;
  plain_fields(w, const_cast<Occupancy &>(o));
  j = std::move(w.out);
  j["active_clusters"] = optional_json(o.active_clusters);
}
void from_json(const json &j, Occupancy &o) {
  read_with_optionals(j, o, [&](json &plain) {
    read_optional(plain, "active_clusters", o.active_clusters);
    plain.erase("active_clusters");
  });
}

void to_json(json &j, const StallCount &c) {
  j = codec::write_fields(const_cast<StallCount &>(c));
}
void from_json(const json &j, StallCount &c) {
  codec::read_fields(j, c);
}
void to_json(json &j, const SampledPc &pc) {
  j = codec::write_fields(const_cast<SampledPc &>(pc));
}
void from_json(const json &j, SampledPc &pc) {
  codec::read_fields(j, pc);
}
void to_json(json &j, const HotLine &l) {
  j = codec::write_fields(const_cast<HotLine &>(l));
}
void from_json(const json &j, HotLine &l) {
  codec::read_fields(j, l);
}
void to_json(json &j, const PcSampling &s) {
  j = codec::write_fields(const_cast<PcSampling &>(s));
}
void from_json(const json &j, PcSampling &s) {
  codec::read_fields(j, s);
}

void to_json(json &j, const KernelProfile &p) {
  codec::FieldWriter w;
  plain_fields(w, const_cast<KernelProfile &>(p));
  j = std::move(w.out);
}
void from_json(const json &j, KernelProfile &p) {
  codec::FieldReader r(j);
  plain_fields(r, p);
  r.finish();
}

const ProfileMetric *KernelProfile::find(std::string_view name) const {
  for (const auto &m : metrics)
    if (m.name == name) return &m;
  return nullptr;
}

const ProfileMetric *KernelProfile::bound_unit() const {
  const ProfileMetric *best = nullptr;
  for (const auto &m : metrics)
    if (m.throughput && std::isfinite(m.value) && (!best || m.value > best->value)) best = &m;
  return best;
}

std::optional<KernelProfile> kernel_profile_from_figures(const json &figures) {
  if (!figures.is_object() || !figures.contains("kernel_profile") || figures["kernel_profile"].is_null())
    return std::nullopt;
  try {
    return figures["kernel_profile"].get<KernelProfile>();
  } catch (const ProtocolError &e) {
    throw ProtocolError("kernel_profile" + (e.field().empty() ? "" : "." + e.field()), e.message());
  }
}

void to_json(json &j, const ProfileFigures &f) {
  j = json::object();
  if (f.kernel_profile) j["kernel_profile"] = *f.kernel_profile;
  j["phase_seconds"] = f.phase_seconds;
}

void from_json(const json &j, ProfileFigures &f) {
  f = ProfileFigures{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  for (const auto &[key, value] : j.items())
    if (key != "kernel_profile" && key != "phase_seconds") throw ProtocolError(key, "unknown field");
  f.kernel_profile = kernel_profile_from_figures(j);
  if (const auto it = j.find("phase_seconds"); it != j.end()) {
    if (!it->is_object()) throw ProtocolError("phase_seconds", "expected an object of seconds");
    for (const auto &[phase, seconds] : it->items()) {
      if (!seconds.is_number() || seconds.get<double>() < 0)
        throw ProtocolError("phase_seconds." + phase, "expected seconds >= 0, got " + seconds.dump());
      f.phase_seconds[phase] = seconds.get<double>();
    }
  }
}

std::optional<ProfileFigures> profile_figures_from_figures(const json &figures) {
  if (!figures.is_object() || figures.empty()) return std::nullopt;
  return figures.get<ProfileFigures>();
}

}  // namespace ptxbench::protocol
