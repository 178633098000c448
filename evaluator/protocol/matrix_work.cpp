#include "evaluator/protocol/matrix_work.hpp"

#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using nlohmann::json;

template <class IO>
void fields(IO &io, NonTargetFamilyWork &w) {
  io("family", w.family);
  io("unit", w.unit);
  io("flops", w.flops, Bounds{0});
  io("share", w.share, Bounds{0});
}

template <class IO>
void fields(IO &io, MatrixWork &w) {
  io("workload_flops", w.workload_flops, Bounds{0});
  io("target_flops", w.target_flops, Bounds{0});
  io("target_share", w.target_share, Bounds{0});
  io("non_target_tensor_flops", w.non_target_tensor_flops, Bounds{0});
  io("non_target_tensor_share", w.non_target_tensor_share, Bounds{0});
  io("fma_flops", w.fma_flops, Bounds{0});
  io("fma_share", w.fma_share, Bounds{0});
  io("families", w.families);
  io("unknown_opcodes", w.unknown_opcodes);
}

template <class IO>
void fields(IO &io, RedundantWorkPolicy &p) {
  io("max_non_target_share", p.max_non_target_share, Bounds{0});
  io("count_fma_pipe", p.count_fma_pipe);
}

void to_json(json &j, const RedundantWorkPolicy &p) {
  j = codec::write_fields(const_cast<RedundantWorkPolicy &>(p));
}

void from_json(const json &j, RedundantWorkPolicy &p) {
  p = RedundantWorkPolicy{};
  codec::read_fields(j, p);
}

void to_json(json &j, const NonTargetFamilyWork &w) {
  j = codec::write_fields(const_cast<NonTargetFamilyWork &>(w));
}

void from_json(const json &j, NonTargetFamilyWork &w) {
  w = NonTargetFamilyWork{};
  codec::read_fields(j, w);
  if (w.unit != "tensor" && w.unit != "fma")
    throw ProtocolError("unit", "expected \"tensor\" or \"fma\", got \"" + w.unit + "\"");
}

void to_json(json &j, const MatrixWork &w) {
  j = codec::write_fields(const_cast<MatrixWork &>(w));
}

void from_json(const json &j, MatrixWork &w) {
  w = MatrixWork{};
  codec::read_fields(j, w);
  if (w.families.size() > MatrixWork::kMaxFamilies)
    throw ProtocolError("families", "more than " + std::to_string(MatrixWork::kMaxFamilies) + " entries");
  if (w.unknown_opcodes.size() > MatrixWork::kMaxUnknownOpcodes)
    throw ProtocolError("unknown_opcodes",
                        "more than " + std::to_string(MatrixWork::kMaxUnknownOpcodes) + " entries");
}

std::optional<MatrixWork> matrix_work_from_figures(const json &figures) {
  return codec::record_in_figures<MatrixWork>(figures, "matrix_work");
}

}  // namespace ptxbench::protocol
