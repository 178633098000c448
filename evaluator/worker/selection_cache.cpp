#include "evaluator/worker/selection_cache.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "util/files.hpp"

namespace ptxbench::worker {
namespace {

std::string g_dir, g_environment;

std::string fnv_hex(const std::string &s) {
  return util::fnv1a64_hex(s);
}

std::string full_key(const std::string &key) {
  return g_environment + "|" + key;
}

std::filesystem::path file_of(const std::string &key) {
  return std::filesystem::path(g_dir) / ("selection-" + fnv_hex(full_key(key)) + ".json");
}

}  // namespace

void set_selection_cache(const std::string &dir, const std::string &environment) {
  g_dir = dir;
  g_environment = environment;
}

std::optional<nlohmann::json> selection_cache_get(const std::string &key) {
  if (g_dir.empty()) return std::nullopt;
  std::ifstream in(file_of(key));
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("key", std::string()) != full_key(key) || !j.contains("value"))
    return std::nullopt;
  if (j.value("checksum", std::string()) != fnv_hex(j["value"].dump())) return std::nullopt;
  return j["value"];
}

void selection_cache_put(const std::string &key, const nlohmann::json &value) {
  if (g_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(g_dir, ec);
  // A failed write only costs the next worker a fresh selection.
  (void)util::write_file_atomic(
      file_of(key),
      nlohmann::json{{"key", full_key(key)}, {"value", value}, {"checksum", fnv_hex(value.dump())}}.dump());
}

}  // namespace ptxbench::worker
