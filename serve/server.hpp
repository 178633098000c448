// `ptxbench serve`'s HTTP/1.1 front (Boost.Beast on one Asio thread) over a VerdictService: routes, bearer
// token, body and time limits, blocking waits that never outlive a request's deadline, and the drain on
// SIGTERM/SIGINT. The routes and shapes are docs/openapi.yaml.
#pragma once

#include <cstdint>
#include <string>

#include "evaluator/evaluator.hpp"
#include "serve/service.hpp"

namespace ptxbench::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";  ///< the address bound; anything else must be asked for
  std::uint16_t port = 8700;       ///< 0 = the system picks one (printed)
  std::string token;  ///< non-empty: every route but /healthz needs "Authorization: Bearer <token>"
  std::size_t max_body_bytes = 64u << 20;  ///< request bodies above it get 413
  double max_wait_s = 60;             ///< the longest blocking wait (GET ...?wait=S) one call may ask for
  double read_timeout_s = 30;         ///< a request must arrive within it (slow clients are dropped)
  std::size_t max_connections = 512;  ///< more open connections are refused (503)
  double drain_s = 600;               ///< on SIGTERM: how long accepted evaluations may still run
  double linger_s = 15;               ///< then how long finished verdicts wait to be fetched before the exit
  std::string gpu_note;  ///< why GPU stages are skipped on this machine ("" = they run), for /healthz
};

/// Serves until SIGTERM/SIGINT, then drains: new submissions get 503, accepted ones finish (bounded by
/// drain_s; a request past its deadline is answered as a timeout verdict), their verdicts can still be
/// fetched (linger_s), then returns 0. A second signal stops at once (returns 130). Returns 3 when the
/// address cannot be bound.
int run_server(const ServerOptions &options, VerdictService &service,
               const evaluator::EvaluatorSettings &base);

}  // namespace ptxbench::serve
