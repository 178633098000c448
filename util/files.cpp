#include "util/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <system_error>

namespace ptxbench::util {
namespace fs = std::filesystem;

namespace {

std::string errno_text(const std::string &what, const fs::path &path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

// Writes all of data to fd; false (errno set) on a short write.
bool write_all(int fd, const char *data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  for (int i = 0; i < 10; ++i) s += kChars[rng() % (sizeof(kChars) - 1)];
  return s;
}

}  // namespace

Expected<std::string> read_file(const fs::path &path, std::size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return unexpected(errno_text("cannot open", path));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return unexpected(path.string() + " is a directory");
  }
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return unexpected(path.string() + " is " + std::to_string(st.st_size) +
                      " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  // Read at most max_bytes + 1 (pipes and growing files have no reliable size).
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string err = errno_text("cannot read", path);
      ::close(fd);
      return unexpected(err);
    }
    if (n == 0) break;
    if (data.size() + static_cast<std::size_t>(n) > max_bytes) {
      ::close(fd);
      return unexpected(path.string() + " is more than the limit of " + std::to_string(max_bytes) + " bytes");
    }
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return data;
}

Expected<void> write_file_atomic(const fs::path &path, const std::string &data) {
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  // Built by appends: GCC 12 at -O3 reports `"." + std::string&&` as a bogus -Wrestrict overlap.
  std::string tmp_name = ".";
  tmp_name += path.filename().string();
  tmp_name += ".tmp-";
  tmp_name += random_suffix();
  fs::path tmp = dir / tmp_name;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return unexpected(errno_text("cannot create", tmp));
  if (!write_all(fd, data.data(), data.size()) || ::fsync(fd) != 0) {
    std::string err = errno_text("cannot write", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return unexpected(err);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = errno_text("cannot replace", path);
    ::unlink(tmp.c_str());
    return unexpected(err);
  }
  // Make the rename itself durable.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

Expected<void> append_fsync(const fs::path &path, const std::string &data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return unexpected(errno_text("cannot open", path));
  if (!write_all(fd, data.data(), data.size())) {
    std::string err = errno_text("short write to", path);
    ::close(fd);
    return unexpected(err);
  }
  if (::fsync(fd) != 0) {
    std::string err = errno_text("cannot fsync", path);
    ::close(fd);
    return unexpected(err);
  }
  if (::close(fd) != 0) return unexpected(errno_text("cannot close", path));
  return {};
}

TempDir::TempDir(const std::string &prefix, fs::path parent) {
  if (parent.empty()) {
    const char *tmp = std::getenv("TMPDIR");
    parent = tmp && *tmp ? fs::path(tmp) : fs::path("/tmp");
  }
  std::string templ = (parent / (prefix + "-XXXXXX")).string();
  // mkdtemp creates the directory with mode 0700.
  if (::mkdtemp(templ.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(),
                            "cannot create a temporary directory in " + parent.string());
  path_ = templ;
}

TempDir::~TempDir() {
  if (keep_ || path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::uint64_t fnv1a64(std::string_view data) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string fnv1a64_hex(std::string_view data) {
  std::uint64_t h = fnv1a64(data);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = kHex[h & 0xf];
  return out;
}

fs::path own_executable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

fs::path data_dir(const char *env_var, const fs::path &installed_relative, const fs::path &fallback) {
  if (const char *env = std::getenv(env_var); env != nullptr && *env != '\0') return env;
  if (const fs::path exe = own_executable(); !exe.empty()) {
    std::error_code ec;
    const fs::path installed = (exe.parent_path() / installed_relative).lexically_normal();
    if (fs::is_directory(installed, ec)) return installed;
  }
  return fallback;
}

}  // namespace ptxbench::util
