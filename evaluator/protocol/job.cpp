#include "evaluator/protocol/job.hpp"

#include <algorithm>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"
#include "util/enum_names.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using nlohmann::json;

namespace {

/// A closed enum's names, in declaration order, and what the enum is called in messages: to_string,
/// from_string and the JSON form all read this table.
template <class E, std::size_t N>
struct EnumNames {
  const char *what;                     ///< the enum's name in messages
  const util::EnumName<E> (&table)[N];  ///< its one name table
  std::string name(E e) const {
    const std::string_view text = util::enum_to_string(table, e);
    return text.empty() ? "?" : std::string(text);
  }
  std::optional<E> parse(std::string_view text) const { return util::enum_from_string(table, text); }
};

constexpr util::EnumName<ParamKind> kParamKindsTable[] = {{ParamKind::tensor, "tensor"},
                                                          {ParamKind::scalar, "scalar"},
                                                          {ParamKind::tensor_map, "tensor_map"},
                                                          {ParamKind::workspace, "workspace"}};
constexpr EnumNames<ParamKind, 4> kParamKinds{"parameter kind", kParamKindsTable};
constexpr util::EnumName<Swizzle> kSwizzlesTable[] = {
    {Swizzle::none, "none"}, {Swizzle::b32, "32B"}, {Swizzle::b64, "64B"}, {Swizzle::b128, "128B"}};
constexpr EnumNames<Swizzle, 4> kSwizzles{"swizzle", kSwizzlesTable};
constexpr util::EnumName<ElemType> kElemTypesTable[] = {{ElemType::bf16, "bf16"}, {ElemType::f16, "f16"},
                                                        {ElemType::f32, "f32"},   {ElemType::e4m3, "e4m3"},
                                                        {ElemType::e5m2, "e5m2"}, {ElemType::i32, "i32"}};
constexpr EnumNames<ElemType, 6> kElemTypes{"element type", kElemTypesTable};
constexpr util::EnumName<InputDistribution> kDistributionsTable[] = {{InputDistribution::normal, "normal"},
                                                                     {InputDistribution::uniform, "uniform"},
                                                                     {InputDistribution::spiky, "spiky"},
                                                                     {InputDistribution::derived, "derived"}};
constexpr EnumNames<InputDistribution, 4> kDistributions{"input distribution", kDistributionsTable};
constexpr util::EnumName<JobMode> kJobModesTable[] = {{JobMode::full, "full"},
                                                      {JobMode::sanitize, "sanitize"}};
constexpr EnumNames<JobMode, 2> kJobModes{"job mode", kJobModesTable};

// Each enum's table, found by the enum's type (the JSON form below is one template over them).

const auto &names_of(ParamKind) {
  return kParamKinds;
}
const auto &names_of(Swizzle) {
  return kSwizzles;
}
const auto &names_of(ElemType) {
  return kElemTypes;
}
const auto &names_of(InputDistribution) {
  return kDistributions;
}
const auto &names_of(JobMode) {
  return kJobModes;
}

}  // namespace

/// Enums as their names (the field lists below read and write them through these).
template <class E>
requires requires(E e) {
  names_of(e);
}
void to_json(json &j, E e) {
  j = names_of(e).name(e);
}

template <class E>
requires requires(E e) {
  names_of(e);
}
void from_json(const json &j, E &e) {
  const auto &names = names_of(E{});
  if (!j.is_string())
    throw ProtocolError("", std::string("a ") + names.what + " is a string, got " + j.dump());
  const auto parsed = names.parse(j.get<std::string>());
  if (!parsed) throw ProtocolError("", std::string("unknown ") + names.what + " " + j.dump());
  e = *parsed;
}

std::string to_string(ParamKind k) {
  return kParamKinds.name(k);
}
std::optional<ParamKind> param_kind_from_string(std::string_view s) {
  return kParamKinds.parse(s);
}
std::string to_string(Swizzle s) {
  return kSwizzles.name(s);
}
std::optional<Swizzle> swizzle_from_string(std::string_view s) {
  return kSwizzles.parse(s);
}
std::string to_string(ElemType t) {
  return kElemTypes.name(t);
}
std::optional<ElemType> elem_type_from_string(std::string_view s) {
  return kElemTypes.parse(s);
}
std::string to_string(InputDistribution d) {
  return kDistributions.name(d);
}
std::optional<InputDistribution> distribution_from_string(std::string_view s) {
  return kDistributions.parse(s);
}
std::string to_string(JobMode m) {
  return kJobModes.name(m);
}

