// A tiny kernel of the worker's own, launched under CUPTI by `--probe`.
#pragma once

#include <cuda_runtime_api.h>

namespace ptxbench::worker::detail {

/// 2 blocks x 64 threads writing out[0..128); a dead branch inside.
void launch_probe_kernel(float *out, cudaStream_t stream);

}  // namespace ptxbench::worker::detail
