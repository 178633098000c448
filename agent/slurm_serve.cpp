#include "agent/slurm_serve.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <sstream>

#include <fmt/core.h>

#include "agent/slurm.hpp"

namespace ptxbench::agent::slurm {

namespace {

bool name_chars(std::string_view s, std::string_view extra) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string_view::npos;
  });
}

std::string joined(const std::vector<std::string> &problems) {
  std::string message;
  for (const auto &p : problems) message += (message.empty() ? "" : "\n") + p;
  return message;
}

}  // namespace

util::Expected<void> check_serve_job_options(const ServeJobOptions &o) {
  std::vector<std::string> problems;
  if (o.nodes < 1 || o.nodes > 10000) problems.push_back("--nodes must be between 1 and 10000");
  if (o.gpus_per_node < 0 || o.gpus_per_node > 64)
    problems.push_back("--gpus-per-node must be between 0 and 64");
  if (o.cpus_per_node < 0) problems.push_back("--cpus-per-node must be >= 0");
  if (o.port < 1 || o.port + std::max(1, o.gpus_per_node) - 1 > 65535)
    problems.push_back("--port: the services' ports (port .. port + GPUs - 1) must lie in 1..65535");
  check_job_paths_and_options(problems, "the directory", o.dir, o.ptxbench, o.partition, o.time_limit,
                              o.account, o.sbatch_args);
  auto no_newline = [&](const std::string &what, const std::string &value) {
    if (value.find_first_of("\r\n") != std::string::npos)
      problems.push_back(fmt::format("{} must not contain a line break", what));
  };
  for (const auto &a : o.sbatch_args) {
    for (const char *owned : {"--nodes", "-N", "--output", "--job-name", "--ntasks", "--array"})
      if (a.starts_with(owned))
        problems.push_back(
            fmt::format("--sbatch-arg '{}': nodes, tasks, output and job name are set by ptxbench", a));
  }
  for (const auto &a : o.serve_args) {
    no_newline("--serve-arg " + a.substr(0, 40), a);
    if (!a.starts_with("-"))
      problems.push_back(fmt::format("--serve-arg '{}': expected an option such as --workers=4", a));
    for (const char *owned : {"--host", "--port", "--id-prefix", "--device", "--token"})
      if (a.starts_with(owned))
        problems.push_back(fmt::format(
            "--serve-arg '{}': host, port, id prefix and device are set per service; the token comes from "
            "the environment (PTXBENCH_SERVE_TOKEN)",
            a));
  }
  if (!o.token_env.empty() && !name_chars(o.token_env, "_"))
    problems.push_back(fmt::format("token variable '{}' is not a variable name", o.token_env));
  if (problems.empty()) return {};
  return util::unexpected(joined(problems));
}

std::string serve_sbatch_script(const ServeJobOptions &o) {
  const std::string dir = o.dir.string();
  const int services = std::max(1, o.gpus_per_node);
  std::string s;
  s += "#!/bin/bash\n";
  s +=
      fmt::format("# PTXBench verdict services: {} node(s) x {} `ptxbench serve` (one per GPU), written by\n",
                  o.nodes, services);
  s += "# `ptxbench slurm serve`. Each service appends \"<host>:<port> <id prefix> <job id>\" to "
       "endpoints.txt\n";
  s += "# once it listens; `ptxbench slurm balancer <this directory>` makes the HAProxy configuration.\n";
  s += "#SBATCH --job-name=ptxbench-serve\n";
  s += fmt::format("#SBATCH --nodes={}\n", o.nodes);
  s += "#SBATCH --ntasks-per-node=1\n";
  s += fmt::format("#SBATCH --chdir={}\n", dir);
  s += fmt::format("#SBATCH --output={}/logs/serve.%j.out\n", dir);
  s += sbatch_resource_lines(o.gpus_per_node, o.cpus_per_node, o.partition, o.time_limit, o.account,
                             o.sbatch_args);
  s += "\nset -u\n";
  s += fmt::format("dir={}\n", shell_quote(dir));
  s += fmt::format("ptxbench={}\n", shell_quote(o.ptxbench.string()));
  s += "endpoints=\"$dir/endpoints.txt\"\n";
  if (!o.token_env.empty()) {
    s +=
        "# The token: only the variable's name is written here; sbatch exports the submitting environment.\n";
    s += fmt::format("if [ -z \"${{{}:-}}\" ]; then\n", o.token_env);
    s += fmt::format(
        "  echo \"ptxbench: {} is not set in the job's environment (export it before submitting)\" >&2\n",
        o.token_env);
    s += "  exit 3\n";
    s += "fi\n";
    s += fmt::format("export PTXBENCH_SERVE_TOKEN=\"${}\"\n", o.token_env);
  }
  s += "if [ \"${1:-}\" != node ]; then\n";
  s += "  # The batch step: one task per node, each running this file's node part with the node's GPUs (a "
       "step\n";
  s += "  # gets GRES only when it asks for them on newer Slurm).\n";
  s += fmt::format(
      "  srun --nodes={} --ntasks-per-node=1{} --kill-on-bad-exit=0 bash \"$dir/serve.sbatch\" node\n",
      o.nodes, o.gpus_per_node > 0 ? fmt::format(" --gres=gpu:{}", o.gpus_per_node) : "");
  s += "  exit $?\n";
  s += "fi\n";
  s += "host=\"${SLURMD_NODENAME:-$(hostname)}\"\n";
  s += "job=\"${SLURM_JOB_ID:-0}\"\n";
  s += "pids=()\n";
  s += "trap 'kill -TERM \"${pids[@]}\" 2>/dev/null; wait \"${pids[@]}\"' TERM INT\n";
  s += fmt::format("for i in $(seq 0 {}); do\n", services - 1);
  s += fmt::format("  port=$(({} + i))\n", o.port);
  s += "  prefix=\"n${SLURM_NODEID:-0}g$i\"\n";
  s += "  log=\"$dir/logs/serve.$job.$host.$i.log\"\n";
  s += "  \"$ptxbench\" serve --host 0.0.0.0 --port \"$port\" --id-prefix \"$prefix\"";
  s += o.gpus_per_node > 0 ? " --device \"$i\"" : " --no-gpu";
  for (const auto &a : o.serve_args) s += " " + shell_quote(a);
  s += " >\"$log\" 2>&1 &\n";
  s += "  pid=$!\n";
  s += "  pids+=(\"$pid\")\n";
  s += "  # Ready: its \"listening on\" line; then its endpoint line, appended under a lock.\n";
  s += "  ( while kill -0 \"$pid\" 2>/dev/null; do\n";
  s += "      if grep -q 'listening on' \"$log\"; then\n";
  s += "        flock \"$endpoints.lock\" sh -c 'printf \"%s\\n\" \"$1\" >> \"$2\"' _ \"$host:$port $prefix "
       "$job\" "
       "\"$endpoints\"\n";
  s += "        exit 0\n";
  s += "      fi\n";
  s += "      sleep 1\n";
  s += "    done\n";
  s += "    echo \"ptxbench: the service on $host:$port exited before it listened (see $log)\" >&2 ) &\n";
  s += "done\n";
  s += "wait \"${pids[@]}\"\n";
  return s;
}