std::size_t size_of(ElemType t) {
  switch (t) {
    case ElemType::bf16:
    case ElemType::f16:
      return 2;
    case ElemType::f32:
    case ElemType::i32:
      return 4;
    case ElemType::e4m3:
    case ElemType::e5m2:
      return 1;
  }
  return 0;
}

std::int64_t TensorSpec::elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

const TensorSpec *WorkloadSpec::find_tensor(const std::string &n) const {
  for (const auto &t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

const ScalarSpec *WorkloadSpec::find_scalar(const std::string &n) const {
  for (const auto &s : scalars)
    if (s.name == n) return &s;
  return nullptr;
}

bool Job::wants(const std::string &stage) const {
  return std::find(stages.begin(), stages.end(), stage) != stages.end();
}

std::string sass_family(std::string_view opcode) {
  return std::string(opcode.substr(0, opcode.find('.')));
}

// ---- field lists ------------------------------------------------------------------------------------

template <class IO>
void fields(IO &io, ResolvedParam &p) {
  io("kind", p.kind);
  io("name", p.name);
  io("ptx_type", p.ptx_type);
  io("dims", p.dims);
  io("strides_bytes", p.strides_bytes);
  io("box", p.box);
  io("swizzle", p.swizzle);
  io("l2_promotion", p.l2_promotion);
  io("oob_fill", p.oob_fill);
  io("interleave", p.interleave);
  io("scalar_value", p.scalar_value);
}

template <class IO>
void fields(IO &io, LaunchPlan &p) {
  io("workload", p.workload);
  io("symbols", p.symbols);
  io("grid", p.grid);
  io("block", p.block);
  io("cluster", p.cluster);
  io("shared_bytes", p.shared_bytes, Bounds{0});
  io("workspace_bytes", p.workspace_bytes, Bounds{0, static_cast<double>(kMaxWorkspaceBytes)});
  io("num_sms", p.num_sms, Bounds{0});
  io("params", p.params);
}

template <class IO>
void fields(IO &io, ScalarSpec &s) {
  io("name", s.name);
  io("type", s.type);
  io("value", s.value);
}

template <class IO>
void fields(IO &io, SassInstruction &i) {
  io("function", i.function);
  io("offset", i.offset);
  io("opcode", i.opcode);
  io("family", i.family);
  io("predicate", i.predicate);
}

template <class IO>
void fields(IO &io, TargetSpec &t) {
  io("name", t.name);
  io("sass_families", t.sass_families);
}

template <class IO>
void fields(IO &io, Job &job) {
  int version = kJobVersion;
  io("version", version);
  if (version != kJobVersion)
    throw ProtocolError("version", "this worker reads job version " + std::to_string(kJobVersion) + ", got " +
                                       std::to_string(version));
  io("task_id", job.task_id);
  io("family", job.family);
  io("reference", job.reference);
  io("mode", job.mode);
  io("device", job.device, Bounds{0, 1024});
  io("cubin_path", job.cubin_path);
  io("entry", job.entry);
  io("stages", job.stages);
  io("workloads", job.workloads);
  io("hidden_workloads", job.hidden_workloads);
  io("time_hidden", job.time_hidden);
  io("targets", job.targets);
  io("sass", job.sass);
  io("sass_path", job.sass_path);
  io("correctness", job.correctness);
  io("timing", job.timing);
  io("limits", job.limits);
  io("profile", job.profile);
  io("cache_dir", job.cache_dir);
  io("task", job.task);
}

// ---- to_json / from_json ------------------------------------------------------------------------------
// The writers only read the members; the field lists take them by reference for the readers' sake.

void to_json(json &j, const ResolvedParam &p) {
  j = codec::write_fields(const_cast<ResolvedParam &>(p));
}
void from_json(const json &j, ResolvedParam &p) {
  codec::read_fields(j, p);
}
void to_json(json &j, const LaunchPlan &p) {
  j = codec::write_fields(const_cast<LaunchPlan &>(p));
}
void from_json(const json &j, LaunchPlan &p) {
  codec::read_fields(j, p);
}
void to_json(json &j, const ScalarSpec &s) {
  j = codec::write_fields(const_cast<ScalarSpec &>(s));
}
void from_json(const json &j, ScalarSpec &s) {
  codec::read_fields(j, s);
}
void to_json(json &j, const SassInstruction &i) {
  j = codec::write_fields(const_cast<SassInstruction &>(i));
}
void from_json(const json &j, SassInstruction &i) {
  codec::read_fields(j, i);
  if (i.opcode.empty()) throw ProtocolError("opcode", "missing or empty");
  if (i.family.empty()) i.family = sass_family(i.opcode);
}
void to_json(json &j, const TargetSpec &t) {
  j = codec::write_fields(const_cast<TargetSpec &>(t));
}
void from_json(const json &j, TargetSpec &t) {
  codec::read_fields(j, t);
}

// A tensor's role is a word ("input" | "output") rather than a flag, as tasks/ spell it.
void to_json(json &j, const TensorSpec &t) {
  j = json{{"name", t.name},
           {"dtype", t.type},
           {"shape", t.shape},
           {"role", t.is_output ? "output" : "input"},
           {"distribution", t.distribution},
           {"atol", t.atol},
           {"rtol", t.rtol}};
}

void from_json(const json &j, TensorSpec &t) {
  std::string role = "input";
  codec::FieldReader r(j);
  r("name", t.name);
  r("dtype", t.type);
  r("shape", t.shape);
  r("role", role);
  r("distribution", t.distribution);
  r("atol", t.atol, Bounds{0});
  r("rtol", t.rtol, Bounds{0});
  r.finish();
  if (role != "input" && role != "output") throw ProtocolError("role", "expected \"input\" or \"output\"");
  t.is_output = role == "output";
  if (t.name.empty()) throw ProtocolError("name", "missing or empty");
}

// A job workload: the workload's fields with its launch plan under "launch".
void to_json(json &j, const JobWorkload &w) {
  const WorkloadSpec &s = w.spec;
  j = json{{"name", s.name},     {"symbols", s.symbols}, {"flops", s.flops},     {"bytes", s.bytes},
           {"causal", s.causal}, {"tensors", s.tensors}, {"scalars", s.scalars}, {"launch", w.launch}};
}

void from_json(const json &j, JobWorkload &w) {
  WorkloadSpec &s = w.spec;
  codec::FieldReader r(j);
  r("name", s.name);
  r("symbols", s.symbols);
  r("flops", s.flops, Bounds{0});
  r("bytes", s.bytes, Bounds{0});
  r("causal", s.causal);
  r("tensors", s.tensors);
  r("scalars", s.scalars);
  if (!j.contains("launch")) throw ProtocolError("launch", "missing");
  r("launch", w.launch);
  r.finish();
  if (s.name.empty()) throw ProtocolError("name", "missing or empty");
}

void to_json(json &j, const SassHandover &h) {
  j = h.error ? json{{"error", *h.error}} : json{{"sass", h.sass}};
}

void from_json(const json &j, SassHandover &h) {
  codec::FieldReader r(j);
  std::string error;
  r("sass", h.sass);
  r("error", error);
  r.finish();
  if (j.contains("error")) h.error = error.empty() ? "no SASS listing" : error;
}

void to_json(json &j, const Job &job) {
  j = codec::write_fields(const_cast<Job &>(job));
}

void from_json(const json &j, Job &job) {
  if (!j.is_object() || !j.contains("version")) throw ProtocolError("version", "missing: not a job file");
  codec::read_fields(j, job);
  for (const char *required : {"task_id", "family", "reference", "cubin_path", "entry"})
    if (!j.contains(required)) throw ProtocolError(required, "missing");
  if (job.workloads.empty()) throw ProtocolError("workloads", "a job needs at least one workload");
  for (const auto &stage : job.stages)
    if (std::none_of(std::begin(kGpuStageNames), std::end(kGpuStageNames),
                     [&](const char *name) { return stage == name; }))
      throw ProtocolError("stages", "unknown stage '" + stage + "'");
}

}  // namespace ptxbench::protocol
