#!/usr/bin/env bash
# Installs what PTXBench needs to build and test on Debian 12 / Ubuntu 24.04
# with the CUDA toolkit at /usr/local/cuda. Idempotent: installs only what is
# missing, so it is a no-op on a prepared machine (or one without a registry).
#   PTXBENCH_WITH_CHROMIUM=1  also install chromium (the report HTML test)
#   PTXBENCH_WITH_CLANG=0     skip clang + its libFuzzer runtime (the fuzz tests then report "skipped")
#   PTXBENCH_WITH_SLURM=0     skip munge + Slurm + HAProxy (the slurm tests then report "skipped")
#   PTXBENCH_WITH_LITELLM=0   skip LiteLLM's proxy (the realserver tests then report "skipped")
set -euo pipefail

need_pkgs=()
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
command -v cmake >/dev/null || need_pkgs+=(cmake)
command -v ninja >/dev/null || need_pkgs+=(ninja-build)
command -v g++ >/dev/null || need_pkgs+=(g++)
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v unzip >/dev/null || need_pkgs+=(unzip)
have_header nlohmann/json.hpp || need_pkgs+=(nlohmann-json3-dev)
have_header fmt/core.h || need_pkgs+=(libfmt-dev)
have_header boost/process.hpp || need_pkgs+=(libboost-dev)
have_header curl/curl.h || need_pkgs+=(libcurl4-openssl-dev)
have_header doctest/doctest.h || need_pkgs+=(doctest-dev)
have_header CLI/CLI.hpp || need_pkgs+=(libcli11-dev)
# clang for the libFuzzer targets (ctest label fuzz). Debian only "recommends" the sanitizer/fuzzer
# runtime, which --no-install-recommends would leave out: ask for it by name.
if [ "${PTXBENCH_WITH_CLANG:-1}" = 1 ]; then
  command -v clang++ >/dev/null || need_pkgs+=(clang)
  compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/*/libclang_rt.fuzzer*.a" >/dev/null || need_pkgs+=(libclang-rt-dev)
fi
# A private single-node Slurm cluster for the `slurm` CTest label (tests/slurm/slurm_cluster_test.py).
if [ "${PTXBENCH_WITH_SLURM:-1}" = 1 ]; then
  have_sbin() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ]; }
  have_sbin munged || need_pkgs+=(munge)
  have_sbin slurmctld || need_pkgs+=(slurmctld)
  have_sbin slurmd || need_pkgs+=(slurmd)
  command -v sbatch >/dev/null || need_pkgs+=(slurm-client)
  have_sbin haproxy || need_pkgs+=(haproxy)  # `ptxbench slurm balancer`'s (tests/slurm/slurm_serve_test.py)
fi
if [ "${PTXBENCH_WITH_CHROMIUM:-0}" = 1 ] && ! command -v chromium >/dev/null; then
  need_pkgs+=(chromium)
fi

if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "install_deps: installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] || [ ! -x /usr/local/cuda/bin/ptxas ]; then
  echo "install_deps: the CUDA toolkit (nvcc, ptxas) is expected at /usr/local/cuda" >&2
  exit 3
fi
# A disassembler gives SASS listings (target opcode families) on CPU-only
# machines too; the toolkit there ships none, PyPI has NVIDIA's nvdisasm.
if ! command -v nvdisasm >/dev/null && [ ! -x /usr/local/cuda/bin/nvdisasm ] &&
   ! python3 -c 'import importlib.util,sys,os; s=importlib.util.find_spec("nvidia"); sys.exit(0 if s and any(os.path.exists(os.path.join(p,"cu13/bin/nvdisasm")) for p in s.submodule_search_locations) else 1)' 2>/dev/null; then
  echo "install_deps: installing nvdisasm (pip nvidia-cuda-nvdisasm)"
  python3 -m pip install -q --disable-pip-version-check "nvidia-cuda-nvdisasm==13.2.51" ||
    echo "install_deps: warning: no nvdisasm; SASS checks will be reported as skipped" >&2
fi
# LiteLLM's proxy: the real OpenAI-compatible server of the `realserver` tests (mock models, no network).
# Without it those tests report "skipped".
# (find_spec, not import: importing the proxy takes seconds.)
if [ "${PTXBENCH_WITH_LITELLM:-1}" = 1 ] &&
   ! python3 -c 'import importlib.util as u,sys; sys.exit(0 if all(u.find_spec(m) for m in ("litellm","fastapi","uvicorn","apscheduler","backoff")) else 1)' 2>/dev/null; then
  echo "install_deps: installing litellm[proxy] (pip)"
  python3 -m pip install -q --disable-pip-version-check 'litellm[proxy]==1.108.7' ||
    echo "install_deps: warning: no LiteLLM; the realserver tests will be reported as skipped" >&2
fi
echo "install_deps: ok"
