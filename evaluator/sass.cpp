#include "evaluator/sass.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <system_error>

#include "util/strings.hpp"

namespace ptxbench::evaluator {
namespace fs = std::filesystem;

namespace {

using util::trim;

bool is_hex(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}

// "/*01a0*/ ..." -> offset 0x1a0 and the rest; encoding lines ("/* 0x... */") do not match.
std::optional<std::pair<std::uint32_t, std::string_view>> split_offset(std::string_view line) {
  line = trim(line);
  if (line.size() < 5 || line.substr(0, 2) != "/*") return std::nullopt;
  std::size_t end = line.find("*/", 2);
  if (end == std::string_view::npos || end == 2) return std::nullopt;
  std::string_view hex = line.substr(2, end - 2);
  if (!std::all_of(hex.begin(), hex.end(), is_hex) || hex.size() > 8) return std::nullopt;
  std::uint32_t offset = static_cast<std::uint32_t>(std::strtoul(std::string(hex).c_str(), nullptr, 16));
  return std::make_pair(offset, line.substr(end + 2));
}

// Function name from a header line of either format, or "" when the line is none.
std::string function_header(std::string_view line) {
  std::string_view t = trim(line);
  // cuobjdump: "Function : name"
  if (t.starts_with("Function :")) return std::string(trim(t.substr(10)));
  // nvdisasm: ".section .text.name,"ax",@progbits" (the label ".text.name:" follows; either suffices)
  if (t.starts_with(".section")) {
    std::size_t pos = t.find(".text.");
    if (pos == std::string_view::npos) return "";
    std::string_view rest = t.substr(pos + 6);
    std::size_t stop = rest.find_first_of(",\" \t");
    return std::string(rest.substr(0, stop));
  }
  return "";
}

// nvdisasm's line info comment: //## File "name", line N[, inlined at ...] -> (name, N).
std::optional<SassSourceLine> line_info_comment(std::string_view t) {
  constexpr std::string_view kFile = "//## File \"";
  if (!t.starts_with(kFile)) return std::nullopt;
  t.remove_prefix(kFile.size());
  const std::size_t quote = t.find('"');
  if (quote == std::string_view::npos) return std::nullopt;
  SassSourceLine out{std::string(t.substr(0, quote)), 0};
  t.remove_prefix(quote + 1);
  constexpr std::string_view kLine = ", line ";
  if (!t.starts_with(kLine)) return std::nullopt;
  t.remove_prefix(kLine.size());
  std::size_t digits = 0;
  while (digits < t.size() && digits < 9 && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  if (digits == 0) return std::nullopt;
  out.line = std::atoi(std::string(t.substr(0, digits)).c_str());
  return out;
}

}  // namespace

SassListing parse_sass_listing(std::string_view text) {
  SassListing listing;
  std::string function;
  std::optional<SassSourceLine> current_line;  // the last line info comment, for the instructions below it
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;

    std::string_view t = trim(line);
    if (listing.arch.empty()) {
      for (std::string_view key : {std::string_view("code for "), std::string_view(".target")}) {
        if (t.starts_with(key)) {
          std::string_view arch = trim(t.substr(key.size()));
          if (arch.starts_with("sm_")) listing.arch = std::string(arch.substr(0, arch.find_first_of(" \t")));
        }
      }
    }
    if (std::string name = function_header(line); !name.empty()) {
      function = std::move(name);
      current_line.reset();
      continue;
    }
    if (auto located = line_info_comment(t)) {
      current_line = std::move(located);
      continue;
    }
    auto split = split_offset(line);
    if (!split || function.empty()) continue;
    std::string_view rest = trim(split->second);
    if (!rest.empty() && rest.front() == '{') rest = trim(rest.substr(1));  // dual-issue bundles (old archs)
    SassInstruction inst;
    inst.function = function;
    inst.offset = split->first;
    if (!rest.empty() && rest.front() == '@') {
      std::size_t sp = rest.find_first_of(" \t");
      inst.predicate = std::string(rest.substr(0, sp));
      rest = sp == std::string_view::npos ? std::string_view() : trim(rest.substr(sp));
    }
    std::size_t stop = rest.find_first_of(" \t;");
    inst.opcode = std::string(rest.substr(0, stop));
    if (inst.opcode.empty()) continue;
    inst.family = sass_family(inst.opcode);
    if (current_line) listing.source_lines[{inst.function, inst.offset}] = *current_line;
    listing.instructions.push_back(std::move(inst));
  }
  return listing;
}

std::vector<std::string> SassListing::functions() const {
  std::vector<std::string> names;
  std::set<std::string_view> seen;
  for (const auto &inst : instructions)
    if (seen.insert(inst.function).second) names.push_back(inst.function);
  return names;
}

std::map<std::string, int> SassListing::family_counts() const {
  std::map<std::string, int> counts;
  for (const auto &inst : instructions) ++counts[inst.family];
  return counts;
}

const SassInstruction *SassListing::find(std::string_view function, std::uint32_t offset) const {
  for (const auto &inst : instructions)
    if (inst.offset == offset && inst.function == function) return &inst;
  return nullptr;
}

nlohmann::json targets_in_sass(const SassListing &listing,
                               const std::vector<tasks::TargetInstruction> &targets) {
  const auto counts = listing.family_counts();
  nlohmann::json result = nlohmann::json::object();
  for (const auto &target : targets) {
    bool present = false;
    for (const auto &family : target.sass_families) present = present || counts.contains(family);
    result[target.name] = present;
  }
  return result;
}

namespace {

bool is_executable(const fs::path &p) {
  std::error_code ec;
  auto st = fs::status(p, ec);
  if (ec || !fs::is_regular_file(st)) return false;
  return (st.permissions() & (fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec)) !=
         fs::perms::none;
}

// A folder's best disassembler: nvdisasm alone, else cuobjdump with an nvdisasm beside it or elsewhere.
std::optional<Disassembler> from_folder(const fs::path &dir, const fs::path &fallback_nvdisasm_dir) {
  if (is_executable(dir / "nvdisasm")) return Disassembler{DisassemblerKind::nvdisasm, dir / "nvdisasm", {}};
  if (is_executable(dir / "cuobjdump") && !fallback_nvdisasm_dir.empty())
    return Disassembler{DisassemblerKind::cuobjdump, dir / "cuobjdump", fallback_nvdisasm_dir};
  return std::nullopt;
}

std::optional<Disassembler> from_file(const fs::path &file, const std::vector<fs::path> &search_dirs) {
  if (!is_executable(file)) return std::nullopt;
  fs::path abs = fs::absolute(file);
  if (abs.filename() == "nvdisasm") return Disassembler{DisassemblerKind::nvdisasm, abs, {}};
  // cuobjdump: usable only with nvdisasm somewhere (beside it first).
  std::vector<fs::path> dirs{abs.parent_path()};
  dirs.insert(dirs.end(), search_dirs.begin(), search_dirs.end());
  for (const auto &d : dirs)
    if (is_executable(d / "nvdisasm")) return Disassembler{DisassemblerKind::cuobjdump, abs, d};
  return std::nullopt;
}

// site-packages/nvidia/<cu13|cu12|cuda_nvdisasm|...>/bin folders of the pip wheels.
std::vector<fs::path> wheel_bin_dirs() {
  std::vector<fs::path> roots;
  auto add_lib_root = [&](const fs::path &lib) {
    std::error_code ec;
    if (!fs::is_directory(lib, ec)) return;
    for (const auto &entry : fs::directory_iterator(lib, ec)) {
      if (!entry.path().filename().string().starts_with("python3")) continue;
      for (const char *sub : {"site-packages", "dist-packages"})
        roots.push_back(entry.path() / sub / "nvidia");
    }
  };
  if (const char *venv = std::getenv("VIRTUAL_ENV")) add_lib_root(fs::path(venv) / "lib");
  if (const char *home = std::getenv("HOME")) {
    add_lib_root(fs::path(home) / ".local" / "lib");
    std::error_code ec;
    fs::path pyenv = fs::path(home) / ".pyenv" / "versions";
    if (fs::is_directory(pyenv, ec))
      for (const auto &v : fs::directory_iterator(pyenv, ec)) add_lib_root(v.path() / "lib");
  }
  for (const char *lib : {"/usr/local/lib", "/usr/lib", "/opt/conda/lib"}) add_lib_root(lib);
  std::vector<fs::path> dirs;
  for (const auto &root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    for (const auto &entry : fs::directory_iterator(root, ec))
      if (fs::is_directory(entry.path() / "bin", ec)) dirs.push_back(entry.path() / "bin");
  }
  std::sort(dirs.begin(), dirs.end(), std::greater<>());  // cu13 before cu12
  return dirs;
}

}  // namespace

std::optional<Disassembler> find_disassembler(const fs::path &explicit_path) {
  std::vector<fs::path> dirs;
  if (const char *path = std::getenv("PATH")) {
    std::string_view p(path);
    while (!p.empty()) {
      std::size_t colon = p.find(':');
      std::string_view dir = p.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(dir);
      p = colon == std::string_view::npos ? std::string_view() : p.substr(colon + 1);
    }
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  for (const auto &d : wheel_bin_dirs()) dirs.push_back(d);

  if (!explicit_path.empty()) return from_file(explicit_path, dirs);
  if (const char *env = std::getenv("PTXBENCH_CUOBJDUMP"); env && *env)
    if (auto d = from_file(env, dirs)) return d;
  // nvdisasm anywhere first; then a cuobjdump paired with any nvdisasm found.
  fs::path any_nvdisasm_dir;
  for (const auto &d : dirs)
    if (auto found = from_folder(d, {})) return found;
  for (const auto &d : dirs)
    if (is_executable(d / "nvdisasm")) any_nvdisasm_dir = d;
  for (const auto &d : dirs)
    if (auto found = from_folder(d, any_nvdisasm_dir)) return found;
  return std::nullopt;
}

util::Expected<std::string> disassemble_cubin(const Disassembler &disassembler, const fs::path &cubin,
                                              const util::ProcessLimits &limits, SassLineInfo line_info) {
  util::ProcessSpec spec;
  spec.limits = limits;
  fs::path home = cubin.parent_path().empty() ? fs::temp_directory_path() : cubin.parent_path();
  spec.env = util::scrubbed_environment(home.string());
  if (disassembler.kind == DisassemblerKind::nvdisasm) {
    // -c: code sections only; the listing keeps the /*offset*/ comments we join on. -ndf: no dataflow
    // analysis, which only names branch-stack jump targets (opcodes and offsets are the same) and costs
    // time an incorrect candidate's verdict waits for.
    spec.argv = {disassembler.path.string(), "-c", "-ndf"};
    if (line_info == SassLineInfo::source) spec.argv.push_back("--print-line-info");
    if (line_info == SassLineInfo::ptx) spec.argv.push_back("--print-line-info-ptx");
    spec.argv.push_back(cubin.string());
  } else {
    fs::path nv =
        disassembler.nvdisasm_dir.empty() ? disassembler.path.parent_path() : disassembler.nvdisasm_dir;
    spec.env["NVDISASM_PATH"] = nv.string();
    spec.env["PATH"] = nv.string() + ":" + spec.env["PATH"];
    spec.argv = {disassembler.path.string(), "-sass", cubin.string()};
  }
  auto result = util::run_process(spec);
  if (!result) return util::unexpected("could not run " + disassembler.path.string() + ": " + result.error());
  if (!result->ok()) {
    std::string err = std::string(trim(result->stderr_text)).substr(0, 500);
    return util::unexpected(disassembler.path.filename().string() + " failed (" + result->describe() +
                            (err.empty() ? ")" : "): " + err));
  }
  if (result->stdout_dropped > 0)
    return util::unexpected("SASS listing larger than " + std::to_string(limits.max_output_bytes) + " bytes");
  return std::move(result->stdout_text);
}

}  // namespace ptxbench::evaluator
