// The candidate's data as the CPU stages pass it on: what the response parser extracted
// (ParsedResponse), the launch manifest (Manifest) and the resolved launch plans' names. The parsers
// that make them are in evaluator/candidate.hpp, which includes this header; the pipeline
// (detail/pipeline.hpp) carries them between stages.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "evaluator/protocol/job.hpp"

namespace ptxbench::evaluator {

enum class KernelLanguage { ptx, cuda };

/// What the response parser extracted. Rule for several blocks: the LAST
/// ```ptx/```cuda block is the kernel and the LAST ```json block is the
/// manifest (models often show a draft and then a final version).
struct ParsedResponse {
  KernelLanguage language = KernelLanguage::ptx;
  std::string kernel_source;
  int kernel_first_line = 0;
  std::string manifest_text;
  int kernel_blocks_seen = 0;
  int json_blocks_seen = 0;
};

using protocol::ParamKind;
using protocol::Swizzle;

/// One kernel parameter as the manifest declares it.
struct ManifestParam {
  ParamKind kind = ParamKind::tensor;
  std::string name;  ///< the task tensor or scalar (or symbol) it names
  // tensor_map only:
  std::vector<std::string> box;  ///< expressions, innermost first
  std::vector<std::string>
      dims;  ///< optional view shape, innermost first (expressions); empty = tensor's shape
  Swizzle swizzle = Swizzle::none;
  std::string l2_promotion = "none";  ///< none | 64B | 128B | 256B
  std::string oob_fill = "zero";      ///< zero | nan
  std::string interleave = "none";    ///< none | 16B | 32B
};

struct Manifest {
  std::string entry;
  /// bytes of global scratch memory the harness allocates, guards and zero-fills before every launch
  /// (expression; "" = none), passed by a {"workspace": true} parameter
  std::string workspace_bytes;
  std::array<std::string, 3> grid{"1", "1", "1"};  ///< expressions
  std::array<std::string, 3> block{"1", "1", "1"};
  std::array<std::string, 3> cluster{"1", "1", "1"};
  std::string shared_bytes = "0";  ///< dynamic shared memory, expression
  std::vector<ManifestParam> params;
};

/// A fully resolved launch for one workload, as the job carries it (evaluator/protocol/job.hpp).
using protocol::LaunchPlan;
using protocol::ResolvedParam;

}  // namespace ptxbench::evaluator
