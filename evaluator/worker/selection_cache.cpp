#include "evaluator/worker/selection_cache.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace ptxbench::worker {
namespace {

std::string g_dir, g_environment;

std::string fnv_hex(const std::string &s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
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
  const std::filesystem::path path = file_of(key);
  const std::filesystem::path tmp = path.string() + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;
    out << nlohmann::json{{"key", full_key(key)}, {"value", value}, {"checksum", fnv_hex(value.dump())}}
               .dump();
    if (!out) return;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace ptxbench::worker
