// Knowledge packs: named, versioned folders of reference text under prompts/packs/<name>/
// (a pack.json manifest plus the text files it lists) that a run variant puts into the system
// prompt, so that reference material can be ablated like any other experimental factor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace ptxbench::agent {

/// The token estimate used for pack sizes and prompt sizes: one token per 4 bytes of UTF-8 text,
/// rounded up. Tokenizers differ by model; this is a model-independent yardstick, not a count.
std::int64_t estimate_tokens(std::string_view text);
inline constexpr const char *kTokenEstimateName = "bytes/4";

struct KnowledgePack {
  std::string name;                ///< the folder name, also the name variants use
  std::string version;             ///< bumped whenever the text changes; recorded with every prompt
  std::string covers;              ///< one line: what the pack covers
  std::vector<std::string> files;  ///< text files in prompt order, relative to the pack folder
  std::int64_t tokens = 0;         ///< the manifest's size figure (estimate_tokens of `text`, within 10%)
  std::string text;                ///< the files' contents joined in order

  /// {"name", "version"}: what a trace records of the pack.
  nlohmann::json identity() const { return {{"name", name}, {"version", version}}; }
};

/// Loads every pack under `packs_dir` (each subfolder with a pack.json). A folder without packs/ is an
/// empty set. Error: every problem (bad manifest, missing file, stale token figure), one per line.
util::Expected<std::map<std::string, KnowledgePack>> load_knowledge_packs(
    const std::filesystem::path &packs_dir);

}  // namespace ptxbench::agent
