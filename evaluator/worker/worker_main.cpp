// ptxbench-worker: the sandboxed GPU stage for one candidate.
//   ptxbench-worker --job job.json --result result.json
//   ptxbench-worker --prestart [--device N] [--lock FILE] [--prewarm-cupti] [--warm-cublaslt]
//                        (`ready` on the protocol channel, then one JOB<TAB>RESULT line on stdin)
// In job mode the protocol lines (`ready`, `finished N`) go to the channel whose fd number is in
// $PTXBENCH_WORKER_CHANNEL_FD (evaluator/protocol/worker_output.hpp), and stdout carries only the
// candidate's device printf.
//   ptxbench-worker --probe [--device N] [--no-cupti]      (JSON on stdout)
//   ptxbench-worker --check-reference [--device N]         (JSON on stdout)
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "evaluator/worker/family.hpp"
#include "evaluator/worker/worker.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: ptxbench-worker --job JOB.json --result RESULT.json\n"
               "       ptxbench-worker --prestart [--device N] [--lock FILE] [--prewarm-cupti] "
               "[--warm-cublaslt]\n"
               "       ptxbench-worker --probe [--device N] [--no-cupti]\n"
               "       ptxbench-worker --check-reference [--device N]\n");
  return ptxbench::protocol::exit_code::kBadJob;
}

}  // namespace

int main(int argc, char **argv) {
  std::string job, result, mode, lock;
  int device = 0;
  bool cupti = true, prewarm_cupti = false, warm_cublaslt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--job" && i + 1 < argc) {
      job = argv[++i];
    } else if (a == "--result" && i + 1 < argc) {
      result = argv[++i];
    } else if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (a == "--lock" && i + 1 < argc) {
      lock = argv[++i];
    } else if (a == "--probe" || a == "--check-reference" || a == "--prestart") {
      mode = a;
    } else if (a == "--prewarm-cupti") {
      prewarm_cupti = true;
    } else if (a == "--warm-cublaslt") {
      warm_cublaslt = true;
    } else if (a == "--no-cupti") {
      cupti = false;
    } else {
      return usage();
    }
  }
  try {
    if (mode == "--probe") {
      std::cout << ptxbench::worker::probe(device, cupti).dump(2) << "\n";
      return ptxbench::protocol::exit_code::kFinished;
    }
    if (mode == "--prestart")
      return ptxbench::worker::serve_prestarted(device, lock, prewarm_cupti, warm_cublaslt);
    if (mode == "--check-reference") {
      std::cout << ptxbench::worker::check_reference_gemm(device).dump(2) << "\n";
      return ptxbench::protocol::exit_code::kFinished;
    }
    if (job.empty() || result.empty()) return usage();
    return ptxbench::worker::run_job_file(job, result);
  } catch (const ptxbench::worker::WorkerError &e) {
    std::fprintf(stderr, "ptxbench-worker: %s: %s\n", e.kind().c_str(), e.what());
    return e.kind() == "device" ? ptxbench::protocol::exit_code::kNoDevice
                                : ptxbench::protocol::exit_code::kInternal;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "ptxbench-worker: internal error: %s\n", e.what());
    return ptxbench::protocol::exit_code::kInternal;
  }
}
