#include "agent/knowledge_pack.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "agent/detail/json_fields.hpp"

namespace ptxbench::agent {

namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxPackFileBytes = 256 << 10;  // one file of reference text
constexpr double kTokenFigureTolerance = 0.10;           // manifest figure vs the files' estimate

bool read_text(const fs::path &path, std::string &out, std::string &error) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) {
    error = fmt::format("{}: cannot read: {}", path.string(), ec.message());
    return false;
  }
  if (size > kMaxPackFileBytes) {
    error = fmt::format("{}: {} bytes, over the {} byte limit for one pack file", path.string(), size,
                        kMaxPackFileBytes);
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

void load_one(const fs::path &folder, std::map<std::string, KnowledgePack> &packs,
              std::vector<std::string> &errors) {
  const fs::path manifest = folder / "pack.json";
  std::string raw, error;
  if (!read_text(manifest, raw, error)) {
    errors.push_back(error);
    return;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(raw);
  } catch (const nlohmann::json::exception &e) {
    errors.push_back(fmt::format("{}: not valid JSON: {}", manifest.string(), e.what()));
    return;
  }
  std::vector<std::string> problems;
  KnowledgePack pack;
  detail::FieldReader r(j, "", problems);
  std::string tokenizer;
  r.read("name", pack.name);
  r.read("version", pack.version);
  r.read("covers", pack.covers);
  r.read("files", pack.files);
  r.read("tokens", pack.tokens, 0);
  r.read("tokenizer", tokenizer);
  r.finish();
  const std::string folder_name = folder.filename().string();
  if (pack.name != folder_name)
    problems.push_back(
        fmt::format("name: \"{}\" differs from the folder name \"{}\"", pack.name, folder_name));
  if (pack.version.empty()) problems.push_back("version: required");
  if (pack.covers.empty()) problems.push_back("covers: required");
  if (pack.files.empty()) problems.push_back("files: list at least one text file");
  if (tokenizer != kTokenEstimateName)
    problems.push_back(fmt::format("tokenizer: expected \"{}\", got \"{}\"", kTokenEstimateName, tokenizer));
  for (const auto &f : pack.files) {
    if (fs::path(f).is_absolute() || f.find("..") != std::string::npos) {
      problems.push_back(fmt::format("files: \"{}\" must be a plain name inside the pack folder", f));
      continue;
    }
    std::string text;
    if (!read_text(folder / f, text, error)) {
      problems.push_back(error);
      continue;
    }
    if (!pack.text.empty() && pack.text.back() != '\n') pack.text += '\n';
    pack.text += text;
  }
  if (problems.empty()) {
    const std::int64_t measured = estimate_tokens(pack.text);
    if (std::abs(static_cast<double>(pack.tokens - measured)) > kTokenFigureTolerance * measured) {
      problems.push_back(fmt::format("tokens: the manifest says {}, the files hold about {} ({}): update it",
                                     pack.tokens, measured, kTokenEstimateName));
    }
  }
  for (const auto &p : problems) errors.push_back(manifest.string() + ": " + p);
  if (problems.empty()) packs.emplace(pack.name, std::move(pack));
}

}  // namespace

std::int64_t estimate_tokens(std::string_view text) {
  return static_cast<std::int64_t>((text.size() + 3) / 4);
}

util::Expected<std::map<std::string, KnowledgePack>> load_knowledge_packs(const fs::path &packs_dir) {
  std::map<std::string, KnowledgePack> packs;
  std::error_code ec;
  if (!fs::is_directory(packs_dir, ec)) return packs;
  std::vector<fs::path> folders;
  for (const auto &entry : fs::directory_iterator(packs_dir, ec))
    if (entry.is_directory()) folders.push_back(entry.path());
  std::sort(folders.begin(), folders.end());
  std::vector<std::string> errors;
  for (const auto &f : folders) load_one(f, packs, errors);
  if (!errors.empty()) {
    std::string message;
    for (const auto &e : errors) message += (message.empty() ? "" : "\n") + e;
    return util::unexpected(message);
  }
  return packs;
}

}  // namespace ptxbench::agent
