#include "evaluator/worker/detail/mismatch_pattern.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace ptxbench::worker::detail {

namespace {

std::vector<std::int64_t> coordinates(std::int64_t flat, const std::vector<NamedDim> &dims) {
  std::vector<std::int64_t> c(dims.size(), 0);
  for (std::size_t k = dims.size(); k-- > 0;) {
    const std::int64_t size = std::max<std::int64_t>(dims[k].size, 1);
    c[k] = flat % size;
    flat /= size;
  }
  return c;
}

// Finite ratios first, largest first; then NaN written, never written, other non-finite.
double rank_of(const FlatMismatch &m) {
  if (std::isfinite(m.error_ratio) && std::isfinite(m.got)) return m.error_ratio;
  return -1.0 - (m.unwritten ? 1.0 : 0.0);
}

protocol::MismatchElement element(const FlatMismatch &m, const std::vector<NamedDim> &dims) {
  protocol::MismatchElement e;
  e.index = coordinates(m.index, dims);
  e.expected = std::isfinite(m.expected) ? m.expected : 0.0;
  if (m.unwritten) {
    e.kind = "unwritten";
  } else if (std::isnan(m.got)) {
    e.kind = "nan";
  } else if (!std::isfinite(m.expected)) {
    e.kind = "reference_not_finite";
    e.got = m.got;
  } else if (!std::isfinite(m.got) || !std::isfinite(m.error_ratio)) {
    e.kind = "infinite";
    e.got = std::isfinite(m.got) ? m.got : 0.0;
  } else {
    e.got = m.got;
    e.error_ratio = std::max(0.0, m.error_ratio);
  }
  return e;
}

protocol::DimSpread spread_of(const NamedDim &dim, const std::set<std::int64_t> &indices, bool tiled) {
  protocol::DimSpread d;
  d.name = dim.name;
  d.size = dim.size;
  d.affected = static_cast<std::int64_t>(indices.size());
  d.coverage = d.affected >= dim.size ? "all" : d.affected == 1 ? "one" : "some";
  for (const std::int64_t i : indices) {
    if (!d.ranges.empty() && d.ranges.back()[1] + 1 == i) {
      d.ranges.back()[1] = i;
    } else if (d.ranges.size() < kMaxDimRanges) {
      d.ranges.push_back({i, i});
    } else {
      d.more_ranges = true;
      break;
    }
  }
  if (!tiled || indices.empty()) return d;
  for (const std::int64_t tile : kPatternTiles) {
    if (dim.size <= tile) continue;  // the ranges say it all
    protocol::TileResidue r{tile, tile, -1, 0};
    std::set<std::int64_t> tiles;
    for (const std::int64_t i : indices) {
      r.first = std::min(r.first, i % tile);
      r.last = std::max(r.last, i % tile);
      tiles.insert(i / tile);
    }
    r.tiles_touched = static_cast<std::int64_t>(tiles.size());
    d.tiles.push_back(r);
  }
  const std::int64_t edge = dim.size / 64 * 64;
  d.partial_tile_only = dim.size % 64 != 0 && dim.size > 64 && *indices.begin() >= edge;
  return d;
}

}  // namespace

