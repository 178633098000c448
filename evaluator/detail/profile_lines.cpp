#include "evaluator/detail/profile_lines.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "evaluator/sass.hpp"
#include "util/strings.hpp"

namespace ptxbench::evaluator::detail {
namespace {

/// The text of 1-based line `n` of `source`, trimmed and cut; "" when there is none.
std::string line_text(std::string_view source, int n) {
  std::size_t start = 0;
  for (int i = 1; i < n; ++i) {
    const std::size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) return "";
    start = nl + 1;
  }
  std::string_view line = source.substr(start, source.find('\n', start) - start);
  line = util::trim(line);
  if (line.size() <= kMaxHotLineChars) return std::string(line);
  return std::string(line.substr(0, kMaxHotLineChars - 3)) + "...";
}

bool names_model_file(const std::string &file, bool cuda) {
  if (!cuda) return file == ".nv_debug_ptx_txt";
  const std::size_t slash = file.find_last_of('/');
  return (slash == std::string::npos ? file : file.substr(slash + 1)) == "kernel.cu";
}

template <class Map>
std::vector<protocol::StallCount> most_first(const Map &counts, std::size_t keep) {
  std::vector<protocol::StallCount> out;
  for (const auto &[name, n] : counts) out.push_back({name, n});
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.samples != b.samples ? a.samples > b.samples : a.reason < b.reason;
  });
  if (out.size() > keep) out.resize(keep);
  return out;
}

}  // namespace

void map_hot_lines(protocol::PcSampling &sampling, const SassListing &listing, std::string_view source,
                   bool cuda) {
  sampling.hot_lines.clear();
  if (sampling.samples == 0 || sampling.pcs.empty()) return;
  if (listing.source_lines.empty()) {
    sampling.line_error = "the SASS listing has no line info";
  } else {
    struct Accumulated {
      std::uint64_t samples = 0;
      std::map<std::string, std::uint64_t> reasons;
      std::map<std::string, std::uint64_t> opcodes;
    };
    std::map<int, Accumulated> lines;
    std::uint64_t mapped = 0;
    for (const auto &pc : sampling.pcs) {
      const auto it = listing.source_lines.find({pc.function, pc.offset});
      if (it == listing.source_lines.end() || !names_model_file(it->second.file, cuda)) continue;
      Accumulated &a = lines[it->second.line];
      a.samples += pc.samples;
      mapped += pc.samples;
      for (const auto &r : pc.reasons) a.reasons[r.reason] += r.samples;
      if (const SassInstruction *inst = listing.find(pc.function, pc.offset))
        a.opcodes[inst->opcode] += pc.samples;
    }
    if (mapped == 0) {
      sampling.line_error = "no sampled instruction maps to a line of the kernel's source";
    } else {
      for (const auto &[line, a] : lines) {
        protocol::HotLine h;
        h.line = line;
        h.text = line_text(source, line);
        h.samples = a.samples;
        h.share = std::min(1.0, static_cast<double>(a.samples) / static_cast<double>(sampling.samples));
        h.reasons = most_first(a.reasons, 3);
        for (const auto &op : most_first(a.opcodes, 3)) h.opcodes.push_back(op.reason);
        sampling.hot_lines.push_back(std::move(h));
      }
      std::sort(sampling.hot_lines.begin(), sampling.hot_lines.end(), [](const auto &a, const auto &b) {
        return a.samples != b.samples ? a.samples > b.samples : a.line < b.line;
      });
      if (sampling.hot_lines.size() > kMaxHotLines) sampling.hot_lines.resize(kMaxHotLines);
      sampling.line_source = cuda ? "kernel.cu" : "kernel.ptx";
      sampling.line_error.clear();
    }
  }
  if (sampling.pcs.size() > kMaxKeptPcs) sampling.pcs.resize(kMaxKeptPcs);
}

}  // namespace ptxbench::evaluator::detail
