// File helpers with bounded reads, atomic writes, fsynced appends and an RAII
// temporary directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace ptxbench::util {

/// Reads a whole file; error if missing, unreadable or larger than max_bytes.
Expected<std::string> read_file(const std::filesystem::path &path, std::size_t max_bytes = 64u << 20);

/// Writes via a temp file + rename, fsynced.
Expected<void> write_file_atomic(const std::filesystem::path &path, const std::string &data);

/// Appends one record (data must end with '\n') and fsyncs. Returns error on short write (e.g. ENOSPC).
Expected<void> append_fsync(const std::filesystem::path &path, const std::string &data);

/// This process's executable (/proc/self/exe); empty when the link cannot be read.
std::filesystem::path own_executable();

/// Where a data folder lives: the environment variable `env_var` when set and non-empty; else
/// `<executable's folder>/<installed_relative>` when that is a folder (an installed tree, e.g.
/// "../share/<program>/tasks"); else `fallback` (the source tree a build came from).
std::filesystem::path data_dir(const char *env_var, const std::filesystem::path &installed_relative,
                               const std::filesystem::path &fallback);

/// Creates a private (0700) directory under `parent` (default: $TMPDIR or /tmp), removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string &prefix = "ptxbench", std::filesystem::path parent = {});
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::filesystem::path &path() const { return path_; }
  void keep() { keep_ = true; }  ///< do not delete on destruction (debugging)

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

/// FNV-1a 64 of `data` (offset basis 0xcbf29ce484222325, prime 0x100000001b3): a fast, stable,
/// non-cryptographic hash for de-duplication keys, cache names and seeds. The one copy in the tree.
std::uint64_t fnv1a64(std::string_view data);

/// fnv1a64 as 16 lower-case hex digits.
std::string fnv1a64_hex(std::string_view data);

}  // namespace ptxbench::util
