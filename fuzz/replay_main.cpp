// Replays files through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so the normal (GCC)
// build re-runs every regression input and seed with the very checks the fuzzer applies (ctest
// fuzz_replay_<name>). A finding shows as a failed test: an escaped exception (terminate), a trap from
// the target's own checks, or a crash; the last "replay:" line names the input.
//
//   fuzz_replay_<name> PATH...   (a folder is read recursively, in name order; a missing path fails)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size);

namespace {

namespace fs = std::filesystem;

// libFuzzer's -max_len in scripts/fuzz.sh: longer files were never fuzzed at full length.
constexpr std::uintmax_t kMaxInputBytes = 65536;

std::vector<fs::path> inputs_under(const fs::path &path) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto &entry : fs::recursive_directory_iterator(path))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  return files;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH... (files or folders of fuzz inputs)\n", argv[0]);
    return 2;
  }
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path root = argv[i];
    std::error_code ec;
    if (!fs::exists(root, ec)) {  // a misspelt or removed folder would otherwise replay nothing unseen
      std::fprintf(stderr, "fuzz replay: %s does not exist\n", root.c_str());
      return 2;
    }
    for (const fs::path &file : inputs_under(root)) {
      if (fs::file_size(file) > kMaxInputBytes) {
        std::fprintf(stderr, "fuzz replay: %s is larger than %ju bytes (the fuzzers' -max_len); trim it\n",
                     file.c_str(), kMaxInputBytes);
        return 2;
      }
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "fuzz replay: cannot read %s\n", file.c_str());
        return 2;
      }
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      std::printf("replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
      std::fflush(stdout);  // the name must be out before a crash
      (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t *>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  std::printf("fuzz replay: %zu inputs, no finding\n", replayed);
  return replayed > 0 ? 0 : 2;  // an empty corpus replays nothing: say so rather than pass
}
