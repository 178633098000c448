// The response parser: finds fenced blocks (``` or ~~~, CommonMark-style)
// in a model's free-text answer and picks the kernel and the manifest.
//
// Rule for several blocks: the LAST ```ptx / ```cuda block is the kernel and
// the LAST ```json block is the manifest; models often show a draft first and
// the final version last. When no block is labeled as a kernel, the last
// unlabeled (or ```asm) block that holds a PTX `.entry` is taken as PTX, else the
// last ```cpp / ```c++ block that holds a `__global__` function as CUDA; when no
// block is labeled json, the last unlabeled block starting with '{' is the manifest.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "evaluator/candidate.hpp"
#include "util/files.hpp"

namespace ptxbench::evaluator {
namespace {

struct Fence {
  char ch = '`';
  std::size_t length = 0;
  std::string info;  // first word, lower-cased
  int open_line = 0;
  std::vector<std::string_view> lines;
  bool closed = false;
};

// A fence line: up to 3 spaces, then 3+ backticks or tildes.
bool fence_open(std::string_view line, char &ch, std::size_t &length, std::string &info) {
  std::size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  ch = line[i];
  std::size_t start = i;
  while (i < line.size() && line[i] == ch) ++i;
  length = i - start;
  if (length < 3) return false;
  std::string_view rest = line.substr(i);
  if (ch == '`' && rest.find('`') != std::string_view::npos) return false;  // inline code, not a fence
  std::size_t b = rest.find_first_not_of(" \t");
  info.clear();
  if (b != std::string_view::npos) {
    std::size_t e = rest.find_first_of(" \t\r{", b);  // \r: an answer with CRLF line ends
    for (char c : rest.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b))
      info += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return true;
}

bool fence_close(std::string_view line, char ch, std::size_t length) {
  std::size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  std::size_t start = i;
  while (i < line.size() && line[i] == ch) ++i;
  if (i - start < length) return false;
  return line.substr(i).find_first_not_of(" \t\r") == std::string_view::npos;
}

bool is_kernel_info(std::string_view info) {
  return info == "ptx" || info == "cuda" || info == "cu";
}
// Labels models put on PTX ("asm") and on CUDA ("cpp"): taken only when the block's body says what it is.
bool is_asm_info(std::string_view info) {
  return info == "asm" || info == "assembly" || info == "nasm";
}
bool is_cpp_info(std::string_view info) {
  return info == "cpp" || info == "c++" || info == "cxx" || info == "c" || info == "cuh";
}
bool is_json_info(std::string_view info) {
  return info == "json" || info == "jsonc" || info == "json5";
}

std::string join_body(const Fence &f) {
  std::string body;
  for (std::size_t k = 0; k < f.lines.size(); ++k) {
    std::string_view l = f.lines[k];
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    body.append(l);
    body += '\n';
  }
  return body;
}

// Share of bytes that are not text (NUL, other C0 controls, invalid UTF-8 lead bytes).
std::optional<std::string> binary_content(std::string_view text) {
  if (auto nul = text.find('\0'); nul != std::string_view::npos)
    return fmt::format("the response contains a NUL byte at offset {}: it looks like binary data, not text",
                       nul);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v')
      ++bad;
    else if (c >= 0x80) {
      // Validate one UTF-8 sequence.
      int extra = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
      bool ok = extra > 0;
      for (int k = 1; ok && k <= extra; ++k)
        ok = i + static_cast<std::size_t>(k) < text.size() &&
             (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
      if (ok)
        i += static_cast<std::size_t>(extra);
      else
        ++bad;
    }
  }
  if (bad * 100 > text.size() && bad > 8)
    return fmt::format("the response is not text: {} of {} bytes are control bytes or invalid UTF-8", bad,
                       text.size());
  return std::nullopt;
}

}  // namespace

std::optional<ParseError> response_size_error(std::size_t bytes, const ParseLimits &limits, bool at_least) {
  if (bytes <= limits.max_response_bytes) return std::nullopt;
  return ParseError{Status::no_kernel,
                    fmt::format("the response is {}{} bytes, more than the limit of {} bytes; it was not "
                                "parsed. Answer with one kernel block and one json block.",
                                at_least ? "at least " : "", bytes, limits.max_response_bytes)};
}

util::Expected<ResponseInput> read_response(const std::string &path, const ParseLimits &limits) {
  const std::size_t read_limit = limits.max_response_bytes + 1;
  if (path != "-") {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return util::unexpected(fmt::format("cannot read {}: {}", path, ec.message()));
    if (size > limits.max_response_bytes) return ResponseInput{"", static_cast<std::size_t>(size), false};
  }
  // One byte past the limit tells an oversized stream from one exactly at the limit.
  auto text = util::read_file(path == "-" ? "/dev/stdin" : path, read_limit);
  if (!text) {
    if (path == "-" && text.error().find("limit") != std::string::npos)
      return ResponseInput{"", read_limit, true};
    return util::unexpected(fmt::format("cannot read {}: {}", path == "-" ? "stdin" : path, text.error()));
  }
  const std::size_t bytes = text->size();
  if (bytes > limits.max_response_bytes) return ResponseInput{"", bytes, false};
  return ResponseInput{std::move(*text), bytes, false};
}

namespace {

// Every fenced block, in order; an unterminated last one is kept (closed = false) to report it.
std::vector<Fence> scan_fences(std::string_view response) {
  std::vector<Fence> fences;
  std::optional<Fence> open;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= response.size()) {
    std::size_t nl = response.find('\n', pos);
    std::string_view line =
        response.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    ++line_no;
    if (open) {
      if (fence_close(line, open->ch, open->length)) {
        open->closed = true;
        fences.push_back(std::move(*open));
        open.reset();
      } else {
        open->lines.push_back(line);
      }
    } else {
      Fence f;
      if (fence_open(line, f.ch, f.length, f.info)) {
        f.open_line = line_no;
        open = std::move(f);
      }
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  if (open) fences.push_back(std::move(*open));
  return fences;
}

struct PickedBlocks {
  const Fence *kernel = nullptr;
  const Fence *manifest = nullptr;
  bool cuda_by_body = false;      ///< an unlabeled C++ block taken as CUDA for its __global__
  std::vector<std::string> seen;  ///< every block's label, for the no-kernel message
};

// The kernel and manifest blocks by the rule at the top; counts the labeled ones into `parsed`.
PickedBlocks pick_blocks(const std::vector<Fence> &fences, ParsedResponse &parsed) {
  PickedBlocks p;
  for (const auto &f : fences) {
    p.seen.push_back(f.info.empty() ? "unlabeled" : f.info);
    if (is_kernel_info(f.info)) {
      ++parsed.kernel_blocks_seen;
      p.kernel = &f;
    } else if (is_json_info(f.info)) {
      ++parsed.json_blocks_seen;
      p.manifest = &f;
    }
  }
  if (!p.kernel)
    for (const auto &f : fences)
      if ((f.info.empty() || is_asm_info(f.info)) && join_body(f).find(".entry") != std::string::npos)
        p.kernel = &f;
  if (!p.kernel)
    for (const auto &f : fences)
      if (is_cpp_info(f.info) && join_body(f).find("__global__") != std::string::npos) {
        p.kernel = &f;
        p.cuda_by_body = true;
      }
  if (!p.manifest)
    for (const auto &f : fences)
      if (f.info.empty() && &f != p.kernel) {
        std::string body = join_body(f);
        auto first = body.find_first_not_of(" \t\r\n");
        if (first != std::string::npos && body[first] == '{') p.manifest = &f;
      }
  return p;
}

std::string fence_name(const Fence &f) {
  return std::string(f.length, f.ch) + (f.info.empty() ? "" : f.info);
}

util::Unexpected<ParseError> fail(Status status, std::string message) {
  return util::unexpected(ParseError{status, std::move(message)});
}

}  // namespace

util::Expected<ParsedResponse, ParseError> parse_response(std::string_view response,
                                                          const ParseLimits &limits) {
  // Size first: a 50 MB response is rejected before it is scanned.
  if (auto too_large = response_size_error(response.size(), limits)) return util::unexpected(*too_large);
  if (auto binary = binary_content(response)) return fail(Status::no_kernel, *binary);
  const std::vector<Fence> fences = scan_fences(response);
  ParsedResponse parsed;
  const PickedBlocks picked = pick_blocks(fences, parsed);
  const Fence *kernel = picked.kernel;
  const Fence *manifest = picked.manifest;
  if (!kernel) {
    std::string what = picked.seen.empty() ? "no fenced blocks at all"
                                           : fmt::format("{} fenced block(s): {}", picked.seen.size(),
                                                         fmt::join(picked.seen, ", "));
    return fail(Status::no_kernel,
                fmt::format("no kernel found: expected a ```ptx (or ```cuda) block, saw {}", what));
  }
  if (!kernel->closed)
    return fail(Status::no_kernel,
                fmt::format("the {} block starting at line {} is never closed (the response may "
                            "have been truncated)",
                            fence_name(*kernel), kernel->open_line));
  parsed.language = kernel->info == "cuda" || kernel->info == "cu" || picked.cuda_by_body
                        ? KernelLanguage::cuda
                        : KernelLanguage::ptx;
  parsed.kernel_source = join_body(*kernel);
  parsed.kernel_first_line = kernel->open_line + 1;
  if (parsed.kernel_source.find_first_not_of(" \t\r\n") == std::string::npos)
    return fail(Status::no_kernel,
                fmt::format("the {} block at line {} is empty", fence_name(*kernel), kernel->open_line));
  if (parsed.kernel_source.size() > limits.max_kernel_bytes)
    return fail(Status::no_kernel,
                fmt::format("the kernel block is {} bytes, more than the limit of {} bytes",
                            parsed.kernel_source.size(), limits.max_kernel_bytes));
  if (!manifest)
    return fail(Status::bad_manifest,
                "no launch manifest found: expected a ```json block with entry, grid, block and params");
  if (!manifest->closed)
    return fail(Status::bad_manifest,
                fmt::format("the {} block starting at line {} is never closed (the response "
                            "may have been truncated)",
                            fence_name(*manifest), manifest->open_line));
  parsed.manifest_text = join_body(*manifest);
  if (parsed.manifest_text.size() > limits.max_manifest_bytes)
    return fail(Status::bad_manifest,
                fmt::format("the json block is {} bytes, more than the limit of {} bytes",
                            parsed.manifest_text.size(), limits.max_manifest_bytes));
  return parsed;
}

}  // namespace ptxbench::evaluator