protocol::TensorMismatches analyze_mismatches(const std::string &tensor, const std::vector<NamedDim> &dims,
                                              std::uint64_t mismatches, std::uint64_t nan_count,
                                              std::uint64_t unwritten_count, std::vector<std::int64_t> sample,
                                              std::vector<FlatMismatch> worst) {
  protocol::TensorMismatches t;
  t.tensor = tensor;
  std::int64_t elements = 1;
  for (const NamedDim &d : dims) elements *= std::max<std::int64_t>(d.size, 1);
  t.elements = static_cast<std::uint64_t>(elements);
  t.mismatches = mismatches;
  t.share = elements > 0 ? std::min(1.0, static_cast<double>(mismatches) / static_cast<double>(elements)) : 0;
  t.nan_count = nan_count;
  t.unwritten_count = unwritten_count;

  std::sort(sample.begin(), sample.end());
  sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
  sample.erase(
      std::remove_if(sample.begin(), sample.end(), [&](std::int64_t i) { return i < 0 || i >= elements; }),
      sample.end());
  t.sampled = sample.size();
  if (!sample.empty() && !dims.empty()) {
    const std::size_t rank = dims.size();
    const std::size_t row_dim = rank >= 2 ? rank - 2 : rank;  // rank: none
    const std::size_t col_dim = rank - 1;
    std::vector<std::set<std::int64_t>> per_dim(rank);
    // Blocks: (leading flat index, row tile, column tile) per tile size.
    std::vector<std::set<std::array<std::int64_t, 3>>> blocks(std::size(kPatternTiles));
    for (const std::int64_t flat : sample) {
      const std::vector<std::int64_t> c = coordinates(flat, dims);
      for (std::size_t k = 0; k < rank; ++k) per_dim[k].insert(c[k]);
      std::int64_t leading = 0;
      for (std::size_t k = 0; k + 2 < rank; ++k) leading = leading * dims[k].size + c[k];
      const std::int64_t row = row_dim < rank ? c[row_dim] : 0;
      for (std::size_t b = 0; b < blocks.size(); ++b)
        blocks[b].insert({leading, row / kPatternTiles[b], c[col_dim] / kPatternTiles[b]});
    }
    for (std::size_t k = 0; k < rank; ++k)
      t.dims.push_back(spread_of(dims[k], per_dim[k], k == row_dim || k == col_dim));
    std::int64_t leading_total = 1;
    for (std::size_t k = 0; k + 2 < rank; ++k) leading_total *= dims[k].size;
    const std::int64_t rows = row_dim < rank ? dims[row_dim].size : 1, cols = dims[col_dim].size;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const std::int64_t tile = kPatternTiles[b];
      t.blocks.push_back({tile, static_cast<std::int64_t>(blocks[b].size()),
                          leading_total * ((rows + tile - 1) / tile) * ((cols + tile - 1) / tile)});
    }
    t.one_block = t.blocks[0].touched == 1 || t.blocks[1].touched == 1;
  }

  std::sort(worst.begin(), worst.end(), [](const FlatMismatch &a, const FlatMismatch &b) {
    const double ra = rank_of(a), rb = rank_of(b);
    return ra != rb ? ra > rb : a.index < b.index;
  });
  std::set<std::int64_t> seen;
  for (const FlatMismatch &m : worst) {
    if (t.worst.size() >= kMaxWorstElements) break;
    if (m.index < 0 || m.index >= elements || !seen.insert(m.index).second) continue;
    t.worst.push_back(element(m, dims));
  }
  return t;
}

std::vector<NamedDim> named_dims(const protocol::WorkloadSpec &spec, const protocol::TensorSpec &t) {
  static const std::vector<std::string> kUsualOrder = {"B", "H", "S", "D", "M", "N", "K"};
  auto order = [](const std::string &s) {
    const auto it = std::find(kUsualOrder.begin(), kUsualOrder.end(), s);
    return static_cast<std::size_t>(it - kUsualOrder.begin());
  };
  std::vector<NamedDim> dims;
  std::set<std::string> used;
  for (const std::int64_t size : t.shape) {
    std::vector<std::string> candidates;
    for (const auto &[name, value] : spec.symbols)
      if (value == size && !used.count(name)) candidates.push_back(name);
    std::sort(candidates.begin(), candidates.end(), [&](const std::string &a, const std::string &b) {
      return order(a) != order(b) ? order(a) < order(b) : a < b;
    });
    std::string name = candidates.empty() ? std::string() : candidates.front();
    if (!name.empty()) used.insert(name);
    dims.push_back({name, size});
  }
  return dims;
}

}  // namespace ptxbench::worker::detail
