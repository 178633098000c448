// `ptxbench slurm serve`: verdict services on GPU nodes behind an existing load balancer. One sbatch job
// runs, on each of its nodes, one `ptxbench serve` per allocated GPU (ports port, port+1, ...); each writes
// its endpoint line to the shared endpoints file once it listens. `ptxbench slurm balancer` turns that file
// into an HAProxy configuration: submissions go to the least busy service, a poll of a request goes to the
// service holding it (the request id carries the service's --id-prefix), dead services are found by
// HAProxy's own health checks (GET /healthz). No protocol of our own between the nodes.
//
// Directory (on a file system every node and the balancer's host see):
//   serve.sbatch       the job script (`ptxbench slurm serve` writes and submits it)
//   endpoints.txt      "<host>:<port> <id prefix> <job id>" per service that is listening, appended under
//   flock logs/              serve.<job id>.out (the job), serve.<job id>.<host>.<i>.log (each service)
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace ptxbench::agent::slurm {

struct ServeJobOptions {
  int nodes = 1;
  int gpus_per_node = 1;  ///< one service per GPU ("--gres=gpu:G"); 0 = one service, GPU stages off
  int cpus_per_node = 0;  ///< "--cpus-per-task"; 0 = Slurm's default
  int port = 8700;        ///< the first service's port on each node; the i-th GPU's is port + i
  std::string partition, time_limit, account;
  std::vector<std::string> sbatch_args;  ///< extra "#SBATCH" options, verbatim
  std::vector<std::string> serve_args;   ///< extra `ptxbench serve` options (e.g. --workers=4), verbatim
  std::filesystem::path dir;             ///< absolute; shared by the nodes
  std::filesystem::path ptxbench;        ///< absolute path of the program on the nodes
  std::string token_env;  ///< a variable that must be set in the job (serve reads PTXBENCH_SERVE_TOKEN)
};

/// Problems with the options, one per line.
util::Expected<void> check_serve_job_options(const ServeJobOptions &options);

/// The sbatch script. Run by sbatch it starts one task per node through srun, which runs this same file
/// (from the shared directory) with the argument "node": that starts the node's services and appends each
/// one's endpoint line when its "listening on" line appears.
std::string serve_sbatch_script(const ServeJobOptions &options);

/// One listening service.
struct ServeEndpoint {
  std::string host;  ///< a host name or IPv4 address
  int port = 0;
  std::string id_prefix;  ///< its request ids start with "v<id_prefix>."
  std::string job_id;     ///< the Slurm job that started it ("" when not given)
};

/// The endpoints file: one endpoint a line ("#" comments and blank lines skipped). Error: each malformed
/// line with its number, or a prefix given twice (polls could not be routed).
util::Expected<std::vector<ServeEndpoint>> parse_endpoints(std::string_view text);

struct BalancerOptions {
  std::string bind = "0.0.0.0:8700";  ///< where HAProxy listens
  double max_wait_s = 60;             ///< the services' --max-wait: the server timeout must outlast it
};

/// An HAProxy configuration (haproxy -f FILE) in front of the endpoints.
std::string haproxy_config(const std::vector<ServeEndpoint> &endpoints, const BalancerOptions &options);

}  // namespace ptxbench::agent::slurm
