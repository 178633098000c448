#include "evaluator/protocol/mismatch.hpp"

#include <algorithm>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using nlohmann::json;

namespace {

constexpr const char *kKinds[] = {"value", "nan", "unwritten", "infinite", "reference_not_finite"};
constexpr const char *kCoverages[] = {"all", "one", "some"};

template <class Range>
void require_one_of(const char *key, const std::string &value, const Range &allowed) {
  if (std::find(std::begin(allowed), std::end(allowed), value) == std::end(allowed))
    throw ProtocolError(key, "unknown value \"" + value + "\"");
}

}  // namespace

// The field lists (in the protocol namespace, where the readers find them by argument-dependent lookup).
template <class IO>
void fields(IO &io, MismatchElement &e) {
  io("index", e.index);
  io("got", e.got);
  io("expected", e.expected);
  io("error_ratio", e.error_ratio, Bounds{0});
  io("kind", e.kind);
}

template <class IO>
void fields(IO &io, TileResidue &t) {
  io("tile", t.tile, Bounds{1});
  io("first", t.first, Bounds{0});
  io("last", t.last, Bounds{0});
  io("tiles_touched", t.tiles_touched, Bounds{0});
}

template <class IO>
void fields(IO &io, DimSpread &d) {
  io("name", d.name);
  io("size", d.size, Bounds{0});
  io("affected", d.affected, Bounds{0});
  io("coverage", d.coverage);
  io("ranges", d.ranges);
  io("more_ranges", d.more_ranges);
  io("tiles", d.tiles);
  io("partial_tile_only", d.partial_tile_only);
}

template <class IO>
void fields(IO &io, BlockCount &b) {
  io("tile", b.tile, Bounds{1});
  io("touched", b.touched, Bounds{0});
  io("total", b.total, Bounds{0});
}

template <class IO>
void fields(IO &io, TensorMismatches &t) {
  io("tensor", t.tensor);
  io("elements", t.elements);
  io("mismatches", t.mismatches);
  io("share", t.share, Bounds{0, 1});
  io("nan_count", t.nan_count);
  io("unwritten_count", t.unwritten_count);
  io("sampled", t.sampled);
  io("dims", t.dims);
  io("blocks", t.blocks);
  io("one_block", t.one_block);
  io("worst", t.worst);
}

template <class IO>
void fields(IO &io, MismatchPattern &p) {
  io("coarse", p.coarse);
  io("trial", p.trial, Bounds{0});
  io("tensors", p.tensors);
}

MismatchPattern coarse_pattern(const MismatchPattern &exact) {
  MismatchPattern p = exact;
  p.coarse = true;
  for (TensorMismatches &t : p.tensors) {
    t.elements = t.mismatches = t.sampled = 0;
    t.nan_count = t.nan_count ? 1 : 0;
    t.unwritten_count = t.unwritten_count ? 1 : 0;
    t.blocks.clear();
    for (DimSpread &d : t.dims) {
      d.size = d.affected = 0;
      d.ranges.clear();
      d.more_ranges = false;
      d.tiles.clear();
    }
    for (MismatchElement &e : t.worst) e.index.clear();
  }
  return p;
}

void to_json(json &j, const MismatchElement &e) {
  j = codec::write_fields(const_cast<MismatchElement &>(e));
}
void from_json(const json &j, MismatchElement &e) {
  e = MismatchElement{};
  codec::read_fields(j, e);
  require_one_of("kind", e.kind, kKinds);
}
void to_json(json &j, const TileResidue &t) {
  j = codec::write_fields(const_cast<TileResidue &>(t));
}
void from_json(const json &j, TileResidue &t) {
  t = TileResidue{};
  codec::read_fields(j, t);
  if (t.first > t.last || t.last >= t.tile) throw ProtocolError("last", "residues outside [0, tile)");
}
void to_json(json &j, const DimSpread &d) {
  j = codec::write_fields(const_cast<DimSpread &>(d));
}
void from_json(const json &j, DimSpread &d) {
  d = DimSpread{};
  codec::read_fields(j, d);
  require_one_of("coverage", d.coverage, kCoverages);
}
void to_json(json &j, const BlockCount &b) {
  j = codec::write_fields(const_cast<BlockCount &>(b));
}
void from_json(const json &j, BlockCount &b) {
  b = BlockCount{};
  codec::read_fields(j, b);
}
void to_json(json &j, const TensorMismatches &t) {
  j = codec::write_fields(const_cast<TensorMismatches &>(t));
}
void from_json(const json &j, TensorMismatches &t) {
  t = TensorMismatches{};
  codec::read_fields(j, t);
  if (t.tensor.empty()) throw ProtocolError("tensor", "missing or empty");
}
void to_json(json &j, const MismatchPattern &p) {
  j = codec::write_fields(const_cast<MismatchPattern &>(p));
}
void from_json(const json &j, MismatchPattern &p) {
  p = MismatchPattern{};
  codec::read_fields(j, p);
}

}  // namespace ptxbench::protocol