util::Expected<std::vector<ServeEndpoint>> parse_endpoints(std::string_view text) {
  std::vector<ServeEndpoint> out;
  std::vector<std::string> problems;
  std::set<std::string> prefixes;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty()) continue;
    const auto bad = [&](const std::string &why) {
      problems.push_back(
          fmt::format("line {}: {} (expected \"<host>:<port> <id prefix> [job id]\")", number, why));
    };
    if (w.size() < 2 || w.size() > 3) {
      bad(fmt::format("{} fields", w.size()));
      continue;
    }
    ServeEndpoint e;
    const auto colon = w[0].rfind(':');
    e.host = w[0].substr(0, colon == std::string::npos ? 0 : colon);
    const std::string port = colon == std::string::npos ? "" : w[0].substr(colon + 1);
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
    if (!name_chars(e.host, ".-") || e.host.starts_with("-")) {
      bad(fmt::format("'{}' is not <host>:<port>", w[0]));
      continue;
    }
    if (ec != std::errc() || end != port.data() + port.size() || e.port < 1 || e.port > 65535) {
      bad(fmt::format("port '{}' is not 1..65535", port));
      continue;
    }
    e.id_prefix = w[1];
    if (!name_chars(e.id_prefix, "_") || e.id_prefix.size() > 32) {
      bad(fmt::format("id prefix '{}' is not letters, digits and _", e.id_prefix));
      continue;
    }
    if (w.size() == 3) {
      e.job_id = w[2];
      if (!name_chars(e.job_id, "_")) {
        bad(fmt::format("job id '{}'", e.job_id));
        continue;
      }
    }
    if (!prefixes.insert(e.id_prefix).second) {
      // A resubmitted job reuses prefixes: the later line (the newer service) wins.
      std::erase_if(out, [&](const ServeEndpoint &x) { return x.id_prefix == e.id_prefix; });
    }
    out.push_back(std::move(e));
  }
  if (!problems.empty()) return util::unexpected(joined(problems));
  if (out.empty()) return util::unexpected(std::string("no endpoint yet (no service has started listening)"));
  return out;
}

std::string haproxy_config(const std::vector<ServeEndpoint> &endpoints, const BalancerOptions &o) {
  std::string s;
  s += fmt::format(
      "# HAProxy in front of {} `ptxbench serve` service(s), written by `ptxbench slurm balancer`.\n",
      endpoints.size());
  s += "# Submissions (POST /v1/verdicts) go to the service with the fewest connections among those whose\n";
  s +=
      "# /healthz says \"ok\" (a draining one takes no new work); a poll GET /v1/verdicts/v<prefix>.* goes\n";
  s += "# to the service that holds the request. Run: haproxy -f <this file>\n";
  s += "global\n";
  s += "  maxconn 4096\n";
  s += "defaults\n";
  s += "  mode http\n";
  s += "  timeout connect 5s\n";
  s += "  timeout client 120s\n";
  s += fmt::format("  timeout server {}s\n", static_cast<long>(o.max_wait_s) + 60);
  s += "  option redispatch\n";
  s += "  retries 2\n";
  s += "frontend ptxbench\n";
  s += fmt::format("  bind {}\n", o.bind);
  for (const auto &e : endpoints)
    s += fmt::format("  use_backend poll_{} if {{ path_beg /v1/verdicts/v{}. }}\n", e.id_prefix, e.id_prefix);
  s += "  default_backend services\n";
  s += "backend services\n";
  s += "  balance leastconn\n";
  s += "  option httpchk GET /healthz\n";
  s += "  http-check expect string \\\"status\\\":\\\"ok\\\"\n";
  for (const auto &e : endpoints)
    s += fmt::format("  server {} {}:{} check inter 5s\n", e.id_prefix, e.host, e.port);
  for (const auto &e : endpoints) {
    s += fmt::format("backend poll_{}\n", e.id_prefix);
    s += fmt::format("  server {} {}:{} check inter 5s\n", e.id_prefix, e.host, e.port);
  }
  return s;
}

}  // namespace ptxbench::agent::slurm
