#include "evaluator/detail/sanitizer.hpp"

#include <cctype>
#include <charconv>

#include <fmt/core.h>

#include "evaluator/sass.hpp"
#include "evaluator/verdict.hpp"
#include "util/strings.hpp"

namespace ptxbench::evaluator::detail {
namespace {

using util::trim;

constexpr std::size_t kMaxReportChars = 2000;  ///< characters of one diagnostic
constexpr std::size_t kMaxQuotedChars = 200;   ///< characters of a quoted source line

bool is_hex(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}
bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

std::optional<std::uint32_t> parse_hex(std::string_view digits) {
  std::uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}

/// "path/to/kernel.ptx:57" -> ("path/to/kernel.ptx", 57); nullopt unless it ends in ":<digits>".
std::optional<std::pair<std::string, int>> split_location(std::string_view loc) {
  const std::size_t colon = loc.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == loc.size() || colon + 1 + 9 < loc.size())
    return std::nullopt;
  int line = 0;
  auto [ptr, ec] = std::from_chars(loc.data() + colon + 1, loc.data() + loc.size(), line);
  if (ec != std::errc() || ptr != loc.data() + loc.size() || line <= 0) return std::nullopt;
  return std::pair{std::string(loc.substr(0, colon)), line};
}

std::string_view last_path_part(std::string_view path) {
  const std::size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// The symbol to look up in the SASS listing: "void k<int>(int *)" -> "k<int>", "gemm" -> "gemm".
std::string symbol_of(std::string_view function) {
  std::string_view s = function.substr(0, function.find('('));
  s = trim(s);
  const std::size_t space = s.rfind(' ');
  return std::string(space == std::string_view::npos ? s : s.substr(space + 1));
}

/// "name+0xHEX[ in LOCATION][ REST]" (the current format).
std::optional<SanitizerFrame> frame_with_name(std::string_view s) {
  for (std::size_t plus = s.find("+0x"); plus != std::string_view::npos; plus = s.find("+0x", plus + 1)) {
    std::size_t end = plus + 3;
    while (end < s.size() && is_hex(s[end])) ++end;
    if (end == plus + 3 || plus == 0 || (end < s.size() && s[end] != ' ')) continue;
    auto offset = parse_hex(s.substr(plus + 3, end - plus - 3));
    if (!offset) continue;
    SanitizerFrame f;
    f.function = std::string(trim(s.substr(0, plus)));
    f.offset = *offset;
    std::string_view rest = s.substr(end);
    if (rest.starts_with(" in ")) {
      std::string_view loc = rest.substr(4);
      const std::size_t stop = loc.find(' ');
      if (auto fl = split_location(loc.substr(0, stop))) {
        f.file = fl->first;
        f.line = fl->second;
        rest = stop == std::string_view::npos ? std::string_view() : loc.substr(stop);
      }
    }
    f.rest = std::string(trim(rest));
    return f;
  }
  return std::nullopt;
}

/// "0xHEX in PATH:LINE:NAME" or "0xHEX in NAME" (the cuda-memcheck era format).
std::optional<SanitizerFrame> frame_with_address_first(std::string_view s) {
  std::size_t end = 2;
  while (end < s.size() && is_hex(s[end])) ++end;
  if (end == 2 || !s.substr(end).starts_with(" in ")) return std::nullopt;
  auto offset = parse_hex(s.substr(2, end - 2));
  if (!offset) return std::nullopt;
  SanitizerFrame f;
  f.offset = *offset;
  std::string_view rest = trim(s.substr(end + 4));
  // PATH:LINE:NAME, the line being the first ":<digits>:" (NAME may hold "::").
  for (std::size_t colon = rest.find(':'); colon != std::string_view::npos;
       colon = rest.find(':', colon + 1)) {
    std::size_t d = colon + 1;
    while (d < rest.size() && is_digit(rest[d])) ++d;
    if (d > colon + 1 && d < rest.size() && rest[d] == ':') {
      if (auto fl = split_location(rest.substr(0, d))) {
        f.file = fl->first;
        f.line = fl->second;
        f.function = std::string(rest.substr(d + 1));
        return f;
      }
    }
  }
  f.function = std::string(rest);
  return f;
}

}  // namespace

std::optional<SanitizerFrame> parse_sanitizer_frame(std::string_view text) {
  text = trim(text);
  std::string_view lead, after;
  const bool caller = text.starts_with("Device Frame:");
  if (caller) {
    after = trim(text.substr(13));
  } else if (text.starts_with("at ")) {
    after = text.substr(3);
  } else if (std::size_t at = text.find(" at "); at != std::string_view::npos) {
    lead = trim(text.substr(0, at));
    after = text.substr(at + 4);
  } else {
    return std::nullopt;
  }
  std::optional<SanitizerFrame> f =
      after.starts_with("0x") ? frame_with_address_first(after) : frame_with_name(after);
  if (!f || f->function.empty()) return std::nullopt;
  f->lead = std::string(lead);
  f->caller = caller;
  return f;
}

namespace {

std::vector<std::string_view> lines_of(std::string_view t) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos <= t.size();) {
    std::size_t nl = t.find('\n', pos);
    if (nl == std::string_view::npos) nl = t.size();
    lines.push_back(t.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

/// Reads compute-sanitizer's "========= " lines into one diagnostic per report: its header, then its
/// device frames and access details, without the host backtrace.
class ReportReader {
 public:
  ReportReader(const SassListing &listing, int max_reports, const SanitizerSource *source)
      : listing_(listing), max_reports_(max_reports), source_(source) {
    if (source_) source_lines_ = lines_of(source_->text);
  }

  /// One output line; false once `max_reports` reports are kept (the rest need not be read).
  bool read(std::string_view line) {
    if (!line.starts_with("========= ")) return true;
    std::string_view body = line.substr(10);
    const bool continuation = !body.empty() && body.front() == ' ';
    body = trim(body);
    if (body.empty()) return true;
    if (!continuation) {
      flush();
      if (static_cast<int>(out_.size()) >= max_reports_) return false;
      start_report(body);
    } else {
      continue_report(body);
    }
    return true;
  }

  std::vector<Diagnostic> finish() {
    flush();
    return std::move(out_);
  }

 private:
  void flush() {
    if (in_report_ && static_cast<int>(out_.size()) < max_reports_) {
      if (current_.text.size() > kMaxReportChars)
        current_.text = current_.text.substr(0, kMaxReportChars) + "...";
      out_.push_back(std::move(current_));
    }
    current_ = Diagnostic{"error", "", std::nullopt};
    in_report_ = false;
    host_backtrace_ = false;
  }

  void start_report(std::string_view body) {
    if (body.starts_with("ERROR SUMMARY") || body.starts_with("COMPUTE-SANITIZER") ||
        body.starts_with("RACECHECK SUMMARY") || body.starts_with("LEAK SUMMARY") ||
        body.starts_with("Program hit") || body.starts_with("Saved host backtrace") ||
        body.starts_with("Target application returned"))
      return;
    in_report_ = true;
    // A racecheck header names its first access: "... Write access at f+0x1b0 in k.ptx:12".
    if (auto f = parse_sanitizer_frame(body); f && !f->lead.empty())
      current_.text = describe(*f);
    else
      current_.text = std::string(body);
  }

  void continue_report(std::string_view body) {
    if (!in_report_ || host_backtrace_) return;
    if (body.starts_with("Saved host backtrace") || body.starts_with("Host Frame")) {
      host_backtrace_ = true;
      return;
    }
    // A quoted PTX line already ends in ';'.
    const std::string separator = current_.text.ends_with(';') ? " " : "; ";
    if (auto f = parse_sanitizer_frame(body)) {
      current_.text += separator + describe(*f);
    } else if (body.starts_with("by thread") || body.starts_with("Address") || body.starts_with("Access") ||
               body.starts_with("and is") || body.starts_with("Read") || body.starts_with("Write")) {
      current_.text += separator + std::string(body);
    }
  }

  /// "at f+0x1f0 (SASS ST.E); at PTX line 57: st.global.f32 [%rd9], %f3;"
  std::string describe(const SanitizerFrame &f) {
    std::string text = fmt::format("{}{}+0x{:x}",
                                   f.caller         ? "called from "
                                   : f.lead.empty() ? "at "
                                                    : f.lead + " at ",
                                   f.function, f.offset);
    if (const SassInstruction *i = listing_.find(symbol_of(f.function), f.offset))
      text += " (SASS " + i->opcode + ")";
    if (!f.rest.empty()) text += " " + f.rest;
    if (f.line == 0) return text;
    const bool ours = source_ && last_path_part(f.file) == last_path_part(source_->file_name) &&
                      f.line <= static_cast<int>(source_lines_.size());
    if (!ours) return text + fmt::format(" in {}:{}", last_path_part(f.file), f.line);
    std::string_view quoted = trim(source_lines_[static_cast<std::size_t>(f.line - 1)]);
    if (quoted.size() > kMaxQuotedChars) quoted = quoted.substr(0, kMaxQuotedChars);
    if (!current_.line) current_.line = f.line;
    return text + fmt::format("; at {} line {}: {}", source_->label, f.line, quoted);
  }

  const SassListing &listing_;
  const int max_reports_;
  const SanitizerSource *source_;
  std::vector<std::string_view> source_lines_;
  std::vector<Diagnostic> out_;
  Diagnostic current_;
  bool in_report_ = false;
  bool host_backtrace_ = false;  // the rest of the report is host frames
};

}  // namespace

std::vector<Diagnostic> sanitizer_reports(std::string_view output, const SassListing &listing,
                                          int max_reports, const SanitizerSource *source) {
  ReportReader reader(listing, max_reports, source);
  std::size_t pos = 0;
  while (pos < output.size()) {
    std::size_t nl = output.find('\n', pos);
    if (nl == std::string_view::npos) nl = output.size();
    std::string_view line = output.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!reader.read(line)) break;
  }
  return reader.finish();
}

}  // namespace ptxbench::evaluator::detail
